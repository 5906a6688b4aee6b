package pod

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
)

// OwnedAnnotationPrefix is the prefix of the pod annotations that only the manager writes:
// policy.game.kruise.io/network-decision (this webhook) and policy.game.kruise.io/network-retry
// (this webhook, and the network controller's exhausted mark). A pod author who could write
// them could keep a retry window open for ever, make the backoff zero, or have a pod
// recreated in a loop; so the webhook never takes them from a request it does not trust.
const OwnedAnnotationPrefix = "policy.game.kruise.io/"

// protectOwned returns the pod the webhook works from: the request's pod with the manager's
// own annotations (OwnedAnnotationPrefix) as the manager last wrote them, and the keys it put
// back, sorted.
//
//   - CREATE: every owned annotation is dropped, whoever sends it: a new pod has no state the
//     manager wrote.
//   - UPDATE by the manager itself (trusted: the network controller's exhausted mark and
//     trigger stamps, made with the manager's own credentials): the request's values stand.
//   - UPDATE by anyone else: each owned annotation is reset to its value in the stored pod
//     (old), and removed when old has none, so an edit is reverted in the same admission.
//
// pod is not modified; the result is pod itself when nothing differs.
func protectOwned(pod, old *corev1.Pod, op plugin.Operation, trusted bool) (*corev1.Pod, []string) {
	if op == plugin.OperationUpdate && trusted {
		return pod, nil
	}
	var oldAnnotations map[string]string
	if op == plugin.OperationUpdate && old != nil {
		oldAnnotations = old.Annotations
	}
	var changed []string
	for k, v := range pod.Annotations {
		if strings.HasPrefix(k, OwnedAnnotationPrefix) {
			if was, ok := oldAnnotations[k]; !ok || was != v {
				changed = append(changed, k)
			}
		}
	}
	for k := range oldAnnotations {
		if _, ok := pod.Annotations[k]; !ok && strings.HasPrefix(k, OwnedAnnotationPrefix) {
			changed = append(changed, k)
		}
	}
	if len(changed) == 0 {
		return pod, nil
	}
	slices.Sort(changed)
	return restoreAnnotations(pod, oldAnnotations, changed), changed
}

// restoreAnnotations returns a copy of pod whose annotations keys are as in was: set to was's
// value, or removed when was has none. pod is not modified.
func restoreAnnotations(pod *corev1.Pod, was map[string]string, keys []string) *corev1.Pod {
	clean := pod.DeepCopy()
	if clean.Annotations == nil {
		clean.Annotations = map[string]string{}
	}
	for _, k := range keys {
		if v, ok := was[k]; ok {
			clean.Annotations[k] = v
		} else {
			delete(clean.Annotations, k)
		}
	}
	return clean
}

// ownedWarning is the admission warning for the owned annotations protectOwned put back.
func ownedWarning(op plugin.Operation, keys []string) string {
	what := "reverted to the value the manager wrote"
	if op == plugin.OperationCreate {
		what = "dropped"
	}
	return "annotations " + strings.Join(keys, ", ") + " are written by network-plugin-policy only: " + what
}

// byManager reports whether req was made with the manager's own credentials (its
// ServiceAccount's username, managerUsername; never when that is empty): such a request may
// change the manager's own annotations.
func byManager(managerUsername string, req admission.Request) bool {
	return managerUsername != "" && req.UserInfo.Username == managerUsername
}
