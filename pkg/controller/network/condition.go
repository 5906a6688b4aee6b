package network

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
