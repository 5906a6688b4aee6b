package network

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/okg-extensions/network-plugin-policy/pkg/networkretry"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// TestReconcileRetry: while the window is open, the trigger is stamped exactly when the next
// attempt is due, never before and never twice for one attempt, and the pod is requeued for
// the next attempt or the deadline, whichever comes first.
func TestReconcileRetry(t *testing.T) {
	cases := map[string]struct {
		pod         *corev1.Pod
		now         time.Time
		wantTrigger string // network-trigger-time after the reconcile, "" for none; a change counts one retry
		wantRequeue time.Duration
	}{
		"first retry not due yet": {
			pod:         newPod().notReady().retry(newState()).obj(),
			now:         at(4 * time.Second),
			wantRequeue: time.Second,
		},
		"first retry exactly when due": {
			pod:         newPod().notReady().retry(newState()).obj(),
			now:         at(5 * time.Second),
			wantTrigger: "2026-03-01T12:00:05Z",
			wantRequeue: 10 * time.Second, // Backoff(2): interval doubled once
		},
		"first retry overdue": {
			pod:         newPod().notReady().retry(newState()).obj(),
			now:         at(7 * time.Second),
			wantTrigger: "2026-03-01T12:00:07Z",
			wantRequeue: 10 * time.Second,
		},
		"fourth attempt one second early": {
			pod:         newPod().notReady().retry(newState(attempts(3, at(15*time.Second)))).obj(),
			now:         at(34 * time.Second), // due at 15s + Backoff(3) = 35s
			wantRequeue: time.Second,
		},
		"fourth attempt due": {
			pod:         newPod().notReady().retry(newState(attempts(3, at(15*time.Second)))).obj(),
			now:         at(35 * time.Second),
			wantTrigger: "2026-03-01T12:00:35Z",
			wantRequeue: 40 * time.Second,
		},
		"backoff capped at maxInterval": {
			pod:         newPod().notReady().retry(newState(attempts(6, at(2*time.Minute)))).obj(),
			now:         at(3 * time.Minute),
			wantTrigger: "2026-03-01T12:03:00Z",
			wantRequeue: time.Minute,
		},
		"next attempt after the deadline: requeue at the deadline": {
			pod:         newPod().notReady().retry(newState(window(30*time.Second), attempts(3, at(15*time.Second)))).obj(),
			now:         at(20 * time.Second), // next attempt at 35s, deadline at 30s
			wantRequeue: 10 * time.Second,
		},
		"stamp after the last possible attempt: requeue at the deadline": {
			pod:         newPod().notReady().retry(newState(window(30*time.Second), attempts(2, at(5*time.Second)))).obj(),
			now:         at(15 * time.Second),
			wantTrigger: "2026-03-01T12:00:15Z",
			wantRequeue: 15 * time.Second,
		},
		"stamp not yet recorded by the webhook: no second stamp": {
			pod:         newPod().notReady().retry(newState()).trigger(at(5 * time.Second)).obj(),
			now:         at(6 * time.Second), // NextAttempt (5s) is due, but attempt 2 is pending
			wantTrigger: "2026-03-01T12:00:05Z",
			wantRequeue: 9 * time.Second, // the stamp + Backoff(2)
		},
		"stamp not recorded for a whole backoff: stamped again": {
			pod:         newPod().notReady().retry(newState()).trigger(at(5 * time.Second)).obj(),
			now:         at(15 * time.Second),
			wantTrigger: "2026-03-01T12:00:15Z",
			wantRequeue: 10 * time.Second,
		},
		"stamp recorded by the webhook in the same second": {
			pod:         newPod().notReady().retry(newState(attempts(2, at(5*time.Second)))).trigger(at(5 * time.Second)).obj(),
			now:         at(15 * time.Second),
			wantTrigger: "2026-03-01T12:00:15Z",
			wantRequeue: 20 * time.Second,
		},
		"someone else's future trigger time is ignored": {
			pod:         newPod().notReady().retry(newState()).trigger(at(time.Hour)).obj(),
			now:         at(5 * time.Second),
			wantTrigger: "2026-03-01T12:00:05Z",
			wantRequeue: 10 * time.Second,
		},
		"malformed trigger time is ignored": {
			pod:         newPod().notReady().retry(newState()).annotation(networkstatus.AnnotationNetworkTriggerTime, "yesterday").obj(),
			now:         at(5 * time.Second),
			wantTrigger: "2026-03-01T12:00:05Z",
			wantRequeue: 10 * time.Second,
		},
		"Waiting is not Ready": {
			pod:         newPod().network(networkstatus.NetworkWaiting).retry(newState()).obj(),
			now:         at(5 * time.Second),
			wantTrigger: "2026-03-01T12:00:05Z",
			wantRequeue: 10 * time.Second,
		},
		"malformed network-status is not Ready": {
			pod:         newPod().annotation(networkstatus.AnnotationNetworkStatus, "{").retry(newState()).obj(),
			now:         at(5 * time.Second),
			wantTrigger: "2026-03-01T12:00:05Z",
			wantRequeue: 10 * time.Second,
		},
		"network-disabled=false retries": {
			pod:         newPod().notReady().retry(newState()).label(networkstatus.LabelNetworkDisabled, "false").obj(),
			now:         at(5 * time.Second),
			wantTrigger: "2026-03-01T12:00:05Z",
			wantRequeue: 10 * time.Second,
		},
		"malformed network-disabled label counts as not disabled": {
			pod:         newPod().notReady().retry(newState()).label(networkstatus.LabelNetworkDisabled, "maybe").obj(),
			now:         at(5 * time.Second),
			wantTrigger: "2026-03-01T12:00:05Z",
			wantRequeue: 10 * time.Second,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, tc.now, interceptor.Funcs{}, tc.pod)
			before := h.state(t)
			hadTrigger := tc.pod.Annotations[networkstatus.AnnotationNetworkTriggerTime]
			res := h.mustReconcile(t)
			if diff := cmp.Diff(ctrl.Result{RequeueAfter: tc.wantRequeue}, res); diff != "" {
				t.Errorf("result (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantTrigger, h.pod(t).Annotations[networkstatus.AnnotationNetworkTriggerTime]); diff != "" {
				t.Errorf("network-trigger-time (-want,+got):\n%s", diff)
			}
			wantRetries := 0.0
			if tc.wantTrigger != hadTrigger {
				wantRetries = 1
			}
			if got := h.retries(); got != wantRetries {
				t.Errorf("npp_network_retries_total = %v, want %v", got, wantRetries)
			}
			if diff := cmp.Diff(before, h.state(t)); diff != "" {
				t.Errorf("retry state changed (-want,+got):\n%s", diff)
			}
			if got := h.events(); len(got) != 0 {
				t.Errorf("events = %q, want none", got)
			}
		})
	}
}

// webhookRun does what the mutating pod webhook does on the pod UPDATE caused by a stamp: run
// the plugin (which fails again) and record the attempt at now.
func webhookRun(t *testing.T, h *harness, now time.Time) {
	t.Helper()
	pod := h.pod(t)
	prev, err := networkretry.FromPod(pod)
	if err != nil {
		t.Fatal(err)
	}
	s := networkretry.Record(prev, now, prev.Plugin, prev.Policy, prev.LastError, prev.Window.Duration,
		prev.Interval.Duration, prev.MaxInterval.Duration, prev.ExhaustedAction)
	v, err := s.Encode()
	if err != nil {
		t.Fatal(err)
	}
	pod.Annotations[networkretry.Annotation] = v
	if err := h.client.Update(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
}

// TestBackoffSchedule drives a whole window: the controller requeues itself, the simulated
// webhook records each attempt, and the gaps between stamps double from the interval up to
// maxInterval; the window then closes with exactly one NetworkRetryExhausted event.
func TestBackoffSchedule(t *testing.T) {
	h := newHarness(t, t0, interceptor.Funcs{}, newPod().notReady().retry(newState()).obj())
	var stamps []time.Duration
	var requeues []time.Duration
	for i := 0; i < 20; i++ {
		now := h.clock.Now()
		trigger := h.pod(t).Annotations[networkstatus.AnnotationNetworkTriggerTime]
		res := h.mustReconcile(t)
		if got := h.pod(t).Annotations[networkstatus.AnnotationNetworkTriggerTime]; got != trigger {
			stamps = append(stamps, now.Sub(t0))
			webhookRun(t, h, now)
		}
		if res.RequeueAfter == 0 {
			break
		}
		requeues = append(requeues, res.RequeueAfter)
		h.clock.Step(res.RequeueAfter)
	}
	wantStamps := []time.Duration{5 * time.Second, 15 * time.Second, 35 * time.Second, 75 * time.Second,
		135 * time.Second, 195 * time.Second, 255 * time.Second}
	if diff := cmp.Diff(wantStamps, stamps); diff != "" {
		t.Errorf("stamps after t0 (-want,+got):\n%s", diff)
	}
	wantRequeues := []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second, 40 * time.Second,
		time.Minute, time.Minute, time.Minute, 45 * time.Second}
	if diff := cmp.Diff(wantRequeues, requeues); diff != "" {
		t.Errorf("requeues (-want,+got):\n%s", diff)
	}
	if got := h.retries(); got != float64(len(wantStamps)) {
		t.Errorf("npp_network_retries_total = %v, want %d", got, len(wantStamps))
	}
	s := h.state(t)
	if s.Exhausted == nil || !s.Exhausted.Time.Equal(at(5*time.Minute)) {
		t.Errorf("exhausted = %v, want %v", s.Exhausted, at(5*time.Minute))
	}
	if got := h.events(); len(got) != 1 {
		t.Errorf("events = %q, want one NetworkRetryExhausted", got)
	}
}

// TestRestartResumes: a fresh reconciler (a restarted manager, a new leader) on a pod whose
// retry state is old continues the schedule of that state: it never resets since, and
// a window that closed while nobody watched is exhausted at once.
func TestRestartResumes(t *testing.T) {
	// Attempts at t0, 5s, 15s, 35s: the fifth is due at 75s.
	old := newState(attempts(4, at(35*time.Second)))
	cases := map[string]struct {
		pod         *corev1.Pod
		now         time.Time
		wantTrigger string
		wantRequeue time.Duration
		wantEvents  int
	}{
		"down for two minutes: overdue attempt stamped at once, window not reset": {
			pod:         newPod().notReady().retry(old).trigger(at(35 * time.Second)).obj(),
			now:         at(2 * time.Minute),
			wantTrigger: "2026-03-01T12:02:00Z",
			wantRequeue: time.Minute, // Backoff(5) capped at maxInterval
		},
		"restart just before the next attempt": {
			pod:         newPod().notReady().retry(old).trigger(at(35 * time.Second)).obj(),
			now:         at(70 * time.Second),
			wantTrigger: "2026-03-01T12:00:35Z",
			wantRequeue: 5 * time.Second,
		},
		"restart right after a stamp the webhook has not recorded": {
			pod:         newPod().notReady().retry(old).trigger(at(80 * time.Second)).obj(),
			now:         at(85 * time.Second),
			wantTrigger: "2026-03-01T12:01:20Z",
			wantRequeue: 55 * time.Second, // 80s + Backoff(5) = 140s
		},
		"window passed while the manager was down: an attempt first, whose Record counts the pause": {
			pod:         newPod().notReady().retry(old).trigger(at(35 * time.Second)).obj(),
			now:         at(6 * time.Minute),
			wantTrigger: "2026-03-01T12:06:00Z",
			wantRequeue: time.Minute, // the stamp's backoff: the passed deadline does not count, the webhook's Record moves it
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, tc.now, interceptor.Funcs{}, tc.pod)
			res := h.mustReconcile(t)
			if diff := cmp.Diff(ctrl.Result{RequeueAfter: tc.wantRequeue}, res); diff != "" {
				t.Errorf("result (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantTrigger, h.pod(t).Annotations[networkstatus.AnnotationNetworkTriggerTime]); diff != "" {
				t.Errorf("network-trigger-time (-want,+got):\n%s", diff)
			}
			s := h.state(t)
			if !s.Since.Equal(&old.Since) || s.Attempts != old.Attempts || !s.LastAttempt.Equal(&old.LastAttempt) {
				t.Errorf("state since %v attempts %d lastAttempt %v, want %v, %d, %v (unchanged)",
					s.Since, s.Attempts, s.LastAttempt, old.Since, old.Attempts, old.LastAttempt)
			}
			if got := h.events(); len(got) != tc.wantEvents {
				t.Errorf("events = %q, want %d", got, tc.wantEvents)
			}
		})
	}
}

// TestWriteConflicts: a write that loses an optimistic-lock conflict (the pod changed since
// the cache read) is dropped without an error, an event or a metric; the newer version is
// reconciled from its own watch event.
func TestWriteConflicts(t *testing.T) {
	conflict := func(context.Context, client.WithWatch, client.Object, client.Patch, ...client.PatchOption) error {
		return apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, testPodName, errInjected)
	}
	cases := map[string]struct {
		pod *corev1.Pod
		now time.Time
	}{
		"trigger stamp": {
			pod: newPod().notReady().retry(newState()).obj(),
			now: at(5 * time.Second),
		},
		"exhausted mark": {
			pod: newPod().notReady().retry(newState(onSchedule, action("Recreate"))).gate().obj(),
			now: at(5 * time.Minute),
		},
		"retry state removal": {
			pod: newPod().ready().retry(newState()).gate().obj(),
			now: at(time.Minute),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, tc.now, interceptor.Funcs{Patch: conflict}, tc.pod)
			before := h.pod(t)
			res, err := h.reconcile(t)
			if err != nil || res != (ctrl.Result{}) {
				t.Errorf("Reconcile = %+v, %v; want no requeue, no error", res, err)
			}
			if diff := cmp.Diff(before, h.pod(t)); diff != "" {
				t.Errorf("pod changed (-before,+after):\n%s", diff)
			}
			if got := h.events(); len(got) != 0 {
				t.Errorf("events = %q, want none", got)
			}
			if len(h.evictions) != 0 || h.retries() != 0 {
				t.Errorf("deletes %d, retries %v; want none", len(h.evictions), h.retries())
			}
		})
	}
}

// TestOptimisticLockOnStaleRead: the stamp is refused by the (fake) API server when the pod
// changed after it was read, which is what makes the conflict path above real.
func TestOptimisticLockOnStaleRead(t *testing.T) {
	h := newHarness(t, at(5*time.Second), interceptor.Funcs{}, newPod().notReady().retry(newState()).obj())
	stale := h.pod(t)
	fresh := stale.DeepCopy()
	fresh.Labels = map[string]string{"touched": "yes"}
	if err := h.client.Update(context.Background(), fresh); err != nil {
		t.Fatal(err)
	}
	applied, err := h.r.patchPod(context.Background(), stale, func(p *corev1.Pod) {
		p.Annotations[networkstatus.AnnotationNetworkTriggerTime] = "2026-03-01T12:00:05Z"
	})
	if err != nil || applied {
		t.Errorf("patchPod on a stale pod = %v, %v; want false, nil", applied, err)
	}
	if _, ok := stale.Annotations[networkstatus.AnnotationNetworkTriggerTime]; ok {
		t.Error("the stale pod keeps the rejected change")
	}
}
