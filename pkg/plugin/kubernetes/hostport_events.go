package kubernetes

import (
	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
)

// hostPortEvents feeds the pod informer's events to the HostPort plugin's allocator.
// The informer delivers events to one handler sequentially; each event takes the
// allocator's lock once.
type hostPortEvents struct{ alloc *hostPortAllocator }

var _ toolscache.ResourceEventHandler = hostPortEvents{}

// OnAdd observes a pod (also for every pod of the informer's initial list).
func (e hostPortEvents) OnAdd(obj any, _ bool) {
	if pod, ok := obj.(*corev1.Pod); ok {
		e.alloc.observe(pod)
	}
}

// OnUpdate observes the pod's new state; a new UID under the same namespace/name
// (the informer replaced the pod after a re-list) forgets the old one.
func (e hostPortEvents) OnUpdate(_, newObj any) {
	if pod, ok := newObj.(*corev1.Pod); ok {
		e.alloc.observe(pod)
	}
}

// OnDelete releases the pod's ports. A DeletedFinalStateUnknown tombstone (the delete
// was missed and found at a re-list) releases the pod it carries, or, when it carries
// none, the pod observed under its namespace/name key.
func (e hostPortEvents) OnDelete(obj any) {
	alloc := e.alloc
	switch o := obj.(type) {
	case *corev1.Pod:
		alloc.forget(o.UID)
	case toolscache.DeletedFinalStateUnknown:
		if pod, ok := o.Obj.(*corev1.Pod); ok && pod.UID != "" {
			alloc.forget(pod.UID)
			return
		}
		if ns, name, err := toolscache.SplitMetaNamespaceKey(o.Key); err == nil {
			alloc.forgetName(ns, name)
		}
	}
}
