package network

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/okg-extensions/network-plugin-policy/pkg/networkretry"
)

// Quiet retries. A pod whose network fails the same way at every retry (a namespace out of
// node-port quota, a host another namespace serves) would cost one pod UPDATE per retry: the
// trigger stamp, which runs the plugin in the webhook, which records the attempt. When the
// caches already show that the next run would fail exactly as the last one did
// (Options.Precheck: same error type and message), the retry is counted here, in memory,
// and nothing is written. The retry state on the pod is written again, by a real plugin run,
// when something changes (the caches show another outcome, the pod got its node or IP) and
// at the pod's refresh slot, at most Options.StateRefresh after the last write (refresh.go:
// slots spread by UID, so a fleet that failed together is not refreshed together); that
// write carries the attempts counted in memory, so the state on the pod stays the
// schedule's.
//
// Only a leader keeps quiet records. A new leader has none and starts from the state on the
// pod. When that state's next attempt is more than networkretry.PauseSlack overdue (the old
// leader counted retries since it was written), the new leader's first retry is a real run,
// and the webhook counts the time since that attempt was due as paused
// (networkretry.Record): a leader change extends a window by at most StateRefresh, never
// shortens one, and costs one write per such pod, at a bounded rate (late.go). Otherwise
// the new leader counts on from the stored state, and the retries the old leader counted
// since the last write are not in attempts (which only shape the backoff). A retry that is
// itself late (more than PauseSlack after its schedule: the manager was busy or away) is
// also a real run, so that the pause is counted.

// quietRecord counts the retries of one pod incarnation done from the caches since the state
// on the pod was written.
type quietRecord struct {
	// uid is the pod incarnation.
	uid types.UID
	// base is the stored state's LastAttempt and attempts the record counts on; a stored
	// state that differs (the webhook wrote a new one) voids the record.
	base         time.Time
	baseAttempts int32
	// checks is how many retries were counted without a write; lastCheck the last one.
	checks    int32
	lastCheck time.Time
}

// withQuietRetries returns the retry state s of pod with the retries counted in memory: the
// attempts raised by their number and LastAttempt set to the last one. It returns s itself
// when there are none, or when the record is for another incarnation or an older state (the
// record is then dropped).
func (r *Reconciler) withQuietRetries(pod *corev1.Pod, s *networkretry.State) *networkretry.State {
	key := client.ObjectKeyFromObject(pod)
	v, ok := r.quiet.Load(key)
	if !ok {
		return s
	}
	rec := v.(quietRecord)
	if rec.uid != pod.UID || !rec.base.Equal(s.LastAttempt.Time) || rec.baseAttempts != s.Attempts || rec.checks == 0 {
		r.quiet.Delete(key)
		return s
	}
	c := *s
	c.Attempts = min(s.Attempts+rec.checks, networkretry.MaxAttempts)
	c.LastAttempt.Time = rec.lastCheck
	return &c
}

// tryQuietRetry is called when a retry of pod is due at now: stored is the retry state on the
// pod, eff the same with the retries counted in memory (withQuietRetries), both raised to the
// interval floor. It reports true when the retry was counted without a write, because
// every condition holds: Options.Precheck is set; the last run failed conclusively; the
// state on the pod is not due for its refresh (refreshDue); the retry is on schedule (not
// more than networkretry.PauseSlack after eff's next attempt); and the caches show the same
// failure again. Otherwise it reports false and the caller runs the plugin for real.
func (r *Reconciler) tryQuietRetry(ctx context.Context, pod *corev1.Pod, stored, eff *networkretry.State, now time.Time) bool {
	if r.opts.Precheck == nil || stored.LastError == nil || stored.LastError.Unknown {
		return false
	}
	if !now.Before(refreshDue(pod.UID, stored.LastAttempt.Time, r.opts.StateRefresh)) || eff.Overdue(now) {
		return false
	}
	if !r.failsAsBefore(ctx, pod, stored) {
		return false
	}
	key := client.ObjectKeyFromObject(pod)
	rec := quietRecord{uid: pod.UID, base: stored.LastAttempt.Time, baseAttempts: stored.Attempts}
	if v, ok := r.quiet.Load(key); ok {
		if prev := v.(quietRecord); prev.uid == rec.uid && prev.base.Equal(rec.base) && prev.baseAttempts == rec.baseAttempts {
			rec = prev
		}
	}
	rec.checks++
	rec.lastCheck = now
	r.quiet.Store(key, rec)
	r.opts.Metrics.quietRetries.WithLabelValues(r.opts.pluginLabel(stored.Plugin)).Inc()
	ctrl.LoggerFrom(ctx).V(2).Info("Retry would fail as the last one; counted without a write",
		"plugin", stored.Plugin, "attempts", eff.Attempts+1, "errorType", stored.LastError.Type)
	return true
}

// failsAsBefore reports whether the caches show that the next plugin run of pod would fail
// exactly as the last one, which stored records: Options.Precheck is set, the last run
// failed conclusively, and Precheck answers with the same error type and message.
func (r *Reconciler) failsAsBefore(ctx context.Context, pod *corev1.Pod, stored *networkretry.State) bool {
	if r.opts.Precheck == nil || stored.LastError == nil || stored.LastError.Unknown {
		return false
	}
	got, ok := r.opts.Precheck(ctx, pod)
	return ok && got.Type == stored.LastError.Type && got.Message == stored.LastError.Message
}
