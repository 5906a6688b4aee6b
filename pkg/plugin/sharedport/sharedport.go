// Package sharedport is the engine of OKG's shared-port load-balancer plugins
// (AlibabaCloud-SLB-SharedPort, AlibabaCloud-NLB-SharedPort): one LoadBalancer Service per load
// balancer, named after its id, in the pod's namespace, selecting every pod that carries the
// pod label Spec.PodLabel with that id; all of them answer on the same listener ports (the
// network-conf's PortProtocols), and the cloud balances players across them. A provider
// package fills in a Spec (pkg/plugin/alibabacloud's sharedport.go). The design, and where it
// differs from OKG on purpose: docs/sharedport-design.md.
package sharedport

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/lb"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// Spec describes one shared-port plugin to the engine.
type Spec struct {
	// Name is OKG's network type, e.g. "AlibabaCloud-SLB-SharedPort"; Alias its family (OKG
	// gives these types none: "").
	Name, Alias string
	// IDsParam is the network-conf parameter naming the load balancers ("SlbIds").
	IDsParam string
	// SingleID takes IDsParam's value as one id (NLB-SharedPort); otherwise it is a
	// comma-separated list the engine chooses from.
	SingleID bool
	// MaxBackends, above 0, is how many pods one load balancer serves at most (SLB: 200, the
	// cloud's limit OKG hard-codes): the engine chooses the listed id with the fewest
	// backends below it, the first listed on a tie. 0: no choice, the one id.
	MaxBackends int
	// IDAnnotation is the Service annotation naming the load balancer.
	IDAnnotation string
	// PodLabel is the pod label the Service selects, with the id as value.
	PodLabel string
	// ServiceLabels are labels of the Service (SLB-SharedPort's marker).
	ServiceLabels map[string]string
	// Class is the Service's loadBalancerClass ("" for none).
	Class string
	// HashAnnotation, when set, is the Service annotation holding the network-conf's hash;
	// a Service whose hash differs is brought to the pod's network-conf (NLB-SharedPort).
	HashAnnotation string
	// EndpointAddress reports the external address as the ingress hostname (endPoint, ip
	// "") rather than the ingress IP.
	EndpointAddress bool
	// ManagedServiceParams reads SLB-SharedPort's ManagedServiceNames and
	// ManagedServiceSelector.
	ManagedServiceParams bool
	// ReadyStatusAtCreate writes a NotReady network-status at CREATE when the Service exists
	// already (OKG's SLB-SharedPort).
	ReadyStatusAtCreate bool
	// LedgerGroup is the load-balancer port ledger (lb.Ledger) that a shared Service's
	// listener ports are claimed in: the one of the per-pod plugin of the same load balancers
	// (its lb.Plugin.LedgerKey), so that a shared Service and a per-pod Service never take
	// one listener, and two namespaces never both make a shared Service on one listener of a
	// load balancer. "" for none.
	LedgerGroup string
}

// Network-conf parameters the engine reads besides Spec.IDsParam (OKG's names).
const (
	ParamPortProtocols          = lb.ParamPortProtocols
	ParamManagedServiceNames    = "ManagedServiceNames"
	ParamManagedServiceSelector = "ManagedServiceSelector"
)

// ReservationTTL is how long a CREATE's choice of a load balancer counts toward its backends
// on the replica that made it, until the pod shows in the pod informer: the CREATE's deadline
// plus the watch's margin, as the listener ports' claims (lb.ClaimTTL).
const ReservationTTL = lb.ClaimTTL

// Plugin is a shared-port plugin built from a Spec: plugin.Plugin. Safe for concurrent use.
// Create one with New.
type Plugin struct {
	spec Spec
	now  func() time.Time

	mu sync.Mutex
	// members are, per load balancer id, the pods of this type the pod informer shows on it
	// ("<namespace>/<name>"; by the manager's record, or OKG's label); podIDs is each such
	// pod's id, and shownAt when the informer first showed it on that id.
	members map[string]map[string]bool
	podIDs  map[string]string
	shownAt map[string]time.Time
	// deleted are the pods of members the informer showed deleted in the last
	// ReservationTTL: their places are free at once, not ReservationTTL after they were held.
	deleted   map[string]deletion
	lastPrune time.Time
	// reserved are this replica's CREATE choices not yet seen in the informer: pod key ->
	// id and until when it counts.
	reserved map[string]reservation

	// ledger, when set (UseLedger), is where a shared Service's listener ports are claimed;
	// inLedger holds the shared Services ("<namespace>/<id>") this replica knows to be in it.
	ledger   lb.Ledger
	inLedger sync.Map
	// places, when set (UseBackendLedger), is where each game server holds its place among
	// an SLB's MaxBackends; releases bounds the releases of deleted pods' places in flight.
	places   BackendLedger
	releases chan struct{}
}

// deletion is when the informer showed a pod deleted, and the load balancer it was on.
type deletion struct {
	id string
	at time.Time
}

// BackendLedger is where game servers hold their places among a load balancer's backends
// (lb.ConfigMapLedger: its Hold, Release and ReleasePorts), so that replicas answering
// CREATEs at the same moment never put more than Spec.MaxBackends on one.
type BackendLedger interface {
	// Hold holds a place of lb for owner and returns it, 0 when there is no room: room is
	// fewer than places places held by others (those stale says are stale do not count) plus
	// uncounted(the others' owners), the game servers on lb that hold no place.
	Hold(ctx context.Context, lb, owner string, places int, stale func(lb.Claim) bool, uncounted func(holders map[string]bool) int) (int32, error)
	// Release releases owner's places of lb held before cutoff (the zero time: all).
	Release(ctx context.Context, lb, owner string, cutoff time.Time) error
	// ReleasePorts releases owner's places of lb that are listed.
	ReleasePorts(ctx context.Context, lb, owner string, ports []int32) error
}

type reservation struct {
	id    string
	until time.Time
}

var (
	_ plugin.Plugin          = (*Plugin)(nil)
	_ plugin.CachedReader    = (*Plugin)(nil)
	_ plugin.ConfValidator   = (*Plugin)(nil)
	_ plugin.NetworkViewer   = (*Plugin)(nil)
	_ plugin.PodInformerUser = (*Plugin)(nil)
)

// New returns the plugin of spec.
func New(spec Spec) *Plugin {
	return &Plugin{spec: spec, now: time.Now, members: map[string]map[string]bool{}, podIDs: map[string]string{}, shownAt: map[string]time.Time{}, reserved: map[string]reservation{},
		deleted: map[string]deletion{}, releases: make(chan struct{}, 4)}
}

// Name returns the Spec's Name.
func (p *Plugin) Name() string { return p.spec.Name }

// Alias returns the Spec's Alias.
func (p *Plugin) Alias() string { return p.spec.Alias }

// IsSynchronous returns false: the cloud answers after the pod exists.
func (p *Plugin) IsSynchronous() bool { return false }

// UseLedger makes p claim, in l, the listener ports of every shared Service it makes (before
// it makes it) and of every one it finds (dated at the Service's creation, as lb.Ledger.Adopt
// does): a port another Service holds there, or a per-pod plugin's CREATE has just claimed,
// is refused rather than taken over with force-override-listeners. The claims are released
// once the Service is gone by ServiceGone (and by the per-pod plugin's ServiceGone and
// leader's sweep, lb.Plugin.Sweep, where that plugin is enabled), at once when the API server
// surely refused the create or patch they were made for, and are taken over by another claim
// lb.ClaimTTL on when neither a Service nor a pod of their owner's name exists. Without a
// ledger (nil, the default) the Services in the cache are the only check.
func (p *Plugin) UseLedger(l lb.Ledger) { p.ledger = l }

// LedgerKey returns the Spec's LedgerGroup: the ledger UseLedger should be given.
func (p *Plugin) LedgerKey() string { return p.spec.LedgerGroup }

// UseBackendLedger makes p hold, in l, a place among the chosen load balancer's
// Spec.MaxBackends for every game server it gives one at CREATE, in the same guarded write
// that counts the others' (BackendLedger): two replicas answering CREATEs at the same moment
// never put more than MaxBackends game servers on one load balancer. A deleted game server's
// place is released by the pod informer's handler and is free to the next hold once the
// informer has shown the deletion; one whose pod never showed (a CREATE refused by a later
// admission step) is free ReservationTTL after it was held; one this plugin's own run refused
// after holding it is released at once. Game servers that hold no place (OKG's; earlier
// versions'; generateName pods, whose place was held under a key of their own) are counted
// from the informer in the same write. Without MaxBackends (NLB-SharedPort) it is not used.
// Without a ledger (nil, the default) each replica counts from its own informer and choices.
func (p *Plugin) UseBackendLedger(l BackendLedger) { p.places = l }

// BackendLedgerKey is the ledger group of the backends' places: "<Name>/backends".
func (p *Plugin) BackendLedgerKey() string { return p.spec.Name + "/backends" }

// Init does nothing: backends are counted from the pod informer (UsePodInformer).
func (p *Plugin) Init(context.Context, client.Client, plugin.Config) error { return nil }

// CachedObjects returns the Service and the Event: the plugin reads the shared Services, and
// the cloud controller's Warning Events about them (lb.CloudFailure), through the cache.
func (p *Plugin) CachedObjects() []client.Object {
	return []client.Object{&corev1.Service{}, &corev1.Event{}}
}

// OnPodDeleted does nothing: a pod's backend counts until the pod is gone from the informer.
func (p *Plugin) OnPodDeleted(context.Context, client.Client, *corev1.Pod) error { return nil }

// UsePodInformer counts backends from the pods the informer shows: a pod of this type whose
// AnnotationAllocation records a load balancer counts for it until it is gone, one without a
// record (OKG's) for the load balancer of its label (a restart loses nothing: OKG counts from
// a label the cloud controller writes on the Service, and a restart before it does moves pods
// between load balancers). With a backend ledger, a deleted pod's place is released (in the
// background, until ctx ends).
func (p *Plugin) UsePodInformer(ctx context.Context, informer cache.Informer) (toolscache.ResourceEventHandlerRegistration, error) {
	set := func(obj any) {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		id := ""
		if pod.Annotations[networkstatus.AnnotationNetworkType] == p.spec.Name {
			// The manager's own record (an owned annotation, put back when anyone else
			// changes it), not the label a pod author may rewrite: a relabelled pod of
			// another namespace does not fill this one's load balancer. A pod without a
			// record (OKG's, before the handover) counts by its label.
			if id = recordedID(pod); id == "" {
				id = pod.Labels[p.spec.PodLabel]
			}
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		p.setLocked(pod.Namespace+"/"+pod.Name, id)
	}
	return informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    set,
		UpdateFunc: func(_, obj any) { set(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				key := pod.Namespace + "/" + pod.Name
				if id := p.forget(key); id != "" && recordedID(pod) == id {
					p.releasePlaceOf(ctx, id, key)
				}
			}
		},
	})
}

// setLocked makes pod key a backend of id ("" for none); p.mu is held.
func (p *Plugin) setLocked(key, id string) {
	if old, ok := p.podIDs[key]; ok {
		if old == id {
			return
		}
		delete(p.members[old], key)
		if len(p.members[old]) == 0 {
			delete(p.members, old)
		}
		delete(p.podIDs, key)
		delete(p.shownAt, key)
	}
	if id != "" {
		if p.members[id] == nil {
			p.members[id] = map[string]bool{}
		}
		p.members[id][key] = true
		p.podIDs[key] = id
		p.shownAt[key] = p.now()
		delete(p.reserved, key)
	}
}

// forget removes pod key, deleted, from the backends and returns the load balancer it was on
// ("" for none), noting the deletion for placeStale. Deletions older than ReservationTTL are
// forgotten, at most once a second.
func (p *Plugin) forget(key string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	id := p.podIDs[key]
	if id == "" {
		return ""
	}
	p.setLocked(key, "")
	now := p.now()
	if now.Sub(p.lastPrune) >= time.Second {
		for k, d := range p.deleted {
			if now.Sub(d.at) > ReservationTTL {
				delete(p.deleted, k)
			}
		}
		p.lastPrune = now
	}
	p.deleted[key] = deletion{id: id, at: now}
	return id
}

// releasePlaceOf releases, in the background, the places of load balancer id that the
// deleted pod key held before the current second (a pod of the same name made since keeps
// its own); at most cap(p.releases) at once, each within 10 s. Every replica does it; a
// release of nothing writes nothing. What fails is left to placeStale.
func (p *Plugin) releasePlaceOf(ctx context.Context, id, key string) {
	if p.places == nil || p.spec.MaxBackends <= 0 {
		return
	}
	cutoff := p.now().Truncate(time.Second)
	go func() {
		select {
		case p.releases <- struct{}{}:
		case <-ctx.Done():
			return
		}
		defer func() { <-p.releases }()
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := p.places.Release(ctx, id, key, cutoff); err != nil {
			ctrl.LoggerFrom(ctx).Info("A deleted game server's backend place left to the next hold", "pod", key, "loadBalancer", id, "error", err.Error())
		}
	}()
}

// placeStale reports whether the place of load balancer id held at c.At by c.Owner is free:
// the informer does not show that pod on id, and it showed it on another load balancer from
// a second or more after the place was held (a pod that moved, or one whose CREATE run held
// this place and was then abandoned at the plugin's timeout, its record never written, and
// whose next run chose another: it holds nothing on this one; a place held by a run moving
// the pod here, which the informer does not show yet, is newer than that and kept), or it
// was deleted from id after the place was held, or the place is older than ReservationTTL
// (a CREATE refused after its admission never shows).
func (p *Plugin) placeStale(id string, c lb.Claim, now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.members[id][c.Owner] {
		return false
	}
	// Claim times have second precision, as below.
	if on, shown := p.podIDs[c.Owner]; shown && on != id && p.shownAt[c.Owner].Sub(c.At) >= time.Second {
		return true
	}
	// Claim times have second precision: a deletion a second or more after the claim's
	// time came after the place was held.
	if d, ok := p.deleted[c.Owner]; ok && d.id == id && d.at.Sub(c.At) >= time.Second {
		return true
	}
	return now.Sub(c.At) >= ReservationTTL
}

// uncounted returns how many game servers the informer shows on id, other than owner, that
// hold none of the places of holders (OKG's, those admitted before the backend ledger, those
// whose place was held under a generateName key).
func (p *Plugin) uncounted(id, owner string, holders map[string]bool) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for k := range p.members[id] {
		if k != owner && !holders[k] {
			n++
		}
	}
	return n
}

// params is a decoded network-conf.
type params struct {
	ids           []string
	ports         []lb.PortProtocol
	managed       []string
	selectorKey   string
	selectorValue string
	conf          networkstatus.Conf
}

// parse reads the network-conf: the ids (each a Service name: a DNS-1035 label),
// PortProtocols (no TCPUDP, no port twice: each is a Service port named by its number), and
// for SLB-SharedPort ManagedServiceNames and ManagedServiceSelector ("<key>=<value>", a valid
// label). Every problem is a ParameterError naming its parameter.
func (p *Plugin) parse(conf networkstatus.Conf) (params, error) {
	out := params{conf: conf}
	for _, v := range conf.Values(p.spec.IDsParam) {
		values := []string{v}
		if !p.spec.SingleID {
			values = strings.Split(v, ",")
		}
		for _, id := range values {
			if id = strings.TrimSpace(id); id != "" && !slices.Contains(out.ids, id) {
				out.ids = append(out.ids, id)
			}
		}
	}
	if len(out.ids) == 0 {
		return params{}, plugin.ParamErrorf(p.spec.IDsParam, "is required: the load balancer whose shared Service the pod joins")
	}
	if p.spec.SingleID && len(out.ids) > 1 {
		return params{}, plugin.ParamErrorf(p.spec.IDsParam, "names %d load balancers (%s): %s takes one, the name of its shared Service", len(out.ids), strings.Join(out.ids, ", "), p.spec.Name)
	}
	for _, id := range out.ids {
		if errs := validation.IsDNS1035Label(id); len(errs) > 0 {
			return params{}, plugin.ParamErrorf(p.spec.IDsParam, "%q cannot name the shared Service: %s", id, strings.Join(errs, "; "))
		}
	}
	pp := conf.Values(ParamPortProtocols)
	if len(pp) == 0 {
		return params{}, plugin.ParamErrorf(ParamPortProtocols, `is required, expected "<port>[/<PROTOCOL>],..."`)
	}
	ports, err := lb.ParsePortProtocols(strings.Join(pp, ","), false)
	if err != nil {
		return params{}, err
	}
	seen := map[int32]bool{}
	for _, pr := range ports {
		if seen[pr.Port] {
			return params{}, plugin.ParamErrorf(ParamPortProtocols, "port %d is listed twice: the shared Service has one port per number, named by it", pr.Port)
		}
		seen[pr.Port] = true
	}
	out.ports = ports
	if p.spec.ManagedServiceParams {
		for _, v := range conf.Values(ParamManagedServiceNames) {
			for _, n := range strings.Split(v, ",") {
				if n = strings.TrimSpace(n); n != "" {
					out.managed = append(out.managed, n)
				}
			}
		}
		if v, ok := conf.Last(ParamManagedServiceSelector); ok {
			key, value, found := strings.Cut(v, "=")
			if !found {
				return params{}, plugin.ParamErrorf(ParamManagedServiceSelector, "%q has no '=': expected <label key>=<label value>", v)
			}
			if errs := append(validation.IsQualifiedName(key), validation.IsValidLabelValue(value)...); len(errs) > 0 {
				return params{}, plugin.ParamErrorf(ParamManagedServiceSelector, "%q is not a label: %s", v, strings.Join(errs, "; "))
			}
			out.selectorKey, out.selectorValue = key, value
		}
	}
	return out, nil
}

// ValidateConf checks the pod's network-conf as OnPodAdded does, choosing and writing
// nothing.
func (p *Plugin) ValidateConf(pod *corev1.Pod) error {
	conf, err := networkstatus.ConfFromPod(pod)
	if err != nil {
		return err
	}
	_, err = p.parse(conf)
	return err
}

// decode reads the pod's network-conf (parse) for a run, and makes sure the pod has
// annotation and label maps to write to.
func (p *Plugin) decode(pod *corev1.Pod) (params, error) {
	conf, err := networkstatus.ConfFromPod(pod)
	if err != nil {
		return params{}, err
	}
	prm, err := p.parse(conf)
	if err != nil {
		return params{}, err
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	return prm, nil
}

// NetworkView describes the network-conf for the network-conf rules: the load balancer ids
// and the ports; a shared Service creates no cloud resource (the load balancer is named).
func (p *Plugin) NetworkView(pod *corev1.Pod) (plugin.NetworkView, error) {
	conf, err := networkstatus.ConfFromPod(pod)
	if err != nil {
		return plugin.NetworkView{}, err
	}
	prm, err := p.parse(conf)
	if err != nil {
		return plugin.NetworkView{}, err
	}
	v := plugin.NetworkView{LoadBalancerIDs: prm.ids,
		Params: map[string][]string{"loadBalancerIDs": {p.spec.IDsParam}, "ports": {ParamPortProtocols}}}
	for _, pr := range prm.ports {
		v.Ports = append(v.Ports, plugin.ViewPort{Port: pr.Port, Protocol: string(pr.Protocol)})
	}
	return v, nil
}

// chooseExcept returns the load balancer of ids for a new backend, leaving out those in full
// (the backend ledger showed them full): the only id, or, with MaxBackends, the one with the
// fewest backends below it (this replica's reservations counted), the first listed on a tie;
// with reserve, the choice is counted for key on this replica until the pod shows. ok is
// false when every id is full.
func (p *Plugin) chooseExcept(key string, ids []string, reserve bool, full map[string]bool) (string, bool) {
	if p.spec.MaxBackends <= 0 {
		return ids[0], true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	load := make(map[string]int, len(ids))
	for _, id := range ids {
		load[id] = len(p.members[id])
	}
	for k, r := range p.reserved {
		if now.After(r.until) {
			delete(p.reserved, k)
			continue
		}
		if _, listed := load[r.id]; listed && k != key {
			load[r.id]++
		}
	}
	best, fewest := "", p.spec.MaxBackends
	for _, id := range ids {
		if full[id] {
			continue
		}
		n := load[id]
		if cur, ok := p.podIDs[key]; ok && cur == id {
			n-- // the pod itself
		}
		if n < fewest {
			best, fewest = id, n
		}
	}
	if best == "" {
		return "", false
	}
	if _, counted := p.podIDs[key]; !counted && reserve {
		p.reserved[key] = reservation{id: best, until: now.Add(ReservationTTL)}
	}
	return best, true
}

// AnnotationAllocation records the load balancer chosen for the pod at its CREATE, one of
// the manager's own annotations ({"loadBalancer":"<id>"}, the shape of the load-balancer
// engine's lb.AnnotationAllocation, under the same key): the record that lasts, where OKG
// keeps it in memory only.
const AnnotationAllocation = lb.AnnotationAllocation

// recorded returns the load balancer the pod's AnnotationAllocation names, when it is one
// of ids.
func recorded(pod *corev1.Pod, ids []string) (string, bool) {
	id := recordedID(pod)
	return id, id != "" && slices.Contains(ids, id)
}

// recordedID returns the load balancer the pod's AnnotationAllocation names, "" for none.
func recordedID(pod *corev1.Pod) string {
	var rec struct {
		LoadBalancer string `json:"loadBalancer"`
	}
	if json.Unmarshal([]byte(pod.Annotations[AnnotationAllocation]), &rec) != nil {
		return ""
	}
	return rec.LoadBalancer
}

// anonymous numbers the CREATEs of pods without a name yet (generateName), so that each
// reservation has a key of its own.
var anonymous atomic.Uint64

// podKey is the pod's "<namespace>/<name>", or for a pod named by generateName at its
// CREATE a key of its own ("<namespace>/<generateName>#<n>"): its reservation then counts
// until it runs out, besides the pod once the informer shows it (counted twice for up to
// ReservationTTL: too many, never too few).
func podKey(pod *corev1.Pod) string {
	if pod.Name != "" {
		return pod.Namespace + "/" + pod.Name
	}
	return fmt.Sprintf("%s/%s#%d", pod.Namespace, pod.GenerateName, anonymous.Add(1))
}

// allocate returns the pod's load balancer: the recorded one, else a new choice, recorded
// (and, unless ctx is a read-only precheck, counted on this replica until the pod shows, and
// held in the backend ledger: place, 0 without one), for pod key (podKey, computed once per
// run). A load balancer that serves another namespace's shared Service is refused (reason
// NotAllowed) before anything is held. No room is a ParameterError naming the ids parameter
// (reason PortsExhausted).
func (p *Plugin) allocate(ctx context.Context, c client.Client, key string, pod *corev1.Pod, prm params) (id string, place int32, err error) {
	if id, ok := recorded(pod, prm.ids); ok {
		return id, 0, nil
	}
	readOnly := plugin.IsReadOnly(ctx)
	for full := map[string]bool{}; ; {
		var ok bool
		id, ok = p.chooseExcept(key, prm.ids, !readOnly, full)
		if !ok {
			return "", 0, &plugin.Error{Type: plugin.ParameterError, Reason: plugin.ReasonPortsExhausted, Param: p.spec.IDsParam,
				Message: fmt.Sprintf("every load balancer of %v serves %d game servers, the most one serves", prm.ids, p.spec.MaxBackends)}
		}
		if !readOnly {
			if err := p.mayJoin(ctx, c, pod.Namespace, id, prm); err != nil {
				p.unreserveKey(key)
				return "", 0, err
			}
		}
		var room bool
		place, room, err = p.hold(ctx, key, id)
		if err != nil {
			p.unreserveKey(key)
			return "", 0, err
		}
		if room {
			break
		}
		full[id] = true // full by the ledger: other replicas' game servers not seen here yet
	}
	b, err := json.Marshal(map[string]string{"loadBalancer": id})
	if err != nil {
		p.releasePlace(ctx, id, key, place)
		return "", 0, plugin.Wrap(plugin.InternalError, err, "encode the allocation")
	}
	pod.Annotations[AnnotationAllocation] = string(b)
	return id, place, nil
}

// mayJoin refuses load balancer id for a game server of ns when ns has no shared Service on
// it yet and one may not be made there (heldElsewhere): checked before a place is held, so
// that CREATEs naming another namespace's load balancer hold none of its places. A Service
// that cannot be read is left to the run's own read.
func (p *Plugin) mayJoin(ctx context.Context, c client.Client, ns, id string, prm params) error {
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: id}, &corev1.Service{}); !apierrors.IsNotFound(err) {
		return nil
	}
	return p.heldElsewhere(ctx, c, ns, id, prm.ports)
}

// hold holds pod key's place among id's backends in the backend ledger, when there is one and
// a cap, outside a read-only precheck: room is false when the ledger, counting the game
// servers the informer shows on id without a place, shows id full. A ledger that cannot be
// written is an APICallError.
func (p *Plugin) hold(ctx context.Context, key, id string) (place int32, room bool, err error) {
	if p.places == nil || p.spec.MaxBackends <= 0 || plugin.IsReadOnly(ctx) {
		return 0, true, nil
	}
	now := p.now()
	place, err = p.places.Hold(ctx, id, key, p.spec.MaxBackends,
		func(c lb.Claim) bool { return p.placeStale(id, c, now) },
		func(holders map[string]bool) int { return p.uncounted(id, key, holders) })
	if err != nil {
		return 0, false, plugin.Wrap(plugin.APICallError, err, "hold a backend place on load balancer %s", id)
	}
	return place, place > 0, nil
}

// releasePlace releases place (0: none) of id that key held in this run, which was refused
// after it; what fails is left to placeStale.
func (p *Plugin) releasePlace(ctx context.Context, id, key string, place int32) {
	if p.places == nil || place == 0 {
		return
	}
	if err := p.places.ReleasePorts(ctx, id, key, []int32{place}); err != nil {
		ctrl.LoggerFrom(ctx).Info("A refused game server's backend place left to the next hold", "pod", key, "loadBalancer", id, "error", err.Error())
	}
}

// desired builds the shared Service of load balancer id for prm.
func (p *Plugin) desired(ns, id string, prm params) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: id,
			Annotations: map[string]string{lbForceOverride: "true", p.spec.IDAnnotation: id},
			Labels:      maps.Clone(p.spec.ServiceLabels)},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{p.spec.PodLabel: id}},
	}
	if p.spec.Class != "" {
		svc.Spec.LoadBalancerClass = ptr.To(p.spec.Class)
	}
	if p.spec.HashAnnotation != "" {
		svc.Annotations[p.spec.HashAnnotation] = confHash(prm)
	}
	for _, pr := range prm.ports {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: strconv.Itoa(int(pr.Port)), Port: pr.Port, Protocol: pr.Protocol,
			TargetPort: intstr.FromInt32(pr.Port)})
	}
	return svc
}

// lbForceOverride is Alibaba's cloud controller annotation that lets the Service take over
// listeners on the load balancer (OKG writes it on every shared Service).
const lbForceOverride = "service.beta.kubernetes.io/alibaba-cloud-loadbalancer-force-override-listeners"

// confHash is the hash (FNV-1a, 32 bits, as the load-balancer engine's) of the network-conf's
// ids and ports the Service was written for.
func confHash(prm params) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s;", strings.Join(prm.ids, ","))
	for _, pr := range prm.ports {
		fmt.Fprintf(&b, "%d/%s;", pr.Port, pr.Protocol)
	}
	h := fnv.New32a()
	h.Write([]byte(b.String()))
	return strconv.FormatUint(uint64(h.Sum32()), 10)
}

// SharedService reports whether svc is a shared Service of this plugin (one this engine or
// OKG's plugin made): a LoadBalancer Service named after its load balancer (Spec.IDAnnotation),
// selecting the pods labelled Spec.PodLabel with that id and nothing else, with the plugin's
// mark (Spec.ServiceLabels, or Spec.HashAnnotation with Spec.Class). nppctl status lists those
// that select no game server.
func (p *Plugin) SharedService(svc *corev1.Service) bool {
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || svc.Annotations[p.spec.IDAnnotation] != svc.Name ||
		len(svc.Spec.Selector) != 1 || svc.Spec.Selector[p.spec.PodLabel] != svc.Name || !p.managed(svc) {
		return false
	}
	return p.spec.Class == "" || ptr.Deref(svc.Spec.LoadBalancerClass, "") == p.spec.Class
}

// PodLabel returns the pod label a shared Service selects its game servers by (Spec.PodLabel),
// with the load balancer id as its value.
func (p *Plugin) PodLabel() string { return p.spec.PodLabel }

// managed reports whether svc is a shared Service this engine or OKG's plugin made.
func (p *Plugin) managed(svc *corev1.Service) bool {
	if p.spec.HashAnnotation != "" {
		if _, ok := svc.Annotations[p.spec.HashAnnotation]; ok {
			return true
		}
	}
	for k, v := range p.spec.ServiceLabels {
		if svc.Labels[k] == v {
			return true
		}
	}
	return false
}

// service returns the shared Service of id in ns, creating it when missing: created is true
// then. A Service of that name that is not a shared one is a ParameterError (OKG takes it
// over); one of another namespace on the same load balancer is refused (reason NotAllowed):
// the two would take each other's listeners.
func (p *Plugin) service(ctx context.Context, c client.Client, ns, id string, prm params) (svc *corev1.Service, created bool, err error) {
	svc = &corev1.Service{}
	switch err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: id}, svc); {
	case apierrors.IsNotFound(err):
		// Only a Service about to be made is checked against the other namespaces: a
		// namespace that holds its shared Service keeps it, whatever others write later.
		if err := p.heldElsewhere(ctx, c, ns, id, prm.ports); err != nil {
			return nil, false, err
		}
		owner := ns + "/" + id
		if err := p.claimListeners(ctx, c, id, owner, listenerNumbers(prm.ports)); err != nil {
			return nil, false, err
		}
		want := p.desired(ns, id, prm)
		if err := c.Create(ctx, want); err != nil {
			if apierrors.IsAlreadyExists(err) {
				// Another replica made it for this namespace: the claim is that Service's.
				existing := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: id}}
				if werr := plugin.AwaitCreated(ctx, c, existing); werr == nil {
					return existing, false, p.check(existing)
				}
				return nil, false, plugin.WrapUnknown(err, "create Service %s/%s", ns, id)
			}
			if refused(err) {
				// Surely not made: its claims go. On anything else (a timeout) the Service
				// may exist: its claims stay, and go with it (ServiceGone, the sweep).
				p.releaseListeners(ctx, id, owner, listenerNumbers(prm.ports))
			}
			return nil, false, plugin.Wrap(plugin.APICallError, err, "create Service %s/%s", ns, id)
		}
		return want, true, nil
	case err != nil:
		return nil, false, plugin.WrapUnknown(err, "get Service %s/%s", ns, id)
	}
	if err := p.check(svc); err != nil {
		return nil, false, err
	}
	p.adopt(ctx, svc)
	return svc, false, nil
}

// listenerNumbers returns the listener port numbers of ports.
func listenerNumbers(ports []lb.PortProtocol) []int32 {
	out := make([]int32, 0, len(ports))
	for _, pr := range ports {
		out = append(out, pr.Port)
	}
	return out
}

// claimListeners claims listener ports of load balancer id in the ledger for the shared
// Service owner ("<namespace>/<id>"), in one guarded write, before the Service is made or
// given those ports. A port another owner holds is a parameterError with reason NotAllowed
// naming the port and the holder, unless that claim is stale: older than lb.ClaimTTL with
// neither a Service nor a pod of its owner's name in c (a CREATE refused after its claim), which
// is taken over as the per-pod plugin takes it over. A ledger that cannot be written is an
// APICallError (the Service is not made either way).
func (p *Plugin) claimListeners(ctx context.Context, c client.Reader, id, owner string, ports []int32) error {
	if p.ledger == nil {
		return nil
	}
	taken, err := p.ledger.Claim(ctx, id, ports, owner, lb.StaleClaims(ctx, c, p.now()))
	if err != nil {
		return plugin.Wrap(plugin.APICallError, err, "claim listener ports %v of load balancer %s", ports, id)
	}
	if len(taken) > 0 {
		port := slices.Sorted(maps.Keys(taken))[0]
		return plugin.NotAllowedf(ParamPortProtocols, "listener port %d of load balancer %s is held by the Service %s (claimed %s): a shared Service would take its listener over", port, id, taken[port].Owner, taken[port].At.UTC().Format(time.RFC3339))
	}
	p.inLedger.Store(owner, true)
	return nil
}

// refused reports whether the API server surely refused a write (nothing was written).
func refused(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err) || apierrors.IsRequestEntityTooLargeError(err) ||
		apierrors.IsConflict(err) || apierrors.IsNotFound(err)
}

// releaseListeners releases owner's claims of ports of id that no Service has (a create or
// patch the API server refused); what fails is left to the ledger's sweep. The Service is
// adopted again at its next read.
func (p *Plugin) releaseListeners(ctx context.Context, id, owner string, ports []int32) {
	if p.ledger == nil || len(ports) == 0 {
		return
	}
	p.inLedger.Delete(owner)
	if err := p.ledger.ReleasePorts(ctx, id, owner, ports); err != nil {
		ctrl.LoggerFrom(ctx).Info("Listener ports of a shared Service left to the ledger's sweep", "service", owner, "ports", ports, "error", err.Error())
	}
}

// adopt records, once per replica, the listener ports of an existing shared Service (one
// another replica or OKG made) in the ledger, dated at its creation; ports another owner
// holds there are left as they are (the Service keeps serving: nothing is taken from a live
// network) and logged.
func (p *Plugin) adopt(ctx context.Context, svc *corev1.Service) {
	key := svc.Namespace + "/" + svc.Name
	if p.ledger == nil || plugin.IsReadOnly(ctx) {
		return
	}
	if _, known := p.inLedger.Load(key); known {
		return
	}
	ports := make([]int32, 0, len(svc.Spec.Ports))
	for _, sp := range svc.Spec.Ports {
		if !slices.Contains(ports, sp.Port) {
			ports = append(ports, sp.Port)
		}
	}
	taken, err := p.ledger.Adopt(ctx, svc.Annotations[p.spec.IDAnnotation], ports, key, svc.CreationTimestamp.Time)
	if err != nil {
		ctrl.LoggerFrom(ctx).Info("An existing shared Service's listener ports were not recorded in the ledger; tried again at its next read", "service", key, "error", err.Error())
		return
	}
	if len(taken) > 0 {
		// Another owner holds some: logged once per replica, not written at every read.
		ctrl.LoggerFrom(ctx).Info("An existing shared Service's listener ports are held by another owner in the ledger", "service", key, "taken", len(taken))
	}
	p.inLedger.Store(key, true)
}

// ServiceGone releases the listener claims of a shared Service of this plugin once it is gone
// from the API (the Service informer's delete handler): those made up to its creation, as
// lb.Plugin.ServiceGone does for a per-pod Service, unless c (read live) shows a Service or
// a pod of its name again. Other Services are not this plugin's: nil. An error leaves the
// claims to the per-pod plugin's sweep, or to a later claim that finds them stale.
func (p *Plugin) ServiceGone(ctx context.Context, c client.Reader, svc *corev1.Service) error {
	id := svc.Annotations[p.spec.IDAnnotation]
	if p.ledger == nil || id != svc.Name || svc.Spec.Selector[p.spec.PodLabel] != id || !p.managed(svc) {
		return nil
	}
	key := svc.Namespace + "/" + svc.Name
	p.inLedger.Delete(key)
	if inUse, err := lb.NameInUse(ctx, c, client.ObjectKeyFromObject(svc)); inUse || err != nil {
		return err // a read that fails leaves the claims: unknown is not gone
	}
	return p.ledger.Release(ctx, id, key, svc.CreationTimestamp.Truncate(time.Second).Add(time.Second))
}

// heldElsewhere refuses (reason NotAllowed) a shared Service of load balancer id in ns when
// a shared Service of another namespace is on it (a LoadBalancer Service this engine or
// OKG's plugin made, with id in Spec.IDAnnotation), or when any other LoadBalancer Service on
// it (a per-pod plugin's, of any namespace) has one of the listener ports: the two would take
// each other's listeners. A Service list that fails is Unknown.
func (p *Plugin) heldElsewhere(ctx context.Context, c client.Client, ns, id string, ports []lb.PortProtocol) error {
	var all corev1.ServiceList
	// Read only, from the cache: no copy of every Service of the cluster per admission.
	if err := c.List(ctx, &all, client.UnsafeDisableDeepCopy); err != nil {
		return plugin.WrapUnknown(err, "list Services")
	}
	for i := range all.Items {
		s := &all.Items[i]
		if s.Spec.Type != corev1.ServiceTypeLoadBalancer || s.Annotations[p.spec.IDAnnotation] != id || (s.Namespace == ns && s.Name == id) {
			continue
		}
		if s.Namespace != ns && p.managed(s) {
			return plugin.NotAllowedf(p.spec.IDsParam, "load balancer %s serves the shared Service %s/%s of another namespace: a shared Service here would take its listeners", id, s.Namespace, s.Name)
		}
		for _, sp := range s.Spec.Ports {
			if slices.ContainsFunc(ports, func(pr lb.PortProtocol) bool { return pr.Port == sp.Port }) {
				return plugin.NotAllowedf(ParamPortProtocols, "listener port %d of load balancer %s is the Service %s/%s's: a shared Service would take its listener over", sp.Port, id, s.Namespace, s.Name)
			}
		}
	}
	return nil
}

// check refuses a Service of the shared Service's name that is not one.
func (p *Plugin) check(svc *corev1.Service) error {
	if !p.managed(svc) {
		return plugin.ParamErrorf(p.spec.IDsParam, "Service %s/%s exists and is not a shared Service of %s managed by network-plugin-policy", svc.Namespace, svc.Name, p.spec.Name)
	}
	return nil
}

// OnPodAdded chooses the pod's load balancer at its CREATE (recorded in AnnotationAllocation
// and the pod label Spec.PodLabel), so that a pod no load balancer has room for fails at
// admission, and makes the shared Service when it is missing, without owners: a shared
// Service serves every GameServerSet that names the load balancer, and OKG's owner (the first
// pod's GameServerSet) garbage-collects it under the others. With ReadyStatusAtCreate and the
// Service already there, the status is NotReady (OKG).
func (p *Plugin) OnPodAdded(ctx context.Context, c client.Client, pod *corev1.Pod) (*corev1.Pod, error) {
	prm, err := p.decode(pod)
	if err != nil {
		return pod, err
	}
	key := podKey(pod)
	id, place, err := p.allocate(ctx, c, key, pod, prm)
	if err != nil {
		return pod, err
	}
	pod.Labels[p.spec.PodLabel] = id
	if plugin.IsReadOnly(ctx) {
		return pod, nil
	}
	_, created, err := p.service(ctx, c, pod.Namespace, id, prm)
	if err != nil {
		p.unreserveKey(key)
		p.releasePlace(ctx, id, key, place)
		return pod, err
	}
	if !created && p.spec.ReadyStatusAtCreate {
		if err := networkstatus.PutStatus(pod, networkstatus.NetworkStatus{CurrentNetworkState: networkstatus.NetworkNotReady}); err != nil {
			return pod, err
		}
	}
	return pod, p.unread(prm.conf)
}

// unreserveKey drops the reservation of pod key, whose CREATE this run refuses.
func (p *Plugin) unreserveKey(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.reserved, key)
}

// ParamAllowNotReadyContainers is OKG's parameter for in-place updates that keep a pod
// published; a shared Service serves every game server behind its load balancer, so it is
// not acted on here (unread warns).
const ParamAllowNotReadyContainers = "AllowNotReadyContainers"

// unread returns a warning naming the network-conf parameters the plugin does not act on,
// nil when there are none.
func (p *Plugin) unread(conf networkstatus.Conf) error {
	known := []string{p.spec.IDsParam, ParamPortProtocols}
	if p.spec.ManagedServiceParams {
		known = append(known, ParamManagedServiceNames, ParamManagedServiceSelector)
	}
	if err := conf.Warn(func(name string) bool { return name == ParamAllowNotReadyContainers },
		"a shared Service serves every game server behind its load balancer: publishing one pod's not-ready addresses would publish them all, so "+p.spec.Name+" does not act on it"); err != nil {
		return err
	}
	return conf.Warn(networkstatus.NotIn(append(known, ParamAllowNotReadyContainers)...), p.spec.Name+" ignores unknown network-conf parameters, expected only "+strings.Join(known, ", "))
}

// OnPodUpdated writes a NotReady status at the first run (OKG). Then: the pod's load
// balancer is the one recorded at CREATE (a restart moves nothing), the shared Service is
// made when missing, and with HashAnnotation brought to the pod's network-conf when its hash
// differs (NotReady meanwhile); network-disabled removes the pod label (and the managed
// selector's) and keeps the network NotReady until it is removed; enabled again, the labels
// come back (never OKG's empty-key label) and the network is Ready only once the Service
// has its address: one internal address per Service port at the pod's IP, one external at
// the ingress IP (or, with EndpointAddress, the ingress hostname as endPoint).
func (p *Plugin) OnPodUpdated(ctx context.Context, c client.Client, pod *corev1.Pod) (*corev1.Pod, error) {
	prev, _ := networkstatus.StatusFromPod(pod)
	if prev == nil {
		return pod, networkstatus.PutStatus(pod, networkstatus.NetworkStatus{CurrentNetworkState: networkstatus.NetworkNotReady})
	}
	notReady := networkstatus.NotReadyFrom(pod, *prev)
	prm, err := p.decode(pod)
	if err != nil {
		return pod, err
	}
	id, ok := recorded(pod, prm.ids)
	if !ok {
		if cur := pod.Labels[p.spec.PodLabel]; slices.Contains(prm.ids, cur) {
			id = cur // OKG's pod, or one whose record predates this manager
		} else if id, _, err = p.allocate(ctx, c, podKey(pod), pod, prm); err != nil {
			return notReady(err)
		}
	}
	if plugin.IsReadOnly(ctx) {
		return pod, nil
	}
	svc, created, err := p.service(ctx, c, pod.Namespace, id, prm)
	if err != nil {
		if perr, isErr := err.(*plugin.Error); isErr && perr.KeepsReady() {
			return pod, err
		}
		return notReady(err)
	}
	if created {
		return pod, nil // OKG's run ends with the create; the next one reads the Service
	}
	if p.spec.HashAnnotation != "" && svc.Annotations[p.spec.HashAnnotation] != confHash(prm) && !disabled(pod) {
		want := p.desired(pod.Namespace, id, prm)
		before := svc.DeepCopy()
		changed := !sameServing(svc, want)
		var dropped, added []int32
		if changed {
			// The new listener ports are claimed before the Service is given them: one that
			// another Service holds is refused, and the Service keeps the ports it has.
			if err := p.claimListeners(ctx, c, id, client.ObjectKeyFromObject(svc).String(), listenerNumbers(prm.ports)); err != nil {
				return pod, err
			}
			for _, sp := range svc.Spec.Ports {
				if !slices.ContainsFunc(prm.ports, func(pr lb.PortProtocol) bool { return pr.Port == sp.Port }) {
					dropped = append(dropped, sp.Port)
				}
			}
			for _, pr := range prm.ports {
				if !slices.ContainsFunc(svc.Spec.Ports, func(sp corev1.ServicePort) bool { return sp.Port == pr.Port }) {
					added = append(added, pr.Port)
				}
			}
		}
		svc.Spec.Ports, svc.Spec.Selector, svc.Spec.LoadBalancerClass = want.Spec.Ports, want.Spec.Selector, want.Spec.LoadBalancerClass
		svc.Annotations[p.spec.HashAnnotation] = want.Annotations[p.spec.HashAnnotation]
		if err := c.Patch(ctx, svc, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			if refused(err) {
				p.releaseListeners(ctx, id, client.ObjectKeyFromObject(svc).String(), added)
			}
			if !changed {
				return pod, plugin.WrapWriteRefused(err, "patch Service %s/%s", svc.Namespace, svc.Name)
			}
			return notReady(plugin.WrapWriteRefused(err, "patch Service %s/%s", svc.Namespace, svc.Name))
		}
		if changed {
			p.releaseListeners(ctx, id, client.ObjectKeyFromObject(svc).String(), dropped)
			return notReady(nil)
		}
		// Only the hash differed (OKG's hash of the same network-conf, after a handover):
		// the listeners are as they were, and so is the network.
	}
	if cur, has := pod.Labels[p.spec.PodLabel]; has && cur != id && !disabled(pod) {
		// The label is the Service's selector: one a pod author changed (to another load
		// balancer, or after a change of the ids) would leave the pod out of the Service
		// its status names. The recorded load balancer is the pod's.
		pod.Labels[p.spec.PodLabel] = id
	}
	_, hasLabel := pod.Labels[p.spec.PodLabel]
	if disabled(pod) {
		if hasLabel {
			delete(pod.Labels, p.spec.PodLabel)
			if prm.selectorKey != "" {
				delete(pod.Labels, prm.selectorKey)
			}
		}
		return notReady(nil)
	}
	if !hasLabel {
		p.label(pod, id, prm)
	}
	if len(svc.Status.LoadBalancer.Ingress) == 0 {
		// Waiting for the cloud; its controller's own word, when it has refused the Service
		// (a quota), is the run's CloudError, as for a per-pod Service.
		return pod, lb.CloudFailure(ctx, c, svc)
	}
	st := *prev
	st.InternalAddresses, st.ExternalAddresses = nil, nil
	in := svc.Status.LoadBalancer.Ingress[0]
	for _, sp := range svc.Spec.Ports {
		tp := sp.TargetPort.IntVal
		name := strconv.Itoa(int(tp))
		st.InternalAddresses = append(st.InternalAddresses, networkstatus.NetworkAddress{IP: pod.Status.PodIP,
			Ports: []networkstatus.NetworkPort{{Name: name, Port: networkstatus.IntPort(tp), Protocol: sp.Protocol}}})
		ext := networkstatus.NetworkAddress{IP: in.IP, Ports: []networkstatus.NetworkPort{{Name: name, Port: networkstatus.IntPort(sp.Port), Protocol: sp.Protocol}}}
		if p.spec.EndpointAddress {
			ext.IP, ext.EndPoint = "", in.Hostname
		}
		st.ExternalAddresses = append(st.ExternalAddresses, ext)
	}
	st.CurrentNetworkState = networkstatus.NetworkReady
	if err := networkstatus.PutStatus(pod, st); err != nil {
		return pod, err
	}
	return pod, p.unread(prm.conf)
}

// sameServing reports whether svc serves as want does: the same ports (name, number,
// protocol, target), selector and class; node ports and everything the API server or the
// cloud controller set are not compared.
func sameServing(svc, want *corev1.Service) bool {
	if len(svc.Spec.Ports) != len(want.Spec.Ports) || !maps.Equal(svc.Spec.Selector, want.Spec.Selector) ||
		ptr.Deref(svc.Spec.LoadBalancerClass, "") != ptr.Deref(want.Spec.LoadBalancerClass, "") {
		return false
	}
	for i, sp := range svc.Spec.Ports {
		w := want.Spec.Ports[i]
		if sp.Name != w.Name || sp.Port != w.Port || sp.Protocol != w.Protocol || sp.TargetPort != w.TargetPort {
			return false
		}
	}
	return true
}

// label puts the pod label the Service selects, and the managed selector's when one is set.
func (p *Plugin) label(pod *corev1.Pod, id string, prm params) {
	pod.Labels[p.spec.PodLabel] = id
	if prm.selectorKey != "" {
		pod.Labels[prm.selectorKey] = prm.selectorValue
	}
}

// disabled reports the pod's game.kruise.io/network-disabled label, true only for "true"
// (OKG's reading).
func disabled(pod *corev1.Pod) bool {
	d, err := networkstatus.NetworkDisabled(pod)
	return err == nil && d
}
