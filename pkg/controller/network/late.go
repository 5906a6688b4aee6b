package network

import (
	"context"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/okg-extensions/network-plugin-policy/pkg/networkretry"
)

// Late runs. A retry that comes more than networkretry.PauseSlack after its schedule is a
// real run, never a quiet one (quiet.go): its run has the webhook count the lateness as
// paused. Such retries come together: a new leader finds the stored state of every pod whose
// retries its predecessor counted quietly overdue, and so does a leader that was away or
// busy. At once they would be a burst of writes (on 2 cores, 500 pods' stamps and condition
// writes in 4-5 s: docs/benchmarks.md, "Failover and cold start at scale"). So a late run
// whose caches show that it would fail as the last one (Options.Precheck, the same check as a
// quiet retry) waits for a token of lateRuns, Options.LateRunsPerSecond with a burst of
// lateRunsBurst, and the pod is requeued for it. While it waits nothing is written, its window
// cannot close (an overdue attempt keeps it open: Reconcile), and the webhook's run counts the
// wait as paused with the rest of the lateness; the wait ends at the pod's refresh slot at the
// latest (refreshDue), so a leader change still extends a window by at most StateRefresh. A
// late run whose caches show another outcome, or cannot tell, or that follows a new node, IP
// or address, is not held. The tokens, like the quiet records, are the leader's memory.

// lateRunsBurst is the burst of Reconciler.lateRuns: one second's worth at the default rate,
// so that the few pods that were due during a short pause go at once. It is not what makes a
// new leader's first second busy: in `make bench-failover` that second made 64 and 71 API
// writes with a burst of 10 and of 4, most of them the runs whose caches could not decide
// yet, which are never held (docs/benchmarks.md).
const lateRunsBurst = 4

// heldRun is the value of Reconciler.held: the pod incarnation and the stored retry state
// (its LastAttempt and Attempts) the run was held for, when it may go, and the token's
// reservation, given back when the run goes early or not at all.
type heldRun struct {
	uid          types.UID
	base         time.Time
	baseAttempts int32
	at           time.Time
	token        *rate.Reservation
}

// holdLateRun reports whether the due retry of pod, a real run because it comes late, waits
// for its token, and how long: stored is the retry state on the pod, eff the same with the
// retries counted in memory, both raised to the interval floor. It is held when
// Options.Precheck is set, the last run failed conclusively, the retry is more than
// networkretry.PauseSlack late, the pod's refresh slot is still ahead, and the caches show
// the same failure again; then the pod keeps the time its token allows (Reconciler.held) and
// is held until then, or until its refresh slot when that comes first. A pod whose time has
// come is not held; the stamp, or forget, drops its entry. An entry for another incarnation
// or another stored state (the webhook ran the plugin since) is dropped and its token given
// back, and so is the entry of a pod whose caches now show another outcome.
func (r *Reconciler) holdLateRun(ctx context.Context, pod *corev1.Pod, stored, eff *networkretry.State, now time.Time) (time.Duration, bool) {
	key := client.ObjectKeyFromObject(pod)
	var held *heldRun
	if v, ok := r.held.Load(key); ok {
		h := v.(heldRun)
		if h.uid == pod.UID && h.base.Equal(stored.LastAttempt.Time) && h.baseAttempts == stored.Attempts {
			held = &h
		} else {
			r.dropHeld(key)
		}
	}
	if held != nil && !now.Before(held.at) {
		return 0, false
	}
	refresh := refreshDue(pod.UID, stored.LastAttempt.Time, r.opts.StateRefresh)
	if !eff.Overdue(now) || !now.Before(refresh) || !r.failsAsBefore(ctx, pod, stored) {
		r.dropHeld(key)
		return 0, false
	}
	if held != nil {
		return held.at.Sub(now), true
	}
	// The clock again, not now: the check above may have taken a while, and the token bucket
	// must not be handed a time earlier than another worker's.
	t := r.opts.Clock.Now()
	token := r.lateRuns.ReserveN(t, 1)
	wait := token.DelayFrom(t)
	if wait <= 0 {
		return 0, false
	}
	at := t.Add(wait)
	if at.After(refresh) {
		token.CancelAt(t)
		token, at = nil, refresh
	}
	r.held.Store(key, heldRun{uid: pod.UID, base: stored.LastAttempt.Time, baseAttempts: stored.Attempts, at: at, token: token})
	ctrl.LoggerFrom(ctx).V(1).Info("Late retry would fail as the last one; held for its turn",
		"plugin", stored.Plugin, "late", now.Sub(eff.NextAttempt()).Round(time.Second).String(), "until", at)
	return max(at.Sub(now), 0), true
}

// dropHeld drops the held run of key, if any, and gives its token back when its time has not
// come (a token's time that has passed was the run's, used or not).
func (r *Reconciler) dropHeld(key types.NamespacedName) {
	v, ok := r.held.LoadAndDelete(key)
	if !ok {
		return
	}
	if h := v.(heldRun); h.token != nil {
		h.token.CancelAt(r.opts.Clock.Now())
	}
}
