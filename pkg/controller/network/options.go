package network

import (
	"context"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/okg-extensions/network-plugin-policy/pkg/networkretry"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// DefaultControllerName is the controller's name in the manager (its logger, its metrics
// labels and its workqueue) when Options.ControllerName is empty. Controller names must be
// unique within one manager.
const DefaultControllerName = "network-retry"

// EventReporter is the reportingController of the events.k8s.io/v1 Events the controller
// records; pass it to manager.GetEventRecorder. client-go derives the reportingInstance as
// EventReporter + "-" + hostname, which must stay within 128 characters.
const EventReporter = "policy.game.kruise.io/network-controller"

// DefaultMaxConcurrentReconciles is Options.MaxConcurrentReconciles when zero: the manager's
// --max-concurrent-reconciles default. Each worker spends most of a stamp waiting for the pod
// UPDATE, which the mutating webhook answers only after the plugin ran (docs/admission.md,
// "Throughput and fairness").
const DefaultMaxConcurrentReconciles = 10

// DefaultMinRetryInterval is Options.MinRetryInterval when zero: the manager's
// --min-retry-interval default, and the precision of game.kruise.io/network-trigger-time.
const DefaultMinRetryInterval = time.Second

// Options configure a Reconciler. The zero value is usable.
type Options struct {
	// ControllerName names the controller in the manager; DefaultControllerName when empty.
	ControllerName string
	// MaxConcurrentReconciles is how many pods are reconciled in parallel;
	// DefaultMaxConcurrentReconciles when zero or less.
	MaxConcurrentReconciles int
	// MinRetryInterval is the platform's floor on the retry schedule: every retry state's
	// interval (and maxInterval) counts as at least this long, whatever the policy said
	// (networkretry.State.WithMinInterval); DefaultMinRetryInterval when zero or less.
	MinRetryInterval time.Duration
	// MaxRecreatesPerNamespacePerMinute bounds the Recreate exhausted action: at most this
	// many evictions a minute in one namespace (a token bucket of that rate and burst), the
	// rest wait their turn; DefaultMaxRecreatesPerNamespacePerMinute when zero or less.
	MaxRecreatesPerNamespacePerMinute int
	// Clock gives the current time for retry schedules, condition transition times and
	// durations; the real clock when nil. Tests inject k8s.io/utils/clock/testing.FakeClock.
	Clock clock.PassiveClock
	// Metrics are the Prometheus metrics the controller updates; DefaultMetrics() (registered
	// in controller-runtime's metrics.Registry) when nil.
	Metrics *Metrics
	// NetworkTypes are the registered plugins' names. The controller acts only on pods whose
	// game.kruise.io/network-type is one of them: a pod of any other type (OKG's cloud
	// types, a near-miss the webhook admitted NotReady) is never retried, marked exhausted or
	// recreated, whatever its annotations say. The metrics' plugin label is the retry
	// state's plugin when it is one of them, "unknown" otherwise, so that pod authors cannot
	// add time series. Empty means every type counts as registered and is labelled by name
	// (unit tests only; the manager always sets it).
	NetworkTypes []string
	// Finalizers are the registered plugins that add a finalizer of their own, by network
	// type: for a terminating pod that carries one (finalizerOf), the controller calls the
	// plugin's Finalize when the pod is of the plugin's type, and removes the finalizer when
	// it returns nil, or at once, with nothing deleted, when the pod's type is no longer the
	// plugin's (finalize.go). Their names carry OKG's prefix game.kruise.io/, which the
	// manager's pod cache keeps (kubernetes.CachesPod; TestPluginFinalizersAreCached).
	Finalizers map[string]plugin.PodFinalizer
	// StepBack, when set and true for a pod's network type, makes the controller leave the
	// pod alone, as if its type were not registered: kruise-game-manager still runs the
	// plugins of the type's provider (okgguard.Guard.StepBack). Nil never steps back.
	StepBack func(networkType string) (bool, string)
	// Looked, when set and false, makes the controller act on no pod of a registered type
	// and write nothing: the OKG guard has not looked at kruise-game-manager yet, so StepBack's
	// false does not mean that OKG is absent. Such a pod is looked at again after
	// lookRequeue (okgguard.Guard.Looked). Nil counts as looked.
	Looked func() bool
	// WatchLoadBalancers makes the controller watch Services too: a Service of type
	// LoadBalancer that a cloud controller gives an address (status.loadBalancer.ingress) has
	// the pod of its name retried at once (loadBalancerEvents), so that a load-balancer
	// network is Ready within a second of its address, not at the next backoff step. Set it
	// when a load-balancer plugin is registered.
	WatchLoadBalancers bool
	// SharedServiceLabel, with WatchLoadBalancers, is the pod label by which a shared-port
	// plugin's Service selects its game servers (one Service per load balancer, named after
	// it; Alibaba's service.k8s.alibaba/loadbalancer-id): a Service whose selector is that
	// label alone, valued with the Service's name, has every game server it selects run at
	// once when it gets its address. Empty: no Service is taken as shared.
	SharedServiceLabel string
	// WatchResults are kinds in which another controller answers for a pod, one object per
	// pod, of the pod's name in its namespace (plugin.ResultObjectsReader: Alibaba's PodEIP
	// and PodDNAT, unstructured): an object created with an answer, or whose answer fields
	// change, has the pod of its name run at once (resultEvents), so that the network is
	// Ready at the answer, not at the next retry. A kind the API server does not serve when
	// the controller starts (its CRD not installed) is not watched, with a log line: its
	// pods are Ready at their retries until the manager restarts.
	WatchResults []plugin.ResultKind
	// ResultAnnotations are, by network type, the pod annotations in which another
	// controller answers for the pod itself (plugin.ResultReader: the EIP plugins' allocated
	// address): a pod update that gives one of them a new, non-empty value has the pod run
	// at once in the ready queue's urgent lane (podEvents), as an address does. While a
	// replica answers, only a trusted writer's change reaches the stored pod (the webhook
	// puts back anyone else's); a type the manager steps back from is never marked.
	ResultAnnotations map[string][]string
	// Precheck, when set, tells from the manager's caches alone how the next plugin run of
	// a pod would fail (the webhook package's pod.Precheck): the failure as the retry
	// state records it and true, or false when the caches cannot tell. When a retry is due
	// and Precheck says it would fail exactly as the last one (same type and message), the
	// controller counts the attempt in memory and writes nothing (see quiet.go). Nil: every
	// retry is a trigger stamp, a pod UPDATE.
	Precheck func(ctx context.Context, pod *corev1.Pod) (*networkretry.Error, bool)
	// StateRefresh is how long a pod's retry state may go unwritten while its retries are
	// counted in memory: after that the next retry is a real plugin run that writes the
	// state, so `kubectl` shows the attempts; DefaultStateRefresh when zero or less.
	StateRefresh time.Duration
	// LateRunsPerSecond bounds the rate of the real runs of retries that come more than
	// networkretry.PauseSlack late while the caches show that they would fail as the last
	// run did (a new leader's first pass, a leader that was away or busy; see late.go), with a
	// burst of lateRunsBurst; DefaultLateRunsPerSecond when zero or less.
	LateRunsPerSecond float64
}

// DefaultLateRunsPerSecond is the default Options.LateRunsPerSecond: 4. Each late run is a
// pod write (the stamp, which the webhook's retry state rides on) and, as the recorded pause
// moves the deadline the network-ready condition names, a status write: 8 writes a second,
// under the 10 a second the manager may cost the API server during a mass failure
// (DefaultStateRefresh). A new leader's first pass over 500 identically stuck pods takes about
// two minutes at this rate.
const DefaultLateRunsPerSecond = 4

// DefaultStateRefresh is the default Options.StateRefresh: 15 minutes. Each refresh of 5,000
// identically stuck pods is a pod write (5,000 / 900 s = 5.6 a second, spread evenly by
// refreshDue), and its failure an occurrence of the pod's Event, whose series is written at
// most every eventrecorder.SeriesObserveInterval (30 minutes: every second refresh, 2.8 a
// second); 8.3 writes a second in all, under the 10 a second the manager may cost the API
// server during a mass failure. At 10 minutes it would be 8.3 + 2.1 to 2.8.
const DefaultStateRefresh = 15 * time.Minute

// pluginLabel is the metrics' plugin label for the retry state's plugin (see NetworkTypes).
func (o Options) pluginLabel(networkType string) string {
	if len(o.NetworkTypes) == 0 || slices.Contains(o.NetworkTypes, networkType) {
		return networkType
	}
	return plugin.UnknownMetricLabel
}

// finalizerOf returns the finalizer of Finalizers that pod carries, with its plugin's network
// type: its own type's plugin's first (two plugins may share a finalizer name), else the
// first by type name; "" and nil when it carries none.
func (o Options) finalizerOf(pod *corev1.Pod) (string, plugin.PodFinalizer) {
	if f := o.Finalizers[pod.Annotations[networkstatus.AnnotationNetworkType]]; f != nil && slices.Contains(pod.Finalizers, f.Finalizer()) {
		return pod.Annotations[networkstatus.AnnotationNetworkType], f // the pod's own type first
	}
	for _, networkType := range slices.Sorted(maps.Keys(o.Finalizers)) {
		if f := o.Finalizers[networkType]; slices.Contains(pod.Finalizers, f.Finalizer()) {
			return networkType, f
		}
	}
	return "", nil
}

// hasFinalizer reports whether obj carries a finalizer of Finalizers.
func (o Options) hasFinalizer(obj client.Object) bool {
	for _, f := range o.Finalizers {
		if slices.Contains(obj.GetFinalizers(), f.Finalizer()) {
			return true
		}
	}
	return false
}

// registered reports whether networkType is one of NetworkTypes (every type when it is
// empty).
func (o Options) registered(networkType string) bool {
	return len(o.NetworkTypes) == 0 || slices.Contains(o.NetworkTypes, networkType)
}

// stepBackRequeue is how soon a pod left alone while the manager steps back is looked at
// again.
const stepBackRequeue = 30 * time.Second

// lookRequeue is how soon a pod left alone before the OKG guard's first look is looked at
// again: the guard looks at start and then every 10 s (okgguard.DefaultInterval).
const lookRequeue = 2 * time.Second

// notLookedYet reports whether the OKG guard has not looked at kruise-game-manager yet
// (Looked), so that no pod of a registered type may be acted on.
func (o Options) notLookedYet() bool {
	return o.Looked != nil && !o.Looked()
}

// steppingBack reports whether the manager leaves pods of networkType to
// kruise-game-manager (StepBack).
func (o Options) steppingBack(networkType string) bool {
	if o.StepBack == nil {
		return false
	}
	back, _ := o.StepBack(networkType)
	return back
}

// withDefaults returns o with its empty fields set to their defaults.
func (o Options) withDefaults() Options {
	if o.ControllerName == "" {
		o.ControllerName = DefaultControllerName
	}
	if o.MaxConcurrentReconciles < 1 {
		o.MaxConcurrentReconciles = DefaultMaxConcurrentReconciles
	}
	if o.MaxRecreatesPerNamespacePerMinute <= 0 {
		o.MaxRecreatesPerNamespacePerMinute = DefaultMaxRecreatesPerNamespacePerMinute
	}
	if o.MinRetryInterval <= 0 {
		o.MinRetryInterval = DefaultMinRetryInterval
	}
	if o.StateRefresh <= 0 {
		o.StateRefresh = DefaultStateRefresh
	}
	if o.LateRunsPerSecond <= 0 {
		o.LateRunsPerSecond = DefaultLateRunsPerSecond
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Metrics == nil {
		o.Metrics = DefaultMetrics()
	}
	return o
}
