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
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/kubernetes"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// Plugin is a family-A load-balancer plugin built from a Spec: plugin.Plugin and
// plugin.CachedReader. Create one with New.
type Plugin struct {
	spec   Spec
	rng    Range
	alloc  *allocator
	ledger Ledger
	// inLedger holds the owners ("<namespace>/<name>") whose ports this replica knows to be
	// in the ledger (loaded at Init or claimed since), so that an adopted Service is claimed
	// once, not at every update.
	inLedger sync.Map
	// clock is the time of claims and their expiry; nil is the real clock.
	clock clock.PassiveClock
	// repairs holds each Service's *repairState ("<namespace>/<name>"), for the backoff of
	// drift repairs.
	repairs sync.Map
	// scatterNext is the index of the ids the next scattered allocation starts its scan at
	// (Spec.ScatterParam), modulo their number.
	scatterNext atomic.Int64
	// reader reads the kinds of the Spec's ServeObjects (UseResultReader); nil: the run's
	// client.
	reader client.Reader
}

// UseResultReader makes the Spec's Serve read its objects through r, the manager's cache,
// rather than through the run's client (which reads unstructured objects from the API
// server). Call it before Init.
func (p *Plugin) UseResultReader(r client.Reader) { p.reader = r }

// ResultObjects returns the Spec's Results (plugin.ResultObjectsReader): none for a plugin
// whose network is Ready on its Service's ingress.
func (p *Plugin) ResultObjects() []plugin.ResultKind { return p.spec.Results }

// serveRun is the ServeRun of a run of pod on svc.
func (p *Plugin) serveRun(c client.Client, pod *corev1.Pod, svc *corev1.Service, conf networkstatus.Conf, disabled bool) ServeRun {
	var r client.Reader = c
	if p.reader != nil {
		r = p.reader
	}
	return ServeRun{Pod: pod, Service: svc, Conf: conf, Disabled: disabled, Reader: r}
}

// UseClock makes p read the time from clk (tests). Call it before Init.
func (p *Plugin) UseClock(clk clock.PassiveClock) { p.clock = clk }

// now is p's clock's time.
func (p *Plugin) now() time.Time {
	if p.clock == nil {
		return time.Now()
	}
	return p.clock.Now()
}

// ClaimTTL is how long listener ports claimed at a pod's CREATE admission count, on every
// replica, when neither the pod nor its Service ever shows up (a CREATE that a later
// admission step or the API server refused: validation, a quota, PodSecurity, a validating
// webhook): the CREATE's deadline plus the watch's delivery margin, 44 s, as HostPort's
// reservations (kubernetes.ReservationTTL). Another replica's claim read from the ledger
// counts until its claim time plus ClaimTTL on the same terms, and a ledger claim older
// than that whose owner has neither a pod nor a Service is taken over by the next claim of
// its ports.
const ClaimTTL = kubernetes.ReservationTTL

// ownerLive returns whether a pod or a Service named owner ("<namespace>/<name>") exists in c (the
// manager's cache); a read that fails counts as live: unknown is not gone.
func ownerLive(ctx context.Context, c client.Reader) func(owner string) bool {
	if c == nil {
		return nil
	}
	return func(owner string) bool {
		ns, name, ok := strings.Cut(owner, "/")
		if !ok {
			return true
		}
		in, err := NameInUse(ctx, c, client.ObjectKey{Namespace: ns, Name: name})
		return in || err != nil
	}
}

// staleTest returns the ledger's test of another owner's claim: older than ClaimTTL at now and
// its owner not live (see ownerLive).
func staleTest(now time.Time, live func(string) bool) func(Claim) bool {
	if live == nil {
		return nil
	}
	return func(c Claim) bool { return now.Sub(c.At) >= ClaimTTL && !live(c.Owner) }
}

// StaleClaims returns the ledger's test of another owner's claim, read through c at now, for
// a plugin that claims in a per-pod plugin's ledger (the shared-port plugins): older than
// ClaimTTL, and neither a Service nor a pod of its owner's name (a read that fails counts as
// one). It runs inside the ledger's guarded write: c should be a cache.
func StaleClaims(ctx context.Context, c client.Reader, now time.Time) func(Claim) bool {
	return staleTest(now, ownerLive(ctx, c))
}

// UseLedger makes p record every listener port it hands out in l before the Service that
// uses it is written, and count the ports l holds at Init: with more than one replica, the
// ledger is what keeps two of them from handing out one port twice. Without one (nil, the
// default) p trusts its own allocator, which is enough for one replica only. Call it before
// Init.
func (p *Plugin) UseLedger(l Ledger) { p.ledger = l }

var (
	_ plugin.Plugin        = (*Plugin)(nil)
	_ plugin.CachedReader  = (*Plugin)(nil)
	_ plugin.ConfValidator = (*Plugin)(nil)
	_ plugin.NetworkViewer = (*Plugin)(nil)
)

// ValidateConf checks the pod's network-conf as the plugin's runs do, claiming and writing
// nothing: JSON, the load balancer ids (or the auto-create parameter and whether it is
// allowed), PortProtocols and its cap, Fixed, the annotations a network-conf may not set,
// and the provider's own parameters (the Spec's Customize, on an empty Service); an unknown
// parameter is a warning. Free ports depend on other pods and are not checked.
func (p *Plugin) ValidateConf(pod *corev1.Pod) error {
	conf, err := networkstatus.ConfFromPod(pod)
	if err != nil {
		return err
	}
	prm, err := p.parse(conf)
	if err != nil {
		return err
	}
	if err := p.restrict(prm); err != nil {
		return err
	}
	if p.spec.Customize != nil {
		if err := p.spec.Customize(prm.conf, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{}, Labels: map[string]string{}}}); err != nil {
			return err
		}
	}
	return p.unknownParams(conf)
}

// NetworkView describes the pod's network-conf for the network-conf rules: the load
// balancer ids (IDsParam), the listener ports (PortProtocols, protocols as written: TCP, UDP,
// TCPUDP, ...) and, with the Spec's AutoCreateParam, whether the cloud creates a load
// balancer. Errors: those of parse (a ParameterError naming the parameter).
func (p *Plugin) NetworkView(pod *corev1.Pod) (plugin.NetworkView, error) {
	conf, err := networkstatus.ConfFromPod(pod)
	if err != nil {
		return plugin.NetworkView{}, err
	}
	prm, err := p.parse(conf)
	if err != nil {
		return plugin.NetworkView{}, err
	}
	v := plugin.NetworkView{LoadBalancerIDs: prm.ids, CreatesCloudResources: prm.auto,
		Params: map[string][]string{"loadBalancerIDs": {p.spec.IDsParam}, "ports": {ParamPortProtocols}}}
	if p.spec.AutoCreateParam != "" {
		v.Params["createsCloudResources"] = []string{p.spec.AutoCreateParam}
	}
	for _, pp := range prm.ports {
		v.Ports = append(v.Ports, plugin.ViewPort{Port: pp.Port, Protocol: string(pp.Protocol)})
	}
	return v, nil
}

// New returns the plugin of spec, handing out listener ports of rng (the provider table's
// range, e.g. [alibabacloud.slb]).
func New(spec Spec, rng Range) *Plugin {
	return &Plugin{spec: spec, rng: rng, alloc: newAllocator(rng)}
}

// Name returns the Spec's Name.
func (p *Plugin) Name() string { return p.spec.Name }

// LedgerKey is the ledger the plugin's claims go in: the Spec's LedgerGroup, or its Name.
func (p *Plugin) LedgerKey() string {
	if p.spec.LedgerGroup != "" {
		return p.spec.LedgerGroup
	}
	return p.spec.Name
}

// Alias returns the Spec's Alias.
func (p *Plugin) Alias() string { return p.spec.Alias }

// IsSynchronous returns false: the network converges when the cloud controller has
// provisioned the listeners, after the pod exists.
func (p *Plugin) IsSynchronous() bool { return false }

// CachedObjects returns the Service and the Event: the plugin reads the pod's Service, lists
// every Service at Init, and reads what the cloud controller said about a Service still
// without an address (the manager's Event cache holds the Warning Events of Services only,
// EventSelector, indexed by RegisterIndexes).
func (p *Plugin) CachedObjects() []client.Object {
	return append([]client.Object{&corev1.Service{}, &corev1.Event{}}, p.spec.ServeObjects...)
}

// Init counts the ports of every Service on a load balancer (the id annotation, or the
// cloud controller's IDLabel): whoever made it, in the range, so that no port in use is
// handed out after a restart; then the ports recorded at the CREATE of pods whose Service is
// not made yet, and the ledger's claims. Call it before the informers' handlers run. Errors
// are the lists' (APICallErrors).
func (p *Plugin) Init(ctx context.Context, c client.Client, _ plugin.Config) error {
	p.alloc = newAllocator(p.rng)
	var list corev1.ServiceList
	if err := c.List(ctx, &list); err != nil {
		return plugin.Wrap(plugin.APICallError, err, "list Services")
	}
	for i := range list.Items {
		p.observe(&list.Items[i])
	}
	// The ports chosen at the CREATE of pods whose Service is not made yet.
	var pods corev1.PodList
	if err := c.List(ctx, &pods); err != nil {
		return plugin.Wrap(plugin.APICallError, err, "list pods")
	}
	for i := range pods.Items {
		pod := &pods.Items[i]
		var rec allocationRecord
		if pod.Annotations[networkstatus.AnnotationNetworkType] != p.spec.Name ||
			json.Unmarshal([]byte(pod.Annotations[AnnotationAllocation]), &rec) != nil || rec.LoadBalancer == "" {
			continue
		}
		p.alloc.tryHold(client.ObjectKeyFromObject(pod).String(), Allocation{LB: rec.LoadBalancer, Ports: rec.Ports})
	}
	if p.ledger == nil {
		return nil
	}
	return loadLedger(ctx, p.ledger, p.alloc, &p.inLedger)
}

// loadLedger counts every claim of ledger in alloc, as another replica's (tentative until its
// claim time plus ClaimTTL unless its owner proves live), and records its owner in inLedger:
// a plugin's Init. Errors: the ledger's read, an APICallError.
func loadLedger(ctx context.Context, ledger Ledger, alloc *allocator, inLedger *sync.Map) error {
	claims, err := ledger.Load(ctx)
	if err != nil {
		return plugin.Wrap(plugin.APICallError, err, "load the listener port ledger")
	}
	for lb, ports := range claims {
		for _, port := range sortedPorts(ports) {
			alloc.holdPort(ports[port].Owner, lb, port, ports[port].At.Add(ClaimTTL))
			inLedger.Store(ports[port].Owner, true)
		}
	}
	return nil
}

// SweepGrace is how old a claim must be for Sweep to release it: a claim made at a pod's
// CREATE admission has neither a pod nor a Service until the API server has stored the
// pod, and a Service create may follow a claim by a plugin's whole deadline.
const SweepGrace = time.Minute

// Sweep releases the ledger's claims older than SweepGrace whose Service is gone and whose
// pod is gone too (a claim made for a pod whose CREATE was then refused, or for a Service
// whose create failed, or released by no replica while its Service went), reading c. A claim
// whose pod still exists is kept: its Service may be on its way. An error on one owner or one
// of the ledger's ConfigMaps does not stop the sweep of the others: the errors of the reads
// and writes are returned together at the end.
func (p *Plugin) Sweep(ctx context.Context, c client.Reader, now time.Time) error {
	if p.ledger == nil {
		return nil
	}
	claims, err := p.ledger.Load(ctx)
	errs := []error{err}
	for lb, ports := range claims {
		owners := map[string]bool{}
		for _, claim := range ports {
			if now.Sub(claim.At) >= SweepGrace {
				owners[claim.Owner] = true
			}
		}
		for owner := range owners {
			ns, name, ok := strings.Cut(owner, "/")
			if !ok {
				continue
			}
			live, err := NameInUse(ctx, c, client.ObjectKey{Namespace: ns, Name: name})
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if live {
				continue
			}
			// Only claims older than the grace, checked in the same guarded write: one made
			// again meanwhile (its time refreshed) stays.
			if err := p.ledger.Release(ctx, lb, owner, now.Add(-SweepGrace)); err != nil {
				errs = append(errs, err)
				continue
			}
			p.alloc.release(owner)
		}
	}
	return errors.Join(errs...)
}

// ServiceSeen counts the ports of svc, a Service the manager's cache shows (added or
// changed), on its load balancer: the Service informer's add and update handler.
func (p *Plugin) ServiceSeen(svc *corev1.Service) { p.observe(svc) }

// ServiceGone frees the ports of the Service key ("<namespace>/<name>") once it is gone from
// the API: the Service informer's delete handler. Ports are freed then, not at the pod's
// DELETE admission, which a later admission controller may still refuse while the Service
// keeps its listeners. With a ledger, the claim is released too, unless c (read live) shows
// a Service or a pod of that name: a new pod of the same name whose CREATE claimed the ports
// again, or its new Service, keeps them (a late delete event must not free a live claim), and
// only the claims made up to created, the deleted Service's creation time (its pod's claim
// came before it), are released: a new pod's CREATE whose claim came later keeps it, even
// one that lands between the read and the release. An error leaves the claim to Sweep.
func (p *Plugin) ServiceGone(ctx context.Context, c client.Reader, key string, created time.Time) error {
	p.repairs.Delete(key)
	al, held := p.alloc.allocation(key)
	if p.ledger == nil || !held {
		p.alloc.release(key)
		return nil
	}
	ns, name, _ := strings.Cut(key, "/")
	live, err := NameInUse(ctx, c, client.ObjectKey{Namespace: ns, Name: name})
	if err != nil || live {
		return err
	}
	p.alloc.release(key)
	p.inLedger.Delete(key)
	// Claim times have second precision: every claim of the second the Service was made in,
	// or before, is the old pod's.
	return p.ledger.Release(ctx, al.LB, key, created.Truncate(time.Second).Add(time.Second))
}

// NameInUse reports whether a Service or a pod named key exists (read through c): a ledger
// claim's owner that may still be made or used. Errors are c's, other than NotFound.
func NameInUse(ctx context.Context, c client.Reader, key client.ObjectKey) (bool, error) {
	for _, obj := range []client.Object{&corev1.Service{}, &corev1.Pod{}} {
		err := c.Get(ctx, key, obj)
		if err == nil {
			return true, nil
		}
		if !apierrors.IsNotFound(err) {
			return false, err
		}
	}
	return false, nil
}

// observe counts svc's ports on its load balancer.
func (p *Plugin) observe(svc *corev1.Service) {
	id := svc.Annotations[p.spec.IDAnnotation]
	if id == "" && p.spec.IDLabel != "" {
		id = svc.Labels[p.spec.IDLabel]
	}
	if id == "" {
		return
	}
	ports := make([]int32, 0, len(svc.Spec.Ports))
	for _, sp := range svc.Spec.Ports {
		ports = append(ports, sp.Port)
	}
	p.alloc.observe(client.ObjectKeyFromObject(svc).String(), id, ports)
}

// AnnotationAllocation records on the pod the listener ports chosen for it at its CREATE:
// {"loadBalancer":"<id>","ports":[<port>,...]}, one of the manager's own annotations. The
// Service, made once the pod exists (it is the Service's owner), takes them when the ledger
// still holds them for it, and new ones otherwise.
const AnnotationAllocation = "policy.game.kruise.io/lb-allocation"

// allocationRecord is the JSON of AnnotationAllocation.
type allocationRecord struct {
	LoadBalancer string  `json:"loadBalancer"`
	Ports        []int32 `json:"ports"`
}

// OnPodAdded chooses the pod's listener ports at its CREATE, so that a pod no configured load
// balancer has room for fails at admission, where a Synchronous policy denies it and names
// the load balancers, rather than at a later update. The ports are claimed in the ledger
// and recorded in AnnotationAllocation; the Service is made at an update, once the pod
// exists. The claim is tentative: unless the pod or its Service shows up, its ports are free
// again ClaimTTL after the CREATE, on every replica (a CREATE refused after this admission
// holds nothing for long). A pod without a name yet (generateName) and a network-conf the
// plugin cannot read are left to the first update, where OKG reports bad input too. Errors:
// the Spec's exhaustion error; an APICallError when the ledger cannot be written.
func (p *Plugin) OnPodAdded(ctx context.Context, c client.Client, pod *corev1.Pod) (*corev1.Pod, error) {
	if pod.Name == "" {
		return pod, nil
	}
	conf, err := networkstatus.ConfFromPod(pod)
	if err != nil {
		return pod, nil
	}
	prm, err := p.parse(conf)
	if err != nil || prm.auto || p.restrict(prm) != nil {
		return pod, nil // auto-create: the load balancer is the Service's own; a refused conf: the first UPDATE says so
	}
	al, err := p.claim(ctx, c, client.ObjectKeyFromObject(pod).String(), prm, len(prm.ports), true)
	if err != nil {
		return pod, err
	}
	b, err := json.Marshal(allocationRecord{LoadBalancer: al.LB, Ports: al.Ports})
	if err != nil {
		return pod, plugin.Wrap(plugin.InternalError, err, "encode %s", AnnotationAllocation)
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[AnnotationAllocation] = string(b)
	return pod, nil
}

// recorded returns the allocation AnnotationAllocation records on pod, when it is usable for
// prm: on one of its ids, one port per PortProtocols entry, every port in the range.
func (p *Plugin) recorded(pod *corev1.Pod, prm params) (Allocation, bool) {
	var rec allocationRecord
	if err := json.Unmarshal([]byte(pod.Annotations[AnnotationAllocation]), &rec); err != nil ||
		!slices.Contains(prm.ids, rec.LoadBalancer) || len(rec.Ports) != len(prm.ports) {
		return Allocation{}, false
	}
	for _, port := range rec.Ports {
		if !p.rng.contains(port) {
			return Allocation{}, false
		}
	}
	return Allocation{LB: rec.LoadBalancer, Ports: rec.Ports}, true
}

// OnPodDeleted does nothing: the Service goes by garbage collection once the pod is gone,
// and its ports are freed when the allocator no longer sees it (this manager does not
// intercept DELETE).
func (p *Plugin) OnPodDeleted(context.Context, client.Client, *corev1.Pod) error { return nil }

// params are a pod's parsed network-conf.
type params struct {
	ids   []string
	ports []PortProtocol
	fixed bool
	// auto is the Spec's AutoCreateParam mode: the cloud controller creates the load
	// balancer, ids is empty.
	auto bool
	// scatter is the Spec's ScatterParam, true.
	scatter bool
	conf    networkstatus.Conf
}

// parse reads the decoded network-conf: the ids (required), PortProtocols (required), Fixed,
// and the provider's own parameters through the Spec's Customize (run by the caller).
func (p *Plugin) parse(conf networkstatus.Conf) (params, error) {
	var err error
	var out params
	out.conf = conf
	if p.spec.SingleID {
		if out.ids, err = p.singleID(conf); err != nil {
			return params{}, err
		}
	} else {
		for _, v := range conf.Values(p.spec.IDsParam) {
			for _, id := range strings.Split(v, ",") {
				if id = strings.TrimSpace(id); id != "" && (!p.spec.DedupIDs || !slices.Contains(out.ids, id)) {
					out.ids = append(out.ids, id)
				}
			}
		}
	}
	if p.spec.AutoCreateParam != "" {
		if v, ok := conf.Last(p.spec.AutoCreateParam); ok {
			if _, named := conf.Last(p.spec.IDsParam); named {
				return params{}, plugin.ParamErrorf(p.spec.IDsParam+","+p.spec.AutoCreateParam, "%s and %s cannot be filled in simultaneously: name a load balancer or ask for one to be created", p.spec.IDsParam, p.spec.AutoCreateParam)
			}
			var obj map[string]any
			if err := json.Unmarshal([]byte(v), &obj); err != nil || obj == nil {
				return params{}, plugin.ParamErrorf(p.spec.AutoCreateParam, "%q is not a JSON object, expected the cloud's load balancer specification as one", v)
			}
			out.auto = true
		}
	}
	if len(out.ids) == 0 && !out.auto {
		if p.spec.AutoCreateParam != "" {
			return params{}, plugin.ParamErrorf(p.spec.IDsParam, "is required (or %s): the load balancer to take ports on", p.spec.AutoCreateParam)
		}
		return params{}, plugin.ParamErrorf(p.spec.IDsParam, "is required: the ids of the load balancers to take ports on, comma-separated")
	}
	pp := conf.Values(ParamPortProtocols)
	if len(pp) == 0 {
		return params{}, plugin.ParamErrorf(ParamPortProtocols, `is required, expected "<port>[/<PROTOCOL>],..."`)
	}
	if out.ports, err = ParsePortProtocols(strings.Join(pp, ","), p.spec.AllowTCPUDP); err != nil {
		return params{}, err
	}
	if v := conf.Values(p.spec.ScatterParam); p.spec.ScatterParam != "" && len(v) > 0 {
		if out.scatter, err = strconv.ParseBool(v[len(v)-1]); err != nil {
			return params{}, plugin.ParamErrorf(p.spec.ScatterParam, "%q is not a boolean, expected true or false", v[len(v)-1])
		}
	}
	if v := conf.Values(ParamFixed); len(v) > 0 {
		if out.fixed, err = strconv.ParseBool(v[len(v)-1]); err != nil {
			return params{}, plugin.ParamErrorf(ParamFixed, "%q is not a boolean, expected true or false", v[len(v)-1])
		}
	}
	return out, nil
}

// restrict applies the platform's rules over what a network-conf may ask for, beyond OKG's
// own checks (parse): no annotation the plugin writes itself (checkProtected), auto-creation
// of a load balancer only where the provider configuration allows it, at most MaxPerPod
// listener ports. They apply where something would be made or changed for the pod (its
// CREATE's claim, its Service's create, a network-conf change of its Service), never to a
// Service that stands as the network-conf asks (one OKG made before the handover included):
// a working network is not taken away. Errors: a ParameterError naming the parameter and the
// key.
func (p *Plugin) restrict(prm params) error {
	if prm.auto && !p.spec.AutoCreateAllowed {
		return plugin.NotAllowedf(p.spec.AutoCreateParam, "asks the cloud to create a load balancer for the pod, a billable resource the platform did not name; the provider configuration allows it only with %s = true", p.spec.AutoCreateKey)
	}
	if p.rng.MaxPerPod > 0 && len(prm.ports) > p.rng.MaxPerPod {
		return plugin.NotAllowedf(ParamPortProtocols, "asks for %d listener ports; the provider configuration allows at most %d per pod (max_ports_per_pod)", len(prm.ports), p.rng.MaxPerPod)
	}
	return p.checkProtected(prm.conf)
}

// checkProtected refuses a network-conf that would set an annotation the plugin writes itself
// (Spec.ProtectedAnnotations, the id annotation, the config hash): an Annotations entry of
// that key, or, for a plugin that copies its parameters onto the Service (ConfAnnotations), a
// parameter of that name other than the one it reads as the load balancer id. Errors: a
// ParameterError naming the parameter and the key.
func (p *Plugin) checkProtected(conf networkstatus.Conf) error {
	protected := append([]string{p.spec.IDAnnotation, AnnotationConfigHash}, p.spec.ProtectedAnnotations...)
	for _, v := range conf.Values(ParamAnnotations) {
		for _, entry := range strings.Split(v, ",") {
			if k, _, ok := strings.Cut(entry, ":"); ok && slices.Contains(protected, k) {
				return plugin.NotAllowedf(ParamAnnotations, "sets %q, an annotation %s writes itself (the load balancer and ports it allocated); a network-conf may not set it", k, p.spec.Name)
			}
		}
	}
	if p.spec.ConfAnnotations {
		for _, c := range conf {
			if c.Name != p.spec.IDsParam && slices.Contains(protected, c.Name) {
				return plugin.NotAllowedf(c.Name, "is an annotation %s writes itself; a network-conf may not set it", p.spec.Name)
			}
		}
	}
	return nil
}

// singleID reads the Spec's IDsParam as one load balancer id: absent, none; empty or with
// a comma, a ParameterError naming it.
func (p *Plugin) singleID(conf networkstatus.Conf) ([]string, error) {
	v, ok := conf.Last(p.spec.IDsParam)
	if !ok {
		return nil, nil
	}
	if v = strings.TrimSpace(v); v == "" || strings.Contains(v, ",") {
		return nil, plugin.ParamErrorf(p.spec.IDsParam, "%q: expected exactly one load balancer id", v)
	}
	return []string{v}, nil
}

// OnPodUpdated runs OKG's lifecycle of the pod's Service (a NotReady status first; the
// Service created on the next run; rebuilt when it no longer matches the network-conf; type
// ClusterIP while the pod's network is disabled; Ready once the cloud controller reports an
// ingress). Errors: ParameterError (network-conf, a Service of the pod's name that this
// manager did not make), the Spec's exhaustion error, APICallError (reads, Unknown; writes),
// each with the pod's status as the step left it.
func (p *Plugin) OnPodUpdated(ctx context.Context, c client.Client, pod *corev1.Pod) (*corev1.Pod, error) {
	conf, confErr := networkstatus.ConfFromPod(pod) // decoded once for the whole run
	out, err := p.onPodUpdated(ctx, c, pod, conf, confErr)
	if err == nil && confErr == nil {
		err = p.unknownParams(conf)
	}
	return out, err
}

// unknownParams returns a warning naming the network-conf parameters the plugin does not
// read (OKG ignores them silently), nil when there are none.
func (p *Plugin) unknownParams(conf networkstatus.Conf) error {
	if p.spec.ConfAnnotations {
		// Every parameter it does not read is a Service annotation; those OKG acts on are
		// named.
		return conf.Warn(func(name string) bool { return slices.Contains(p.spec.NotActedOn, name) },
			p.spec.Name+" copies it onto the Service as an annotation and does nothing else with it here (OKG's plugin acts on it)")
	}
	known := append([]string{p.spec.IDsParam, ParamPortProtocols, ParamFixed}, p.spec.Params...)
	return conf.Warn(networkstatus.NotIn(known...), p.spec.Name+" ignores unknown network-conf parameters, expected only "+strings.Join(known, ", "))
}

// onPodUpdated is OnPodUpdated with the pod's network-conf decoded (confErr: why it could not
// be).
func (p *Plugin) onPodUpdated(ctx context.Context, c client.Client, pod *corev1.Pod, conf networkstatus.Conf, confErr error) (*corev1.Pod, error) {
	log := ctrl.LoggerFrom(ctx).WithName("lb").WithValues("plugin", p.spec.Name)
	prev, _ := networkstatus.StatusFromPod(pod)
	if prev == nil && p.spec.ParseFirst && p.spec.Customize != nil {
		// The provider's own parameters only, as OKG's NLB checks them.
		if confErr == nil {
			if err := p.spec.Customize(conf, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{}}}); err != nil {
				return pod, err
			}
		}
	}
	if prev == nil {
		// OKG's first run: a NotReady status (and, for some plugins, nothing else).
		prev = &networkstatus.NetworkStatus{CurrentNetworkState: networkstatus.NetworkNotReady}
		if err := networkstatus.PutStatus(pod, *prev); err != nil || !p.spec.CreateAtFirstRun {
			return pod, err
		}
	}
	notReady := networkstatus.NotReadyFrom(pod, *prev)
	if confErr != nil {
		return notReady(confErr)
	}
	prm, err := p.parse(conf)
	if err != nil {
		return notReady(err)
	}
	disabled, err := networkstatus.NetworkDisabled(pod)
	if err != nil {
		return notReady(err)
	}
	svc := &corev1.Service{}
	raced := false
	switch err := c.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: pod.Name}, svc); {
	case apierrors.IsNotFound(err):
		if err := p.restrict(prm); err != nil {
			return notReady(err)
		}
		var out *corev1.Pod
		raced, out, err = p.create(ctx, c, pod, prm, disabled, notReady, svc)
		if !raced {
			return out, err
		}
		// Created by another admission of this pod at the same moment: svc holds it, and
		// the run goes on with it as with an existing Service.
	case err != nil:
		return notReady(plugin.WrapUnknown(err, "get Service %s/%s", pod.Namespace, pod.Name))
	}
	if ref := firstOwner(svc); ref != nil && ref.Kind == "Pod" && ref.UID != pod.UID {
		// The Service of an earlier pod of the same name: it goes with that pod.
		log.V(1).Info("The Service of an earlier pod of this name is still there; waiting for it to go", "service", klog.KObj(svc))
		return pod, nil
	}
	if !kubernetes.ManagedFor(svc, pod, AnnotationConfigHash) {
		return notReady(plugin.Errorf(plugin.ParameterError, "Service %s/%s exists and is not managed by network-plugin-policy", svc.Namespace, svc.Name))
	}
	if raced {
		plugin.CreateRaceAdopted("Service")
	}
	p.observe(svc)
	want, err := p.desired(ctx, c, pod, prm, disabled, svc)
	if err != nil {
		return notReady(err)
	}
	var repaired error // the warning of a drift repair, joined to the run's result
	if fields := p.differences(want, svc); len(fields) > 0 && p.drift(want, svc) {
		// The network-conf is the one the Service was written for: someone edited a field
		// the plugin owns. Put it back and keep a Ready network Ready (a repair is not an
		// outage), with a warning; a field rewritten after every repair is repaired less
		// and less often.
		if repaired = p.repair(ctx, c, svc, want, fields); repaired != nil && !plugin.IsWarning(repaired) {
			return notReady(repaired)
		}
	} else if len(fields) > 0 {
		// The network-conf changed, or the network was disabled or enabled: bring the
		// Service to it, if the platform's rules allow what it asks for; if not, the ports
		// desired chose for it go back, and the Service stays as it is.
		if err := p.restrict(prm); err != nil {
			p.releaseUnused(ctx, want, svc)
			p.observe(svc)
			return notReady(err)
		}
		before := svc.DeepCopy()
		p.apply(want, svc)
		if err := c.Patch(ctx, svc, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			if apierrors.IsConflict(err) {
				return notReady(plugin.WrapUnknown(err, "patch Service %s/%s", svc.Namespace, svc.Name))
			}
			return notReady(plugin.WrapWriteRefused(err, "patch Service %s/%s", svc.Namespace, svc.Name))
		}
		log.Info("Service updated", "service", klog.KObj(svc))
		if before.Spec.Type != svc.Spec.Type {
			// OKG leaves the status as it was when it only switches the type.
			return pod, nil
		}
		return notReady(nil)
	}
	if p.spec.Serve != nil {
		ready, err := p.spec.Serve(ctx, c, p.serveRun(c, pod, svc, prm.conf, disabled))
		if disabled {
			// OKG leaves the status as it was while the network is disabled.
			return pod, errors.Join(err, repaired)
		}
		if err != nil || !ready {
			return notReady(errors.Join(err, repaired))
		}
	} else if len(svc.Status.LoadBalancer.Ingress) == 0 {
		// Waiting for the cloud. OKG says nothing here; the cloud controller's own word, when
		// it has refused the Service (a quota, a rate limit), is the run's CloudError, so that
		// the retry state, nppctl status and a policy's CEL see it.
		return notReady(errors.Join(CloudFailure(ctx, c, svc), repaired))
	}
	st := *prev
	st.CurrentNetworkState = networkstatus.NetworkReady
	st.InternalAddresses, st.ExternalAddresses = nil, nil
	var perPort [][]networkstatus.NetworkAddress // ExternalAddresses' answer per Service port
	for _, sp := range svc.Spec.Ports {
		tp := sp.TargetPort.IntVal
		st.InternalAddresses = append(st.InternalAddresses, networkstatus.NetworkAddress{IP: pod.Status.PodIP,
			Ports: []networkstatus.NetworkPort{{Name: portText(tp), Port: networkstatus.IntPort(tp), Protocol: sp.Protocol}}})
		if p.spec.ExternalAddresses != nil {
			perPort = append(perPort, p.spec.ExternalAddresses(prm.conf, svc, sp))
			continue
		}
		st.ExternalAddresses = append(st.ExternalAddresses, networkstatus.NetworkAddress{IP: svc.Status.LoadBalancer.Ingress[0].IP,
			Ports: []networkstatus.NetworkPort{{Name: portText(tp), Port: networkstatus.IntPort(sp.Port), Protocol: sp.Protocol}}})
	}
	st.ExternalAddresses = append(st.ExternalAddresses, externalOrder(perPort, p.spec.IngressMajor)...)
	if err := networkstatus.PutStatus(pod, st); err != nil {
		return pod, err
	}
	return pod, repaired
}

// externalOrder joins the external addresses of each Service port (perPort), per port, or
// with ingressMajor the i-th address of every port, then the next (Spec.IngressMajor).
func externalOrder(perPort [][]networkstatus.NetworkAddress, ingressMajor bool) []networkstatus.NetworkAddress {
	var out []networkstatus.NetworkAddress
	if !ingressMajor {
		for _, addrs := range perPort {
			out = append(out, addrs...)
		}
		return out
	}
	for i := 0; ; i++ {
		more := false
		for _, addrs := range perPort {
			if i < len(addrs) {
				out = append(out, addrs[i])
				more = true
			}
		}
		if !more {
			return out
		}
	}
}

// create allocates the pod's ports and creates its Service, leaving the status NotReady.
// When the create is refused as AlreadyExists (another admission of the same pod created
// it at the same moment) and the cache then shows the Service (plugin.AwaitCreated), it
// returns raced with existing holding that Service, for the caller to go on with it.
func (p *Plugin) create(ctx context.Context, c client.Client, pod *corev1.Pod, prm params, disabled bool, notReady func(error) (*corev1.Pod, error),
	existing *corev1.Service) (raced bool, out *corev1.Pod, err error) {
	want, err := p.desired(ctx, c, pod, prm, disabled, nil)
	if err != nil {
		out, err = notReady(err)
		return false, out, err
	}
	if err := c.Create(ctx, want); err != nil {
		if apierrors.IsAlreadyExists(err) {
			existing.Namespace, existing.Name = want.Namespace, want.Name
			werr := plugin.AwaitCreated(ctx, c, existing)
			if werr == nil {
				p.releaseUnused(ctx, want, existing)
				return true, nil, nil
			}
			ctrl.LoggerFrom(ctx).V(1).Info("A Service created meanwhile did not show in the cache", "service", klog.KObj(want), "error", werr.Error())
			out, err = notReady(plugin.WrapUnknown(err, "create Service %s/%s", want.Namespace, want.Name))
			return false, out, err
		}
		out, err = notReady(plugin.Wrap(plugin.APICallError, err, "create Service %s/%s", want.Namespace, want.Name))
		return false, out, err
	}
	ctrl.LoggerFrom(ctx).Info("Service created", "service", klog.KObj(want), "loadBalancer", want.Annotations[p.spec.IDAnnotation])
	var served error
	if p.spec.Serve != nil {
		// The objects beside the Service are made in the same run, as OKG makes them.
		_, served = p.spec.Serve(ctx, c, p.serveRun(c, pod, want, prm.conf, disabled))
	}
	out, err = notReady(served)
	return false, out, err
}

// releaseUnused releases, in the ledger, the listener ports that this run claimed for want
// and that the pod's Service as it stands (have) does not use: the Service another run
// created meanwhile, or the one a refused network-conf change leaves as it is. Claims are
// under the pod's name, so the ones have does not hold would stay claimed for the pod's
// lifetime. A failed release is logged and left to the next run's claim or the sweep.
func (p *Plugin) releaseUnused(ctx context.Context, want, have *corev1.Service) {
	if p.ledger == nil {
		return
	}
	lbID := want.Annotations[p.spec.IDAnnotation]
	if lbID == "" {
		return
	}
	var unused []int32
	for _, sp := range want.Spec.Ports {
		if have.Annotations[p.spec.IDAnnotation] == lbID && slices.ContainsFunc(have.Spec.Ports, func(h corev1.ServicePort) bool { return h.Port == sp.Port }) {
			continue
		}
		if !slices.Contains(unused, sp.Port) {
			unused = append(unused, sp.Port)
		}
	}
	if len(unused) == 0 {
		return
	}
	if err := p.ledger.ReleasePorts(ctx, lbID, client.ObjectKeyFromObject(want).String(), unused); err != nil {
		ctrl.LoggerFrom(ctx).Info("Listener ports of a lost create left claimed", "service", klog.KObj(want), "loadBalancer", lbID, "ports", unused, "error", err.Error())
	}
}

// desired builds the pod's Service. Its listener ports are existing's when it exists (an
// adopted Service keeps its ports, OKG's or ours) and its load balancer is still one of the
// ids; otherwise they are allocated.
func (p *Plugin) desired(ctx context.Context, c client.Client, pod *corev1.Pod, prm params, disabled bool, existing *corev1.Service) (*corev1.Service, error) {
	n := len(prm.ports) // one listener port per PortProtocols entry (a TCPUDP pair shares it)
	owner := client.ObjectKey{Namespace: pod.Namespace, Name: pod.Name}.String()
	var al Allocation
	if prm.auto {
		var err error
		if al, err = p.autoCreated(existing, n); err != nil {
			return nil, err
		}
	} else if p.spec.AutoCreateParam != "" && existing != nil && existing.Annotations[p.spec.AutoCreateParam] != "" {
		return nil, plugin.ParamErrorf(p.spec.IDsParam, "Service %s/%s is on a load balancer the cloud created for it: it cannot move to the named load balancer %v in place; delete the pod (or its Fixed Service) to make it anew",
			existing.Namespace, existing.Name, prm.ids)
	} else if held, ok := listenerPorts(existing, p.spec.IDAnnotation, len(prm.ports)); ok && slices.Contains(prm.ids, held.LB) {
		al = held
		p.alloc.observe(owner, held.LB, held.Ports)
		if _, known := p.inLedger.Load(owner); p.ledger != nil && !known && !plugin.IsReadOnly(ctx) {
			// An adopted Service (OKG's, an earlier release's, or one another replica made):
			// its ports go in the ledger, so that other replicas count them; it keeps them
			// either way. The record is dated at the Service's creation, so that the
			// release at its deletion (ServiceGone) removes it.
			if taken, err := p.ledger.Adopt(ctx, held.LB, held.Ports, owner, existing.CreationTimestamp.Time); err != nil || len(taken) > 0 {
				ctrl.LoggerFrom(ctx).Info("An existing Service's listener ports could not all be recorded in the ledger", "service", owner,
					"loadBalancer", held.LB, "ports", held.Ports, "takenBy", taken, "error", err)
			} else {
				p.inLedger.Store(owner, true)
			}
		}
	} else if rec, ok := p.recorded(pod, prm); ok && p.reclaim(ctx, c, owner, rec) {
		al = rec
	} else {
		var err error
		if al, err = p.claim(ctx, c, owner, prm, n, false); err != nil {
			return nil, err
		}
	}
	owners, err := kubernetes.OwnerReferences(ctx, c, pod, prm.fixed)
	if err != nil {
		return nil, err
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, OwnerReferences: owners,
			Annotations: map[string]string{AnnotationConfigHash: ConfHash(prm.conf)}},
		Spec: corev1.ServiceSpec{Type: p.spec.serviceType(), Selector: map[string]string{kubernetes.SelectorPodNameLabel: pod.Name}},
	}
	if al.LB != "" { // "" only while the cloud creates the Service's own load balancer
		svc.Annotations[p.spec.IDAnnotation] = al.LB
	}
	for i, pp := range prm.ports {
		names := p.spec.PortNames(pp)
		protos := []corev1.Protocol{pp.Protocol}
		if pp.Protocol == ProtocolTCPUDP {
			protos = []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP}
		}
		for j, proto := range protos {
			svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: names[j], Port: al.Ports[i], Protocol: proto, TargetPort: intstr.FromInt32(pp.Port)})
		}
	}
	if p.spec.Customize != nil {
		if err := p.spec.Customize(prm.conf, svc); err != nil {
			return nil, err
		}
	}
	if disabled && svc.Spec.Type != corev1.ServiceTypeClusterIP {
		svc.Spec.Type = corev1.ServiceTypeClusterIP
		svc.Spec.ExternalTrafficPolicy = ""
		svc.Spec.AllocateLoadBalancerNodePorts = nil
		svc.Spec.LoadBalancerClass = nil
	}
	return svc, nil
}

// autoCreated returns the listener ports of a Service whose load balancer the cloud
// creates (AutoCreateParam): the id the cloud controller wrote on existing ("" until then)
// whatever else changes, with existing's ports when it has n distinct ones, otherwise the
// first n ports of the range, as OKG's HwCloud-CCE-ELB takes them (each such Service has a
// load balancer of its own). Errors, ParameterErrors: existing is on a named load balancer
// (naming AutoCreateParam: the mode cannot change in place), or the range has fewer than n
// ports (naming PortProtocols; OKG indexes past its port list and panics).
func (p *Plugin) autoCreated(existing *corev1.Service, n int) (Allocation, error) {
	var id string
	if existing != nil {
		if existing.Annotations[p.spec.AutoCreateParam] == "" && existing.Annotations[p.spec.IDAnnotation] != "" {
			// CCE does not move a Service between a named ELB and one of its own in place.
			return Allocation{}, plugin.ParamErrorf(p.spec.AutoCreateParam, "Service %s/%s is on the named load balancer %s: its load balancer cannot change to an auto-created one in place; delete the pod (or its Fixed Service) to make it anew",
				existing.Namespace, existing.Name, existing.Annotations[p.spec.IDAnnotation])
		}
		// The id the cloud controller wrote stays whatever else changes: without it the
		// cloud would create another load balancer and orphan this one.
		id = existing.Annotations[p.spec.IDAnnotation]
		var ports []int32
		for _, sp := range existing.Spec.Ports {
			if !slices.Contains(ports, sp.Port) {
				ports = append(ports, sp.Port)
			}
		}
		if len(ports) == n {
			return Allocation{LB: id, Ports: ports}, nil
		}
	}
	ports := p.rng.first(n)
	if len(ports) < n {
		return Allocation{}, plugin.ParamErrorf(ParamPortProtocols, "asks for %d listener ports, the provider's range has %d", n, len(ports))
	}
	return Allocation{LB: id, Ports: ports}, nil
}

// claimAttempts bounds how often claim chooses again after the ledger showed its choice
// taken by another replica.
const claimAttempts = 16

// claim allocates n ports for owner on one of prm's ids and, with a ledger, records them
// there: a port another replica claimed meanwhile is counted as its owner's and the choice
// is made again, unless that claim is stale (older than ClaimTTL, and c shows neither a pod
// nor a Service of its owner), which is taken over. With tentative (a CREATE's claim) the
// hold counts here until ClaimTTL from now unless the owner shows up. Errors: the exhaustion
// error of the Spec; an APICallError when the ledger cannot be read or written, or keeps
// showing the choice taken.
func (p *Plugin) claim(ctx context.Context, c client.Reader, owner string, prm params, n int, tentative bool) (Allocation, error) {
	live := ownerLive(ctx, c)
	if plugin.IsReadOnly(ctx) {
		// A precheck: no hold, no claim. A load balancer this replica sees full is the
		// exhaustion error the real run would return; otherwise only a real run can tell.
		if !p.alloc.fits(owner, prm.ids, n, p.now(), live) {
			return Allocation{}, &plugin.Error{Type: p.spec.ExhaustedType, Reason: plugin.ReasonPortsExhausted, Param: p.spec.IDsParam, Message: p.spec.Exhausted(prm.ids, n)}
		}
		return Allocation{}, plugin.Wrap(plugin.APICallError, plugin.ErrWouldWrite, "claim listener ports")
	}
	if ns, _, _ := strings.Cut(owner, "/"); tentative && p.rng.MaxReservedPerNamespace > 0 {
		if held := p.alloc.pendingIn(ns, owner, p.now(), live); held+n > p.rng.MaxReservedPerNamespace {
			return Allocation{}, &plugin.Error{Type: plugin.RetryError, Reason: plugin.ReasonPortsExhausted, Param: ParamPortProtocols, Message: fmt.Sprintf(
				"namespace %s holds %d listener ports of %s for pods not created yet; %d more would pass the provider configuration's max_reserved_ports_per_namespace (%d): retry once those pods exist or their claims run out (%s)",
				ns, held, p.spec.Name, n, p.rng.MaxReservedPerNamespace, ClaimTTL)}
		}
	}
	refreshed := false
	for range claimAttempts {
		now := p.now()
		var until time.Time
		if tentative {
			until = now.Add(ClaimTTL)
		}
		ids := prm.ids
		if prm.scatter && len(ids) > 1 {
			// OKG's round robin: the scan starts after the id of the last scattered choice.
			// Concurrent choices take consecutive starts (the index is advanced as it is
			// read), so they do not all start at one load balancer.
			start := int((p.scatterNext.Add(1) - 1) % int64(len(ids)))
			ids = append(slices.Clone(ids[start:]), ids[:start]...)
		}
		al, ok := p.alloc.allocate(owner, ids, n, p.spec.FirstFit, now, until, live)
		if !ok && p.ledger != nil && !refreshed {
			// Before saying no room: this replica may still count claims another replica has
			// given up since (an AlibabaCloud-Multi-NLBs level abandoned on one of its load
			// balancers). Read the ledger once and choose again.
			refreshed = true
			if claims, err := p.ledger.Load(ctx); err == nil {
				p.alloc.forgetUnclaimed(prm.ids, claims)
				continue
			}
		}
		if !ok {
			return Allocation{}, &plugin.Error{Type: p.spec.ExhaustedType, Reason: plugin.ReasonPortsExhausted, Param: p.spec.IDsParam, Message: p.spec.Exhausted(prm.ids, n)}
		}
		if p.ledger == nil {
			p.scattered(prm, al)
			return al, nil
		}
		taken, err := p.ledger.Claim(ctx, al.LB, al.Ports, owner, staleTest(now, live))
		if err != nil {
			// Not Unknown: the Service is missing either way; an API failure is Transient and
			// pauses the window as such.
			p.alloc.release(owner)
			return Allocation{}, plugin.Wrap(plugin.APICallError, err, "claim listener ports %v of load balancer %s", al.Ports, al.LB)
		}
		if len(taken) == 0 {
			p.inLedger.Store(owner, true)
			p.scattered(prm, al)
			return al, nil
		}
		p.alloc.release(owner)
		for _, port := range sortedPorts(taken) {
			p.alloc.holdPort(taken[port].Owner, al.LB, port, taken[port].At.Add(ClaimTTL))
		}
	}
	// Contention with the other replicas, not an answer about this pod: Unavailable.
	return Allocation{}, &plugin.Error{Type: plugin.APICallError, Reason: plugin.ReasonUnavailable, Message: "claim listener ports",
		Err: fmt.Errorf("%d choices in a row were taken by another replica", claimAttempts)}
}

// scattered makes the next scattered choice (Spec.ScatterParam) start after al's load
// balancer, once al is held (OKG sets its index after the chosen id).
func (p *Plugin) scattered(prm params, al Allocation) {
	if prm.scatter {
		p.scatterNext.Store(int64(slices.Index(prm.ids, al.LB) + 1))
	}
}

// reclaim makes the ports chosen at the pod's CREATE owner's again before its Service is
// written, firm (the pod exists): in the ledger (the claim may have gone meanwhile, with an
// earlier Service of the same name, or gone stale and been taken) and in the allocator. It
// reports false when another owner holds one of them now, or the ledger cannot be written:
// the caller chooses afresh.
func (p *Plugin) reclaim(ctx context.Context, c client.Reader, owner string, al Allocation) bool {
	if plugin.IsReadOnly(ctx) {
		return false // a precheck holds nothing: claim decides
	}
	if !p.alloc.tryHold(owner, al) {
		return false // this replica has seen another owner take one of them
	}
	if p.ledger != nil {
		if taken, err := p.ledger.Claim(ctx, al.LB, al.Ports, owner, staleTest(p.now(), ownerLive(ctx, c))); err != nil || len(taken) > 0 {
			p.alloc.release(owner)
			return false
		}
		p.inLedger.Store(owner, true)
	}
	return true
}

// listenerPorts returns the load balancer and listener ports a Service holds, one per
// PortProtocols entry (a TCPUDP pair shares one), when it has n distinct ports.
func listenerPorts(svc *corev1.Service, idAnnotation string, n int) (Allocation, bool) {
	if svc == nil || svc.Annotations[idAnnotation] == "" {
		return Allocation{}, false
	}
	var ports []int32
	for _, sp := range svc.Spec.Ports {
		if !slices.Contains(ports, sp.Port) {
			ports = append(ports, sp.Port)
		}
	}
	return Allocation{LB: svc.Annotations[idAnnotation], Ports: ports}, len(ports) == n
}

// differences names the fields the plugin owns in which have differs from want ("spec.type",
// "spec.ports", "metadata.annotations[<key>]", ...), sorted; none when have already is want:
// type, selector, ports (name, port, protocol, target port), the spec fields a provider sets,
// owners, and every annotation and label of want but the config hash (OKG's cannot be
// reproduced: an adopted Service that matches is never written, since any change makes the
// cloud controller reconcile the load balancer).
func (p *Plugin) differences(want, have *corev1.Service) []string {
	var out []string
	add := func(differ bool, field string) {
		if differ {
			out = append(out, field)
		}
	}
	add(want.Spec.Type != have.Spec.Type, "spec.type")
	add(!equality.Semantic.DeepEqual(want.Spec.Selector, have.Spec.Selector), "spec.selector")
	add(!equality.Semantic.DeepEqual(want.OwnerReferences, have.OwnerReferences), "metadata.ownerReferences")
	add(want.Spec.ExternalTrafficPolicy != "" && want.Spec.ExternalTrafficPolicy != have.Spec.ExternalTrafficPolicy, "spec.externalTrafficPolicy")
	add(want.Spec.PublishNotReadyAddresses != have.Spec.PublishNotReadyAddresses, "spec.publishNotReadyAddresses")
	add(want.Spec.LoadBalancerClass != nil && !equality.Semantic.DeepEqual(want.Spec.LoadBalancerClass, have.Spec.LoadBalancerClass), "spec.loadBalancerClass")
	add(want.Spec.AllocateLoadBalancerNodePorts != nil && !equality.Semantic.DeepEqual(want.Spec.AllocateLoadBalancerNodePorts, have.Spec.AllocateLoadBalancerNodePorts), "spec.allocateLoadBalancerNodePorts")
	ports := len(want.Spec.Ports) != len(have.Spec.Ports)
	for i := 0; !ports && i < len(want.Spec.Ports); i++ {
		w, h := want.Spec.Ports[i], have.Spec.Ports[i]
		ports = w.Name != h.Name || w.Port != h.Port || w.Protocol != h.Protocol || w.TargetPort.IntVal != h.TargetPort.IntVal
	}
	add(ports, "spec.ports")
	for k, v := range want.Annotations {
		add(k != AnnotationConfigHash && have.Annotations[k] != v, "metadata.annotations["+k+"]")
	}
	for k := range have.Annotations {
		_, wanted := want.Annotations[k]
		add(!wanted && slices.Contains(p.spec.OwnedAnnotations, k), "metadata.annotations["+k+"]")
	}
	for k, v := range want.Labels {
		add(have.Labels[k] != v, "metadata.labels["+k+"]")
	}
	slices.Sort(out)
	return out
}

// apply brings svc to want for what the plugin owns: the annotations and labels it writes
// (one of Spec.OwnedAnnotations want no longer has is removed; others', such as the cloud
// controller's id label and finalizer, stay), the owners, and
// the spec fields it sets; the API server keeps the allocated cluster IP and node ports.
func (p *Plugin) apply(want, svc *corev1.Service) {
	if svc.Annotations == nil {
		svc.Annotations = map[string]string{}
	}
	for k := range svc.Annotations {
		if _, wanted := want.Annotations[k]; !wanted && slices.Contains(p.spec.OwnedAnnotations, k) {
			delete(svc.Annotations, k)
		}
	}
	for k, v := range want.Annotations {
		svc.Annotations[k] = v
	}
	if len(want.Labels) > 0 && svc.Labels == nil {
		svc.Labels = map[string]string{}
	}
	for k, v := range want.Labels {
		svc.Labels[k] = v
	}
	svc.OwnerReferences = want.OwnerReferences
	svc.Spec.Type = want.Spec.Type
	svc.Spec.Selector = want.Spec.Selector
	svc.Spec.PublishNotReadyAddresses = want.Spec.PublishNotReadyAddresses
	if want.Spec.Type == corev1.ServiceTypeClusterIP {
		// Fields a ClusterIP Service may not have.
		svc.Spec.ExternalTrafficPolicy, svc.Spec.LoadBalancerClass, svc.Spec.AllocateLoadBalancerNodePorts = "", nil, nil
	} else {
		// Only the fields the plugin sets: others' (a user's Local) stay.
		if want.Spec.ExternalTrafficPolicy != "" {
			svc.Spec.ExternalTrafficPolicy = want.Spec.ExternalTrafficPolicy
		}
		if want.Spec.LoadBalancerClass != nil {
			svc.Spec.LoadBalancerClass = want.Spec.LoadBalancerClass
		}
		if want.Spec.AllocateLoadBalancerNodePorts != nil {
			svc.Spec.AllocateLoadBalancerNodePorts = want.Spec.AllocateLoadBalancerNodePorts
		}
	}
	ports := make([]corev1.ServicePort, len(want.Spec.Ports))
	for i, w := range want.Spec.Ports {
		ports[i] = w
		for _, h := range svc.Spec.Ports {
			if h.Name == w.Name && want.Spec.Type != corev1.ServiceTypeClusterIP {
				ports[i].NodePort = h.NodePort
			}
		}
	}
	svc.Spec.Ports = ports
	if want.Spec.Type == corev1.ServiceTypeClusterIP {
		svc.Spec.HealthCheckNodePort = 0
	}
}

// firstOwner returns the Service's first owner reference, nil without one.
func firstOwner(svc *corev1.Service) *metav1.OwnerReference {
	if len(svc.OwnerReferences) == 0 {
		return nil
	}
	return &svc.OwnerReferences[0]
}

// ConfHash is the AnnotationConfigHash value of a Service written for conf: FNV-1a 32-bit,
// decimal (OKG's form), of each parameter as "<name>=<value>;" in order. The load-balancer
// engine's, the Multi engine's and AlibabaCloud-AutoNLBs-V2's Services carry it.
func ConfHash(conf networkstatus.Conf) string {
	h := fnv.New32a()
	for _, c := range conf {
		fmt.Fprintf(h, "%s=%s;", c.Name, c.Value)
	}
	return strconv.FormatUint(uint64(h.Sum32()), 10)
}

func portText(p int32) string { return strconv.Itoa(int(p)) }
