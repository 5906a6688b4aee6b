// Package eventrecorder makes repeated events about one object one Event object with a
// series: however often the object changes in between, whichever replica records them, and
// however far apart they come.
//
// client-go's events library (k8s.io/client-go/tools/events) folds an event into an earlier
// one, as an EventSeries on the same Event object, when both have the same type, reason,
// action, reporting controller and instance, and the same regarding and related references.
// The reference it builds from an object carries the object's resourceVersion. The network
// controller and the pod webhook record an event at every failed retry of a pod, and every
// retry is a pod update (the trigger stamp, the retry state), so no two such events were ever
// alike: each became an Event object of its own, and the library kept every one in its cache
// for 6 minutes. A reference without the resourceVersion (WithoutResourceVersion; the
// object's kind, namespace, name and UID still identify it, and a same-name successor has
// another UID) restores the aggregation within one process.
//
// The library still aggregates only within one process, and ends a series 6 minutes after
// its last repeat; with two webhook replicas and retries minutes apart, one pod's one error
// became up to 5 Event objects. StableNameSink names each Event after its content, so every
// replica, and every series after a pause or a restart, writes the same object; Provider
// puts the two together for the manager.
package eventrecorder

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/reference"
)

// WithoutResourceVersion returns a recorder that records through inner with the regarding and
// related objects replaced by references to them without a resourceVersion (built with
// scheme, which must know their types). An object whose reference cannot be built (a type
// scheme does not know) is passed to inner as it is, which reports the problem the same way.
func WithoutResourceVersion(inner events.EventRecorder, scheme *runtime.Scheme) events.EventRecorder {
	return &recorder{inner: inner, scheme: scheme}
}

type recorder struct {
	inner  events.EventRecorder
	scheme *runtime.Scheme
}

// Eventf records through the inner recorder with references without a resourceVersion.
func (r *recorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	r.inner.Eventf(r.stable(regarding), r.stable(related), eventtype, reason, action, note, args...)
}

// stable returns a reference to obj without its resourceVersion; nil stays nil, and obj
// itself when no reference can be built.
func (r *recorder) stable(obj runtime.Object) runtime.Object {
	if obj == nil {
		return nil
	}
	ref, err := reference.GetReference(r.scheme, obj)
	if err != nil {
		return obj
	}
	c := *ref
	c.ResourceVersion = ""
	return &c
}
