package network

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/okg-extensions/network-plugin-policy/pkg/networkretry"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// reconcileRetry handles a pod whose network is not Ready and whose retry window is open or
// has not started (the pod is not scheduled); raw is the retry state on the pod. It sets the
// network-ready condition False (reason NetworkNotReady) when the pod has the readiness
// gate. When the next attempt is due (on the schedule raised to the interval floor, the
// retries counted in memory included), or at once when the pod got its node or IP since the
// last plugin run (placedSinceLastRun), it either counts the retry in memory without a
// write (tryQuietRetry) or stamps game.kruise.io/network-trigger-time with now (RFC 3339,
// UTC), together with the retry state with the retries counted in memory when there are
// any, and counts npp_network_retries_total; it requeues for the attempt after that, or
// for the deadline when that comes first (a pod that is not scheduled has none). With
// realRun the attempt is always a stamp (never counted from the caches). A stamp that comes
// late and would fail as the last one may first wait for its turn (holdLateRun, late.go).
func (r *Reconciler) reconcileRetry(ctx context.Context, pod *corev1.Pod, raw *networkretry.State, now time.Time, realRun bool) (ctrl.Result, error) {
	stored := raw.WithMinInterval(r.opts.MinRetryInterval)
	counted := r.withQuietRetries(pod, raw)
	s := counted.WithMinInterval(r.opts.MinRetryInterval)
	deadline, scheduled := s.DeadlineFor(pod)
	if ok, err := r.ensureNotReadyCondition(ctx, pod, ReasonNetworkNotReady, retryingMessage(s, deadline, scheduled), now); err != nil || !ok {
		return ctrl.Result{}, err
	}
	key := client.ObjectKeyFromObject(pod)
	mark, marked := r.placed.Load(key)
	trigger := triggerTime(pod)
	due := nextTrigger(s, trigger, now)
	placed := r.placedSinceLastRun(pod, s, trigger, now)
	if placed {
		due = now
	}
	if now.Before(due) {
		return requeueAt(r.bound(due, deadline, scheduled), now), nil
	}
	observeLateness := func() {
		if !placed {
			r.opts.Metrics.lateness.WithLabelValues(r.opts.pluginLabel(s.Plugin)).Observe(now.Sub(due).Seconds())
		}
	}
	if !placed && !realRun && r.tryQuietRetry(ctx, pod, stored, s, now) {
		observeLateness()
		next := r.withQuietRetries(pod, raw).WithMinInterval(r.opts.MinRetryInterval)
		return requeueAt(r.bound(next.NextAttempt(), deadline, scheduled), now), nil
	}
	if !placed && !realRun {
		if wait, held := r.holdLateRun(ctx, pod, stored, s, now); held {
			return requeueAt(now.Add(wait), now), nil
		}
	}
	var withCounts string
	if counted != raw {
		// The retries counted in memory go on the pod with this run: the webhook records
		// the run after them, on schedule (no pause), and attempts keep counting.
		v, err := counted.Encode()
		if err != nil {
			return ctrl.Result{}, err
		}
		withCounts = v
	}

	stamp := now.UTC().Format(time.RFC3339)
	if pod.Annotations[networkstatus.AnnotationNetworkTriggerTime] == stamp {
		// Stamped this second already (the annotation has second precision): the same value
		// again would not be a change.
		return ctrl.Result{RequeueAfter: minRequeue}, nil
	}
	applied, err := r.patchPod(ctx, pod, func(p *corev1.Pod) {
		p.Annotations[networkstatus.AnnotationNetworkTriggerTime] = stamp
		if withCounts != "" {
			p.Annotations[networkretry.Annotation] = withCounts
		}
	})
	if err != nil || !applied {
		return ctrl.Result{}, err
	}
	r.quiet.Delete(key)
	r.dropHeld(key)
	observeLateness()
	if marked && r.spendMark(key, mark.(placedMark), pod) {
		return ctrl.Result{RequeueAfter: minRequeue}, nil
	}
	r.opts.Metrics.retries.WithLabelValues(r.opts.pluginLabel(s.Plugin)).Inc()
	ctrl.LoggerFrom(ctx).V(1).Info("Triggered a network plugin retry", "plugin", s.Plugin, "triggerTime", stamp,
		"attempts", s.Attempts, "scheduled", scheduled, "deadline", deadline, "gotNodeOrIP", placed)

	// The stamp was a pod UPDATE: the webhook ran the plugin in the same write, and pod now
	// holds the retry state it recorded (or the one before, if it recorded none).
	next := s
	if ns, err := networkretry.FromPodAt(pod, now); err == nil && ns != nil {
		next = ns.WithMinInterval(r.opts.MinRetryInterval)
	}
	nextDeadline, nextScheduled := next.DeadlineFor(pod)
	return requeueAt(r.bound(nextTrigger(next, triggerTime(pod), now), nextDeadline, nextScheduled), now), nil
}

// bound returns due, or the deadline when the pod is scheduled and that comes first. A
// deadline that has passed does not count: the window is open only because a run is overdue
// (networkretry.State.Overdue), and the run's record moves the deadline.
func (r *Reconciler) bound(due, deadline time.Time, scheduled bool) time.Time {
	if scheduled && deadline.After(r.opts.Clock.Now()) {
		return earliest(due, deadline)
	}
	return due
}

// placedMark is the value of Reconciler.placed: the pod incarnation (its UID; empty where the
// event cannot tell it: a Fixed Service a GameServerSet owns, an answer named after the pod)
// and the resourceVersion of the update that gave it a node or an IP, or of the object whose
// answer marks it (loadBalancerEvents: the Service; resultEvents: a PodEIP, a PodDNAT, or an
// operator's EIP or NLB object, which marks the game servers of the GameServerSet its label
// names).
// The resourceVersion tells two marks of one pod apart, so that a stamp spends only the mark
// it acted on (CompareAndDelete).
type placedMark struct {
	uid             types.UID
	resourceVersion string
	// address marks a load-balancer Service that got its address (loadBalancerEvents), or
	// a controller's new answer for the pod or its GameServerSet (resultEvents).
	address bool
	// reruns counts the stamps an address mark has had that left the network not Ready
	// (spendMark).
	reruns int
}

// addressReruns is how many more stamps an address mark (loadBalancerEvents, resultEvents) gets, a second
// apart, while the stamped run still finds the network not Ready: the webhook that ran it may
// be another replica, whose Service informer has not yet delivered the address this
// replica's did. 3 covers an informer that lags by up to 3 s; after that the pod waits for
// its next scheduled attempt (or, exhausted, stays so).
const addressReruns = 3

// spendMark spends mark, the placed mark a stamp of pod (as the patch returned it, the
// webhook's run included) acted on; a mark stored since by a newer update stays. An address
// mark whose run left the network not Ready is kept for another stamp instead, at most
// addressReruns times: spendMark then reports true, and the caller requeues in a second.
func (r *Reconciler) spendMark(key types.NamespacedName, mark placedMark, pod *corev1.Pod) bool {
	if mark.address && mark.reruns < addressReruns && !networkReady(pod) {
		again := mark
		again.reruns++
		return r.placed.CompareAndSwap(key, mark, again)
	}
	r.placed.CompareAndDelete(key, mark)
	return false
}

// placedSinceLastRun reports whether the pod got its node or IP (or its load-balancer
// Service its address) after the plugin last ran for it: a watched update said so
// (Reconciler.placed, for this pod UID or for any pod of the name), or the pod was
// scheduled (networkretry.ScheduledAt) after both the last attempt the webhook recorded and
// the last trigger stamp (trigger; a future one is not ours and does not count). The second
// rule is what survives a manager restart; the first also covers the IP, which has no time on
// the pod, and a binding in the same second as the last run.
func (r *Reconciler) placedSinceLastRun(pod *corev1.Pod, s *networkretry.State, trigger, now time.Time) bool {
	if mark, ok := r.placed.Load(client.ObjectKeyFromObject(pod)); ok && (mark.(placedMark).uid == pod.UID || mark.(placedMark).uid == "") {
		return true
	}
	scheduled, ok := networkretry.ScheduledAt(pod)
	if !ok {
		return false
	}
	last := s.LastAttempt.Time
	if trigger.After(last) && !trigger.After(now) {
		last = trigger
	}
	return scheduled.After(last)
}

// retryingMessage is the message of the False network-ready condition while the network is
// retried: the plugin, the last error, the policy and when the window closes (or that it
// starts when the pod is scheduled). It changes only when one of those does, so the
// condition is not rewritten at every attempt.
func retryingMessage(s *networkretry.State, deadline time.Time, scheduled bool) string {
	lastErr := "the plugin succeeded, the network is not Ready yet"
	if s.LastError != nil {
		lastErr = "last error " + s.LastError.Type + ": " + s.LastError.Message
	}
	if !scheduled {
		return fmt.Sprintf("Network of plugin %s is not Ready (%s); retried under %s, whose %s retry window starts when the pod is scheduled",
			s.Plugin, lastErr, policySource(s), s.Window.Duration)
	}
	return fmt.Sprintf("Network of plugin %s is not Ready (%s); retried under %s until %s",
		s.Plugin, lastErr, policySource(s), deadline.UTC().Format(time.RFC3339))
}

// policySource names where the retry schedule of s came from: "policy <ref>" or "the
// built-in default".
func policySource(s *networkretry.State) string {
	if s.Policy == networkretry.BuiltInDefault {
		return "the built-in default"
	}
	return "policy " + s.Policy
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
