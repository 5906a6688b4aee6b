package lb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	// Alias is OKG's family name of the type, "Multi-NLBs-Network".
	Alias string
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

// Alias returns the spec's Alias.
func (m *Multi) Alias() string { return m.spec.Alias }

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

// MultiMaxLines and MultiMaxLoadBalancers bound a network-conf's IDsParam: at most 8 lines
// (Alibaba's ISP lines are a handful: BGP, China Telecom, Unicom, Mobile, ...) and 64 load
// balancer ids in all. A pod holds its listener ports on one NLB per line, and every id is
// parsed and scanned at each run: the caps keep one pod's claims and each run's work bounded
// whatever a pod author writes.
const (
	MultiMaxLines         = 8
	MultiMaxLoadBalancers = 64
)

// parse reads the network-conf: IDsParam (required; "<id>/<line>" entries, line names of
// letters and digits, distinct once lower-cased, every line with as many ids, each id once
// per level, at most MultiMaxLines lines and MultiMaxLoadBalancers ids), PortProtocols
// (required, TCPUDP allowed), Fixed and AllocatePolicy. Errors are ParameterErrors naming
// the parameter.
func (m *Multi) parse(conf networkstatus.Conf) (multiParams, error) {
	out := multiParams{conf: conf}
	byLine := map[string][]string{} // line -> its ids, in order: its n-th is level n's
	lower := map[string]string{}
	n := 0
	for _, v := range conf.Values(m.spec.IDsParam) {
		for _, entry := range strings.Split(v, ",") {
			if entry = strings.TrimSpace(entry); entry == "" {
				continue
			}
			if n++; n > MultiMaxLoadBalancers {
				return multiParams{}, plugin.ParamErrorf(m.spec.IDsParam, "names more than %d load balancers", MultiMaxLoadBalancers)
			}
			id, line, ok := strings.Cut(entry, "/")
			id, line = strings.TrimSpace(id), strings.TrimSpace(line)
			if !ok || id == "" || !LettersAndDigits(line) {
				return multiParams{}, plugin.ParamErrorf(m.spec.IDsParam, "%q is not <id>/<line>, expected \"<id>/<line>,...\" such as nlb-a/dx,nlb-b/lt, a line of letters and digits", entry)
			}
			if other, seen := lower[strings.ToLower(line)]; seen && other != line {
				// OKG names both lines' Services <pod>-<lower(line)>: one Service for two lines.
				return multiParams{}, plugin.ParamErrorf(m.spec.IDsParam, "lines %q and %q differ only in case; their Services would have one name (<pod>-%s)", other, line, strings.ToLower(line))
			}
			lower[strings.ToLower(line)] = line
			if _, seen := byLine[line]; !seen {
				if len(out.lines) == MultiMaxLines {
					return multiParams{}, plugin.ParamErrorf(m.spec.IDsParam, "names more than %d lines", MultiMaxLines)
				}
				out.lines = append(out.lines, line)
			}
			byLine[line] = append(byLine[line], id)
		}
	}
	if len(out.lines) == 0 {
		return multiParams{}, plugin.ParamErrorf(m.spec.IDsParam, "is required, expected \"<id>/<line>,...\" such as nlb-a/dx,nlb-b/lt")
	}
	levels := len(byLine[out.lines[0]])
	for _, line := range out.lines {
		if len(byLine[line]) != levels {
			return multiParams{}, plugin.ParamErrorf(m.spec.IDsParam, "line %q has %d load balancers and line %q %d: every line needs one per level", out.lines[0], levels, line, len(byLine[line]))
		}
	}
	for l := range levels {
		level := make([]string, len(out.lines))
		for i, line := range out.lines {
			level[i] = byLine[line][l]
			if j := slices.Index(level[:i], level[i]); j >= 0 {
				return multiParams{}, plugin.ParamErrorf(m.spec.IDsParam, "load balancer %q is both line %q's and line %q's in level %d; each line needs its own", level[i], out.lines[j], line, l)
			}
		}
		out.levels = append(out.levels, level)
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

// LettersAndDigits reports whether s is a non-empty string of ASCII letters and digits: a
// name part that cannot join two others into one name (a line of AlibabaCloud-Multi-NLBs,
// "1-dx" of pod "gs" and "dx" of pod "gs-1", would share a Service name; an ISP type of
// AlibabaCloud-AutoNLBs likewise).
func LettersAndDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && (r < '0' || r > '9') {
			return false
		}
	}
	return true
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

// restrict applies the platform's cap on the listeners a pod holds (max_ports_per_pod,
// counted over every line: each line's NLB holds the pod's ports) and the provider's
// parameters on an empty Service.
func (m *Multi) restrict(prm multiParams) error {
	if n := len(prm.ports) * len(prm.lines); m.rng.MaxPerPod > 0 && n > m.rng.MaxPerPod {
		return plugin.NotAllowedf(ParamPortProtocols, "asks for %d listener ports on each of %d lines, %d in all; the provider configuration allows at most %d per pod (max_ports_per_pod)",
			len(prm.ports), len(prm.lines), n, m.rng.MaxPerPod)
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
		// Tentative, as at the CREATE: a pod deleted before its Services were made holds
		// nothing past ClaimTTL.
		m.alloc.holdLevel(rec.LoadBalancers, prm.owners(pod.Namespace, pod.Name)[0], rec.Ports, m.now().Add(ClaimTTL))
	}
	if m.ledger == nil {
		return nil
	}
	return loadLedger(ctx, m.ledger, m.alloc, &m.inLedger)
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
// balancer of the level and recorded in AnnotationAllocation: the ports its lines' Fixed
// Services hold already (a Fixed game server created again), else new ones. The claims are
// tentative: they count for ClaimTTL unless the lines' Services show up. A pod without a
// name (generateName) is refused with a ParameterError naming metadata.name: its gates are
// named after it, and a pod's gates cannot change once it exists. Errors: ParameterErrors,
// the exhaustion ParameterError, an APICallError when the ledger cannot be written, Unknown
// when a line's Service cannot be read.
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
	// Only a GameServerSet's Services (Fixed) outlive a pod: an earlier pod's go with it.
	have := make([]*corev1.Service, len(prm.lines))
	for i, line := range prm.lines {
		svc := &corev1.Service{}
		switch err := c.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: serviceName(pod.Name, line)}, svc); {
		case apierrors.IsNotFound(err):
		case err != nil:
			return pod, plugin.WrapUnknown(err, "get Service %s/%s", pod.Namespace, serviceName(pod.Name, line))
		default:
			if ref := metav1.GetControllerOf(svc); ref != nil && ref.Kind == "GameServerSet" && m.ours(svc, pod) {
				have[i] = svc
			}
		}
	}
	hold, err := m.allocation(ctx, c, pod, prm, have, true)
	if err != nil {
		return pod, err
	}
	return pod, m.record(pod, prm, hold)
}

// ours reports whether svc is a line Service of pod by what it carries: the plugin's
// network-type label and a selector of pod's name (OKG's Services and this manager's both
// have them), besides the owner or config hash kubernetes.ManagedFor accepts.
func (m *Multi) ours(svc *corev1.Service, pod *corev1.Pod) bool {
	return kubernetes.ManagedFor(svc, pod, AnnotationConfigHash) && svc.Labels[networkstatus.AnnotationNetworkType] == m.spec.Name &&
		svc.Spec.Selector[kubernetes.SelectorPodNameLabel] == pod.Name
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
// have are the lines' existing Services (nil: missing), whose ports count as the pod's own
// and are restored here whatever the outcome.
func (m *Multi) claim(ctx context.Context, c client.Reader, pod *corev1.Pod, prm multiParams, have []*corev1.Service, atCreate bool) (hold levelHold, err error) {
	live := ownerLive(ctx, c)
	defer func() {
		if err != nil {
			m.restore(have)
		}
	}()
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
	refreshed := false
	for range claimAttempts {
		// Every hold is tentative, at an update too: a line's owner is its Service, which
		// shows up (and the hold turns firm) only once made; a hold whose Service is never
		// made runs out here and goes stale in the ledger.
		now := m.now()
		hold, ok := m.alloc.allocateLevel(prm.levels, owners, n, prm.balanced, now, now.Add(ClaimTTL), live)
		if !ok && m.ledger != nil && !refreshed {
			// Before saying no room: this replica may still count claims another replica has
			// given up since (a level it abandoned). Read the ledger once and choose again.
			refreshed = true
			if claims, err := m.ledger.Load(ctx); err == nil {
				m.alloc.forgetUnclaimed(prm.ids(), claims)
				m.restore(have)
				continue
			}
		}
		if !ok {
			return levelHold{}, m.exhausted(prm)
		}
		if m.ledger == nil {
			return hold, nil
		}
		taken, err := m.claimLevel(ctx, prm.levels[hold.level], owners[hold.level], hold.ports, m.kept(prm.levels[hold.level], have), staleTest(now, live))
		if err != nil {
			return levelHold{}, err
		}
		if !taken {
			return hold, nil
		}
		m.restore(have)
	}
	return levelHold{}, &plugin.Error{Type: plugin.APICallError, Reason: plugin.ReasonUnavailable, Message: "claim listener ports",
		Err: fmt.Errorf("%d choices in a row were taken by another replica", claimAttempts)}
}

// claimLevel claims ports on every ids[i] for owners[i] in the ledger, ids in sorted order.
// When one load balancer shows some of them taken, the claims this call made are released
// (but for keep[i], the ports owners[i]'s Service holds on ids[i] already, which stay its),
// the owners' holds dropped, the takers' ports held here, and taken is true; an error (the
// ledger's, an APICallError) releases what it made too.
func (m *Multi) claimLevel(ctx context.Context, ids, owners []string, ports []int32, keep [][]int32, stale func(Claim) bool) (taken bool, err error) {
	order := make([]int, len(ids))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(ids[a], ids[b]) })
	var made []int
	undo := func() {
		for _, i := range made {
			drop := slices.DeleteFunc(slices.Clone(ports), func(p int32) bool { return keep != nil && slices.Contains(keep[i], p) })
			if len(drop) == 0 {
				continue
			}
			if keep == nil || len(keep[i]) == 0 {
				m.inLedger.Delete(owners[i])
			}
			if err := m.ledger.ReleasePorts(ctx, ids[i], owners[i], drop); err != nil {
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
			return false, plugin.Wrap(plugin.APICallError, err, "claim listener ports %v of load balancer %s", ports, ids[i])
		}
		if len(taken) > 0 {
			undo()
			for _, port := range sortedPorts(taken) {
				m.alloc.holdPort(taken[port].Owner, ids[i], port, taken[port].At.Add(ClaimTTL))
			}
			return true, nil
		}
		made = append(made, i)
		m.inLedger.Store(owners[i], true)
	}
	return false, nil
}

// claimLines makes ports owners[i]'s on ids[i] again, in the ledger first (keep as
// claimLevel's) and then here (tentative for ClaimTTL, firm once the Service shows up); false
// when another owner holds one of them now: the caller chooses afresh. A ledger that cannot
// be written is an APICallError: no choice is made on it.
func (m *Multi) claimLines(ctx context.Context, c client.Reader, ids, owners []string, ports []int32, keep [][]int32) (bool, error) {
	if plugin.IsReadOnly(ctx) {
		return false, plugin.Wrap(plugin.APICallError, plugin.ErrWouldWrite, "claim listener ports")
	}
	if m.ledger == nil {
		return m.alloc.holdLevel(ids, owners, ports, m.now().Add(ClaimTTL)), nil
	}
	// The ledger decides, not this replica's view, which may still count a claim given up
	// since: claimed there, the ports are held here too.
	taken, err := m.claimLevel(ctx, ids, owners, ports, keep, staleTest(m.now(), ownerLive(ctx, c)))
	if err != nil || taken {
		return false, err
	}
	if !m.alloc.forceLevel(ids, owners, ports, m.now().Add(ClaimTTL)) {
		// A Service this replica sees has one of them and the ledger does not know it:
		// give the claims back and choose afresh.
		for i, id := range ids {
			var drop []int32
			for _, p := range ports {
				if keep == nil || !slices.Contains(keep[i], p) {
					drop = append(drop, p)
				}
			}
			if len(drop) > 0 {
				if err := m.ledger.ReleasePorts(ctx, id, owners[i], drop); err != nil {
					ctrl.LoggerFrom(ctx).Info("Listener ports of an abandoned claim left to the sweep", "loadBalancer", id, "owner", owners[i], "error", err.Error())
				}
			}
		}
		return false, nil
	}
	return true, nil
}

// kept returns, for each line of a level of ids, the ports its existing Service (have)
// holds on that line's load balancer: they are the line's whatever a new claim does.
func (m *Multi) kept(ids []string, have []*corev1.Service) [][]int32 {
	out := make([][]int32, len(ids))
	for i, svc := range have {
		if svc != nil && i < len(ids) && svc.Annotations[m.spec.IDAnnotation] == ids[i] {
			out[i] = servicePorts(svc)
		}
	}
	return out
}

// restore counts the ports of the lines' existing Services again here (a claim that failed
// after the allocator had set them aside).
func (m *Multi) restore(have []*corev1.Service) {
	for _, svc := range have {
		if svc != nil {
			m.ServiceSeen(svc)
		}
	}
}

// servicePorts returns svc's distinct listener ports.
func servicePorts(svc *corev1.Service) []int32 {
	var out []int32
	for _, sp := range svc.Spec.Ports {
		if !slices.Contains(out, sp.Port) {
			out = append(out, sp.Port)
		}
	}
	return out
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
	notReady := networkstatus.NotReadyFrom(pod, *prev)
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
		if ref := firstOwner(svc); ref != nil && ref.Kind == "Pod" && ref.Name == pod.Name && ref.UID != pod.UID {
			log.V(1).Info("The Service of an earlier pod of this name is still there; waiting for it to go", "service", klog.KObj(svc))
			return pod, nil
		}
		if !m.ours(svc, pod) {
			return notReady(plugin.Errorf(plugin.ParameterError, "Service %s/%s exists and is not managed by network-plugin-policy", svc.Namespace, svc.Name))
		}
		have[i] = svc
	}
	hash := ConfHash(conf)
	if slices.ContainsFunc(have, func(svc *corev1.Service) bool { return svc == nil || svc.Annotations[AnnotationConfigHash] != hash }) {
		// A Service to make, or a network-conf that changed: the platform's caps apply to
		// what is asked now (Services that stand as the network-conf asks are kept).
		if err := m.restrict(prm); err != nil {
			return notReady(err)
		}
	}
	owners := prm.owners(pod.Namespace, pod.Name)
	hold, err := m.allocation(ctx, c, pod, prm, have, false)
	if err != nil {
		return notReady(err)
	}
	ownerRefs, err := kubernetes.OwnerReferences(ctx, c, pod, prm.fixed)
	if err != nil {
		return notReady(err)
	}
	created, switched, changed := false, false, false
	var repaired error // the warnings of drift repairs, joined to the run's result
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
		moved := svc.Annotations[m.spec.IDAnnotation] != want.Annotations[m.spec.IDAnnotation] || !slices.Equal(servicePorts(svc), servicePorts(want))
		if !moved && m.base.drift(want, svc) {
			// Someone edited fields the plugin owns, the network-conf unchanged: put them back,
			// keeping a Ready network Ready (the per-pod engine's repair and its back-off).
			err := m.base.repair(ctx, c, svc, want, fields)
			if err != nil && !plugin.IsWarning(err) {
				return notReady(err)
			}
			repaired = errors.Join(repaired, err)
			m.ServiceSeen(svc)
			continue
		}
		switch {
		case svc.Spec.Type != want.Spec.Type && !moved:
			switched = true // the network was disabled or enabled
		default:
			changed = true // the network-conf changed, or the line moves: NotReady until the cloud has it
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
	if created || changed || switched || disabled {
		// A switch of the type is NotReady at once, both ways: OKG leaves the status as it
		// was until its next run, which its GameServer controller re-drives; this manager
		// does not run a Ready network again, and a disabled one is not served.
		return notReady(repaired)
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
		return notReady(errors.Join(append(cloudErrs, repaired)...))
	}
	if !m.linesServed(pod, prm) {
		return notReady(repaired)
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
	return pod, repaired
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
// (have) hold, when they agree (a level of prm, one port per PortProtocols entry, the same
// ports on every one), held here and, for an adopted Service, in the ledger, and claimed for
// the lines still without a Service; else the ones recorded at its CREATE, claimed again;
// else a new choice (the existing Services are then moved to it). The record's claims the
// result does not use are released in a run that claimed. atCreate is a CREATE's (claim). Errors: the exhaustion
// ParameterError, the caps', APICallErrors of the ledger.
func (m *Multi) allocation(ctx context.Context, c client.Client, pod *corev1.Pod, prm multiParams, have []*corev1.Service, atCreate bool) (levelHold, error) {
	owners := prm.owners(pod.Namespace, pod.Name)
	rec, recOK := m.recorded(pod, prm)
	standing := false // every line's Service stands on the result: nothing was claimed now
	hold, err := func() (levelHold, error) {
		if hold, ok := m.existing(prm, have); ok {
			ids, os := prm.levels[hold.level], owners[hold.level]
			m.adopt(ctx, ids, os, hold.ports, have)
			var missingIDs, missingOwners []string
			for i, svc := range have {
				if svc == nil {
					missingIDs, missingOwners = append(missingIDs, ids[i]), append(missingOwners, os[i])
				}
			}
			if len(missingIDs) == 0 {
				standing = true
				return hold, nil
			}
			if ok, err := m.claimLines(ctx, c, missingIDs, missingOwners, hold.ports, nil); err != nil || ok {
				return hold, err
			}
		}
		if recOK {
			ok, err := m.claimLines(ctx, c, prm.levels[rec.level], owners[rec.level], rec.ports, m.kept(prm.levels[rec.level], have))
			if err != nil || ok {
				return rec, err
			}
		}
		return m.claim(ctx, c, pod, prm, have, atCreate)
	}()
	if err != nil {
		m.restore(have)
		return levelHold{}, err
	}
	if !standing && recOK && (rec.level != hold.level || !slices.Equal(rec.ports, hold.ports)) && m.ledger != nil && !plugin.IsReadOnly(ctx) {
		// The claims made for the record (at the CREATE) that the result does not use, once,
		// in the run that chose otherwise (a ledger write each; a run whose Services all
		// stand writes nothing).
		for i := range prm.lines {
			id := prm.levels[rec.level][i]
			drop := slices.Clone(rec.ports)
			if id == prm.levels[hold.level][i] {
				drop = slices.DeleteFunc(drop, func(p int32) bool { return slices.Contains(hold.ports, p) })
			}
			if len(drop) == 0 {
				continue
			}
			if err := m.ledger.ReleasePorts(ctx, id, owners[rec.level][i], drop); err != nil {
				ctrl.LoggerFrom(ctx).Info("Listener ports of a recorded choice left to the sweep", "loadBalancer", id, "owner", owners[rec.level][i], "error", err.Error())
			}
		}
	}
	return hold, nil
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
		// Ports outside the range (a provider table changed since) are kept: a Service that
		// stands is not moved.
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
