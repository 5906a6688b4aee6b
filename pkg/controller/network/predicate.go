package network

import (
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// HasNetworkType is the predicate that admits only pods carrying the annotation
// game.kruise.io/network-type (any value, even empty: the webhook reports unknown types); on
// updates it looks at the new object. Other pods never reach Reconcile.
func HasNetworkType() predicate.Predicate {
	return predicate.NewPredicateFuncs(hasNetworkType)
}

// hasNetworkType reports whether obj has the game.kruise.io/network-type annotation.
func hasNetworkType(obj client.Object) bool {
	_, ok := obj.GetAnnotations()[networkstatus.AnnotationNetworkType]
	return ok
}

// GotNodeOrIP is the predicate of updates that give a pod a node (spec.nodeName) or an IP
// (status.podIP) it did not have: the moment a plugin that failed for want of either can
// succeed. Neither change reaches the mutating webhook on its own (the scheduler writes
// pods/binding and the kubelet pods/status), so the network controller retries such a pod at
// once instead of at its next backoff stamp. Create, delete and generic events do not match.
func GotNodeOrIP() predicate.Predicate { return podUpdate(gotNodeOrIP) }

// gotNodeOrIP reports whether newPod has a node or an IP that oldPod had not.
func gotNodeOrIP(oldPod, newPod *corev1.Pod) bool {
	return (oldPod.Spec.NodeName == "" && newPod.Spec.NodeName != "") ||
		(oldPod.Status.PodIP == "" && newPod.Status.PodIP != "")
}

// WroteFirstStatus is the predicate of updates that give a scheduled pod its first
// game.kruise.io/network-status, NotReady: a plugin's first run, which for OKG's
// load-balancer plugins (and Kubernetes-NodePort) writes that status and nothing else, the
// Service coming at the next run. OKG's GameServer controller makes that run about 5 s later;
// the network controller makes it at once, so the cloud starts on the load balancer 5 s
// sooner. A pod author who removes and re-adds the status gets one more run per such update,
// never more. Create, delete and generic events do not match.
func WroteFirstStatus() predicate.Predicate { return podUpdate(wroteFirstStatus) }

// podUpdate is the predicate of pod updates for which changed(old, new) holds; create,
// delete and generic events, and objects that are not pods, do not match.
func podUpdate(changed func(oldPod, newPod *corev1.Pod) bool) predicate.Predicate {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			oldPod, ok1 := e.ObjectOld.(*corev1.Pod)
			newPod, ok2 := e.ObjectNew.(*corev1.Pod)
			return ok1 && ok2 && changed(oldPod, newPod)
		},
	}
}

// wroteFirstStatus reports whether newPod is scheduled and has a NotReady network-status
// where oldPod had none.
func wroteFirstStatus(oldPod, newPod *corev1.Pod) bool {
	if _, had := oldPod.Annotations[networkstatus.AnnotationNetworkStatus]; had || newPod.Spec.NodeName == "" {
		return false
	}
	st, err := networkstatus.StatusFromPod(newPod)
	return err == nil && st != nil && st.CurrentNetworkState == networkstatus.NetworkNotReady
}
