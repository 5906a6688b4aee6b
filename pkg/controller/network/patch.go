package network

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Every write of the controller is a patch guarded by the resourceVersion it read (optimistic
// lock), because every write is a decision taken on that exact version of the pod: "attempt n
// is due", "the window of this state is closed", "this retry state is obsolete". A plain merge
// patch would apply such a decision to whatever the pod holds by then, for example remove a
// retry state that the webhook wrote a moment ago (the network failed again) and leave the pod
// not Ready with nothing to retry it, stamp a trigger right after the webhook recorded an
// attempt, or take an exhausted action twice. On a conflict the controller drops the decision:
// the newer version reaches Reconcile through its own watch event.
//
// Metadata patches are JSON merge patches (they touch single annotation keys); status patches
// are strategic merge patches, so that they carry only the network-ready condition (merged by
// type) and never rewrite the kubelet's conditions.

// patchPod applies mutate to a copy of pod and patches the difference in the pod's metadata
// and spec, with an optimistic lock. It reports false, nil on a conflict or when the pod is
// gone; on success pod holds the patched pod as returned by the API server (including what
// the mutating webhook changed in the same write).
func (r *Reconciler) patchPod(ctx context.Context, pod *corev1.Pod, mutate func(*corev1.Pod)) (bool, error) {
	base := pod.DeepCopy()
	mutate(pod)
	patch := client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})
	if err := r.client.Patch(ctx, pod, patch); err != nil {
		return handlePatchError(ctx, base, pod, err, "patch pod")
	}
	return true, nil
}

// patchPodStatus is patchPod for the status subresource (a strategic merge patch).
func (r *Reconciler) patchPodStatus(ctx context.Context, pod *corev1.Pod, mutate func(*corev1.Pod)) (bool, error) {
	base := pod.DeepCopy()
	mutate(pod)
	patch := client.StrategicMergeFrom(base, client.MergeFromWithOptimisticLock{})
	if err := r.client.Status().Patch(ctx, pod, patch); err != nil {
		return handlePatchError(ctx, base, pod, err, "patch pod status")
	}
	return true, nil
}

// handlePatchError restores pod to base after a failed patch and turns conflicts and
// not-found errors into "not applied"; other errors are wrapped with what, the pod's key.
func handlePatchError(ctx context.Context, base, pod *corev1.Pod, err error, what string) (bool, error) {
	base.DeepCopyInto(pod)
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		ctrl.LoggerFrom(ctx).V(1).Info("Pod changed or went away, waiting for its next event", "write", what, "reason", apierrors.ReasonForError(err))
		return false, nil
	}
	return false, fmt.Errorf("%s %s: %w", what, client.ObjectKeyFromObject(pod), err)
}
