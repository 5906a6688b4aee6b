package lb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/kubernetes"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// MultiSpec describes a plugin that publishes a pod on several load balancers at once, one
// per line (an ISP line of Alibaba's AlibabaCloud-Multi-NLBs: "dx", "lt", ...), all on the
// same listener ports, to the Multi engine.
type MultiSpec struct {
	// Name is the network type, "AlibabaCloud-Multi-NLBs".
	Name string
	// IDsParam is the network-conf parameter of "<id>/<line>,..." ("NlbIdNames"); the n-th
	// id of each line is that line's load balancer in level n.
	IDsParam string
	// IDAnnotation is the Service annotation naming its load balancer, as for the per-pod
	// plugin of the same load balancers (AlibabaCloud-NLB's), so that each counts the
	// other's Services.
	IDAnnotation string
	// LevelAnnotation is the Service annotation holding its level, in decimal
	// ("game.kruise.io/lb-belong-index", OKG's).
	LevelAnnotation string
	// GatePrefix is the prefix of the readiness gate the cloud controller sets per line:
	// the gate is GatePrefix + the line's Service name
	// ("service.readiness.alibabacloud.com/").
	GatePrefix string
	// LedgerGroup is the ledger the claims go in: the per-pod plugin's of the same load
	// balancers ("AlibabaCloud-NLB"), so that neither hands out the other's ports.
	LedgerGroup string
	// OwnedAnnotations are the Service annotations the plugin writes and removes when the
	// network-conf no longer asks for them (the health-check keys).
	OwnedAnnotations []string
	// Params are the provider's own network-conf parameters (read by Customize), besides
	// IDsParam, PortProtocols, Fixed and ParamAllocatePolicy.
	Params []string
	// Customize adds the provider's fields to a line's Service (class, external traffic
	// policy, health checks); its error is a ParameterError naming the parameter.
	Customize func(conf networkstatus.Conf, svc *corev1.Service) error
}

// ParamAllocatePolicy is the network-conf parameter choosing a level: "default" (or absent:
// the first level with room) or "balanced" (the level with the most free ports), OKG's.
const ParamAllocatePolicy = "AllocatePolicy"

// Multi is the engine of MultiSpec plugins: plugin.Plugin, plugin.CachedReader,
// plugin.ConfValidator and plugin.NetworkViewer. Create one with NewMulti.
//
// A pod gets one LoadBalancer Service per line, "<pod>-<lower(line)>", on that line's load
// balancer of one level, every line on the same listener ports. The ports are chosen at
// the pod's CREATE, free on every load balancer of the level, claimed in the ledger per load
// balancer (the owner is the line's Service, "<namespace>/<pod>-<lower(line)>") and recorded
// in AnnotationAllocation; every line's Service is made at the next update. The network is
// Ready when every line's Service has an address and the cloud controller has set every
// line's readiness gate.
type Multi struct {
	spec   MultiSpec
	rng    Range
	alloc  *allocator
	ledger Ledger
	clock  clock.PassiveClock
	// base holds the per-pod engine's Service comparison and write (differences, apply)
	// with the spec's owned annotations.
	base *Plugin
	// inLedger holds the owners whose ports this replica knows to be in the ledger.
	inLedger sync.Map
}

var (
	_ plugin.Plugin        = (*Multi)(nil)
	_ plugin.CachedReader  = (*Multi)(nil)
	_ plugin.ConfValidator = (*Multi)(nil)
	_ plugin.NetworkViewer = (*Multi)(nil)
)

// NewMulti returns the plugin of spec, handing out listener ports of rng (the provider
// table's range, [alibabacloud.nlb]).
func NewMulti(spec MultiSpec, rng Range) *Multi {
	return &Multi{spec: spec, rng: rng, alloc: newAllocator(rng),
		base: New(Spec{Name: spec.Name, IDAnnotation: spec.IDAnnotation, OwnedAnnotations: spec.OwnedAnnotations}, rng)}
}

// Name returns the spec's Name.
func (m *Multi) Name() string { return m.spec.Name }

// Alias returns "": OKG gives the type no family name.
func (m *Multi) Alias() string { return "" }

// IsSynchronous returns false: the network converges when the cloud controller has
// provisioned every line.
func (m *Multi) IsSynchronous() bool { return false }

// CachedObjects returns the Service and the Event (the cloud controller's Warning Events on
// a line's Service), as the per-pod engine's.
func (m *Multi) CachedObjects() []client.Object {
	return []client.Object{&corev1.Service{}, &corev1.Event{}}
}

// UseLedger makes m claim every listener port it hands out in l (the spec's LedgerGroup)
// before a Service uses it. Call it before Init.
func (m *Multi) UseLedger(l Ledger) { m.ledger = l }

// LedgerKey is the spec's LedgerGroup.
func (m *Multi) LedgerKey() string { return m.spec.LedgerGroup }

// UseClock makes m read the time from clk (tests). Call it before Init.
func (m *Multi) UseClock(clk clock.PassiveClock) { m.clock = clk }

func (m *Multi) now() time.Time {
	if m.clock == nil {
		return time.Now()
	}
	return m.clock.Now()
}

// multiParams are a pod's parsed network-conf.
type multiParams struct {
	// lines are the line names in the order of their first appearance.
	lines []string
	// levels[l][i] is the load balancer of lines[i] in level l.
	levels   [][]string
	ports    []PortProtocol
	fixed    bool
	balanced bool
	conf     networkstatus.Conf
}

// ids returns every load balancer id of prm, level by level.
func (prm multiParams) ids() []string {
	var out []string
	for _, l := range prm.levels {
		out = append(out, l...)
	}
	return out
}

// parse reads the network-conf: IDsParam (required; "<id>/<line>" entries, every line with
// as many ids, line names distinct once lower-cased), PortProtocols (required, TCPUDP
// allowed), Fixed and AllocatePolicy. Errors are ParameterErrors naming the parameter.
func (m *Multi) parse(conf networkstatus.Conf) (multiParams, error) {
	out := multiParams{conf: conf}
	count := map[string]int{}
	lower := map[string]string{}
	for _, v := range conf.Values(m.spec.IDsParam) {
		for _, entry := range strings.Split(v, ",") {
			if entry = strings.TrimSpace(entry); entry == "" {
				continue
			}
			id, line, ok := strings.Cut(entry, "/")
			id, line = strings.TrimSpace(id), strings.TrimSpace(line)
			if !ok || id == "" || line == "" || strings.Contains(line, "/") {
				return multiParams{}, plugin.ParamErrorf(m.spec.IDsParam, "%q is not <id>/<line>, expected \"<id>/<line>,...\" such as nlb-a/dx,nlb-b/lt", entry)
			}
			if other, seen := lower[strings.ToLower(line)]; seen && other != line {
				// OKG names both lines' Services <pod>-<lower(line)>: one Service for two lines.
				return multiParams{}, plugin.ParamErrorf(m.spec.IDsParam, "lines %q and %q differ only in case; their Services would have one name (<pod>-%s)", other, line, strings.ToLower(line))
			}
			lower[strings.ToLower(line)] = line
			if count[line] == 0 {
				out.lines = append(out.lines, line)
			}
			level := count[line]
			count[line]++
			for len(out.levels) <= level {
				out.levels = append(out.levels, nil)
			}
			out.levels[level] = append(out.levels[level], id)
		}
	}
	if len(out.lines) == 0 {
		return multiParams{}, plugin.ParamErrorf(m.spec.IDsParam, "is required, expected \"<id>/<line>,...\" such as nlb-a/dx,nlb-b/lt")
	}
	for _, line := range out.lines {
		if count[line] != len(out.levels) {
			return multiParams{}, plugin.ParamErrorf(m.spec.IDsParam, "line %q has %d load balancers and line %q %d: every line needs one per level", out.lines[0], count[out.lines[0]], line, count[line])
		}
	}
	// A level's ids in line order: the ids above were appended in entry order.
	for l := range out.levels {
		ordered := make([]string, len(out.lines))
		seen := map[string]int{}
		for _, v := range conf.Values(m.spec.IDsParam) {
			for _, entry := range strings.Split(v, ",") {
				id, line, ok := strings.Cut(strings.TrimSpace(entry), "/")
				if !ok {
					continue
				}
				line = strings.TrimSpace(line)
				if seen[line] == l {
					ordered[slices.Index(out.lines, line)] = strings.TrimSpace(id)
				}
				seen[line]++
			}
		}
		out.levels[l] = ordered
		for i, id := range ordered {
			if j := slices.Index(ordered, id); j != i {
				return multiParams{}, plugin.ParamErrorf(m.spec.IDsParam, "load balancer %q is both line %q's and line %q's in level %d; each line needs its own", id, out.lines[j], out.lines[i], l)
			}
		}
	}
	pp := conf.Values(ParamPortProtocols)
	if len(pp) == 0 {
		return multiParams{}, plugin.ParamErrorf(ParamPortProtocols, `is required, expected "<port>[/<PROTOCOL>],..."`)
	}
	var err error
	if out.ports, err = ParsePortProtocols(strings.Join(pp, ","), true); err != nil {
		return multiParams{}, err
	}
	if v := conf.Values(ParamFixed); len(v) > 0 {
		if out.fixed, err = strconv.ParseBool(v[len(v)-1]); err != nil {
			return multiParams{}, plugin.ParamErrorf(ParamFixed, "%q is not a boolean, expected true or false", v[len(v)-1])
		}
	}
	if v, ok := conf.Last(ParamAllocatePolicy); ok {
		switch v {
		case "", "default":
		case "balanced":
			out.balanced = true
		default:
			return multiParams{}, plugin.ParamErrorf(ParamAllocatePolicy, "%q is not a policy, expected default or balanced", v)
		}
	}
	return out, nil
}

// serviceName is the Service of line for the pod named pod: "<pod>-<lower(line)>".
func serviceName(pod, line string) string { return pod + "-" + strings.ToLower(line) }

// checkNames refuses line Service names that are not DNS-1035 labels (the API server would
// refuse the Service; OKG sends it). Errors: a ParameterError naming IDsParam.
func (m *Multi) checkNames(pod string, prm multiParams) error {
	if pod == "" {
		return nil
	}
	for _, line := range prm.lines {
		if msgs := validation.IsDNS1035Label(serviceName(pod, line)); len(msgs) > 0 {
			return plugin.ParamErrorf(m.spec.IDsParam, "line %q makes the Service name %q, which is not a DNS-1035 label: %s", line, serviceName(pod, line), strings.Join(msgs, "; "))
		}
	}
	return nil
}

// restrict applies the platform's caps (max_ports_per_pod, per line as per pod: each line
// has the pod's ports) and the provider's parameters on an empty Service.
func (m *Multi) restrict(prm multiParams) error {
	if m.rng.MaxPerPod > 0 && len(prm.ports) > m.rng.MaxPerPod {
		return plugin.NotAllowedf(ParamPortProtocols, "asks for %d listener ports; the provider configuration allows at most %d per pod (max_ports_per_pod)", len(prm.ports), m.rng.MaxPerPod)
	}
	if m.spec.Customize != nil {
		return m.spec.Customize(prm.conf, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{}, Labels: map[string]string{}}})
	}
	return nil
}

// ValidateConf checks the pod's network-conf as the runs do, claiming and writing nothing:
// JSON, IDsParam, PortProtocols, Fixed, AllocatePolicy, the lines' Service names, the caps
// and the provider's parameters; an unknown parameter is a warning.
func (m *Multi) ValidateConf(pod *corev1.Pod) error {
	conf, err := networkstatus.ConfFromPod(pod)
	if err != nil {
		return err
	}
	prm, err := m.parse(conf)
	if err != nil {
		return err
	}
	if err := m.checkNames(pod.Name, prm); err != nil {
		return err
	}
	if err := m.restrict(prm); err != nil {
		return err
	}
	return m.unknownParams(conf)
}

// NetworkView describes the network-conf for the network-conf rules: every load balancer id
// of IDsParam, the listener ports; nothing is created in the cloud (the load balancers
// exist).
func (m *Multi) NetworkView(pod *corev1.Pod) (plugin.NetworkView, error) {
	conf, err := networkstatus.ConfFromPod(pod)
	if err != nil {
		return plugin.NetworkView{}, err
	}
	prm, err := m.parse(conf)
	if err != nil {
		return plugin.NetworkView{}, err
	}
	v := plugin.NetworkView{LoadBalancerIDs: prm.ids(),
		Params: map[string][]string{"loadBalancerIDs": {m.spec.IDsParam}, "ports": {ParamPortProtocols}}}
	for _, pp := range prm.ports {
		v.Ports = append(v.Ports, plugin.ViewPort{Port: pp.Port, Protocol: string(pp.Protocol)})
	}
	return v, nil
}

// unknownParams warns of the parameters the plugin does not read.
func (m *Multi) unknownParams(conf networkstatus.Conf) error {
	known := append([]string{m.spec.IDsParam, ParamPortProtocols, ParamFixed, ParamAllocatePolicy}, m.spec.Params...)
	return conf.Warn(networkstatus.NotIn(known...), m.spec.Name+" ignores unknown network-conf parameters, expected only "+strings.Join(known, ", "))
}

// owners returns the ledger owners of each level's lines for the pod key ns/name:
// "<ns>/<name>-<lower(line)>", the line's Service.
func (prm multiParams) owners(ns, name string) [][]string {
	out := make([][]string, len(prm.levels))
	for l := range prm.levels {
		for _, line := range prm.lines {
			out[l] = append(out[l], ns+"/"+serviceName(name, line))
		}
	}
	return out
}

// multiRecord is the JSON of AnnotationAllocation for a Multi plugin:
// {"level":<n>,"loadBalancers":["<id>",...],"ports":[<port>,...]}, the load balancers in
// line order.
type multiRecord struct {
	Level         int      `json:"level"`
	LoadBalancers []string `json:"loadBalancers"`
	Ports         []int32  `json:"ports"`
}

// Init counts the ports of every Service on a load balancer (IDAnnotation), the ports
// recorded at the CREATE of pods of this type whose Services are not made yet, and the
// ledger's claims. Errors are the lists' and the ledger's (APICallErrors).
func (m *Multi) Init(ctx context.Context, c client.Client, _ plugin.Config) error {
	m.alloc = newAllocator(m.rng)
	var list corev1.ServiceList
	if err := c.List(ctx, &list); err != nil {
		return plugin.Wrap(plugin.APICallError, err, "list Services")
	}
	for i := range list.Items {
		m.ServiceSeen(&list.Items[i])
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods); err != nil {
		return plugin.Wrap(plugin.APICallError, err, "list pods")
	}
	for i := range pods.Items {
		pod := &pods.Items[i]
		var rec multiRecord
		if pod.Annotations[networkstatus.AnnotationNetworkType] != m.spec.Name ||
			json.Unmarshal([]byte(pod.Annotations[AnnotationAllocation]), &rec) != nil || len(rec.LoadBalancers) == 0 {
			continue
		}
		conf, err := networkstatus.ConfFromPod(pod)
		if err != nil {
			continue
		}
		prm, err := m.parse(conf)
		if err != nil || len(prm.lines) != len(rec.LoadBalancers) {
			continue
		}
		owners := prm.owners(pod.Namespace, pod.Name)[0]
		for i, id := range rec.LoadBalancers {
			m.alloc.tryHold(owners[i], Allocation{LB: id, Ports: rec.Ports})
		}
	}
	if m.ledger == nil {
		return nil
	}
	claims, err := m.ledger.Load(ctx)
	if err != nil {
		return plugin.Wrap(plugin.APICallError, err, "load the listener port ledger")
	}
	for id, ports := range claims {
		for _, port := range sortedPorts(ports) {
			m.alloc.holdPort(ports[port].Owner, id, port, ports[port].At.Add(ClaimTTL))
			m.inLedger.Store(ports[port].Owner, true)
		}
	}
	return nil
}

// ServiceSeen counts the ports of svc, a Service the manager's cache shows, on its load
// balancer (IDAnnotation): this plugin's, the per-pod plugin's and anyone's.
func (m *Multi) ServiceSeen(svc *corev1.Service) {
	id := svc.Annotations[m.spec.IDAnnotation]
	if id == "" {
		return
	}
	ports := make([]int32, 0, len(svc.Spec.Ports))
	for _, sp := range svc.Spec.Ports {
		ports = append(ports, sp.Port)
	}
	m.alloc.observe(client.ObjectKeyFromObject(svc).String(), id, ports)
}

// ServiceGone frees the ports of svc, a Service that is gone, here and, for one of this
// plugin's Services (its network-type label), unless c (read live) shows a Service or a pod
// of its name, in the ledger: the claims made up to its creation.
// An error leaves the claim to the per-pod plugin's sweep.
func (m *Multi) ServiceGone(ctx context.Context, c client.Reader, svc *corev1.Service) error {
	key := client.ObjectKeyFromObject(svc).String()
	al, held := m.alloc.allocation(key)
	if m.ledger == nil || !held || svc.Labels[networkstatus.AnnotationNetworkType] != m.spec.Name {
		// Another plugin's Service (the per-pod plugin's): its claims are that plugin's.
		m.alloc.release(key)
		return nil
	}
	live, err := NameInUse(ctx, c, client.ObjectKeyFromObject(svc))
	if err != nil || live {
		return err
	}
	m.alloc.release(key)
	m.inLedger.Delete(key)
	return m.ledger.Release(ctx, al.LB, key, svc.CreationTimestamp.Truncate(time.Second).Add(time.Second))
}

// OnPodAdded parses the network-conf (a ParameterError naming the parameter refuses the
// CREATE, as OKG's), adds one readiness gate per line (GatePrefix + the line's Service
// name), and chooses the pod's level and listener ports, claimed in the ledger on every load
// balancer of the level and recorded in AnnotationAllocation. The claims are tentative: they
// count for ClaimTTL unless the lines' Services show up. A pod without a name yet
// (generateName) gets its gates from the names at its first update only if... it cannot
// (gates are immutable): it is refused with a ParameterError naming metadata.name. Errors:
// ParameterErrors, the exhaustion ParameterError, an APICallError when the ledger cannot be
// written.
func (m *Multi) OnPodAdded(ctx context.Context, c client.Client, pod *corev1.Pod) (*corev1.Pod, error) {
	conf, err := networkstatus.ConfFromPod(pod)
	if err != nil {
		return pod, err
	}
	prm, err := m.parse(conf)
	if err != nil {
		return pod, err
	}
	if pod.Name == "" {
		return pod, plugin.ParamErrorf("metadata.name", "is empty (generateName): %s names a readiness gate per line after the pod, at its CREATE; give the pod a name", m.spec.Name)
	}
	if err := m.checkNames(pod.Name, prm); err != nil {
		return pod, err
	}
	if err := m.restrict(prm); err != nil {
		return pod, err
	}
	for _, line := range prm.lines {
		gate := corev1.PodConditionType(m.spec.GatePrefix + serviceName(pod.Name, line))
		if !slices.ContainsFunc(pod.Spec.ReadinessGates, func(g corev1.PodReadinessGate) bool { return g.ConditionType == gate }) {
			pod.Spec.ReadinessGates = append(pod.Spec.ReadinessGates, corev1.PodReadinessGate{ConditionType: gate})
		}
	}
	hold, err := m.claim(ctx, c, pod, prm, true)
	if err != nil {
		return pod, err
	}
	return pod, m.record(pod, prm, hold)
}

// record writes hold in AnnotationAllocation.
func (m *Multi) record(pod *corev1.Pod, prm multiParams, hold levelHold) error {
	b, err := json.Marshal(multiRecord{Level: hold.level, LoadBalancers: prm.levels[hold.level], Ports: hold.ports})
	if err != nil {
		return plugin.Wrap(plugin.InternalError, err, "encode %s", AnnotationAllocation)
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[AnnotationAllocation] = string(b)
	return nil
}

// recorded returns the level AnnotationAllocation records on pod when it still fits prm:
// the same load balancers at that level, one port per PortProtocols entry, in the range.
func (m *Multi) recorded(pod *corev1.Pod, prm multiParams) (levelHold, bool) {
	var rec multiRecord
	if json.Unmarshal([]byte(pod.Annotations[AnnotationAllocation]), &rec) != nil || rec.Level < 0 || rec.Level >= len(prm.levels) ||
		!slices.Equal(rec.LoadBalancers, prm.levels[rec.Level]) || len(rec.Ports) != len(prm.ports) {
		return levelHold{}, false
	}
	for _, p := range rec.Ports {
		if !m.rng.contains(p) {
			return levelHold{}, false
		}
	}
	return levelHold{level: rec.Level, ports: rec.Ports}, true
}

// exhausted is the error when no level has room: OKG's message, then which.
func (m *Multi) exhausted(prm multiParams) error {
	return &plugin.Error{Type: plugin.ParameterError, Reason: plugin.ReasonPortsExhausted, Param: m.spec.IDsParam,
		Message: fmt.Sprintf("no available ports found: no level of %s %v has %d listener ports free on every one of its load balancers", m.spec.IDsParam, prm.levels, len(prm.ports))}
}

// claim chooses a level and ports for the pod's lines (allocateLevel) and claims them in the
// ledger on each load balancer of the level, in the order of their ids; when another
// replica holds one of them, the claims made are released, the taker's ports counted, and
// the choice made again (at most claimAttempts times). atCreate is a CREATE's claim, bound
// by max_reserved_ports_per_namespace.
func (m *Multi) claim(ctx context.Context, c client.Reader, pod *corev1.Pod, prm multiParams, atCreate bool) (levelHold, error) {
	live := ownerLive(ctx, c)
	owners := prm.owners(pod.Namespace, pod.Name)
	n := len(prm.ports)
	if plugin.IsReadOnly(ctx) {
		return levelHold{}, plugin.Wrap(plugin.APICallError, plugin.ErrWouldWrite, "claim listener ports")
	}
	if atCreate && m.rng.MaxReservedPerNamespace > 0 {
		held := m.alloc.pendingIn(pod.Namespace, "", m.now(), live)
		for _, o := range owners[0] {
			if al, ok := m.alloc.allocation(o); ok {
				held -= len(al.Ports) // the pod's own earlier hold
			}
		}
		if want := n * len(prm.lines); held+want > m.rng.MaxReservedPerNamespace {
			return levelHold{}, &plugin.Error{Type: plugin.RetryError, Reason: plugin.ReasonPortsExhausted, Param: ParamPortProtocols, Message: fmt.Sprintf(
				"namespace %s holds %d listener ports of %s for pods not created yet; %d more would pass the provider configuration's max_reserved_ports_per_namespace (%d): retry once those pods exist or their claims run out (%s)",
				pod.Namespace, held, m.spec.Name, want, m.rng.MaxReservedPerNamespace, ClaimTTL)}
		}
	}
	for range claimAttempts {
		// Every hold is tentative, at an update too: a line's owner is its Service, which
		// shows up (and the hold turns firm) only once made; a hold whose Service is never
		// made runs out here and goes stale in the ledger.
		now := m.now()
		hold, ok := m.alloc.allocateLevel(prm.levels, owners, n, prm.balanced, now, now.Add(ClaimTTL), live)
		if !ok {
			return levelHold{}, m.exhausted(prm)
		}
		if m.ledger == nil {
			return hold, nil
		}
		taken, err := m.claimLevel(ctx, prm.levels[hold.level], owners[hold.level], hold.ports, staleTest(now, live))
		if err != nil {
			return levelHold{}, err
		}
		if taken == nil {
			return hold, nil
		}
	}
	return levelHold{}, &plugin.Error{Type: plugin.APICallError, Reason: plugin.ReasonUnavailable, Message: "claim listener ports",
		Err: fmt.Errorf("%d choices in a row were taken by another replica", claimAttempts)}
}

// levelTaken is the claims another owner holds on one load balancer.
type levelTaken struct {
	lb    string
	taken map[int32]Claim
}

// claimLevel claims ports on every ids[i] for owners[i] in the ledger, ids in sorted order.
// When one load balancer shows some of them taken, the claims this call made are released,
// the owners' holds dropped, the takers' ports held here, and the taken claims returned; an
// error (the ledger's, an APICallError) releases what it made too.
func (m *Multi) claimLevel(ctx context.Context, ids, owners []string, ports []int32, stale func(Claim) bool) (*levelTaken, error) {
	order := make([]int, len(ids))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(ids[a], ids[b]) })
	var made []int
	undo := func() {
		for _, i := range made {
			if err := m.ledger.ReleasePorts(ctx, ids[i], owners[i], ports); err != nil {
				ctrl.LoggerFrom(ctx).Info("Listener ports of an abandoned level claim left to the sweep", "loadBalancer", ids[i], "owner", owners[i], "error", err.Error())
			}
		}
		for _, o := range owners {
			m.alloc.release(o)
		}
	}
	for _, i := range order {
		taken, err := m.ledger.Claim(ctx, ids[i], ports, owners[i], stale)
		if err != nil {
			undo()
			return nil, plugin.Wrap(plugin.APICallError, err, "claim listener ports %v of load balancer %s", ports, ids[i])
		}
		if len(taken) > 0 {
			undo()
			for _, port := range sortedPorts(taken) {
				m.alloc.holdPort(taken[port].Owner, ids[i], port, taken[port].At.Add(ClaimTTL))
			}
			return &levelTaken{lb: ids[i], taken: taken}, nil
		}
		made = append(made, i)
		m.inLedger.Store(owners[i], true)
	}
	return nil, nil
}

// claimLines makes ports owners[i]'s on ids[i] again, here (tentative for ClaimTTL, firm
// once the Service shows up) and in the ledger; false when another owner holds one of them
// now or the ledger cannot be written: the caller chooses afresh.
func (m *Multi) claimLines(ctx context.Context, c client.Reader, ids, owners []string, ports []int32) bool {
	if plugin.IsReadOnly(ctx) {
		return false
	}
	if !m.alloc.holdLevel(ids, owners, ports, m.now().Add(ClaimTTL)) {
		return false
	}
	if m.ledger == nil {
		return true
	}
	taken, err := m.claimLevel(ctx, ids, owners, ports, staleTest(m.now(), ownerLive(ctx, c)))
	return err == nil && taken == nil
}

// OnPodDeleted does nothing: the lines' Services go by garbage collection, and their ports
// are freed when they are gone (ServiceGone).
func (m *Multi) OnPodDeleted(context.Context, client.Client, *corev1.Pod) error { return nil }

// OnPodUpdated runs the pod's lines: a NotReady status first; every missing line Service
// made in one run (OKG makes one per run); every Service brought to the network-conf
// (type ClusterIP on every line while the network is disabled); Ready when every line's
// Service has an address and the cloud controller has set every line's readiness gate (or
// the pod is Ready, which needs them). Errors: ParameterError (network-conf, a Service of a
// line's name that this manager did not make), the exhaustion error, APICallError (reads:
// Unknown; writes), each with the pod's status as the step left it.
func (m *Multi) OnPodUpdated(ctx context.Context, c client.Client, pod *corev1.Pod) (*corev1.Pod, error) {
	conf, confErr := networkstatus.ConfFromPod(pod)
	out, err := m.onPodUpdated(ctx, c, pod, conf, confErr)
	if err == nil && confErr == nil {
		err = m.unknownParams(conf)
	}
	return out, err
}

func (m *Multi) onPodUpdated(ctx context.Context, c client.Client, pod *corev1.Pod, conf networkstatus.Conf, confErr error) (*corev1.Pod, error) {
	log := ctrl.LoggerFrom(ctx).WithName("lb").WithValues("plugin", m.spec.Name)
	prev, _ := networkstatus.StatusFromPod(pod)
	first := prev == nil
	if first {
		prev = &networkstatus.NetworkStatus{CurrentNetworkState: networkstatus.NetworkNotReady}
	}
	notReady := func(err error) (*corev1.Pod, error) {
		st := *prev
		st.CurrentNetworkState = networkstatus.NetworkNotReady
		if werr := networkstatus.PutStatus(pod, st); werr != nil {
			return pod, werr
		}
		return pod, err
	}
	// The network-conf is checked first, at the first run too, as OKG's plugin does.
	if confErr != nil {
		return notReady(confErr)
	}
	prm, err := m.parse(conf)
	if err == nil {
		err = m.checkNames(pod.Name, prm)
	}
	if err != nil || first {
		// OKG's first run: a NotReady status and nothing else.
		return notReady(err)
	}
	disabled, err := networkstatus.NetworkDisabled(pod)
	if err != nil {
		return notReady(err)
	}
	// Every line's Service as it stands (nil: missing).
	have := make([]*corev1.Service, len(prm.lines))
	for i, line := range prm.lines {
		svc := &corev1.Service{}
		switch err := c.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: serviceName(pod.Name, line)}, svc); {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return notReady(plugin.WrapUnknown(err, "get Service %s/%s", pod.Namespace, serviceName(pod.Name, line)))
		}
		if ref := firstOwner(svc); ref != nil && ref.Kind == "Pod" && ref.UID != pod.UID {
			log.V(1).Info("The Service of an earlier pod of this name is still there; waiting for it to go", "service", klog.KObj(svc))
			return pod, nil
		}
		if !kubernetes.ManagedFor(svc, pod, AnnotationConfigHash) {
			return notReady(plugin.Errorf(plugin.ParameterError, "Service %s/%s exists and is not managed by network-plugin-policy", svc.Namespace, svc.Name))
		}
		have[i] = svc
	}
	owners := prm.owners(pod.Namespace, pod.Name)
	hold, err := m.allocation(ctx, c, pod, prm, have)
	if err != nil {
		return notReady(err)
	}
	ownerRefs, err := kubernetes.OwnerReferences(ctx, c, pod, prm.fixed)
	if err != nil {
		return notReady(err)
	}
	hash := multiHash(conf)
	created, switched, changed := false, false, false
	for i, line := range prm.lines {
		want, err := m.desired(pod, prm, line, prm.levels[hold.level][i], hold, ownerRefs, hash, disabled)
		if err != nil {
			m.releaseUnmade(ctx, prm.levels[hold.level], owners[hold.level], hold.ports, have)
			return notReady(err)
		}
		if have[i] == nil {
			if err := c.Create(ctx, want); err != nil {
				if apierrors.IsAlreadyExists(err) {
					return notReady(plugin.WrapUnknown(err, "create Service %s/%s", want.Namespace, want.Name))
				}
				return notReady(plugin.Wrap(plugin.APICallError, err, "create Service %s/%s", want.Namespace, want.Name))
			}
			log.Info("Service created", "service", klog.KObj(want), "loadBalancer", prm.levels[hold.level][i])
			m.ServiceSeen(want)
			created = true
			continue
		}
		svc := have[i]
		fields := m.base.differences(want, svc)
		if len(fields) == 0 {
			continue
		}
		if svc.Spec.Type != want.Spec.Type {
			switched = true // the network was disabled or enabled
		} else if svc.Annotations[AnnotationConfigHash] != hash {
			changed = true // the network-conf changed; else someone edited the Service: put back
		}
		before := svc.DeepCopy()
		m.base.apply(want, svc)
		svc.Annotations[AnnotationConfigHash] = hash
		if err := c.Patch(ctx, svc, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			if apierrors.IsConflict(err) {
				return notReady(plugin.WrapUnknown(err, "patch Service %s/%s", svc.Namespace, svc.Name))
			}
			return notReady(plugin.WrapWriteRefused(err, "patch Service %s/%s", svc.Namespace, svc.Name))
		}
		log.Info("Service updated", "service", klog.KObj(svc), "fields", fields)
		m.releaseOld(ctx, svc, before.Annotations[m.spec.IDAnnotation], before.Spec.Ports)
		m.ServiceSeen(svc)
	}
	switch {
	case created || changed:
		return notReady(nil)
	case switched:
		// OKG leaves the status as it was when it only switches the type.
		return pod, nil
	case disabled:
		return notReady(nil)
	}
	var cloudErrs []error
	waiting := false
	for _, svc := range have {
		if len(svc.Status.LoadBalancer.Ingress) == 0 {
			// Waiting for the cloud; its own word, when it refused the Service, is the run's
			// CloudError.
			waiting = true
			cloudErrs = append(cloudErrs, CloudFailure(ctx, c, svc))
		}
	}
	if waiting {
		return notReady(errors.Join(cloudErrs...))
	}
	if !m.linesServed(pod, prm) {
		return notReady(nil)
	}
	st := *prev
	st.CurrentNetworkState = networkstatus.NetworkReady
	st.InternalAddresses, st.ExternalAddresses = nil, nil
	for _, sp := range have[0].Spec.Ports {
		st.InternalAddresses = append(st.InternalAddresses, networkstatus.NetworkAddress{IP: pod.Status.PodIP,
			Ports: []networkstatus.NetworkPort{{Name: sp.Name, Port: networkstatus.IntPort(sp.TargetPort.IntVal), Protocol: sp.Protocol}}})
	}
	for i, line := range prm.lines {
		in := have[i].Status.LoadBalancer.Ingress[0]
		for _, sp := range have[i].Spec.Ports {
			st.ExternalAddresses = append(st.ExternalAddresses, networkstatus.NetworkAddress{IP: in.IP, EndPoint: in.Hostname + "/" + line,
				Ports: []networkstatus.NetworkPort{{Name: sp.Name, Port: networkstatus.IntPort(sp.Port), Protocol: sp.Protocol}}})
		}
	}
	if err := networkstatus.PutStatus(pod, st); err != nil {
		return pod, err
	}
	return pod, nil
}

// linesServed reports whether the cloud controller serves every line: its readiness gate's
// condition is True, or the pod is Ready (which needs every gate True), or the pod has no such
// gate (one created without this plugin's CREATE: nothing would ever set it).
func (m *Multi) linesServed(pod *corev1.Pod, prm multiParams) bool {
	status := map[corev1.PodConditionType]corev1.ConditionStatus{}
	for _, c := range pod.Status.Conditions {
		status[c.Type] = c.Status
	}
	if status[corev1.PodReady] == corev1.ConditionTrue {
		return true
	}
	for _, line := range prm.lines {
		gate := corev1.PodConditionType(m.spec.GatePrefix + serviceName(pod.Name, line))
		gated := slices.ContainsFunc(pod.Spec.ReadinessGates, func(g corev1.PodReadinessGate) bool { return g.ConditionType == gate })
		if gated && status[gate] != corev1.ConditionTrue {
			return false
		}
	}
	return true
}

// allocation returns the level and ports of the pod's lines: those its existing Services
// hold, when they agree (a level of prm, one port per PortProtocols entry, the same ports on
// every one), held here and, for an adopted Service, in the ledger, and claimed for the lines
// still without a Service; else the ones recorded at its CREATE, claimed again; else a new
// choice (the existing Services are then moved to it).
func (m *Multi) allocation(ctx context.Context, c client.Client, pod *corev1.Pod, prm multiParams, have []*corev1.Service) (levelHold, error) {
	owners := prm.owners(pod.Namespace, pod.Name)
	if hold, ok := m.existing(prm, have); ok {
		ids, os := prm.levels[hold.level], owners[hold.level]
		m.adopt(ctx, ids, os, hold.ports, have)
		var missingIDs, missingOwners []string
		for i, svc := range have {
			if svc == nil {
				missingIDs, missingOwners = append(missingIDs, ids[i]), append(missingOwners, os[i])
			}
		}
		if len(missingIDs) == 0 || m.claimLines(ctx, c, missingIDs, missingOwners, hold.ports) {
			return hold, nil
		}
	}
	if rec, ok := m.recorded(pod, prm); ok && m.claimLines(ctx, c, prm.levels[rec.level], owners[rec.level], rec.ports) {
		return rec, nil
	}
	return m.claim(ctx, c, pod, prm, false)
}

// existing returns the level and ports the lines' existing Services agree on.
func (m *Multi) existing(prm multiParams, have []*corev1.Service) (levelHold, bool) {
	hold := levelHold{level: -1}
	for i, svc := range have {
		if svc == nil {
			continue
		}
		al, ok := listenerPorts(svc, m.spec.IDAnnotation, len(prm.ports))
		if !ok {
			return levelHold{}, false
		}
		level := slices.IndexFunc(prm.levels, func(ids []string) bool { return ids[i] == al.LB })
		if level < 0 || (hold.level >= 0 && (level != hold.level || !slices.Equal(al.Ports, hold.ports))) {
			return levelHold{}, false
		}
		for _, p := range al.Ports {
			if !m.rng.contains(p) {
				return levelHold{}, false
			}
		}
		hold = levelHold{level: level, ports: al.Ports}
	}
	return hold, hold.level >= 0
}

// adopt records the ports of existing Services this replica has not seen in the ledger
// (OKG's, or another replica's) there, dated at their creation; a failure is logged (they
// keep their ports either way).
func (m *Multi) adopt(ctx context.Context, ids, owners []string, ports []int32, have []*corev1.Service) {
	if m.ledger == nil || plugin.IsReadOnly(ctx) {
		return
	}
	for i, svc := range have {
		if svc == nil {
			continue
		}
		if _, known := m.inLedger.Load(owners[i]); known {
			continue
		}
		if taken, err := m.ledger.Adopt(ctx, ids[i], ports, owners[i], svc.CreationTimestamp.Time); err != nil || len(taken) > 0 {
			ctrl.LoggerFrom(ctx).Info("An existing Service's listener ports could not all be recorded in the ledger", "service", owners[i],
				"loadBalancer", ids[i], "ports", ports, "takenBy", taken, "error", err)
			continue
		}
		m.inLedger.Store(owners[i], true)
	}
}

// releaseUnmade releases the claims on ids[i] of the lines whose Services do not exist (a
// run that made nothing for them).
func (m *Multi) releaseUnmade(ctx context.Context, ids, owners []string, ports []int32, have []*corev1.Service) {
	for i, svc := range have {
		if svc != nil {
			continue
		}
		m.alloc.release(owners[i])
		if m.ledger != nil {
			if err := m.ledger.ReleasePorts(ctx, ids[i], owners[i], ports); err != nil {
				ctrl.LoggerFrom(ctx).Info("Listener ports of an unmade Service left to the sweep", "owner", owners[i], "error", err.Error())
			}
		}
	}
}

// releaseOld releases in the ledger the ports svc held before a patch (on id) that it no
// longer holds: a new allocation replaced them.
func (m *Multi) releaseOld(ctx context.Context, svc *corev1.Service, id string, old []corev1.ServicePort) {
	if m.ledger == nil || id == "" {
		return
	}
	var unused []int32
	for _, sp := range old {
		if (svc.Annotations[m.spec.IDAnnotation] != id || !slices.ContainsFunc(svc.Spec.Ports, func(h corev1.ServicePort) bool { return h.Port == sp.Port })) &&
			!slices.Contains(unused, sp.Port) {
			unused = append(unused, sp.Port)
		}
	}
	if len(unused) == 0 {
		return
	}
	if err := m.ledger.ReleasePorts(ctx, id, client.ObjectKeyFromObject(svc).String(), unused); err != nil {
		ctrl.LoggerFrom(ctx).Info("Listener ports a Service gave up left to the sweep", "service", klog.KObj(svc), "loadBalancer", id, "ports", unused, "error", err.Error())
	}
}

// desired builds line's Service on id with hold's ports: OKG's Multi-NLBs Service (ports
// "<target>-<lower(protocol)>", TCPUDP as two, the level annotation, the network-type label)
// plus the provider's fields (Customize); ClusterIP while disabled.
func (m *Multi) desired(pod *corev1.Pod, prm multiParams, line, id string, hold levelHold, owners []metav1.OwnerReference, hash string, disabled bool) (*corev1.Service, error) {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: serviceName(pod.Name, line), OwnerReferences: owners,
			Annotations: map[string]string{AnnotationConfigHash: hash, m.spec.IDAnnotation: id, m.spec.LevelAnnotation: strconv.Itoa(hold.level)},
			Labels:      map[string]string{}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{kubernetes.SelectorPodNameLabel: pod.Name},
			AllocateLoadBalancerNodePorts: ptr.To(false)},
	}
	for i, pp := range prm.ports {
		protos := []corev1.Protocol{pp.Protocol}
		if pp.Protocol == ProtocolTCPUDP {
			protos = []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP}
		}
		for _, proto := range protos {
			svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: fmt.Sprintf("%d-%s", pp.Port, strings.ToLower(string(proto))),
				Port: hold.ports[i], Protocol: proto, TargetPort: intstr.FromInt32(pp.Port)})
		}
	}
	if m.spec.Customize != nil {
		if err := m.spec.Customize(prm.conf, svc); err != nil {
			return nil, err
		}
	}
	if svc.Labels == nil {
		svc.Labels = map[string]string{}
	}
	svc.Labels[networkstatus.AnnotationNetworkType] = m.spec.Name
	if disabled {
		svc.Spec.Type = corev1.ServiceTypeClusterIP
		svc.Spec.ExternalTrafficPolicy = ""
		svc.Spec.AllocateLoadBalancerNodePorts = nil
		svc.Spec.LoadBalancerClass = nil
	}
	return svc, nil
}

// multiHash is the engine's AnnotationConfigHash for a Multi Service: FNV-1a 32-bit, decimal,
// of the network-conf's parameters.
func multiHash(conf networkstatus.Conf) string {
	h := fnv.New32a()
	for _, c := range conf {
		fmt.Fprintf(h, "%s=%s;", c.Name, c.Value)
	}
	return strconv.FormatUint(uint64(h.Sum32()), 10)
}
