package okgvalidation

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// ControllerName is the controller's name in the manager (logger, metrics, workqueue).
const ControllerName = "okg-gameserverset-validation"

// resync is how often every replica looks again without an event: a guard that changes its
// mind (OKG's provider switched on) is seen within it even if no watch event arrives.
const resync = 10 * time.Second

// Reconciler keeps this manager's matchCondition (Condition) on OKG's GameServerSet entry
// (EntryName) of the ValidatingWebhookConfiguration Name, and nothing else of it. It runs on
// every replica, not only the leader: when OKG restarts and rewrites its configuration while
// the leader is being replaced, any replica puts the condition back within the watch's
// latency. Every replica computes the same condition, so they write the same bytes; a write
// that loses a race is retried by the workqueue and then finds nothing to do.
type Reconciler struct {
	// Client patches the configuration. Required.
	Client client.Client
	// Name is OKG's ValidatingWebhookConfiguration (--okg-validating-webhook-configuration).
	Name string
	// Served returns the network types this manager serves now: the registered plugins'
	// names, or none while it steps back from them (okgguard.Guard). None removes the
	// condition, so that OKG validates every GameServerSet again. Required.
	Served func() []string
	// Recorder records a Warning Event on the configuration each time the condition is found
	// missing and put back; nil records none.
	Recorder events.EventRecorder
	// Metrics are the gauge and counter of NewMetrics; nil keeps none.
	Metrics *Metrics

	// reader reads the one configuration from the dedicated cache of SetupWithManager.
	reader client.Reader
}

// Metrics are the Reconciler's metrics.
type Metrics struct {
	// Missing is npp_okg_gameserverset_condition_missing: 1 while OKG's entry exists without
	// the condition this manager wants on it, 0 otherwise.
	Missing prometheus.Gauge
	// Repairs is npp_okg_gameserverset_condition_writes_total: writes of the condition, by
	// result (written, error).
	Repairs *prometheus.CounterVec
}

// NewMetrics registers the Reconciler's metrics with reg. Errors come from reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		Missing: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "npp_okg_gameserverset_condition_missing",
			Help: "1 while OpenKruise Game's GameServerSet validating entry exists without this manager's matchCondition (new GameServerSets of the types this manager serves are refused by OKG meanwhile), 0 otherwise.",
		}),
		Repairs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "npp_okg_gameserverset_condition_writes_total",
			Help: "Writes of this manager's matchCondition on OpenKruise Game's GameServerSet validating entry, by result (written, error).",
		}, []string{"result"}),
	}
	for _, c := range []prometheus.Collector{m.Missing, m.Repairs} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register the okg-gameserverset-validation metrics: %w", err)
		}
	}
	m.Repairs.WithLabelValues("written")
	m.Repairs.WithLabelValues("error")
	return m, nil
}

// NewCache returns a cache that watches only the ValidatingWebhookConfiguration name (a field
// selector on metadata.name, as RBAC by resourceNames allows), for SetupWithManager. Add it
// to the manager as a runnable of every replica (webhookcert.EveryReplica). Errors come from
// cache.New.
func NewCache(cfg *rest.Config, opts cache.Options, name string) (cache.Cache, error) {
	opts.ByObject = map[client.Object]cache.ByObject{
		&admissionregistrationv1.ValidatingWebhookConfiguration{}: {Field: fields.OneTermEqualSelector("metadata.name", name)},
	}
	c, err := cache.New(cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("cache of ValidatingWebhookConfiguration %s: %w", name, err)
	}
	return c, nil
}

// SetupWithManager registers the controller with mgr, on every replica, reading the
// configuration from c (NewCache). Errors come from the controller builder.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, c cache.Cache) error {
	r.reader = c
	key := reconcile.Request{NamespacedName: types.NamespacedName{Name: r.Name}}
	err := ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false)}).
		WatchesRawSource(source.Kind(c, &admissionregistrationv1.ValidatingWebhookConfiguration{}, handler.TypedEnqueueRequestsFromMapFunc(
			func(context.Context, *admissionregistrationv1.ValidatingWebhookConfiguration) []reconcile.Request {
				return []reconcile.Request{key}
			}))).
		WatchesRawSource(source.Func(func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
			q.Add(key)
			return nil
		})).
		Complete(r)
	if err != nil {
		return fmt.Errorf("set up controller %s: %w", ControllerName, err)
	}
	return nil
}

// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,verbs=get;list;watch
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,resourceNames=kruise-game-validating-webhook,verbs=patch

// Reconcile reads OKG's configuration and, when its GameServerSet entry's matchConditions
// differ from WithCondition's, patches that entry's matchConditions alone, with a JSON patch
// that tests the object's resourceVersion and the entry's name at its index (a configuration
// rewritten meanwhile fails the test and is read again). A configuration or entry that does
// not exist is left alone: OKG is not installed, or its GameServerSet webhook is off. It looks
// again every 10 s. Errors are API errors, wrapped.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := r.reader.Get(ctx, req.NamespacedName, cfg); err != nil {
		if client.IgnoreNotFound(err) == nil {
			r.setMissing(false)
			return ctrl.Result{RequeueAfter: resync}, nil
		}
		return ctrl.Result{}, fmt.Errorf("get validating webhook configuration %q: %w", req.Name, err)
	}
	i := slices.IndexFunc(cfg.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool { return w.Name == EntryName })
	if i < 0 {
		r.setMissing(false)
		return ctrl.Result{RequeueAfter: resync}, nil
	}
	served := r.Served()
	want, changed := WithCondition(cfg.Webhooks[i].MatchConditions, served)
	if !changed {
		r.setMissing(false)
		return ctrl.Result{RequeueAfter: resync}, nil
	}
	missing := len(served) > 0
	r.setMissing(missing)
	if err := patchConditions(ctx, r.Client, cfg, i, want); err != nil {
		r.count("error")
		return ctrl.Result{}, err
	}
	r.count("written")
	if !missing {
		log.Info("Removed this manager's condition from OKG's GameServerSet webhook: OKG validates every GameServerSet again", "configuration", req.Name)
		return ctrl.Result{RequeueAfter: resync}, nil
	}
	log.Info("Put this manager's condition on OKG's GameServerSet webhook", "configuration", req.Name, "condition", ConditionName, "networkTypes", served)
	if r.Recorder != nil {
		r.Recorder.Eventf(cfg, nil, corev1.EventTypeWarning, "GameServerSetConditionRestored", "Patch",
			"%s had no matchCondition %s (OKG rewrites its configuration at every start): new GameServerSets of %v were refused by OKG until it was put back",
			EntryName, ConditionName, served)
	}
	return ctrl.Result{RequeueAfter: resync}, nil
}

func (r *Reconciler) setMissing(missing bool) {
	if r.Metrics == nil {
		return
	}
	v := 0.0
	if missing {
		v = 1
	}
	r.Metrics.Missing.Set(v)
}

func (r *Reconciler) count(result string) {
	if r.Metrics != nil {
		r.Metrics.Repairs.WithLabelValues(result).Inc()
	}
}

// patchConditions sets the matchConditions of entry i of cfg to want, with a JSON patch that
// tests cfg's resourceVersion and the entry's name (a configuration rewritten since cfg was
// read fails the test). Errors are API errors, wrapped.
func patchConditions(ctx context.Context, c client.Client, cfg *admissionregistrationv1.ValidatingWebhookConfiguration, i int, want []admissionregistrationv1.MatchCondition) error {
	ops := []patchOp{
		{Op: "test", Path: "/metadata/resourceVersion", Value: cfg.ResourceVersion},
		{Op: "test", Path: fmt.Sprintf("/webhooks/%d/name", i), Value: EntryName},
		{Op: "add", Path: fmt.Sprintf("/webhooks/%d/matchConditions", i), Value: want},
	}
	data, err := json.Marshal(ops)
	if err != nil {
		return fmt.Errorf("encode the matchConditions patch: %w", err)
	}
	if err := c.Patch(ctx, cfg, client.RawPatch(types.JSONPatchType, data)); err != nil {
		return fmt.Errorf("patch the matchConditions of %s in validating webhook configuration %q: %w", EntryName, cfg.Name, err)
	}
	return nil
}

// RemoveCondition removes this manager's condition from OKG's GameServerSet entry of the
// ValidatingWebhookConfiguration name, reading it from c (the API server, not a cache), and
// reports whether it was there. A configuration or entry that does not exist has nothing to
// remove. A configuration rewritten between the read and the patch is read again, up to five
// times. It is what the chart's pre-delete hook runs (`manager
// --remove-okg-gameserverset-condition`), since an uninstalled manager can no longer keep
// the condition. Errors are API errors, wrapped.
func RemoveCondition(ctx context.Context, c client.Client, name string) (bool, error) {
	var err error
	for range 5 {
		cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err = c.Get(ctx, types.NamespacedName{Name: name}, cfg); err != nil {
			if client.IgnoreNotFound(err) == nil {
				return false, nil
			}
			return false, fmt.Errorf("get validating webhook configuration %q: %w", name, err)
		}
		i := slices.IndexFunc(cfg.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool { return w.Name == EntryName })
		if i < 0 {
			return false, nil
		}
		want, changed := WithCondition(cfg.Webhooks[i].MatchConditions, nil)
		if !changed {
			return false, nil
		}
		if err = patchConditions(ctx, c, cfg, i, want); err == nil {
			return true, nil
		}
	}
	return false, err
}

// patchOp is one RFC 6902 JSON patch operation. "add" on an existing member replaces it.
type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}
