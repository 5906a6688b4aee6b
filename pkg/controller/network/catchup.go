package network

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
	podwebhook "github.com/okg-extensions/network-plugin-policy/pkg/webhook/pod"
)

// DefaultCatchUpControllerName is the catch-up controller's name when
// CatchUpOptions.ControllerName is empty.
const DefaultCatchUpControllerName = "network-catch-up"

// ReasonNetworkCatchUp (Normal event): the pod was admitted without the webhook (no
// network-decision annotation) and the controller stamped network-trigger-time, so that the
// resulting UPDATE runs its plugin under the policy in force.
const ReasonNetworkCatchUp = "NetworkCatchUp"

// ReasonNetworkCatchUpAbandoned (Warning event): the webhook did not answer the catch-up
// stamps within CatchUpOptions.Window; the controller stops stamping the pod.
const ReasonNetworkCatchUpAbandoned = "NetworkCatchUpAbandoned"

// actionCatchUp is the events.k8s.io/v1 action of the catch-up events.
const actionCatchUp = "TriggerNetworkCatchUp"

// CatchUpOptions configure a CatchUpReconciler. The zero value is usable.
type CatchUpOptions struct {
	// ControllerName names the controller in the manager; DefaultCatchUpControllerName when
	// empty.
	ControllerName string
	// NetworkTypes are the network types the webhook runs a plugin for (the registered
	// plugins' names): only pods of these types are caught up, since the webhook writes no
	// decision on a type it passes through. Empty means every type.
	NetworkTypes []string
	// WebhookReady reports whether this replica's webhook serves; while it does not, no
	// stamp is written (a stamp that no webhook answers is wasted and lengthens the backoff).
	// Nil means always ready.
	WebhookReady func() bool
	// Interval is the first delay between two stamps of one pod; 5s (OKG's retry interval)
	// when zero.
	Interval time.Duration
	// MaxInterval caps the delay between two stamps; 1m when zero.
	MaxInterval time.Duration
	// Window is how long after the pod's creation (or this controller's start, whichever is
	// later) the controller keeps stamping; 15m when zero.
	Window time.Duration
}

func (o CatchUpOptions) withDefaults() CatchUpOptions {
	if o.ControllerName == "" {
		o.ControllerName = DefaultCatchUpControllerName
	}
	if o.Interval <= 0 {
		o.Interval = 5 * time.Second
	}
	if o.MaxInterval < o.Interval {
		o.MaxInterval = max(time.Minute, o.Interval)
	}
	if o.Window <= 0 {
		o.Window = 15 * time.Minute
	}
	return o
}

// CatchUpReconciler catches up pods admitted while no webhook replica answered (the
// failurePolicy Ignore entry of the webhook configuration): a pod with a network type but
// without the policy.game.kruise.io/network-decision annotation the webhook writes on every
// pod it admits. It stamps game.kruise.io/network-trigger-time, the trigger the retry
// controller uses, so that the UPDATE runs the plugin through the webhook; from then on the
// pod carries a decision (and, if the plugin failed, a retry state the retry controller
// follows).
//
// It keeps no state on the pod: the delay after a stamp is the time since the pod's
// creation, or since this controller started if that is later, clamped to [Interval,
// MaxInterval]. Stamps therefore come at base, base+Interval, and then about twice as far
// from base each time; a webhook that does not answer gets stamps on that schedule, never a
// burst, and none after Window.
type CatchUpReconciler struct {
	base    *Reconciler
	opts    CatchUpOptions
	types   map[string]bool
	once    sync.Once
	started time.Time
}

// NewCatchUpReconciler returns a CatchUpReconciler that reads and writes pods through c,
// records events with recorder and reads the time from opts.Clock.
func NewCatchUpReconciler(c client.Client, recorder events.EventRecorder, opts Options, catchUp CatchUpOptions) *CatchUpReconciler {
	r := &CatchUpReconciler{base: NewReconciler(c, recorder, opts), opts: catchUp.withDefaults()}
	if len(r.opts.NetworkTypes) > 0 {
		r.types = map[string]bool{}
		for _, t := range r.opts.NetworkTypes {
			r.types[t] = true
		}
	}
	return r
}

// SetupWithManager registers the controller with mgr: it watches pods that carry a network
// type and no network-decision annotation, on the elected leader. Errors come from the
// controller builder.
func (r *CatchUpReconciler) SetupWithManager(mgr ctrl.Manager) error {
	err := ctrl.NewControllerManagedBy(mgr).
		Named(r.opts.ControllerName).
		For(&corev1.Pod{}, builder.WithPredicates(HasNetworkType(), predicate.NewPredicateFuncs(func(o client.Object) bool {
			_, decided := o.GetAnnotations()[podwebhook.AnnotationDecision]
			return !decided
		}))).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.base.opts.MaxConcurrentReconciles}).
		Complete(r)
	if err != nil {
		return fmt.Errorf("set up controller %s: %w", r.opts.ControllerName, err)
	}
	return nil
}

// Reconcile stamps network-trigger-time on a pod that needs catching up (network type of
// a plugin, no network-decision annotation, not terminating, network not disabled) when its
// next stamp is due, and requeues it for the stamp after. Before the OKG guard's first look
// (Options.Looked) and while the manager steps back from the type's provider, it stamps
// nothing and looks again later. Errors are API errors of the read
// and the write, wrapped; a write that loses an optimistic-lock conflict is not an error.
func (r *CatchUpReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pod := &corev1.Pod{}
	if err := r.base.client.Get(ctx, req.NamespacedName, pod); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("get pod %s: %w", req.NamespacedName, err)
	}
	if !r.needsCatchUp(pod) {
		return ctrl.Result{}, nil
	}
	if r.base.opts.notLookedYet() {
		// Whether kruise-game-manager serves the pod is not known yet.
		return ctrl.Result{RequeueAfter: lookRequeue}, nil
	}
	if r.base.opts.steppingBack(pod.Annotations[networkstatus.AnnotationNetworkType]) {
		// kruise-game-manager serves the pod; look again later, in case it stops.
		return ctrl.Result{RequeueAfter: stepBackRequeue}, nil
	}
	if r.opts.WebhookReady != nil && !r.opts.WebhookReady() {
		return ctrl.Result{RequeueAfter: minRequeue}, nil
	}
	log := ctrl.LoggerFrom(ctx).WithValues("pod", klog.KObj(pod), "podUID", pod.UID)
	ctx = ctrl.LoggerInto(ctx, log)

	now := r.base.opts.Clock.Now()
	r.once.Do(func() { r.started = now })
	base := pod.CreationTimestamp.Time
	if r.started.After(base) {
		base = r.started
	}
	last := triggerTime(pod)
	if last.Before(base) || last.After(now) {
		// An older stamp was not this controller's (or was before its start); a future one is
		// someone else's.
		last = time.Time{}
	}
	if !last.IsZero() {
		due := last.Add(r.backoff(last.Sub(base)))
		if now.Before(due) {
			return requeueAt(due, now), nil
		}
		if due.Sub(base) > r.opts.Window {
			log.Info("Webhook did not catch the pod up; no more network triggers", "since", base, "lastTrigger", last)
			r.base.eventf(pod, corev1.EventTypeWarning, ReasonNetworkCatchUpAbandoned, actionCatchUp,
				"The pod was admitted without the network plugin webhook and has no %s annotation; the webhook did not answer the %s stamps since %s, no more are written",
				podwebhook.AnnotationDecision, networkstatus.AnnotationNetworkTriggerTime, base.UTC().Format(time.RFC3339))
			return ctrl.Result{}, nil
		}
	}

	stamp := now.UTC().Format(time.RFC3339)
	applied, err := r.base.patchPod(ctx, pod, func(p *corev1.Pod) { p.Annotations[networkstatus.AnnotationNetworkTriggerTime] = stamp })
	if err != nil || !applied {
		return ctrl.Result{}, err
	}
	networkType := pod.Annotations[networkstatus.AnnotationNetworkType]
	if decision, ok := pod.Annotations[podwebhook.AnnotationDecision]; ok {
		// The stamp was a pod UPDATE and the webhook answered it in the same write.
		log.Info("Caught up a pod admitted without the network plugin webhook", "networkType", networkType, "decision", decision)
		r.base.eventf(pod, corev1.EventTypeNormal, ReasonNetworkCatchUp, actionCatchUp,
			"Network plugin %s ran on a pod admitted without the webhook: %s", networkType, decision)
		return ctrl.Result{}, nil
	}
	log.Info("Webhook did not answer the catch-up trigger; trying again later", "networkType", networkType, "triggerTime", stamp)
	return requeueAt(now.Add(r.backoff(now.Sub(base))), now), nil
}

// needsCatchUp reports whether pod was admitted without the webhook and should be caught
// up: a network type of a plugin, no network-decision annotation, not terminating, network
// not disabled.
func (r *CatchUpReconciler) needsCatchUp(pod *corev1.Pod) bool {
	networkType, ok := pod.Annotations[networkstatus.AnnotationNetworkType]
	if !ok || pod.DeletionTimestamp != nil {
		return false
	}
	if _, decided := pod.Annotations[podwebhook.AnnotationDecision]; decided {
		return false
	}
	if r.types != nil && !r.types[networkType] {
		return false
	}
	disabled, _ := networkstatus.NetworkDisabled(pod)
	return !disabled
}

// backoff is the delay after a stamp written age after the base time: age clamped to
// [Interval, MaxInterval].
func (r *CatchUpReconciler) backoff(age time.Duration) time.Duration {
	return min(max(age, r.opts.Interval), r.opts.MaxInterval)
}
