package network

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	policyv1alpha1 "github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
	"github.com/okg-extensions/network-plugin-policy/pkg/networkretry"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
	podwebhook "github.com/okg-extensions/network-plugin-policy/pkg/webhook/pod"
)

// Reconciler is the network retry and readiness controller for pods that carry
// game.kruise.io/network-type. Everything it needs is on the pod (the retry state, the trigger
// time, the readiness-gate condition, the scheduling time), so any replica that wins the
// leader election resumes where the previous one stopped; its only state of its own is a
// hint that makes retries come sooner (placed).
type Reconciler struct {
	client   client.Client
	recorder events.EventRecorder
	opts     Options
	// placed maps the key (types.NamespacedName) of each pod that a watched update gave a
	// node or an IP (GotNodeOrIP), or whose load-balancer Service got an address
	// (loadBalancerEvents), since its last retry stamp to a placedMark (the pod's UID, empty
	// for any pod of the name, and that update's resourceVersion): such a pod is retried at
	// once. Entries go at the
	// stamp, or when the pod is Ready, exhausted, gone or has no retry state. It is a hint
	// that a restart may lose; the time the pod was scheduled, which is on the pod, covers
	// the node after a restart (placedSinceLastRun).
	placed sync.Map
	// quiet maps the key of each pod whose retries are counted in memory (Options.Precheck)
	// to its quietRecord; see quiet.go.
	quiet sync.Map
	// held maps the key of each pod whose late run waits for its token to a heldRun; lateRuns
	// is the token bucket (Options.LateRunsPerSecond, burst lateRunsBurst). See late.go.
	held     sync.Map
	lateRuns *rate.Limiter
	// cleared maps the key of each pod whose retry state the webhook removed with its Ready
	// run (an update seen by podEvents) to a clearedState, until the pod's Ready reconcile
	// reports it (reconcileReady); see ready.go.
	cleared sync.Map
	// recreates limits the Recreate evictions per namespace
	// (Options.MaxRecreatesPerNamespacePerMinute). A restart refills the buckets.
	recreates *recreateLimiter
}

// NewReconciler returns a Reconciler that reads and writes pods through c and records
// events.k8s.io/v1 Events with recorder (in a manager: mgr.GetEventRecorder(EventReporter)).
// Empty fields of opts take their defaults (see Options).
func NewReconciler(c client.Client, recorder events.EventRecorder, opts Options) *Reconciler {
	opts = opts.withDefaults()
	opts.Metrics.Initialize(opts.NetworkTypes)
	return &Reconciler{client: c, recorder: recorder, opts: opts, recreates: newRecreateLimiter(opts.MaxRecreatesPerNamespacePerMinute),
		lateRuns: rate.NewLimiter(rate.Limit(opts.LateRunsPerSecond), lateRunsBurst)}
}

// SetupWithManager registers the controller with mgr: it watches pods, admits only those
// with the game.kruise.io/network-type annotation (HasNetworkType) or a finalizer of
// Options.Finalizers, marks those an update gave
// a node or an IP (GotNodeOrIP) for an immediate retry, with Options.WatchLoadBalancers
// watches Services too (loadBalancerEvents), with Options.WatchResults the controllers'
// answers (resultEvents), and runs only on the elected leader
// (the controller-runtime default) with Options.MaxConcurrentReconciles workers over a
// namespace-fair workqueue (namespaceFairQueue) whose urgent lane takes the pods with an
// address mark (urgent), its waits observed in npp_network_queue_wait_seconds. Errors come from the controller builder, for
// example a controller name already taken in mgr.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr).
		Named(r.opts.ControllerName).
		Watches(&corev1.Pod{}, r.podEvents(), builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			// A pod that lost its type annotation still carries a plugin's finalizer.
			return hasNetworkType(o) || r.opts.hasFinalizer(o)
		})))
	if r.opts.WatchLoadBalancers {
		b = b.Watches(&corev1.Service{}, r.loadBalancerEvents())
	}
	for _, kind := range r.opts.WatchResults {
		gvk := kind.Object.GetObjectKind().GroupVersionKind()
		if _, err := mgr.GetRESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version); meta.IsNoMatchError(err) {
			mgr.GetLogger().Info("A kind of the network plugins' answers is not served by the API server: not watched until the manager restarts; its pods are Ready at their retries",
				"kind", gvk.String(), "error", err.Error())
			continue
		} else if err != nil {
			return fmt.Errorf("set up controller %s: look up %s: %w", r.opts.ControllerName, gvk, err)
		}
		b = b.Watches(kind.Object, r.resultEvents(kind))
	}
	err := b.WithOptions(controller.Options{
		MaxConcurrentReconciles: r.opts.MaxConcurrentReconciles,
		RateLimiter:             errorRateLimiter(),
		NewQueue: func(name string, rl workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
			return newFairWorkqueue(name, rl, r.urgent, r.opts.Metrics.observeWait)
		},
	}).
		Complete(r)
	if err != nil {
		return fmt.Errorf("set up controller %s: %w", r.opts.ControllerName, err)
	}
	return nil
}

// urgent reports whether req's pod holds an address mark (loadBalancerEvents,
// resultEvents): the run it is queued for can turn its network Ready, and goes in the
// ready queue's urgent lane (namespaceFairQueue).
func (r *Reconciler) urgent(req reconcile.Request) bool {
	m, ok := r.placed.Load(req.NamespacedName)
	return ok && m.(placedMark).address
}

// podEvents enqueues the pod of every event; an update that removed the retry state with
// the manager's Ready status is noted for its NetworkReady Event (noteCleared), one that
// gave the pod a new answer in one of its plugin's result annotations
// (Options.ResultAnnotations) marks it in r.placed for an immediate run as an address does
// (urgent lane, runOnceForAddress), one that gave it a node or an IP (GotNodeOrIP) or its
// first NotReady network-status (WroteFirstStatus) marks it for an immediate retry, and a
// delete forgets it.
func (r *Reconciler) podEvents() handler.EventHandler {
	placed, first := GotNodeOrIP(), WroteFirstStatus()
	enqueue := func(q workqueue.TypedRateLimitingInterface[reconcile.Request], obj client.Object) {
		q.Add(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(obj)})
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(q, e.Object)
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			key := client.ObjectKeyFromObject(e.ObjectNew)
			r.noteCleared(key, e.ObjectOld, e.ObjectNew)
			if r.answered(e.ObjectOld, e.ObjectNew) {
				r.placed.Store(key, placedMark{uid: e.ObjectNew.GetUID(), resourceVersion: e.ObjectNew.GetResourceVersion(), address: true})
			} else if (placed.Update(e) || first.Update(e)) && !r.unspentAddress(key, e.ObjectNew.GetUID()) {
				// An address mark not yet spent is kept: its run is the urgent one.
				r.placed.Store(key, placedMark{uid: e.ObjectNew.GetUID(), resourceVersion: e.ObjectNew.GetResourceVersion()})
			}
			enqueue(q, e.ObjectNew)
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			r.placed.Delete(client.ObjectKeyFromObject(e.Object))
			r.cleared.Delete(client.ObjectKeyFromObject(e.Object))
			enqueue(q, e.Object)
		},
		GenericFunc: func(_ context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(q, e.Object)
		},
	}
}

// unspentAddress reports whether the pod of key (uid) holds an address mark
// (loadBalancerEvents, resultEvents, an answer on the pod) for its own incarnation or any.
func (r *Reconciler) unspentAddress(key types.NamespacedName, uid types.UID) bool {
	m, ok := r.placed.Load(key)
	if !ok {
		return false
	}
	pm := m.(placedMark)
	return pm.address && (pm.uid == "" || pm.uid == uid)
}

// answered reports whether the update from old to pod gave one of the result annotations of
// pod's network type (Options.ResultAnnotations) a new, non-empty value. A type the manager
// steps back from (kruise-game-manager serves it), or any before the OKG guard looked, never
// does: the webhook then passes the pod through without putting back an untrusted writer's
// change.
func (r *Reconciler) answered(old, pod client.Object) bool {
	networkType := pod.GetAnnotations()[networkstatus.AnnotationNetworkType]
	if r.opts.notLookedYet() || r.opts.steppingBack(networkType) {
		return false
	}
	for _, k := range r.opts.ResultAnnotations[networkType] {
		if v := pod.GetAnnotations()[k]; v != "" && v != old.GetAnnotations()[k] {
			return true
		}
	}
	return false
}

// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups="",resources=pods/status,verbs=patch
// +kubebuilder:rbac:groups="",resources=pods/eviction,verbs=create
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile brings one pod's network retry forward:
//   - network type not a registered plugin (Options.NetworkTypes), whatever retry state or
//     network-status the pod carries: nothing, ever (OKG's cloud types are OKG's);
//   - before the OKG guard's first look (Options.Looked), or while the manager steps back
//     from the type's provider (Options.StepBack): nothing, looked at again later;
//   - pod terminating with the finalizer of a registered plugin (Options.Finalizers, found by
//     the finalizer's name, whatever type the pod now names): the plugin's Finalize, then the
//     finalizer removed; a pod whose type is no longer the plugin's is let go with nothing
//     deleted (finalize);
//   - network disabled (label game.kruise.io/network-disabled=true), pod terminating or gone:
//     nothing;
//   - network-status Ready, the manager's own (its digest matches): record NetworkReady
//     from the retry state the webhook removed in that write (noteCleared), or remove one
//     still on the pod and record it, and set the readiness-gate condition True; a Ready
//     status the manager did not write: only a plugin run asked for (checkStatusOrigin);
//     when the webhook could not check it (an Unknown failure:
//     networkretry.UnverifiedAnnotation), trigger the check again on a backoff without
//     touching the network-status or the condition;
//   - not Ready, retry state present, window open or not started (the pod is not scheduled):
//     set the condition False (reason NetworkNotReady), stamp
//     game.kruise.io/network-trigger-time when the next attempt is due (at once when the pod
//     got its node or IP since the last plugin run) and requeue for the one after, or for
//     the deadline;
//   - not Ready, window closed for this pod (the window starts at the first not-Ready plugin
//     run or when the pod was scheduled, whichever is later): record NetworkRetryExhausted,
//     set the condition False and take the exhausted action, once per pod UID (Recreate is
//     an eviction, bounded and guarded: see recreate);
//   - network-status NotReady without a retry state: the condition False (the webhook writes
//     a state at its next run);
//   - invalid retry state (malformed, values the manager never writes, another plugin's): a
//     Warning event, the condition False (reason NetworkRetryStateInvalid), never acted on;
//     a trigger stamp every 30 s has the webhook replace it with a fresh one.
//
// Every schedule is raised to Options.MinRetryInterval.
//
// Errors are API errors of reads and writes, wrapped; a write that loses an optimistic-lock
// conflict is not an error: the newer pod version is reconciled from its own watch event.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pod := &corev1.Pod{}
	if err := r.client.Get(ctx, req.NamespacedName, pod); err != nil {
		if client.IgnoreNotFound(err) == nil {
			r.forget(req.NamespacedName)
			r.cleared.Delete(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("get pod %s: %w", req.NamespacedName, err)
	}
	if hasNetworkType(pod) && pod.DeletionTimestamp == nil && r.opts.registered(pod.Annotations[networkstatus.AnnotationNetworkType]) && r.opts.notLookedYet() {
		// Whether kruise-game-manager still runs this type's plugins is not known yet: a
		// retry now could be a second allocator, an exhausted action a guess.
		return ctrl.Result{RequeueAfter: lookRequeue}, nil
	}
	if hasNetworkType(pod) && pod.DeletionTimestamp == nil && r.opts.registered(pod.Annotations[networkstatus.AnnotationNetworkType]) && r.opts.steppingBack(pod.Annotations[networkstatus.AnnotationNetworkType]) {
		// kruise-game-manager still runs the plugins of this type's provider: this manager
		// leaves the pod alone, and looks again later, in case it stops.
		return ctrl.Result{RequeueAfter: stepBackRequeue}, nil
	}
	if networkType, f := r.opts.finalizerOf(pod); pod.DeletionTimestamp != nil && f != nil && r.opts.registered(networkType) {
		return r.finalize(ctx, pod, networkType, f)
	}
	if !hasNetworkType(pod) || pod.DeletionTimestamp != nil || !r.opts.registered(pod.Annotations[networkstatus.AnnotationNetworkType]) {
		// A type that is not a registered plugin (OKG's cloud types, a near-miss) is never
		// this manager's to retry, mark or delete, whatever state its annotations claim.
		r.forget(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	// The same keys as the webhook's log lines about this pod (pkg/webhook/pod), so that one
	// grep for the pod shows both.
	log := ctrl.LoggerFrom(ctx).WithValues("pod", klog.KObj(pod), "podUID", pod.UID, "decision", pod.Annotations[podwebhook.AnnotationDecision])
	ctx = ctrl.LoggerInto(ctx, log)

	disabled, err := networkstatus.NetworkDisabled(pod)
	if err != nil {
		// The webhook reports a malformed label through the plugin; here it just means
		// "not disabled".
		log.V(1).Info("Treating a malformed network-disabled label as false", "error", err.Error())
	}
	if disabled {
		r.forget(req.NamespacedName)
		return ctrl.Result{}, nil
	}

	now := r.opts.Clock.Now()
	if networkReady(pod) {
		cleared := r.takeCleared(req.NamespacedName, pod.UID)
		r.placed.Delete(req.NamespacedName)
		r.quiet.Delete(req.NamespacedName)
		r.dropHeld(req.NamespacedName)
		return r.reconcileReady(ctx, pod, cleared, now)
	}
	r.dropMark(req.NamespacedName)
	state, err := networkretry.FromPodAt(pod, now)
	if err == nil && state != nil && state.Plugin != pod.Annotations[networkstatus.AnnotationNetworkType] {
		err = fmt.Errorf("annotation %s: plugin: %q is not the pod's network type %q", networkretry.Annotation, state.Plugin, pod.Annotations[networkstatus.AnnotationNetworkType])
	}
	if err != nil {
		r.forget(req.NamespacedName)
		return r.replaceInvalidState(ctx, pod, err, now)
	}
	if state == nil {
		// The webhook's next run writes a state; the mark would only outlive the pod.
		r.forget(req.NamespacedName)
		return ctrl.Result{}, r.reconcileNoState(ctx, pod, now)
	}
	deadline, scheduled := state.DeadlineFor(pod)
	// A window that seems closed while an attempt is overdue (the manager or the API server
	// was away) gets that attempt first: its Record counts the pause, which may reopen it.
	// Retries counted in memory (quiet.go) are attempts too. A window found closed while the
	// attempt before it is due and this replica has not counted it (a new leader, whose
	// predecessor counted retries without writing them) also gets that attempt first: the
	// caches or a real run say whether the network would work now, so nothing is recreated
	// on what an older leader last wrote.
	counted := r.withQuietRetries(pod, state)
	floored := counted.WithMinInterval(r.opts.MinRetryInterval)
	unseen := r.opts.Precheck != nil && counted == state && !floored.NextAttempt().After(now)
	// A window never closes on a refusal the plugin only predicted from the caches (a cached
	// ResourceQuota: networkretry.Error.FromCache): the attempt after it is made first, and
	// the plugin has the API server answer it at least every
	// kubernetes.QuotaConfirmInterval, so a cache that went stale cannot close it.
	predicted := state.LastError != nil && state.LastError.FromCache
	if exhausted := state.ExhaustedFor(pod.UID); exhausted || (scheduled && !now.Before(deadline) && !floored.Overdue(now) && !unseen && !predicted) {
		// An address (or a controller's answer) that comes as the window closes gets its one
		// run whatever the order: before the exhausted mark is written (the run comes first,
		// and the window closes after it if the network is still not Ready) or after it; a
		// Recreate pod already marked is being evicted instead.
		if !exhausted || state.ExhaustedAction != policyv1alpha1.ExhaustedActionRecreate {
			if res, ran, err := r.runOnceForAddress(ctx, pod, now); ran || err != nil {
				return res, err
			}
		}
		// An address mark is kept: one stored while this run writes the exhausted mark
		// gets the run its queued request asks for.
		r.forgetKeepingAddress(req.NamespacedName)
		return r.reconcileExhausted(ctx, pod, counted, now)
	}
	// After a predicted refusal at the window's end, the next attempt is a real run (no quiet
	// retry from the caches): the webhook has the API server answer it.
	return r.reconcileRetry(ctx, pod, state, now, predicted && scheduled && !now.Before(deadline))
}

// forget drops what the reconciler keeps in memory about the pod of key: its placed mark,
// its quiet retries, its held late run and a reported mark (dropMark; a note of a removed
// retry state goes with the pod, or at its Ready reconcile).
func (r *Reconciler) forget(key types.NamespacedName) {
	r.placed.Delete(key)
	r.dropMark(key)
	r.quiet.Delete(key)
	r.dropHeld(key)
}

// forgetKeepingAddress is forget for a pod whose window closes, but for an address mark
// (loadBalancerEvents, resultEvents), which runOnceForAddress spends: the address event may
// have been handled as the window closed, and its run must not be lost.
func (r *Reconciler) forgetKeepingAddress(key types.NamespacedName) {
	if m, ok := r.placed.Load(key); ok && !m.(placedMark).address {
		r.placed.CompareAndDelete(key, m)
	}
	r.quiet.Delete(key)
	r.dropHeld(key)
}

// networkReady reports whether the pod's game.kruise.io/network-status says Ready; a missing
// or malformed status is not Ready.
func networkReady(pod *corev1.Pod) bool { return networkstatus.IsReady(pod) }

// invalidStateRetry is how often the controller asks for a fresh retry state while the one
// on a pod stays invalid (the webhook replaces it at the plugin run the trigger stamp
// causes; while no replica answers the stamp changes nothing): 30 s, OKG's network probe
// interval six times over, so a pod whose state keeps being forged costs one write per
// 30 s, never a hot loop.
const invalidStateRetry = 30 * time.Second

// replaceInvalidState handles a retry-state annotation that does not parse, holds values the
// manager never writes (networkretry.DecodeAt), or names another plugin than the pod's
// network type: such a state is never acted on (no window, no exhausted action). It logs,
// records a Warning event (reason NetworkRetryStateInvalid), sets the network-ready condition
// False with that reason, and stamps game.kruise.io/network-trigger-time (at most once per
// invalidStateRetry or Options.MinRetryInterval, the longer): the stamp is a pod UPDATE, the
// webhook runs the plugin and, finding the stored state invalid, writes a fresh one in its
// place. It requeues for the next stamp. Errors are the writes'.
func (r *Reconciler) replaceInvalidState(ctx context.Context, pod *corev1.Pod, err error, now time.Time) (ctrl.Result, error) {
	ctrl.LoggerFrom(ctx).Error(err, "Replacing an invalid network retry state", "annotation", networkretry.Annotation)
	r.eventf(pod, corev1.EventTypeWarning, ReasonNetworkRetryStateInvalid, actionReadRetry,
		"The annotation %s is invalid and is not acted on; a plugin run replaces it with a fresh retry state: %v", networkretry.Annotation, err)
	if _, werr := r.ensureNotReadyCondition(ctx, pod, ReasonNetworkRetryStateInvalid,
		fmt.Sprintf("Network of plugin %s is not Ready and its retry state is invalid: %v", pod.Annotations[networkstatus.AnnotationNetworkType], err), now); werr != nil {
		return ctrl.Result{}, werr
	}
	every := max(invalidStateRetry, r.opts.MinRetryInterval)
	// A stamp in the future (the annotation is anyone's to write) does not hold this back.
	if last := triggerTime(pod); !last.IsZero() && !last.After(now) && now.Sub(last) < every {
		return requeueAt(last.Add(every), now), nil
	}
	stamp := now.UTC().Format(time.RFC3339)
	if _, werr := r.patchPod(ctx, pod, func(p *corev1.Pod) { p.Annotations[networkstatus.AnnotationNetworkTriggerTime] = stamp }); werr != nil {
		return ctrl.Result{}, werr
	}
	return ctrl.Result{RequeueAfter: every}, nil
}

// reconcileNoState handles a pod whose network is not Ready and that has no retry state:
// when its network-status says NotReady (the webhook ran a plugin), the network-ready
// condition is set False with reason NetworkNotReady; a pod without a network-status is left
// alone (its network was never run here, for example a type the webhook passes through).
func (r *Reconciler) reconcileNoState(ctx context.Context, pod *corev1.Pod, now time.Time) error {
	if st, err := networkstatus.StatusFromPod(pod); err != nil || st == nil {
		return nil
	}
	_, err := r.ensureNotReadyCondition(ctx, pod, ReasonNetworkNotReady,
		"Network of plugin "+pod.Annotations[networkstatus.AnnotationNetworkType]+" is not Ready", now)
	return err
}

// requeueAt returns a result that requeues the pod at t, and at least minRequeue from now:
// trigger times have second precision, so retrying faster than that gains nothing.
func requeueAt(t, now time.Time) ctrl.Result {
	return ctrl.Result{RequeueAfter: max(t.Sub(now), minRequeue)}
}

// minRequeue is the shortest RequeueAfter the controller asks for: the precision of
// network-trigger-time and of the retry state's times (RFC 3339, seconds).
const minRequeue = time.Second

// markSelected marks for an immediate retry, and queues, every game server of svc's
// namespace that svc's selector selects (the cache's pods; a list that fails marks none:
// the retries go on as scheduled).
func (r *Reconciler) markSelected(ctx context.Context, svc *corev1.Service, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	var pods corev1.PodList
	if err := r.client.List(ctx, &pods, client.InNamespace(svc.Namespace), client.MatchingLabels(svc.Spec.Selector), client.UnsafeDisableDeepCopy); err != nil {
		return
	}
	for i := range pods.Items {
		pod := &pods.Items[i]
		if !hasNetworkType(pod) {
			continue
		}
		key := client.ObjectKeyFromObject(pod)
		r.placed.Store(key, placedMark{uid: pod.UID, resourceVersion: svc.ResourceVersion, address: true})
		q.Add(reconcile.Request{NamespacedName: key})
	}
}

// markPool marks, as markSelected does, the game servers a GameServerSet's pool Service
// serves: those its ports are named after ("<protocol>-<ordinal>-<port>"), pods
// "<gss>-<ordinal>" of the GameServerSet, read from the cache; not the GameServerSet's other
// game servers, which other pools serve.
func (r *Reconciler) markPool(ctx context.Context, svc *corev1.Service, gss string, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	seen := map[string]bool{}
	for _, sp := range svc.Spec.Ports {
		parts := strings.Split(sp.Name, "-")
		if len(parts) != 3 || seen[parts[1]] {
			continue
		}
		seen[parts[1]] = true
		pod := &corev1.Pod{}
		key := client.ObjectKey{Namespace: svc.Namespace, Name: gss + "-" + parts[1]}
		if err := r.client.Get(ctx, key, pod); err != nil || !hasNetworkType(pod) || pod.Labels[networkstatus.LabelOwnerGSS] != gss {
			continue
		}
		r.placed.Store(key, placedMark{uid: pod.UID, resourceVersion: svc.ResourceVersion, address: true})
		q.Add(reconcile.Request{NamespacedName: key})
	}
}

// resultEvents maps an object in which another controller answers for a pod (PodEIP,
// PodDNAT; Options.WatchResults) that is created with an answer (one of the fields at the
// paths answer is set), or whose answer changes, to the pod of its name (with gssLabel, to
// every game server, read from the cache, of the GameServerSet that label of the object
// names: ResultKind.GameServerSetLabel; with ResultKind.PodLabel, to the pod that label
// names): the pod is marked
// for an immediate run (any incarnation: the object names the pod, not its UID; the mark of
// an address, runOnceForAddress) and queued, so that the plugin's next run reads the answer.
// An object without an answer, a change of anything else (a heartbeat) and a delete are
// ignored: there is no new answer to read, and a network that was Ready stays so (OKG's rule
// for these plugins).
func (r *Reconciler) resultEvents(kind plugin.ResultKind) handler.EventHandler {
	answer, gssLabel := kind.Answer, kind.GameServerSetLabel
	status := func(obj client.Object) []any {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return nil
		}
		var out []any
		set := false
		for _, path := range answer {
			v, found, _ := unstructured.NestedFieldNoCopy(u.Object, path...)
			out = append(out, v)
			set = set || (found && v != nil && v != "")
		}
		if !set {
			return nil
		}
		return out
	}
	mark := func(ctx context.Context, obj client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		if gssLabel == "" {
			key := client.ObjectKeyFromObject(obj)
			if kind.PodLabel != "" {
				if key.Name = obj.GetLabels()[kind.PodLabel]; key.Name == "" {
					return
				}
			}
			r.placed.Store(key, placedMark{resourceVersion: obj.GetResourceVersion(), address: true})
			q.Add(reconcile.Request{NamespacedName: key})
			return
		}
		gss := obj.GetLabels()[gssLabel]
		if gss == "" {
			return
		}
		var pods corev1.PodList
		if err := r.client.List(ctx, &pods, client.InNamespace(obj.GetNamespace()), client.MatchingLabels{networkstatus.LabelOwnerGSS: gss}); err != nil {
			return // the game servers' retries read the answer
		}
		for i := range pods.Items {
			pod := &pods.Items[i]
			if !hasNetworkType(pod) {
				continue
			}
			key := client.ObjectKeyFromObject(pod)
			r.placed.Store(key, placedMark{uid: pod.UID, resourceVersion: obj.GetResourceVersion(), address: true})
			q.Add(reconcile.Request{NamespacedName: key})
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if status(e.Object) != nil {
				mark(ctx, e.Object, q)
			}
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if st := status(e.ObjectNew); st != nil && !equality.Semantic.DeepEqual(st, status(e.ObjectOld)) {
				mark(ctx, e.ObjectNew, q)
			}
		},
	}
}

// loadBalancerEvents maps a Service of type LoadBalancer that an update gave a load-balancer
// address (status.loadBalancer.ingress empty before, or different) to the pod of its name,
// the pod whose load-balancer plugin made it (family A names the Service after the pod), or,
// for one of a pod's per-line Services ("<pod>-<line>", AlibabaCloud-Multi-NLBs), to the pod
// its statefulset.kubernetes.io/pod-name selector names when the Service's name starts with it;
// a GameServerSet's pool Service (its controller, selecting game.kruise.io/owner-gss of its
// name alone: AlibabaCloud-AutoNLBs) marks the game servers its ports serve (markPool):
// the pod is marked for an immediate retry (placed, with the UID of the Service's controller
// pod; any incarnation when OKG's GameServerSet controls it, a Fixed Service) and queued, so
// that the plugin's next run sees the address. A shared Service (Options.SharedServiceLabel:
// its selector is that label alone, with the Service's name as value) marks every game
// server of its namespace it selects, read from the cache. Other Services, and other Service
// events, are ignored.
func (r *Reconciler) loadBalancerEvents() handler.EventHandler {
	return handler.Funcs{
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			old, okOld := e.ObjectOld.(*corev1.Service)
			svc, ok := e.ObjectNew.(*corev1.Service)
			if !ok || !okOld || svc.Spec.Type != corev1.ServiceTypeLoadBalancer || len(svc.Status.LoadBalancer.Ingress) == 0 ||
				equality.Semantic.DeepEqual(old.Status.LoadBalancer.Ingress, svc.Status.LoadBalancer.Ingress) {
				return
			}
			if l := r.opts.SharedServiceLabel; l != "" && len(svc.Spec.Selector) == 1 && svc.Spec.Selector[l] == svc.Name {
				// A shared Service (named after its load balancer, selecting its game
				// servers by the label): whoever owns it, OKG's GameServerSet included.
				r.markSelected(ctx, svc, q)
				return
			}
			if ref := metav1.GetControllerOf(svc); ref != nil && ref.Kind == "GameServerSet" && strings.HasPrefix(ref.APIVersion, "game.kruise.io/") &&
				len(svc.Spec.Selector) == 1 && svc.Spec.Selector[networkstatus.LabelOwnerGSS] == ref.Name {
				// A GameServerSet's pool Service (AlibabaCloud-AutoNLBs: an NLB of its own that
				// serves a range of its game servers' ordinals): the game servers it serves.
				r.markPool(ctx, svc, ref.Name, q)
				return
			}
			// The game server's name: the Service's (a per-pod Service), or the pod its
			// selector names (one of a pod's per-line Services, "<pod>-<line>").
			pod := svc.Name
			if name := svc.Spec.Selector[appsv1.StatefulSetPodNameLabel]; name != "" && strings.HasPrefix(svc.Name, name+"-") {
				pod = name
			}
			var uid types.UID
			switch ref := metav1.GetControllerOf(svc); {
			case ref != nil && ref.Kind == "Pod" && ref.Name == pod:
				uid = ref.UID
			case ref != nil && ref.Kind == "GameServerSet" && strings.HasPrefix(ref.APIVersion, "game.kruise.io/"):
				// A Fixed Service: whichever pod of its name is there now.
			default:
				return // not a game server's Service
			}
			key := client.ObjectKey{Namespace: svc.Namespace, Name: pod}
			r.placed.Store(key, placedMark{uid: uid, resourceVersion: svc.ResourceVersion, address: true})
			q.Add(reconcile.Request{NamespacedName: key})
		},
	}
}
