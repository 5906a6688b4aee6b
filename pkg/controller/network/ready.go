package network

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/okg-extensions/network-plugin-policy/pkg/networkretry"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// reconcileReady handles a pod whose network-status is Ready. When the pod carries a retry
// state it removes it, records NetworkReady with the time since the state's since (rounded to
// seconds) and the failed attempts, and observes npp_network_ready_duration_seconds. When the
// pod has the network-ready readiness gate and the condition is not True, it sets it True
// (reason NetworkReady); a pod that had no retry state gets its NetworkReady event then, with
// the time since the pod was created. Each write is guarded by an optimistic lock, so the
// event is recorded once per Ready transition.
func (r *Reconciler) reconcileReady(ctx context.Context, pod *corev1.Pod, now time.Time) error {
	log := ctrl.LoggerFrom(ctx)
	plugin := pod.Annotations[networkstatus.AnnotationNetworkType]

	_, hadState := pod.Annotations[networkretry.Annotation]
	state, stateErr := networkretry.FromPodAt(pod, now)
	if hadState {
		applied, err := r.patchPod(ctx, pod, func(p *corev1.Pod) { delete(p.Annotations, networkretry.Annotation) })
		if err != nil || !applied {
			return err
		}
		if stateErr != nil {
			log.Info("Removed a malformed network retry state from a pod whose network is Ready", "error", stateErr.Error())
		} else {
			took := max(now.Sub(state.Since.Time), 0).Round(time.Second)
			r.opts.Metrics.readySeconds.WithLabelValues(r.opts.pluginLabel(state.Plugin)).Observe(took.Seconds())
			r.eventf(pod, corev1.EventTypeNormal, ReasonNetworkReady, actionClearRetry,
				"Network of plugin %s is Ready after %s and %d failed attempts (retry policy %s)",
				state.Plugin, took, state.Attempts, state.Policy)
			log.Info("Network Ready after retries", "plugin", state.Plugin, "took", took.String(), "attempts", state.Attempts)
		}
		// The removal was a pod UPDATE, so the webhook ran the plugin again; if the network
		// broke meanwhile, the webhook wrote a new retry state and the next event handles it.
		if !networkReady(pod) {
			return nil
		}
	}

	if !hasReadinessGate(pod) {
		return nil
	}
	if c := networkCondition(pod); c != nil && c.Status == corev1.ConditionTrue {
		return nil
	}
	applied, err := r.patchPodStatus(ctx, pod, func(p *corev1.Pod) {
		setNetworkCondition(p, corev1.ConditionTrue, ReasonNetworkReady, "Network of plugin "+plugin+" is Ready", now)
	})
	if err != nil || !applied {
		return err
	}
	log.V(1).Info("Set the network readiness-gate condition", "status", corev1.ConditionTrue)
	if !hadState || stateErr != nil {
		took := max(now.Sub(pod.CreationTimestamp.Time), 0).Round(time.Second)
		r.eventf(pod, corev1.EventTypeNormal, ReasonNetworkReady, actionClearRetry,
			"Network of plugin %s is Ready, %s after the pod was created", plugin, took)
	}
	return nil
}
