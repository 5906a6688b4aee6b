package network

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// finalizeRequeue is how soon a terminating pod whose plugin waits (a RetryError from
// Finalize) is looked at again.
const finalizeRequeue = 10 * time.Second

// finalize runs a terminating pod's plugin Finalize and, when it returns nil, removes the
// plugin's finalizer with a patch guarded by the pod's resourceVersion. Before the OKG guard's
// first look, or while the manager steps back from the type's provider (kruise-game-manager
// finalizes its own pods), it does nothing and looks again later. A RetryError is waited
// for (finalizeRequeue); another error is returned for the workqueue's back-off; a patch that
// loses a conflict or finds the pod gone is not an error.
func (r *Reconciler) finalize(ctx context.Context, pod *corev1.Pod, f plugin.PodFinalizer) (ctrl.Result, error) {
	networkType := pod.Annotations[networkstatus.AnnotationNetworkType]
	if r.opts.notLookedYet() {
		return ctrl.Result{RequeueAfter: lookRequeue}, nil
	}
	if r.opts.steppingBack(networkType) {
		return ctrl.Result{RequeueAfter: stepBackRequeue}, nil
	}
	log := ctrl.LoggerFrom(ctx).WithValues("pod", client.ObjectKeyFromObject(pod), "finalizer", f.Finalizer())
	if err := f.Finalize(ctrl.LoggerInto(ctx, log), r.client, pod); err != nil {
		var perr *plugin.Error
		if errors.As(err, &perr) && perr.Type == plugin.RetryError {
			log.V(1).Info("Finalizer kept: waiting", "reason", err.Error())
			return ctrl.Result{RequeueAfter: finalizeRequeue}, nil
		}
		return ctrl.Result{}, fmt.Errorf("finalize pod %s/%s (%s): %w", pod.Namespace, pod.Name, f.Finalizer(), err)
	}
	next := pod.DeepCopy()
	next.Finalizers = slices.DeleteFunc(next.Finalizers, func(s string) bool { return s == f.Finalizer() })
	if err := r.client.Patch(ctx, next, client.MergeFromWithOptions(pod, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil // the newer version comes with its own event
		}
		return ctrl.Result{}, fmt.Errorf("remove finalizer %s of pod %s/%s: %w", f.Finalizer(), pod.Namespace, pod.Name, err)
	}
	log.Info("Finalizer removed")
	return ctrl.Result{}, nil
}
