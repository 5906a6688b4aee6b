// Package okgguard keeps this manager from running OKG's Kubernetes network plugins while
// kruise-game-manager still runs them too: with both, both webhooks would allocate host
// ports and node ports for the same pod. The Guard watches OKG's webhook configurations
// (either one existing means OKG is installed) and OKG's provider configuration (the
// ConfigMap kruise-game-manager mounts at /etc/kruise-game/config.toml); while OKG is
// installed with its [kubernetes] provider enabled, or its configuration may not be read,
// the manager steps back, and only a look that shows no conflict ends that: its webhook passes every pod through untouched, its
// webhook entries intercept nothing of the Kubernetes types, its controllers leave those
// pods alone, and /readyz, an Event and a metric say why.
package okgguard

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/prometheus/client_golang/prometheus"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
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

// State is what the Guard found.
type State string

const (
	// StateAbsent: neither of OKG's webhook configurations exists; this manager serves the
	// Kubernetes types.
	StateAbsent State = "absent"
	// StateDisabled: OKG is installed with its [kubernetes] provider off (enable = false);
	// this manager serves the Kubernetes types.
	StateDisabled State = "disabled"
	// StateConflict: OKG is installed with its [kubernetes] provider on, or its provider
	// configuration may not be read (RBAC names another ConfigMap), or the last look that
	// could read it showed a conflict; this manager steps back.
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
}

// Guard decides, every Interval, whether OKG still serves the Kubernetes types. It is a
// manager Runnable on every replica (each replica's webhook needs the answer).
type Guard struct {
	// Reader reads OKG's webhook configurations (the manager's cache).
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
	// Interval is how often to look; zero means DefaultInterval.
	Interval time.Duration
	// Recorder records a Warning Event on OKG's ConfigMap when a conflict starts; nil
	// records none.
	Recorder events.EventRecorder
	// Metric, when set, is the gauge npp_okg_coexistence{state}: 1 for the current state.
	Metric *prometheus.GaugeVec

	status  atomic.Pointer[Status]
	mu      sync.Mutex
	changed chan struct{}
}

// NewMetric registers the gauge npp_okg_coexistence{state} with reg: 1 for the state this
// replica found, 0 for the others. Errors come from the registry.
func NewMetric(reg prometheus.Registerer) (*prometheus.GaugeVec, error) {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "npp_okg_coexistence",
		Help: "1 for the state in which this replica found kruise-game-manager's Kubernetes provider (absent, disabled, conflict: this manager steps back from the Kubernetes types, unknown), 0 for the others.",
	}, []string{"state"})
	if err := reg.Register(g); err != nil {
		return nil, fmt.Errorf("register npp_okg_coexistence: %w", err)
	}
	return g, nil
}

// NeedLeaderElection is false: every replica's webhook needs the state.
func (g *Guard) NeedLeaderElection() bool { return false }

// Start looks at once and then every Interval until ctx ends. It returns nil.
func (g *Guard) Start(ctx context.Context) error {
	interval := g.Interval
	if interval == 0 {
		interval = DefaultInterval
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

// notLookedYet is Current's Status before the first look.
var notLookedYet = Status{State: StateUnknown, Reason: "kruise-game-manager's configuration has not been read yet"}

// Current returns the last Status; before the first look it is StateUnknown (notLookedYet),
// not StateAbsent: nothing has been seen yet.
func (g *Guard) Current() Status {
	if s := g.status.Load(); s != nil {
		return *s
	}
	return notLookedYet
}

// Looked reports whether the guard has looked at OKG's configuration at least once.
func (g *Guard) Looked() bool { return g.status.Load() != nil }

// StepBack reports whether this manager must leave the Kubernetes types to OKG, and why.
func (g *Guard) StepBack() (bool, string) {
	s := g.Current()
	return s.State == StateConflict, s.Reason
}

// Changed returns a channel that is closed at the next change of state.
func (g *Guard) Changed() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.changed == nil {
		g.changed = make(chan struct{})
	}
	return g.changed
}

// Check is a readiness check: it fails before the first look (the replica does not know yet
// whether OKG serves the Kubernetes types) and while the manager steps back, with the reason.
func (g *Guard) Check(*http.Request) error {
	if g.status.Load() == nil {
		return fmt.Errorf("OKG guard: %s", notLookedYet.Reason)
	}
	if back, why := g.StepBack(); back {
		return fmt.Errorf("stepping back from the Kubernetes network types: %s", why)
	}
	return nil
}

// set stores s, and on a change of state logs it, records the Event, sets the metric and
// closes the Changed channel. A conflict ends only on a look that shows no conflict (absent
// or disabled): an Unknown look during a conflict (a throttled, timed-out or refused read)
// keeps the conflict, so that one failed read never starts a second allocator.
func (g *Guard) set(ctx context.Context, s Status) {
	if prev := g.status.Load(); prev != nil && prev.State == StateConflict && s.State == StateUnknown {
		s = Status{State: StateConflict, Reason: fmt.Sprintf("%s (still stepping back: the last look could not read it, and only a look that shows no conflict ends one: %s)", firstReason(prev.Reason), s.Reason)}
	}
	prev := g.status.Swap(&s)
	if g.Metric != nil {
		for _, st := range States {
			v := 0.0
			if st == s.State {
				v = 1
			}
			g.Metric.WithLabelValues(string(st)).Set(v)
		}
	}
	if prev != nil && prev.State == s.State {
		return
	}
	log := ctrl.LoggerFrom(ctx).WithName("okg-guard")
	switch s.State {
	case StateConflict:
		log.Error(nil, "kruise-game-manager still runs the Kubernetes network plugins; this manager steps back until its provider is disabled", "reason", s.Reason)
		if g.Recorder != nil {
			cm := &corev1.ConfigMap{}
			cm.Namespace, cm.Name = g.ConfigMap.Namespace, g.ConfigMap.Name
			g.Recorder.Eventf(cm, nil, corev1.EventTypeWarning, "KubernetesProviderConflict", "StepBack",
				"network-plugin-policy leaves the Kubernetes-* network types to kruise-game-manager: %s", s.Reason)
		}
	default:
		log.Info("Serving the Kubernetes network types", "okg", s.State, "reason", s.Reason)
	}
	g.mu.Lock()
	if g.changed != nil {
		close(g.changed)
		g.changed = nil
	}
	g.mu.Unlock()
}

// Evaluate reads OKG's webhook configurations and provider configuration once and returns
// what they say: OKG is installed while either of its webhook configurations exists.
func (g *Guard) Evaluate(ctx context.Context) Status {
	ctx, cancel := context.WithTimeout(ctx, EvaluateTimeout)
	defer cancel()
	installed := "MutatingWebhookConfiguration " + g.WebhookConfiguration
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := g.Reader.Get(ctx, types.NamespacedName{Name: g.WebhookConfiguration}, mwc); err != nil {
		if !apierrors.IsNotFound(err) {
			return Status{State: StateUnknown, Reason: fmt.Sprintf("cannot read MutatingWebhookConfiguration %s: %v", g.WebhookConfiguration, err)}
		}
		if g.ValidatingWebhookConfiguration == "" {
			return Status{State: StateAbsent, Reason: fmt.Sprintf("no MutatingWebhookConfiguration %s", g.WebhookConfiguration)}
		}
		vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := g.Reader.Get(ctx, types.NamespacedName{Name: g.ValidatingWebhookConfiguration}, vwc); err != nil {
			if apierrors.IsNotFound(err) {
				return Status{State: StateAbsent, Reason: fmt.Sprintf("no MutatingWebhookConfiguration %s nor ValidatingWebhookConfiguration %s", g.WebhookConfiguration, g.ValidatingWebhookConfiguration)}
			}
			return Status{State: StateUnknown, Reason: fmt.Sprintf("cannot read ValidatingWebhookConfiguration %s: %v", g.ValidatingWebhookConfiguration, err)}
		}
		installed = "ValidatingWebhookConfiguration " + g.ValidatingWebhookConfiguration
	}
	cm := &corev1.ConfigMap{}
	if err := g.APIReader.Get(ctx, g.ConfigMap, cm); apierrors.IsForbidden(err) {
		// A misconfiguration, not a passing failure: the manager may read only the ConfigMap
		// its RBAC names. It cannot tell whether OKG serves the types, so it stays back.
		return Status{State: StateConflict, Reason: fmt.Sprintf("kruise-game-manager is installed (%s) but its provider configuration, ConfigMap %s, may not be read (%v): --okg-config-map and the resourceNames of the manager's configmaps rule must name the same ConfigMap", installed, g.ConfigMap, err)}
	} else if err != nil {
		return Status{State: StateUnknown, Reason: fmt.Sprintf("kruise-game-manager is installed (%s) but its provider configuration, ConfigMap %s, cannot be read: %v", installed, g.ConfigMap, err)}
	}
	return decide(installed, g.ConfigMap, cm.Data[ConfigKey])
}

// decide returns the Status for OKG's provider configuration data (the TOML of the
// ConfigMap's config.toml), OKG being installed (installed names the webhook configuration
// that shows it). [kubernetes] enable = true is a conflict;
// enable = false, or no [kubernetes] table (OKG registers the provider only when it is
// enabled), is not; TOML that does not parse is unknown.
func decide(installed string, key types.NamespacedName, data string) Status {
	var cfg struct {
		Kubernetes *struct {
			Enable bool `toml:"enable"`
		} `toml:"kubernetes"`
	}
	if _, err := toml.Decode(data, &cfg); err != nil {
		return Status{State: StateUnknown, Reason: fmt.Sprintf("ConfigMap %s key %s is not TOML: %v", key, ConfigKey, strings.TrimSpace(err.Error()))}
	}
	if cfg.Kubernetes == nil || !cfg.Kubernetes.Enable {
		return Status{State: StateDisabled, Reason: fmt.Sprintf("ConfigMap %s has [kubernetes] enable = false", key)}
	}
	return Status{State: StateConflict, Reason: fmt.Sprintf("kruise-game-manager is installed (%s) and ConfigMap %s has [kubernetes] enable = true: set it to false and restart kruise-game-manager", installed, key)}
}

// firstReason is a conflict's reason without what sticky looks appended to it.
func firstReason(r string) string {
	if i := strings.Index(r, " (still stepping back:"); i >= 0 {
		return r[:i]
	}
	return r
}
