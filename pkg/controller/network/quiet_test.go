package network

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/okg-extensions/network-plugin-policy/pkg/networkretry"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// quietHarness is a harness whose reconciler has a Precheck that answers with *answer (and
// true), or false when answer is nil, and a StateRefresh of refresh. writes counts the pod
// writes (patches and updates of the pod and its status).
func quietHarness(t *testing.T, refresh time.Duration, answer **networkretry.Error, writes *int, pod *corev1.Pod) *harness {
	t.Helper()
	h := newHarness(t, t0, interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			*writes++
			return c.Patch(ctx, obj, patch, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			*writes++
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	}, pod)
	h.r.opts.StateRefresh = refresh
	h.r.opts.Precheck = func(context.Context, *corev1.Pod) (*networkretry.Error, bool) {
		if *answer == nil {
			return nil, false
		}
		e := **answer
		return &e, true
	}
	return h
}

// TestQuietRetries drives a whole window in which every retry would fail as the first run
// did: the retries on schedule are counted in memory without a write, the state is written
// by a real run at the first retry after the pod's refresh slot (placed here 76-120 s into
// each 2-minute period from t0), carrying the counted
// attempts (so the webhook records that run on schedule, with no pause), and the window
// closes exactly when it would have with a write per retry.
func TestQuietRetries(t *testing.T) {
	same := newState().LastError
	writes := 0
	uid := uidWithRefresh(t, t0, 2*time.Minute, 76*time.Second, 2*time.Minute)
	h := quietHarness(t, 2*time.Minute, &same, &writes, newPod().uid(uid).notReady().retry(newState()).obj())
	var stamps, quiet []time.Duration
	for range 30 {
		now := h.clock.Now()
		trigger := h.pod(t).Annotations[networkstatus.AnnotationNetworkTriggerTime]
		q := testutil.ToFloat64(h.metrics.quietRetries.WithLabelValues(testPlugin))
		res := h.mustReconcile(t)
		if got := h.pod(t).Annotations[networkstatus.AnnotationNetworkTriggerTime]; got != trigger {
			stamps = append(stamps, now.Sub(t0))
			if now.Equal(at(135 * time.Second)) {
				s := h.state(t)
				if s.Attempts != 5 || !s.LastAttempt.Time.Equal(at(75*time.Second)) {
					t.Errorf("state written with the stamp: attempts %d, lastAttempt %s; want 5 and the last counted retry at 75s", s.Attempts, s.LastAttempt.Sub(t0))
				}
			}
			webhookRun(t, h, now)
		}
		if testutil.ToFloat64(h.metrics.quietRetries.WithLabelValues(testPlugin)) > q {
			quiet = append(quiet, now.Sub(t0))
		}
		if res.RequeueAfter == 0 {
			break
		}
		h.clock.Step(res.RequeueAfter)
	}
	// The same schedule as TestBackoffSchedule: 5s, 15s, 35s, 75s, then every minute.
	// The state was written at t0, then by the runs at 135s and 255s: the first retries
	// after the slots at 76-120 s and 196-240 s.
	if diff := cmp.Diff([]time.Duration{5 * time.Second, 15 * time.Second, 35 * time.Second, 75 * time.Second, 195 * time.Second}, quiet); diff != "" {
		t.Errorf("retries counted without a write (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff([]time.Duration{135 * time.Second, 255 * time.Second}, stamps); diff != "" {
		t.Errorf("real runs (-want,+got):\n%s", diff)
	}
	s := h.state(t)
	if s.Exhausted == nil || !s.Exhausted.Time.Equal(at(5*time.Minute)) || s.Paused.Duration != 0 {
		t.Errorf("exhausted %v, paused %s; want exhausted at 5m with nothing paused", s.Exhausted, s.Paused.Duration)
	}
	if s.Attempts != 8 {
		t.Errorf("attempts at exhaustion = %d, want 8 (1 + 4 counted + 1 run + 1 counted + 1 run)", s.Attempts)
	}
	if got := h.retries(); got != 2 {
		t.Errorf("npp_network_retries_total = %v, want 2", got)
	}
	// Two stamps, the exhausted mark, and the condition writes of the exhausted action.
	if writes > 5 {
		t.Errorf("%d pod writes for a 5-minute window, want at most 5", writes)
	}
	if got := h.events(); len(got) != 1 {
		t.Errorf("events = %q, want one NetworkRetryExhausted", got)
	}
}

// TestQuietRetryConditions: a due retry is a real run (a stamp) unless everything says it
// would fail as the last one.
func TestQuietRetryConditions(t *testing.T) {
	same := newState().LastError
	other := &networkretry.Error{Type: "apiCallError", Message: "exceeded quota: services.nodeports=1"}
	unknown := newState(func(s *networkretry.State) {
		s.LastError = &networkretry.Error{Type: "apiCallError", Message: "timeout", Unknown: true}
	})
	cases := map[string]struct {
		pod     *corev1.Pod
		answer  *networkretry.Error
		now     time.Time
		refresh time.Duration // 10m when zero
		quiet   bool
	}{
		"same failure, on schedule":         {pod: newPod().notReady().retry(newState()).obj(), answer: same, now: at(5 * time.Second), quiet: true},
		"another failure":                   {pod: newPod().notReady().retry(newState()).obj(), answer: other, now: at(5 * time.Second)},
		"the caches cannot tell":            {pod: newPod().notReady().retry(newState()).obj(), answer: nil, now: at(5 * time.Second)},
		"the last failure was inconclusive": {pod: newPod().notReady().retry(unknown).obj(), answer: same, now: at(5 * time.Second)},
		"late: the pause must be counted":   {pod: newPod().notReady().retry(newState()).obj(), answer: same, now: at(time.Minute)},
		"state written longer ago than refresh": {pod: newPod().notReady().retry(newState(window(time.Hour), attempts(9, at(11*time.Minute)))).obj(),
			answer: same, now: at(12 * time.Minute), refresh: 30 * time.Second},
		"the pod just got its node": {pod: newPod().notReady().retry(newState()).scheduledAt(at(3 * time.Second)).obj(),
			answer: same, now: at(4 * time.Second)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			writes := 0
			answer := tc.answer
			refresh := tc.refresh
			if refresh == 0 {
				refresh = 10 * time.Minute
			}
			h := quietHarness(t, refresh, &answer, &writes, tc.pod)
			h.clock.SetTime(tc.now)
			trigger := h.pod(t).Annotations[networkstatus.AnnotationNetworkTriggerTime]
			h.mustReconcile(t)
			stamped := h.pod(t).Annotations[networkstatus.AnnotationNetworkTriggerTime] != trigger
			counted := testutil.ToFloat64(h.metrics.quietRetries.WithLabelValues(testPlugin)) == 1
			if tc.quiet && (stamped || !counted || writes != 0) {
				t.Errorf("stamped %v, counted %v, %d writes; want counted without a write", stamped, counted, writes)
			}
			if !tc.quiet && (!stamped || counted) {
				t.Errorf("stamped %v, counted %v; want a real run", stamped, counted)
			}
		})
	}
}

// TestQuietRetriesAcrossALeaderChange: a new leader has no counted retries; when the stored
// state's next attempt is more than PauseSlack overdue, as here, its first retry is a real
// run that writes the state (the webhook counts the time since the stored next attempt as
// paused, so the window is extended, never shortened), then it counts quietly.
func TestQuietRetriesAcrossALeaderChange(t *testing.T) {
	same := newState().LastError
	writes := 0
	h := quietHarness(t, 10*time.Minute, &same, &writes, newPod().notReady().retry(newState(window(time.Hour))).obj())
	for _, d := range []time.Duration{5 * time.Second, 15 * time.Second, 35 * time.Second} {
		h.clock.SetTime(at(d))
		h.mustReconcile(t)
	}
	if writes != 0 {
		t.Fatalf("%d writes while counting quietly, want 0", writes)
	}
	// The leader changes: a new reconciler with the same options and no memory.
	opts := h.r.opts
	h.r = NewReconciler(h.client, h.recorder, opts)
	h.clock.SetTime(at(75 * time.Second))
	trigger := h.pod(t).Annotations[networkstatus.AnnotationNetworkTriggerTime]
	h.mustReconcile(t)
	if h.pod(t).Annotations[networkstatus.AnnotationNetworkTriggerTime] == trigger {
		t.Fatal("the new leader's first retry was not a real run")
	}
	webhookRun(t, h, at(75*time.Second))
	s := h.state(t)
	if s.Attempts != 2 || s.Paused.Duration <= 0 || !s.Since.Time.Equal(t0) {
		t.Errorf("state after the new leader's run: attempts %d, paused %s, since %s; want 2, some pause, since t0", s.Attempts, s.Paused.Duration, s.Since.Time)
	}
	writes = 0
	h.clock.SetTime(at(75*time.Second + s.Backoff(s.Attempts)))
	h.mustReconcile(t)
	if writes != 0 || testutil.ToFloat64(h.metrics.quietRetries.WithLabelValues(testPlugin)) != 4 {
		t.Errorf("after the real run: %d writes, want the next retry counted quietly", writes)
	}
}

// TestNewLeaderChecksBeforeItExhausts: a leader that finds a window closed while the attempt
// before it is due, and that has not counted that attempt itself (a new leader), makes it
// first: when the caches show the same failure, it counts it and then exhausts; when they
// cannot tell (the Service would now be created), it runs the plugin for real and does not
// exhaust on what an older leader last wrote.
func TestNewLeaderChecksBeforeItExhausts(t *testing.T) {
	// Window 5m from t0; the state was last written at 4m (attempt 6, next due at 5m).
	stale := newState(attempts(6, at(4*time.Minute)))
	// A pod whose refresh slot is not due before 5m10s: the state is not refreshed first.
	uid := uidWithRefresh(t, at(4*time.Minute), 10*time.Minute, 2*time.Minute, 10*time.Minute)
	t.Run("same failure: counted, then exhausted", func(t *testing.T) {
		same := newState().LastError
		writes := 0
		h := quietHarness(t, 10*time.Minute, &same, &writes, newPod().uid(uid).notReady().retry(stale).obj())
		h.clock.SetTime(at(5*time.Minute + 10*time.Second))
		h.mustReconcile(t)
		if s := h.state(t); s.Exhausted != nil || testutil.ToFloat64(h.metrics.quietRetries.WithLabelValues(testPlugin)) != 1 {
			t.Fatalf("first reconcile: exhausted %v, counted %v; want the due attempt counted first",
				s.Exhausted, testutil.ToFloat64(h.metrics.quietRetries.WithLabelValues(testPlugin)))
		}
		h.mustReconcile(t)
		if s := h.state(t); s.Exhausted == nil {
			t.Error("second reconcile: not exhausted after the counted attempt failed the same way")
		}
	})
	t.Run("the caches cannot tell: a real run, not exhausted", func(t *testing.T) {
		var none *networkretry.Error
		writes := 0
		h := quietHarness(t, 10*time.Minute, &none, &writes, newPod().uid(uid).notReady().retry(stale).obj())
		h.clock.SetTime(at(5*time.Minute + 10*time.Second))
		trigger := h.pod(t).Annotations[networkstatus.AnnotationNetworkTriggerTime]
		h.mustReconcile(t)
		if h.pod(t).Annotations[networkstatus.AnnotationNetworkTriggerTime] == trigger || h.state(t).Exhausted != nil {
			t.Errorf("want a trigger stamp and no exhausted mark, got stamp %q, exhausted %v",
				h.pod(t).Annotations[networkstatus.AnnotationNetworkTriggerTime], h.state(t).Exhausted)
		}
	})
}
