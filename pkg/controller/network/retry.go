package network

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/okg-extensions/network-plugin-policy/pkg/networkretry"
	"github.com/okg-extensions/network-plugin-policy/pkg/networkstatus"
)

// reconcileRetry handles a pod whose network is not Ready and whose retry window is open
// (now < s.Deadline(), s.Exhausted nil). When the next attempt is due it stamps
// game.kruise.io/network-trigger-time with now (RFC 3339, UTC) and counts
// npp_network_retries_total; it requeues for the attempt after that, or for the deadline when
// that comes first.
func (r *Reconciler) reconcileRetry(ctx context.Context, pod *corev1.Pod, s *networkretry.State, now time.Time) (ctrl.Result, error) {
	due := nextTrigger(s, triggerTime(pod), now)
	if now.Before(due) {
		return requeueAt(earliest(due, s.Deadline()), now), nil
	}

	stamp := now.UTC().Format(time.RFC3339)
	applied, err := r.patchPod(ctx, pod, func(p *corev1.Pod) { p.Annotations[networkstatus.AnnotationNetworkTriggerTime] = stamp })
	if err != nil || !applied {
		return ctrl.Result{}, err
	}
	r.opts.Metrics.retries.WithLabelValues(s.Plugin).Inc()
	ctrl.LoggerFrom(ctx).V(1).Info("Triggered a network plugin retry", "plugin", s.Plugin, "triggerTime", stamp,
		"attempts", s.Attempts, "deadline", s.Deadline())

	// The stamp was a pod UPDATE: the webhook ran the plugin in the same write, and pod now
	// holds the retry state it recorded (or the one before, if it recorded none).
	next := s
	if ns, err := networkretry.FromPod(pod); err == nil && ns != nil {
		next = ns
	}
	return requeueAt(earliest(nextTrigger(next, triggerTime(pod), now), next.Deadline()), now), nil
}

// nextTrigger is when the next network-trigger-time stamp is due for the retry state s on a
// pod whose current trigger time is trigger (zero when it has none): s.NextAttempt(), that is
// the last attempt plus the backoff after it. While the webhook has not recorded an attempt
// for the last stamp (trigger after s.LastAttempt, and not in the future, which would be
// someone else's), that stamp counts as attempt s.Attempts+1: the next one is due no earlier
// than trigger + s.Backoff(s.Attempts+1). So a webhook that does not record attempts (a pod
// its namespaceSelector excludes, a slow or failing webhook) gets stamps on the backoff
// schedule, never a burst.
func nextTrigger(s *networkretry.State, trigger, now time.Time) time.Time {
	next := s.NextAttempt()
	if trigger.After(s.LastAttempt.Time) && !trigger.After(now) {
		if pending := trigger.Add(s.Backoff(s.Attempts + 1)); pending.After(next) {
			next = pending
		}
	}
	return next
}

// triggerTime parses the pod's game.kruise.io/network-trigger-time (RFC 3339); zero when the
// pod has none or it does not parse (OKG writes the same format; anything else is not ours).
func triggerTime(pod *corev1.Pod) time.Time {
	t, err := time.Parse(time.RFC3339, pod.Annotations[networkstatus.AnnotationNetworkTriggerTime])
	if err != nil {
		return time.Time{}
	}
	return t
}

// earliest returns the earlier of a and b.
func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
