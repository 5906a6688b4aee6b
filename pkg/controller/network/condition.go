package network

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	policyv1alpha1 "github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
)

// conditionNetworkReady is the pod condition type of the readiness gate the webhook injects
// when the policy sets readinessGate: true.
const conditionNetworkReady = corev1.PodConditionType(policyv1alpha1.ReadinessGateNetworkReady)

// hasReadinessGate reports whether pod lists game.kruise.io/network-ready in
// spec.readinessGates; only then does the controller write the condition.
func hasReadinessGate(pod *corev1.Pod) bool {
	for _, g := range pod.Spec.ReadinessGates {
		if g.ConditionType == conditionNetworkReady {
			return true
		}
	}
	return false
}

// networkCondition returns the pod's game.kruise.io/network-ready condition, nil if none.
func networkCondition(pod *corev1.Pod) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == conditionNetworkReady {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// conditionIs reports whether the pod's network-ready condition has status and reason.
func conditionIs(pod *corev1.Pod, status corev1.ConditionStatus, reason string) bool {
	c := networkCondition(pod)
	return c != nil && c.Status == status && c.Reason == reason
}

// setNetworkCondition sets the pod's network-ready condition in place, with
// lastTransitionTime now when the status changes (kept otherwise) and observedGeneration the
// pod's generation; message is cut to maxNoteBytes.
func setNetworkCondition(pod *corev1.Pod, status corev1.ConditionStatus, reason, message string, now time.Time) {
	c := networkCondition(pod)
	if c == nil {
		pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: conditionNetworkReady})
		c = &pod.Status.Conditions[len(pod.Status.Conditions)-1]
	}
	if c.Status != status {
		c.LastTransitionTime = metav1.NewTime(now)
	}
	c.Status = status
	c.Reason = reason
	c.Message = truncate(message, maxNoteBytes)
	c.ObservedGeneration = pod.Generation
}

// ensureNotReadyCondition sets the pod's network-ready condition False with reason and
// message, when the pod has the readiness gate and the condition is not already exactly that
// (so a pod whose last error does not change is written once, not at every retry). It
// reports whether the pod now holds that condition: false after a lost optimistic-lock
// conflict (the newer pod comes back through its own event). The error is the status
// patch's.
func (r *Reconciler) ensureNotReadyCondition(ctx context.Context, pod *corev1.Pod, reason, message string, now time.Time) (bool, error) {
	if !hasReadinessGate(pod) {
		return true, nil
	}
	message = truncate(message, maxNoteBytes)
	if c := networkCondition(pod); c != nil && c.Status == corev1.ConditionFalse && c.Reason == reason && c.Message == message {
		return true, nil
	}
	applied, err := r.patchPodStatus(ctx, pod, func(p *corev1.Pod) {
		setNetworkCondition(p, corev1.ConditionFalse, reason, message, now)
	})
	if err != nil || !applied {
		return false, err
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Set the network readiness-gate condition", "status", corev1.ConditionFalse, "reason", reason)
	return true, nil
}
