// Package okgguard keeps this manager from running OKG's network plugins of a provider while
// kruise-game-manager still runs them too: with both, both webhooks would allocate host
// ports, node ports or load-balancer listener ports for the same pod. OKG enables its
// providers whole ([kubernetes], [alibabacloud], ...: every plugin of the provider with one
// `enable`), so the Guard decides per provider. It watches OKG's webhook configurations
// (either one existing means OKG is installed) and OKG's provider configuration (the
// ConfigMap kruise-game-manager mounts at /etc/kruise-game/config.toml); while OKG is
// installed with a provider enabled, or its configuration may not be read, the manager steps
// back from that provider, and only a look that shows no conflict ends that: its webhook
// passes the provider's pods through untouched, its webhook entries intercept none of the
// provider's types, its controllers leave those pods alone, and an Event and a metric say
// why (/readyz too, when every provider the manager serves steps back). A cloud provider is
// also not taken over while the cluster holds pods or GameServerSets of a type of that
// provider this manager does not serve (none of the providers it has plugins for has one
// today; AlibabaCloud-AutoNLBs-V2 was one): handing the provider over
// would leave them without a plugin.
package okgguard

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/prometheus/client_golang/prometheus"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// OKG's names, from kruise-game-manager's own manifests (config/manager/manager.yaml and
// its Helm chart): the mutating webhook configuration, the ConfigMap of its provider
// configuration and that ConfigMap's key, in OKG's default namespace.
const (
	DefaultWebhookConfiguration = "kruise-game-mutating-webhook"
	DefaultConfigMapNamespace   = "kruise-game-system"
	DefaultConfigMapName        = "kruise-game-manager-config"
	ConfigKey                   = "config.toml"
)

// EvaluateTimeout bounds one look (every read it makes).
const EvaluateTimeout = 5 * time.Second

// DefaultInterval is how often the Guard reads OKG's configuration.
const DefaultInterval = 10 * time.Second

// providerPrefixes maps the prefix OKG gives every network type of a provider to the
// provider's TOML table: "Kubernetes-HostPort" is the kubernetes provider's,
// "AlibabaCloud-EIP" alibabacloud's (kruise-game's cloudprovider packages, d76ace2).
var providerPrefixes = map[string]string{
	"Kubernetes-":        "kubernetes",
	"AlibabaCloud-":      "alibabacloud",
	"HwCloud-":           "hwcloud",
	"Volcengine-":        "volcengine",
	"JdCloud-":           "jdcloud",
	"TencentCloud-":      "tencentcloud",
	"AmazonWebServices-": "aws",
}

// ProviderOf returns the provider table of an OKG network type ("alibabacloud" for
// "AlibabaCloud-SLB"), or "" for a type of no provider the Guard knows.
func ProviderOf(networkType string) string {
	for prefix, provider := range providerPrefixes {
		if strings.HasPrefix(networkType, prefix) {
			return provider
		}
	}
	return ""
}

// providerTitle is how OKG spells the provider in its type names, for Event reasons
// ("AlibabaCloudProviderConflict").
func providerTitle(provider string) string {
	for prefix, p := range providerPrefixes {
		if p == provider {
			return strings.TrimSuffix(prefix, "-")
		}
	}
	return provider
}

// State is what the Guard found for one provider.
type State string

const (
	// StateAbsent: neither of OKG's webhook configurations exists; this manager serves the
	// provider's types.
	StateAbsent State = "absent"
	// StateDisabled: OKG is installed with the provider off (enable = false, or no table);
	// this manager serves the provider's types.
	StateDisabled State = "disabled"
	// StateConflict: OKG is installed with the provider on, or its provider configuration may
	// not be read (RBAC names another ConfigMap), or the cluster holds pods or GameServerSets
	// of a type of the provider that this manager does not serve, or the last look that could
	// read it all showed a conflict; this manager steps back from the provider.
	StateConflict State = "conflict"
	// StateUnknown: OKG is installed but its provider configuration cannot be read (a
	// missing ConfigMap, an API error, TOML that does not parse), or nothing has been read
	// yet. Unknown is not a conflict: the manager keeps serving, and says so; but an Unknown
	// look during a conflict keeps the conflict.
	StateUnknown State = "unknown"
)

// States are every State, for the metric's label values.
var States = []State{StateAbsent, StateDisabled, StateConflict, StateUnknown}

// Status is a State and why.
type Status struct {
	State State
	// Reason is one sentence for /readyz, the Event and the log.
	Reason string
	// Unserved marks that the cluster holds pods or GameServerSets of the provider's types
	// that this manager does not serve. On a conflict it is the cause (not OKG serving the
	// provider): the Event's action is RefuseHandover rather than StepBack, so that the two are
	// two Events. On a serving Status (the provider was handed over before they appeared) it
	// is reported by a Warning Event <Provider>UnservedTypes, and the provider stays served.
	Unserved bool
}

// Guard decides, every Interval and per provider, whether OKG still serves the provider's
// types. It is a manager Runnable on every replica (each replica's webhook needs the answer).
type Guard struct {
	// Reader reads OKG's webhook configurations (the manager's cache) and lists the
	// GameServerSets (unstructured, so from the API server).
	Reader client.Reader
	// APIReader reads OKG's ConfigMap straight from the API server: the manager may get that
	// one ConfigMap by name only (RBAC resourceNames), which a cache cannot list.
	APIReader client.Reader
	// WebhookConfiguration is OKG's MutatingWebhookConfiguration.
	WebhookConfiguration string
	// ValidatingWebhookConfiguration is OKG's ValidatingWebhookConfiguration (OKG writes both
	// at every start); either one existing means OKG is installed. Empty: the mutating one
	// alone tells.
	ValidatingWebhookConfiguration string
	// ConfigMap is OKG's provider configuration.
	ConfigMap types.NamespacedName
	// Providers are the provider tables this manager serves (plugin.Config.EnabledProviders);
	// empty means ["kubernetes"].
	Providers []string
	// Served reports whether this manager has a plugin of a network type; nil serves every
	// type of Providers. A cloud provider with pods or GameServerSets of a type it does not
	// serve is not taken over.
	Served func(networkType string) bool
	// Pods, when set, gives the manager's pod informer: with a cloud provider among
	// Providers, Start registers UsePodInformer's handler on it and waits until it has seen
	// every pod before its first look.
	Pods cache.Informers
	// Interval is how often to look; zero means DefaultInterval.
	Interval time.Duration
	// Recorder records a Warning Event on OKG's ConfigMap when a conflict starts; nil
	// records none.
	Recorder events.EventRecorder
	// Metric, when set, is the gauge npp_okg_coexistence{provider,state}: 1 for the current
	// state of each provider.
	Metric *prometheus.GaugeVec

	status  atomic.Pointer[map[string]Status]
	looks   atomic.Int32
	decided atomic.Bool
	mu      sync.Mutex
	changed chan struct{}
	// unserved holds, per cloud provider, the pods ("<namespace>/<name>") of its types that
	// this manager does not serve, with their type, from the pod informer (UsePodInformer).
	unservedMu sync.Mutex
	unserved   map[string]map[string]string
}

// NewMetric registers the gauge npp_okg_coexistence{provider,state} with reg: 1 for the state
// this replica found for the provider, 0 for the others. Errors come from the registry.
func NewMetric(reg prometheus.Registerer) (*prometheus.GaugeVec, error) {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "npp_okg_coexistence",
		Help: "1 for the state in which this replica found kruise-game-manager's provider (absent, disabled, conflict: this manager steps back from the provider's network types, unknown), 0 for the others, per provider this manager serves (kubernetes, alibabacloud, hwcloud, volcengine, jdcloud, tencentcloud, aws).",
	}, []string{"provider", "state"})
	if err := reg.Register(g); err != nil {
		return nil, fmt.Errorf("register npp_okg_coexistence: %w", err)
	}
	return g, nil
}

// NeedLeaderElection is false: every replica's webhook needs the state.
func (g *Guard) NeedLeaderElection() bool { return false }

func (g *Guard) providers() []string {
	if len(g.Providers) == 0 {
		return []string{"kubernetes"}
	}
	return g.Providers
}

// Start looks at once and then every Interval until ctx ends (with a cloud provider and
// Pods, first waiting until the pod informer has shown every pod). It returns nil, or an
// error when the pod informer cannot be had or watched.
func (g *Guard) Start(ctx context.Context) error {
	interval := g.Interval
	if interval == 0 {
		interval = DefaultInterval
	}
	if g.Pods != nil && slices.ContainsFunc(g.providers(), func(p string) bool { return p != "kubernetes" }) {
		informer, err := g.Pods.GetInformer(ctx, &corev1.Pod{})
		if err != nil {
			return fmt.Errorf("OKG guard: get the pod informer: %w", err)
		}
		reg, err := g.UsePodInformer(informer)
		if err != nil {
			return fmt.Errorf("OKG guard: watch the pods: %w", err)
		}
		if !toolscache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
			return nil // stopping
		}
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		g.set(ctx, g.Evaluate(ctx))
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// UsePodInformer registers a handler on the manager's pod informer that keeps, per cloud
// provider of Providers, the pods of its types that Served refuses, so that each look can
// name them without listing every pod. Start calls it when Pods is set; call it once. The
// returned registration's HasSynced tells when the informer's pods have all been seen.
func (g *Guard) UsePodInformer(informer cache.Informer) (toolscache.ResourceEventHandlerRegistration, error) {
	track := func(obj any, gone bool) {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			if d, isTomb := obj.(toolscache.DeletedFinalStateUnknown); isTomb {
				pod, ok = d.Obj.(*corev1.Pod)
			}
			if !ok {
				return
			}
			gone = true
		}
		key := pod.Namespace + "/" + pod.Name
		typ := pod.Annotations[networkTypeAnnotation]
		provider := ProviderOf(typ)
		g.unservedMu.Lock()
		defer g.unservedMu.Unlock()
		for p, pods := range g.unserved {
			if p != provider || gone || g.served(typ) {
				delete(pods, key)
			}
		}
		if gone || provider == "" || provider == "kubernetes" || !slices.Contains(g.providers(), provider) || g.served(typ) {
			return
		}
		if g.unserved == nil {
			g.unserved = map[string]map[string]string{}
		}
		if g.unserved[provider] == nil {
			g.unserved[provider] = map[string]string{}
		}
		g.unserved[provider][key] = typ
	}
	return informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { track(obj, false) },
		UpdateFunc: func(_, obj any) { track(obj, false) },
		DeleteFunc: func(obj any) { track(obj, true) },
	})
}

// networkTypeAnnotation is OKG's game.kruise.io/network-type (networkstatus's key; this
// package stays below pkg/plugin).
const networkTypeAnnotation = "game.kruise.io/network-type"

func (g *Guard) served(networkType string) bool {
	return g.Served == nil || g.Served(networkType)
}

// notLookedYet is Current's Status before the first look.
var notLookedYet = Status{State: StateUnknown, Reason: "kruise-game-manager's configuration has not been read yet"}

// Current returns the last Status of provider; before the first look, or for a provider the
// manager does not serve, it is StateUnknown (notLookedYet), not StateAbsent: nothing has
// been seen yet.
func (g *Guard) Current(provider string) Status {
	if m := g.status.Load(); m != nil {
		if s, ok := (*m)[provider]; ok {
			return s
		}
	}
	return notLookedYet
}

// inconclusiveLooks is how many looks in a row that leave some provider Unknown (a read that
// failed or timed out, a missing ConfigMap) make the guard decided all the same: Unknown is
// not a conflict, and a manager that never decided would serve nothing. At DefaultInterval
// that is 30 s.
const inconclusiveLooks = 3

// Looked reports whether the guard has decided, for every provider, whether this manager
// serves it: after its first look that found no provider Unknown, or after
// inconclusiveLooks looks in a row. Until then StepBack's false does not mean that OKG is
// absent: an Unknown first look (a read that timed out) tells nothing, and no earlier
// conflict keeps the manager back; the controllers act on no pod and write no configuration
// meanwhile, and the replica is not ready.
func (g *Guard) Looked() bool { return g.decided.Load() }

// StepBack reports whether this manager must leave pods of networkType to OKG, and why: while
// the type's provider is in conflict. A type of no provider the manager serves never steps
// back (the manager has no plugin of it anyway).
func (g *Guard) StepBack(networkType string) (bool, string) {
	p := ProviderOf(networkType)
	if p == "" || !slices.Contains(g.providers(), p) {
		return false, ""
	}
	s := g.Current(p)
	return s.State == StateConflict, s.Reason
}

// Changed returns a channel that is closed at the next change of any provider's state.
func (g *Guard) Changed() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.changed == nil {
		g.changed = make(chan struct{})
	}
	return g.changed
}

// Check is a readiness check: it fails until the guard has decided (Looked: the replica does
// not know yet whether OKG serves its types) and while the manager steps back from every provider it
// serves, with the reasons. While only some providers step back the replica stays ready:
// its webhook serves the other providers' types.
func (g *Guard) Check(*http.Request) error {
	if g.status.Load() == nil {
		return fmt.Errorf("OKG guard: %s", notLookedYet.Reason)
	}
	if !g.Looked() {
		return fmt.Errorf("OKG guard: kruise-game-manager's configuration could not be read yet (look %d of at most %d before Unknown counts as decided)", g.looks.Load(), inconclusiveLooks)
	}
	var why []string
	for _, p := range g.providers() {
		s := g.Current(p)
		if s.State != StateConflict {
			return nil
		}
		why = append(why, p+": "+s.Reason)
	}
	return fmt.Errorf("stepping back from every provider this manager serves: %s", strings.Join(why, "; "))
}

// set stores states, and on a provider's change of state logs it, records the Event, sets
// the metric and closes the Changed channel. A conflict ends only on a look that shows no
// conflict (absent or disabled): an Unknown look during a conflict (a throttled, timed-out or
// refused read) keeps the conflict, so that one failed read never starts a second allocator.
func (g *Guard) set(ctx context.Context, states map[string]Status) {
	prev := map[string]Status{}
	if m := g.status.Load(); m != nil {
		prev = *m
	}
	next := make(map[string]Status, len(states))
	changed := false
	log := ctrl.LoggerFrom(ctx).WithName("okg-guard")
	for p, s := range states {
		old, had := prev[p]
		if had && old.State == StateConflict && s.State == StateUnknown {
			s = Status{State: StateConflict, Unserved: old.Unserved, Reason: fmt.Sprintf("%s (still stepping back: the last look could not read it, and only a look that shows no conflict ends one: %s)", firstReason(old.Reason), s.Reason)}
		}
		next[p] = s
		if g.Metric != nil {
			for _, st := range States {
				v := 0.0
				if st == s.State {
					v = 1
				}
				g.Metric.WithLabelValues(p, string(st)).Set(v)
			}
		}
		if had && old.State == s.State && old.Unserved == s.Unserved {
			continue
		}
		changed = true
		switch s.State {
		case StateConflict:
			log.Error(nil, "This manager steps back from a provider that kruise-game-manager still serves, or that the cluster uses beyond what this manager serves", "provider", p, "reason", s.Reason)
			if g.Recorder != nil {
				cm := &corev1.ConfigMap{}
				cm.Namespace, cm.Name = g.ConfigMap.Namespace, g.ConfigMap.Name
				action := "StepBack"
				if s.Unserved {
					action = "RefuseHandover"
				}
				g.Recorder.Eventf(cm, nil, corev1.EventTypeWarning, providerTitle(p)+"ProviderConflict", action,
					"network-plugin-policy leaves the %s-* network types to kruise-game-manager: %s", providerTitle(p), s.Reason)
			}
		default:
			log.Info("Serving the provider's network types", "provider", p, "okg", s.State, "reason", s.Reason)
			if s.Unserved && g.Recorder != nil {
				cm := &corev1.ConfigMap{}
				cm.Namespace, cm.Name = g.ConfigMap.Namespace, g.ConfigMap.Name
				g.Recorder.Eventf(cm, nil, corev1.EventTypeWarning, providerTitle(p)+"UnservedTypes", "Report",
					"network-plugin-policy serves the %s-* types it has plugins for; %s", providerTitle(p), s.Reason)
			}
		}
	}
	g.status.Store(&next)
	n := g.looks.Add(1)
	if !g.decided.Load() {
		conclusive := true
		for _, st := range next {
			if st.State == StateUnknown {
				conclusive = false
			}
		}
		if conclusive || n >= inconclusiveLooks {
			g.decided.Store(true)
			changed = true // the first decision is a change: whoever waits for it looks again
		}
	}
	if !changed {
		return
	}
	g.mu.Lock()
	if g.changed != nil {
		close(g.changed)
		g.changed = nil
	}
	g.mu.Unlock()
}

// gameServerSetList is OKG's GameServerSetList, read unstructured (the module is not a
// dependency).
var gameServerSetList = schema.GroupVersionKind{Group: "game.kruise.io", Version: "v1alpha1", Kind: "GameServerSetList"}

// Evaluate reads OKG's webhook configurations and provider configuration once, and the
// GameServerSets when a cloud provider is served, and returns what they say for each
// provider of Providers: OKG is installed while either of its webhook configurations exists.
func (g *Guard) Evaluate(ctx context.Context) map[string]Status {
	ctx, cancel := context.WithTimeout(ctx, EvaluateTimeout)
	defer cancel()
	out := map[string]Status{}
	okg := g.evaluateOKG(ctx)
	for _, p := range g.providers() {
		out[p] = okg(p)
	}
	// The types this manager does not serve matter only where OKG is installed and the
	// provider is being handed over (OKG's provider off, this manager not serving it yet): with
	// OKG absent nobody would serve those pods either way, and once this manager serves the
	// provider, stepping back would leave every pod of the provider without a plugin (OKG's
	// is off), so they are only reported (Unserved on a serving Status: a Warning Event).
	var clouds []string
	for _, p := range g.providers() {
		if p != "kubernetes" && out[p].State == StateDisabled {
			clouds = append(clouds, p)
		}
	}
	if len(clouds) == 0 {
		return out
	}
	gss, err := g.unservedGameServerSets(ctx)
	for _, p := range clouds {
		if err != nil {
			out[p] = Status{State: StateUnknown, Reason: fmt.Sprintf("cannot list the GameServerSets: %v", err)}
			continue
		}
		var names []string
		g.unservedMu.Lock()
		for key, typ := range g.unserved[p] {
			names = append(names, fmt.Sprintf("pod %s (%s)", key, typ))
		}
		g.unservedMu.Unlock()
		for key, typ := range gss {
			if ProviderOf(typ) == p {
				names = append(names, fmt.Sprintf("GameServerSet %s (%s)", key, typ))
			}
		}
		if len(names) == 0 {
			continue
		}
		sort.Strings(names)
		n := len(names)
		if n > 5 {
			names = append(names[:5], fmt.Sprintf("and %d more", n-5))
		}
		if prev := g.Current(p); g.Looked() && prev.State != StateConflict {
			// Served already: reported, not stepped back from.
			out[p] = Status{State: out[p].State, Unserved: true, Reason: fmt.Sprintf("%s; the cluster holds %d object(s) of %s types this manager does not serve, and OKG's [%s] is off: nobody serves them (%s)",
				out[p].Reason, n, providerTitle(p), p, strings.Join(names, ", "))}
			continue
		}
		out[p] = Status{State: StateConflict, Unserved: true, Reason: fmt.Sprintf("the cluster holds %d object(s) of %s types this manager does not serve (%s): handing %s over would leave them without a plugin; keep OKG's [%s] enabled and this manager's disabled until they are gone",
			n, providerTitle(p), strings.Join(names, ", "), p, p)}
	}
	return out
}

// unservedGameServerSets lists the GameServerSets ("<namespace>/<name>" to network type) of a
// provider type this manager does not serve. No GameServerSet kind means none.
func (g *Guard) unservedGameServerSets(ctx context.Context) (map[string]string, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gameServerSetList)
	if err := g.Reader.List(ctx, list); err != nil {
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	out := map[string]string{}
	for _, item := range list.Items {
		typ, _, _ := unstructured.NestedString(item.Object, "spec", "network", "networkType")
		if p := ProviderOf(typ); p != "" && p != "kubernetes" && !g.served(typ) {
			out[item.GetNamespace()+"/"+item.GetName()] = typ
		}
	}
	return out, nil
}

// evaluateOKG reads OKG's configuration once and returns the Status of each provider.
func (g *Guard) evaluateOKG(ctx context.Context) func(provider string) Status {
	same := func(s Status) func(string) Status { return func(string) Status { return s } }
	installed := "MutatingWebhookConfiguration " + g.WebhookConfiguration
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := g.Reader.Get(ctx, types.NamespacedName{Name: g.WebhookConfiguration}, mwc); err != nil {
		if !apierrors.IsNotFound(err) {
			return same(Status{State: StateUnknown, Reason: fmt.Sprintf("cannot read MutatingWebhookConfiguration %s: %v", g.WebhookConfiguration, err)})
		}
		if g.ValidatingWebhookConfiguration == "" {
			return same(Status{State: StateAbsent, Reason: fmt.Sprintf("no MutatingWebhookConfiguration %s", g.WebhookConfiguration)})
		}
		vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := g.Reader.Get(ctx, types.NamespacedName{Name: g.ValidatingWebhookConfiguration}, vwc); err != nil {
			if apierrors.IsNotFound(err) {
				return same(Status{State: StateAbsent, Reason: fmt.Sprintf("no MutatingWebhookConfiguration %s nor ValidatingWebhookConfiguration %s", g.WebhookConfiguration, g.ValidatingWebhookConfiguration)})
			}
			return same(Status{State: StateUnknown, Reason: fmt.Sprintf("cannot read ValidatingWebhookConfiguration %s: %v", g.ValidatingWebhookConfiguration, err)})
		}
		installed = "ValidatingWebhookConfiguration " + g.ValidatingWebhookConfiguration
	}
	cm := &corev1.ConfigMap{}
	if err := g.APIReader.Get(ctx, g.ConfigMap, cm); apierrors.IsForbidden(err) {
		// A misconfiguration, not a passing failure: the manager may read only the ConfigMap
		// its RBAC names. It cannot tell whether OKG serves the types, so it stays back.
		return same(Status{State: StateConflict, Reason: fmt.Sprintf("kruise-game-manager is installed (%s) but its provider configuration, ConfigMap %s, may not be read (%v): --okg-config-map and the resourceNames of the manager's configmaps rule must name the same ConfigMap", installed, g.ConfigMap, err)})
	} else if err != nil {
		return same(Status{State: StateUnknown, Reason: fmt.Sprintf("kruise-game-manager is installed (%s) but its provider configuration, ConfigMap %s, cannot be read: %v", installed, g.ConfigMap, err)})
	}
	data := cm.Data[ConfigKey]
	return func(provider string) Status { return decide(installed, g.ConfigMap, data, provider) }
}

// decide returns the Status of provider for OKG's provider configuration data (the TOML of
// the ConfigMap's config.toml), OKG being installed (installed names the webhook
// configuration that shows it). [<provider>] enable = true, table and key matched without case
// as OKG's decoder matches them, is a conflict (whether or not OKG finds the provider's port
// tables valid: stepping back is the safe side); enable = false, or no table (OKG registers a
// provider only when it is enabled), is not; TOML that does not parse is unknown.
func decide(installed string, key types.NamespacedName, data, provider string) Status {
	var cfg map[string]any
	if _, err := toml.Decode(data, &cfg); err != nil {
		return Status{State: StateUnknown, Reason: fmt.Sprintf("ConfigMap %s key %s is not TOML: %v", key, ConfigKey, strings.TrimSpace(err.Error()))}
	}
	// OKG decodes into a struct, and BurntSushi/toml matches table and key names without
	// case when no exact match exists: [AlibabaCloud] Enable = true enables the provider.
	// Any spelling that enables it is a conflict (which of several OKG uses depends on
	// map order).
	for name, v := range cfg {
		table, ok := v.(map[string]any)
		if !ok || !strings.EqualFold(name, provider) {
			continue
		}
		for k, e := range table {
			if enable, _ := e.(bool); enable && strings.EqualFold(k, "enable") {
				return Status{State: StateConflict, Reason: fmt.Sprintf("kruise-game-manager is installed (%s) and ConfigMap %s has [%s] %s = true: set it to false and restart kruise-game-manager", installed, key, name, k)}
			}
		}
	}
	return Status{State: StateDisabled, Reason: fmt.Sprintf("ConfigMap %s does not enable [%s]", key, provider)}
}

// firstReason is a conflict's reason without what sticky looks appended to it.
func firstReason(r string) string {
	if i := strings.Index(r, " (still stepping back:"); i >= 0 {
		return r[:i]
	}
	return r
}
