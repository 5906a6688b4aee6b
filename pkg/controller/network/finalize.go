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

// ReasonFinalizerReleased is the reason of the Normal Event recorded when a terminating pod's
// plugin finalizer is removed without the plugin's Finalize: the pod no longer names the
// plugin's network type, so its network-conf is not the plugin's to act on.
const ReasonFinalizerReleased = "NetworkFinalizerReleased"

// finalize runs a terminating pod's plugin Finalize (f, of network type networkType) and,
// when it returns nil, removes the plugin's finalizer with a patch guarded by the pod's
// resourceVersion. Before the OKG guard's first look, or while the manager steps back from
// the type's provider (kruise-game-manager finalizes its own pods), it does nothing and looks
// again later. A pod whose network-type annotation no longer names networkType (changed or
// removed since the finalizer was added) is let go without Finalize: nothing is deleted on a
// conf of another type, and no pod is held terminating by a finalizer nothing would remove
// (ReasonFinalizerReleased). A RetryError is waited for (finalizeRequeue); another error is
// returned for the workqueue's back-off; a patch that loses a conflict or finds the pod gone
// is not an error.
func (r *Reconciler) finalize(ctx context.Context, pod *corev1.Pod, networkType string, f plugin.PodFinalizer) (ctrl.Result, error) {
	if r.opts.notLookedYet() {
		return ctrl.Result{RequeueAfter: lookRequeue}, nil
	}
	if r.opts.steppingBack(networkType) {
		return ctrl.Result{RequeueAfter: stepBackRequeue}, nil
	}
	log := ctrl.LoggerFrom(ctx).WithValues("pod", client.ObjectKeyFromObject(pod), "finalizer", f.Finalizer())
	released := pod.Annotations[networkstatus.AnnotationNetworkType] != networkType
	if !released {
		if err := f.Finalize(ctrl.LoggerInto(ctx, log), r.client, pod); err != nil {
			var perr *plugin.Error
			if errors.As(err, &perr) && perr.Type == plugin.RetryError {
				log.V(1).Info("Finalizer kept: waiting", "reason", err.Error())
				return ctrl.Result{RequeueAfter: finalizeRequeue}, nil
			}
			return ctrl.Result{}, fmt.Errorf("finalize pod %s/%s (%s): %w", pod.Namespace, pod.Name, f.Finalizer(), err)
		}
	}
	next := pod.DeepCopy()
	next.Finalizers = slices.DeleteFunc(next.Finalizers, func(s string) bool { return s == f.Finalizer() })
	if err := r.client.Patch(ctx, next, client.MergeFromWithOptions(pod, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil // the newer version comes with its own event
		}
		return ctrl.Result{}, fmt.Errorf("remove finalizer %s of pod %s/%s: %w", f.Finalizer(), pod.Namespace, pod.Name, err)
	}
	if released {
		log.Info("Finalizer released: the pod's network type is no longer the plugin's; nothing deleted", "networkType", pod.Annotations[networkstatus.AnnotationNetworkType], "pluginType", networkType)
		r.eventf(pod, corev1.EventTypeNormal, ReasonFinalizerReleased, "RemoveFinalizer",
			"finalizer %s removed without its cleanup: the pod's network type is %q, not %s, which added it; nothing was deleted", f.Finalizer(), pod.Annotations[networkstatus.AnnotationNetworkType], networkType)
		return ctrl.Result{}, nil
	}
	log.Info("Finalizer removed")
	return ctrl.Result{}, nil
}
