package network

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	"github.com/okg-extensions/network-plugin-policy/pkg/networkretry"
	"github.com/okg-extensions/network-plugin-policy/pkg/networkstatus"
)

// Reconciler is the network retry and readiness controller for pods that carry
// game.kruise.io/network-type. It keeps no state of its own: everything it needs is on the
// pod (the retry state, the trigger time, the readiness-gate condition), so any replica that
// wins the leader election resumes where the previous one stopped.
type Reconciler struct {
	client   client.Client
	recorder events.EventRecorder
	opts     Options
}

// NewReconciler returns a Reconciler that reads and writes pods through c and records
// events.k8s.io/v1 Events with recorder (in a manager: mgr.GetEventRecorder(EventReporter)).
// Empty fields of opts take their defaults (see Options).
func NewReconciler(c client.Client, recorder events.EventRecorder, opts Options) *Reconciler {
	return &Reconciler{client: c, recorder: recorder, opts: opts.withDefaults()}
}

// SetupWithManager registers the controller with mgr: it watches pods, admits only those
// with the game.kruise.io/network-type annotation (HasNetworkType) and runs only on the
// elected leader (the controller-runtime default). Errors come from the controller builder,
// for example a controller name already taken in mgr.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	err := ctrl.NewControllerManagedBy(mgr).
		Named(r.opts.ControllerName).
		For(&corev1.Pod{}, builder.WithPredicates(HasNetworkType())).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.opts.MaxConcurrentReconciles}).
		Complete(r)
	if err != nil {
		return fmt.Errorf("set up controller %s: %w", r.opts.ControllerName, err)
	}
	return nil
}

// Reconcile brings one pod's network retry forward:
//   - network disabled (label game.kruise.io/network-disabled=true), pod terminating or gone:
//     nothing;
//   - network-status Ready: clear the retry state, record NetworkReady, set the
//     readiness-gate condition True;
//   - not Ready, retry state present, window open: stamp game.kruise.io/network-trigger-time
//     when the next attempt is due and requeue for the one after, or for the deadline;
//   - not Ready, window closed: record NetworkRetryExhausted, set the condition False and take
//     the exhausted action, once;
//   - not Ready without a retry state: nothing (the webhook writes one at its next run);
//   - malformed retry state: a Warning event, no retry.
//
// Errors are API errors of reads and writes, wrapped; a write that loses an optimistic-lock
// conflict is not an error: the newer pod version is reconciled from its own watch event.
//
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;update;patch;delete
// +kubebuilder:rbac:groups="",resources=pods/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pod := &corev1.Pod{}
	if err := r.client.Get(ctx, req.NamespacedName, pod); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("get pod %s: %w", req.NamespacedName, err)
	}
	if !hasNetworkType(pod) || pod.DeletionTimestamp != nil {
		return ctrl.Result{}, nil
	}
	log := ctrl.LoggerFrom(ctx).WithValues("pod", klog.KObj(pod))
	ctx = ctrl.LoggerInto(ctx, log)

	disabled, err := networkstatus.NetworkDisabled(pod)
	if err != nil {
		// The webhook reports a malformed label through the plugin; here it just means
		// "not disabled".
		log.V(1).Info("Treating a malformed network-disabled label as false", "error", err.Error())
	}
	if disabled {
		return ctrl.Result{}, nil
	}

	now := r.opts.Clock.Now()
	if networkReady(pod) {
		return ctrl.Result{}, r.reconcileReady(ctx, pod, now)
	}
	state, err := networkretry.FromPod(pod)
	if err != nil {
		r.reportInvalidState(ctx, pod, err)
		return ctrl.Result{}, nil
	}
	if state == nil {
		return ctrl.Result{}, nil
	}
	if state.Exhausted != nil || !now.Before(state.Deadline()) {
		return ctrl.Result{}, r.reconcileExhausted(ctx, pod, state, now)
	}
	return r.reconcileRetry(ctx, pod, state, now)
}

// networkReady reports whether the pod's game.kruise.io/network-status says Ready; a missing
// or malformed status is not Ready.
func networkReady(pod *corev1.Pod) bool {
	st, err := networkstatus.StatusFromPod(pod)
	return err == nil && st != nil && st.CurrentNetworkState == networkstatus.NetworkReady
}

// reportInvalidState logs and records a Warning event for a retry-state annotation that does
// not parse. Nothing is retried and nothing is requeued: the annotation changes only when the
// webhook or a person rewrites it, and that update brings the pod back here.
func (r *Reconciler) reportInvalidState(ctx context.Context, pod *corev1.Pod, err error) {
	ctrl.LoggerFrom(ctx).Error(err, "Ignoring a malformed network retry state", "annotation", networkretry.Annotation)
	r.eventf(pod, corev1.EventTypeWarning, ReasonNetworkRetryStateInvalid, actionReadRetry,
		"No network retry is triggered until the annotation %s is rewritten: %v", networkretry.Annotation, err)
}

// requeueAt returns a result that requeues the pod at t, and at least minRequeue from now:
// trigger times have second precision, so retrying faster than that gains nothing.
func requeueAt(t, now time.Time) ctrl.Result {
	return ctrl.Result{RequeueAfter: max(t.Sub(now), minRequeue)}
}

// minRequeue is the shortest RequeueAfter the controller asks for: the precision of
// network-trigger-time and of the retry state's times (RFC 3339, seconds).
const minRequeue = time.Second
