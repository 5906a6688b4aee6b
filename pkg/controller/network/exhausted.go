package network

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
	"github.com/okg-extensions/network-plugin-policy/pkg/networkretry"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// reconcileExhausted handles a pod whose network is not Ready and whose retry window has
// closed (the pod is scheduled and now >= s.DeadlineFor(pod)), or was closed before for this
// pod (s.ExhaustedFor(pod.UID)).
//
// The first time, it writes s.Exhausted = now and s.ExhaustedUID = the pod's UID into the
// retry-state annotation before anything else, with an optimistic lock, so that the event and the action happen once even across
// restarts and leader changes (at most once: a crash right after that write loses the event,
// never doubles it). Then it records the NetworkRetryExhausted Warning event and counts
// npp_network_retry_windows_exhausted_total. Every time, it makes sure the network-ready
// condition is False (reason NetworkRetryExhausted) when the pod has the readiness gate, and,
// for the Recreate action, that the pod is evicted (recreate: through the Eviction API with a
// UID precondition, never a pod without a controller owner, rate-limited per namespace): a
// pod that is still there and not terminating had its eviction refused or postponed, and is
// evicted again when the returned Result requeues it.
//
// A window closed for this pod stays closed: no more triggers, even if a policy change
// lengthened the window; any other update of the pod still makes the webhook run the plugin.
// A mark recorded for another UID (a state carried over to a same-name successor) does not
// count: that pod gets a window of its own.
func (r *Reconciler) reconcileExhausted(ctx context.Context, pod *corev1.Pod, s *networkretry.State, now time.Time) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	action := s.ExhaustedAction
	if action != policyv1alpha1.ExhaustedActionRecreate {
		action = policyv1alpha1.ExhaustedActionEvent
	}
	message := exhaustedMessage(s, action)

	first := !s.ExhaustedFor(pod.UID)
	if first {
		marked := *s
		marked.Exhausted = &metav1.Time{Time: now}
		marked.ExhaustedUID = pod.UID
		value, err := marked.Encode()
		if err != nil {
			return ctrl.Result{}, err
		}
		applied, err := r.patchPod(ctx, pod, func(p *corev1.Pod) { p.Annotations[networkretry.Annotation] = value })
		if err != nil || !applied {
			return ctrl.Result{}, err
		}
		// The write was a pod UPDATE and the webhook ran the plugin once more: if that made
		// the network Ready, the Ready path takes over from the next event.
		if networkReady(pod) {
			return ctrl.Result{}, nil
		}
		// That run is counted in the state the apiserver returned: report it.
		if st, err := networkretry.FromPodAt(pod, now); err == nil && st != nil {
			message = exhaustedMessage(st, action)
		}
		r.opts.Metrics.exhausted.WithLabelValues(r.opts.pluginLabel(s.Plugin), string(action)).Inc()
		r.eventf(pod, corev1.EventTypeWarning, ReasonNetworkRetryExhausted, string(action), "%s", message)
		log.Info("Network retry window exhausted", "plugin", s.Plugin, "policy", s.Policy, "attempts", s.Attempts,
			"window", s.Window.Duration.String(), "action", action)
	}

	if hasReadinessGate(pod) && !conditionIs(pod, corev1.ConditionFalse, ReasonNetworkRetryExhausted) {
		applied, err := r.patchPodStatus(ctx, pod, func(p *corev1.Pod) {
			setNetworkCondition(p, corev1.ConditionFalse, ReasonNetworkRetryExhausted, message, now)
		})
		if err != nil || !applied {
			return ctrl.Result{}, err
		}
	}

	if action != policyv1alpha1.ExhaustedActionRecreate {
		return ctrl.Result{}, nil
	}
	return r.recreate(ctx, pod, s, first)
}

// exhaustedMessage is the note of the NetworkRetryExhausted event and the message of the False
// condition: plugin, attempts, window, policy, last error (type and message) and action.
func exhaustedMessage(s *networkretry.State, action policyv1alpha1.ExhaustedAction) string {
	lastErr := "none (the plugin succeeded but the network is not Ready)"
	if s.LastError != nil {
		lastErr = s.LastError.Type + ": " + s.LastError.Message
	}
	msg := fmt.Sprintf("Network of plugin %s is not Ready after %d attempts in the %s retry window of %s; last error: %s; exhausted action: %s",
		s.Plugin, s.Attempts, s.Window.Duration, policySource(s), lastErr, action)
	if action == policyv1alpha1.ExhaustedActionRecreate {
		msg += " (the pod is evicted so that its owner recreates it)"
	}
	return msg
}

// runOnceForAddress runs the plugin once more for a pod whose window closes now (before the
// exhausted mark is written, whatever its action) or closed with the exhausted action Event
// (the caller's check; a Recreate pod already marked is evicted instead) when its
// load-balancer Service got its address since, or its controller answered (a placedMark from
// loadBalancerEvents or resultEvents): the cloud has done what the retries waited for, so
// one stamp of
// game.kruise.io/network-trigger-time has the webhook read the address and make the network
// Ready. It is not a retry: no schedule, no window, and a run that does not make the network
// Ready leaves the pod exhausted. The mark is spent by the stamp (spendMark: one that left
// the network not Ready gets up to addressReruns more, a second apart, for a webhook replica
// that had not seen the address yet); a stamp of the same second already on the pod defers
// it by a second. ran reports whether it stamped or deferred;
// errors are the patch's.
func (r *Reconciler) runOnceForAddress(ctx context.Context, pod *corev1.Pod, now time.Time) (res ctrl.Result, ran bool, err error) {
	key := client.ObjectKeyFromObject(pod)
	m, ok := r.placed.Load(key)
	if !ok {
		return ctrl.Result{}, false, nil
	}
	mark := m.(placedMark)
	if !mark.address || (mark.uid != "" && mark.uid != pod.UID) {
		return ctrl.Result{}, false, nil
	}
	stamp := now.UTC().Format(time.RFC3339)
	if pod.Annotations[networkstatus.AnnotationNetworkTriggerTime] == stamp {
		return ctrl.Result{RequeueAfter: minRequeue}, true, nil
	}
	applied, err := r.patchPod(ctx, pod, func(p *corev1.Pod) { p.Annotations[networkstatus.AnnotationNetworkTriggerTime] = stamp })
	if err != nil || !applied {
		return ctrl.Result{}, true, err
	}
	ctrl.LoggerFrom(ctx).Info("Ran the plugin once more after the retry window closed: its load balancer got an address or its network controller answered", "triggerTime", stamp)
	if r.spendMark(key, mark, pod) {
		return ctrl.Result{RequeueAfter: minRequeue}, true, nil
	}
	return ctrl.Result{}, true, nil
}
