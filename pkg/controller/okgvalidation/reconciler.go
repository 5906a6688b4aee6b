package okgvalidation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/okg-extensions/network-plugin-policy/pkg/webhook/gameserverset"
)

// ControllerName is the controller's name in the manager (logger, metrics, workqueue).
const ControllerName = "okg-gameserverset-validation"

// resync is how often every replica looks again without an event.
const resync = 10 * time.Second

// Writes of OKG's configuration by one replica are rate-limited: a burst of writeBurst, then
// one every writeInterval. Replicas whose guards disagree for a while (one restarted while
// OKG's provider configuration cannot be read, say) would otherwise undo each other's writes
// as fast as the watch delivers them; an OKG restart is repaired at once, from the burst.
const (
	writeInterval = 2 * time.Second
	writeBurst    = 3
)

// replaceInterval is the least time between two replacements, by one replica, of a condition
// of this name whose expression differs from its own: during a rollout, replicas of two
// versions would otherwise rewrite each other's condition for the whole rollout.
const replaceInterval = 5 * time.Minute

// Reconciler keeps this manager's matchCondition (Condition) on OKG's GameServerSet entry
// (EntryName) of the ValidatingWebhookConfiguration Name, and nothing else of it, and the
// matchConditions of this manager's own GameServerSet entry (gameserverset.WebhookName of the
// configuration Own) in step with it. It runs on every replica, not only the leader: when OKG
// restarts and rewrites its configuration while the leader is being replaced, any replica puts
// the condition back within the watch's latency. Replicas agree because each acts only on
// what its guard has decided (Served), computes the same bytes, and writes with a JSON patch
// that tests the resourceVersion (a write that loses a race is retried and then finds nothing
// to do).
type Reconciler struct {
	// Client patches both configurations. Required.
	Client client.Client
	// Name is OKG's ValidatingWebhookConfiguration (--okg-validating-webhook-configuration).
	Name string
	// Own is this manager's ValidatingWebhookConfiguration (--validating-webhook-configuration),
	// whose gameserverset.WebhookName entry gets gameserverset.MatchConditions of the types
	// served: none (an entry that matches nothing) while the manager steps back or Manage is
	// off. Its replicas are not ready while stepping back, and a failurePolicy Fail entry that
	// matched would refuse every GameServerSet of those types. Empty leaves it alone.
	Own string
	// Manage is --manage-okg-gameserverset-validation. Off, the condition is removed (one an
	// earlier run left) and the own entry matches nothing.
	Manage bool
	// Served returns the network types this manager serves now and whether its guard has
	// decided: the registered plugins' names while OKG is absent or its provider off; none
	// while it steps back (okgguard.Guard), which removes the condition so that OKG validates
	// every GameServerSet again; undecided (before the guard's first look, or while it cannot
	// read OKG's configuration) leaves both configurations as they are. Required.
	Served func() (types []string, decided bool)
	// Changed, when set, returns a channel closed at the guard's next change of state, to
	// reconcile at once rather than at the next resync.
	Changed func() <-chan struct{}
	// Recorder records a Warning Event on OKG's configuration each time the condition is
	// found missing and put back; nil records none.
	Recorder events.EventRecorder
	// Metrics are the gauge and counter of NewMetrics; nil keeps none.
	Metrics *Metrics

	// reader reads OKG's configuration from the dedicated cache of SetupWithManager; ownReader
	// reads Own from the manager's cache.
	reader, ownReader client.Reader
	// writes limits this replica's writes of OKG's configuration (created on first use);
	// lastReplace is its last replacement of a differing condition; now is the clock
	// (time.Now when nil).
	writes      *rate.Limiter
	lastReplace time.Time
	now         func() time.Time
	// conflicts counts the writes lost to another writer in a row (lostRace).
	conflicts int
}

// Metrics are the Reconciler's metrics.
type Metrics struct {
	// Missing is npp_okg_gameserverset_condition_missing: 1 while OKG's entry exists without
	// the condition this manager wants on it, 0 otherwise.
	Missing prometheus.Gauge
	// Repairs is npp_okg_gameserverset_condition_writes_total: writes of the condition, by
	// result: written; conflict (the configuration changed since it was read, another
	// replica wrote first: read again, not an error); error.
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
			Help: "Writes of this manager's matchCondition on OpenKruise Game's GameServerSet validating entry, by result (written; conflict: the configuration changed since it was read, read again; error).",
		}, []string{"result"}),
	}
	for _, c := range []prometheus.Collector{m.Missing, m.Repairs} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register the okg-gameserverset-validation metrics: %w", err)
		}
	}
	m.Repairs.WithLabelValues("written")
	m.Repairs.WithLabelValues("conflict")
	m.Repairs.WithLabelValues("error")
	return m, nil
}

// NewCache returns a cache that watches only the ValidatingWebhookConfiguration name (a field
// selector on metadata.name, a watch that RBAC limited by resourceNames would allow; the
// manager's main cache lists webhook configurations anyway, for the guard and the caBundle
// injector), for SetupWithManager. Add it
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

// SetupWithManager registers the controller with mgr, on every replica, reading OKG's
// configuration from c (NewCache) and Own from the manager's cache; it reconciles at start,
// at every change of either configuration, at every change of the guard (Changed) and every
// 10 s. Errors come from the controller builder.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, c cache.Cache) error {
	r.reader, r.ownReader = c, mgr.GetClient()
	key := reconcile.Request{NamespacedName: types.NamespacedName{Name: r.Name}}
	toKey := func(context.Context, *admissionregistrationv1.ValidatingWebhookConfiguration) []reconcile.Request {
		return []reconcile.Request{key}
	}
	err := ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false)}).
		WatchesRawSource(source.Kind(c, &admissionregistrationv1.ValidatingWebhookConfiguration{}, handler.TypedEnqueueRequestsFromMapFunc(toKey))).
		WatchesRawSource(source.Kind(mgr.GetCache(), &admissionregistrationv1.ValidatingWebhookConfiguration{}, handler.TypedEnqueueRequestsFromMapFunc(toKey),
			predicate.NewTypedPredicateFuncs(func(o *admissionregistrationv1.ValidatingWebhookConfiguration) bool { return o.Name == r.Own }))).
		WatchesRawSource(source.Func(func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
			q.Add(key)
			if r.Changed == nil {
				return nil
			}
			go func() {
				for {
					select {
					case <-r.Changed():
						q.Add(key)
					case <-ctx.Done():
						return
					}
				}
			}()
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

// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,resourceNames=validating-webhook-configuration,verbs=patch

// Reconcile brings both configurations to what Served decides (nothing while it is
// undecided): Own's GameServerSet entry first (reconcileOwn), then OKG's (reconcileOKG). It
// looks again every 10 s. Errors are API errors, wrapped.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	served, decided := r.Served()
	if !decided {
		return ctrl.Result{RequeueAfter: resync}, nil
	}
	if !r.Manage {
		served = nil
	}
	if lost, err := r.reconcileOwn(ctx, served); err != nil {
		return ctrl.Result{}, err
	} else if lost {
		return ctrl.Result{RequeueAfter: conflictRequeue}, nil
	}
	return r.reconcileOKG(ctx, req.Name, served)
}

// reconcileOwn patches the matchConditions of Own's gameserverset.WebhookName entry to
// gameserverset.MatchConditions(served) when they differ. A configuration or entry that does
// not exist is left alone (a GitOps tool may not have applied it yet).
// It reports lost when the patch lost to another writer (another replica wrote first: see
// lostRace), to be read again soon.
func (r *Reconciler) reconcileOwn(ctx context.Context, served []string) (lost bool, err error) {
	if r.Own == "" {
		return false, nil
	}
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := r.ownReader.Get(ctx, types.NamespacedName{Name: r.Own}, cfg); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	i := slices.IndexFunc(cfg.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool { return w.Name == gameserverset.WebhookName })
	want := gameserverset.MatchConditions(served)
	if i < 0 || slices.Equal(cfg.Webhooks[i].MatchConditions, want) {
		return false, nil
	}
	if err := patchConditions(ctx, r.Client, cfg, i, want); err != nil {
		if r.lostRace(err) {
			ctrl.LoggerFrom(ctx).V(1).Info("This manager's validating configuration changed since it was read; reading it again", "error", err.Error())
			return true, nil
		}
		return false, err
	}
	r.conflicts = 0
	ctrl.LoggerFrom(ctx).Info("This manager's GameServerSet webhook entry follows the types it serves", "configuration", r.Own, "networkTypes", served)
	return false, nil
}

// reconcileOKG patches the matchConditions of OKG's GameServerSet entry of name to
// WithCondition's when they differ (rate-limited: writeBurst, then one every writeInterval),
// and a condition of
// this name with another expression (another version's) at most once every replaceInterval.
// A configuration or entry that does not exist is left alone: OKG is not installed, or its
// GameServerSet webhook is off.
func (r *Reconciler) reconcileOKG(ctx context.Context, name string, served []string) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := r.reader.Get(ctx, types.NamespacedName{Name: name}, cfg); err != nil {
		if client.IgnoreNotFound(err) == nil {
			r.setMissing(false)
			return ctrl.Result{RequeueAfter: resync}, nil
		}
		return ctrl.Result{}, fmt.Errorf("get validating webhook configuration %q: %w", name, err)
	}
	i := slices.IndexFunc(cfg.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool { return w.Name == EntryName })
	if i < 0 {
		r.setMissing(false)
		return ctrl.Result{RequeueAfter: resync}, nil
	}
	conds := cfg.Webhooks[i].MatchConditions
	want, changed := WithCondition(conds, served)
	if !changed {
		r.setMissing(false)
		return ctrl.Result{RequeueAfter: resync}, nil
	}
	now := time.Now
	if r.now != nil {
		now = r.now
	}
	replacing := len(served) > 0 && slices.ContainsFunc(conds, func(c admissionregistrationv1.MatchCondition) bool { return c.Name == ConditionName })
	if replacing {
		if wait := replaceInterval - now().Sub(r.lastReplace); wait > 0 {
			log.V(1).Info("OKG's GameServerSet entry has this manager's condition with another expression (another version's); replacing it later", "after", wait)
			return ctrl.Result{RequeueAfter: min(wait, resync)}, nil
		}
	}
	if r.writes == nil {
		r.writes = rate.NewLimiter(rate.Every(writeInterval), writeBurst)
	}
	if tokens := r.writes.TokensAt(now()); tokens < 1 {
		wait := time.Duration((1 - tokens) * float64(writeInterval))
		log.V(1).Info("Writes of OKG's configuration are rate-limited; writing later", "after", wait)
		return ctrl.Result{RequeueAfter: max(wait, time.Millisecond)}, nil
	}
	missing := len(served) > 0 && !replacing
	r.setMissing(missing)
	if err := patchConditions(ctx, r.Client, cfg, i, want); err != nil {
		if r.lostRace(err) {
			// Another replica (or OKG) wrote the configuration since it was read: at every
			// OKG start both replicas put the condition back, and one of them is second.
			// Read it again; nothing failed.
			r.count("conflict")
			log.V(1).Info("OKG's GameServerSet configuration changed since it was read; reading it again", "error", err.Error())
			return ctrl.Result{RequeueAfter: conflictRequeue}, nil
		}
		r.count("error")
		return ctrl.Result{}, err
	}
	r.conflicts = 0
	r.writes.AllowN(now(), 1)
	if replacing {
		r.lastReplace = now()
	}
	r.count("written")
	r.setMissing(false)
	switch {
	case len(served) == 0:
		log.Info("Removed this manager's condition from OKG's GameServerSet webhook: OKG validates every GameServerSet again", "configuration", name)
	case replacing:
		log.Info("Replaced this manager's condition on OKG's GameServerSet webhook (another version's expression)", "configuration", name)
	default:
		log.Info("Put this manager's condition on OKG's GameServerSet webhook", "configuration", name, "condition", ConditionName, "networkTypes", served)
		if r.Recorder != nil {
			r.Recorder.Eventf(cfg, nil, corev1.EventTypeWarning, "GameServerSetConditionRestored", "Patch",
				"%s had no matchCondition %s (OKG rewrites its configuration at every start): new GameServerSets of %v were refused by OKG until it was put back",
				EntryName, ConditionName, served)
		}
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

// conflictRequeue is how soon a write that lost to another writer reads the configuration
// again: long enough for the dedicated cache to show the other write.
const conflictRequeue = 200 * time.Millisecond

// lostRace reports whether err is patchConditions' write refused because the configuration
// changed since it was read: a conflict, or the 422 that k8s.io/apiserver's patch handler
// answers when a JSON patch does not apply (its resourceVersion or entry-name test failed):
// NewGenericServerResponse(422, ...), reason Invalid with no causes and no kind, where a
// validation failure of the patched object names its kind and its fields. Such a loss is
// read again; after maxConflicts of them in a row (a 422 of that shape that is no race,
// another admission webhook's, say), it is an error, retried with the workqueue's backoff.
func (r *Reconciler) lostRace(err error) bool {
	race := apierrors.IsConflict(err)
	var status apierrors.APIStatus
	if !race && apierrors.IsInvalid(err) && errors.As(err, &status) {
		d := status.Status().Details
		race = d == nil || (d.Kind == "" && len(d.Causes) == 0)
	}
	if !race {
		return false
	}
	r.conflicts++
	if r.conflicts > maxConflicts {
		r.conflicts = 0
		return false
	}
	return true
}

// maxConflicts is how many lost races in a row lostRace takes as races: every replica writes
// once after a change, so a real race is lost once or twice.
const maxConflicts = 3

// patchConditions sets the matchConditions of entry i of cfg to want, with a JSON patch that
// tests cfg's resourceVersion and the entry's name (a configuration rewritten since cfg was
// read fails the test). Errors are API errors, wrapped.
func patchConditions(ctx context.Context, c client.Client, cfg *admissionregistrationv1.ValidatingWebhookConfiguration, i int, want []admissionregistrationv1.MatchCondition) error {
	ops := []patchOp{
		{Op: "test", Path: "/metadata/resourceVersion", Value: cfg.ResourceVersion},
		{Op: "test", Path: fmt.Sprintf("/webhooks/%d/name", i), Value: cfg.Webhooks[i].Name},
		{Op: "add", Path: fmt.Sprintf("/webhooks/%d/matchConditions", i), Value: want},
	}
	data, err := json.Marshal(ops)
	if err != nil {
		return fmt.Errorf("encode the matchConditions patch: %w", err)
	}
	if err := c.Patch(ctx, cfg, client.RawPatch(types.JSONPatchType, data)); err != nil {
		return fmt.Errorf("patch the matchConditions of %s in validating webhook configuration %q: %w", cfg.Webhooks[i].Name, cfg.Name, err)
	}
	return nil
}

// RemoveCondition removes this manager's condition from OKG's GameServerSet entry of the
// ValidatingWebhookConfiguration name, reading it from c (the API server, not a cache), and
// reports whether it was there. A configuration or entry that does not exist has nothing to
// remove. A configuration rewritten between the read and the patch is read again, up to five
// times. It is what the chart's post-delete hook runs (`manager
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
