package networkretry

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// ScheduledAt returns when pod was bound to a node, and false while it has no spec.nodeName.
// The time is the lastTransitionTime of its PodScheduled condition with status True (the
// apiserver's binding sets it when the scheduler binds the pod); a pod that has a node but no
// such condition (created with spec.nodeName, or not yet reported) counts as scheduled when
// it was created.
func ScheduledAt(pod *corev1.Pod) (time.Time, bool) {
	if pod.Spec.NodeName == "" {
		return time.Time{}, false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue && !c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime.Time, true
		}
	}
	return pod.CreationTimestamp.Time, true
}

// WindowStart returns when the retry window of s started for pod: the first not-Ready plugin
// run (Since) or the pod's scheduling (ScheduledAt), whichever came later, and never before
// the pod was created (a state copied onto a new pod does not shorten its window). It returns
// false while the pod is not scheduled: a pod that is merely Pending has no running window
// and is never exhausted.
func (s *State) WindowStart(pod *corev1.Pod) (time.Time, bool) {
	scheduled, ok := ScheduledAt(pod)
	if !ok {
		return time.Time{}, false
	}
	start := s.Since.Time
	for _, t := range []time.Time{scheduled, pod.CreationTimestamp.Time} {
		if t.After(start) {
			start = t
		}
	}
	return start, true
}

// DeadlineFor returns when the retry window of s closes for pod: WindowStart + Window +
// Paused, and false while the pod is not scheduled (no deadline).
func (s *State) DeadlineFor(pod *corev1.Pod) (time.Time, bool) {
	start, ok := s.WindowStart(pod)
	if !ok {
		return time.Time{}, false
	}
	return start.Add(s.Window.Duration + s.Paused.Duration), true
}
