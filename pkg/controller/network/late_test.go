package network

import (
	"testing"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/types"

	"github.com/okg-extensions/network-plugin-policy/pkg/networkretry"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// TestLateRunHeldForItsTurn: a retry 70 s late (a new leader's first pass) whose caches show
// the same failure waits for its token when the leader's late runs have used their burst:
// no write while it waits; at its turn it is a real run, and the webhook counts the whole
// lateness, the wait included, as paused. A change in the caches ends the wait at once and
// gives the token back, and the wait never goes past the pod's refresh slot.
func TestLateRunHeldForItsTurn(t *testing.T) {
	same := newState().LastError
	other := &networkretry.Error{Type: "apiCallError", Message: "exceeded quota: services.nodeports=1"}
	// The state was written at t0 and its next attempt was due at 5s; the pod's refresh slot
	// is 5-6 minutes after t0.
	uid := uidWithRefresh(t, t0, 10*time.Minute, 5*time.Minute, 6*time.Minute)
	start := func(t *testing.T, perSecond float64, answer **networkretry.Error, writes *int) *harness {
		h := quietHarness(t, 10*time.Minute, answer, writes, newPod().uid(uid).notReady().retry(newState(window(time.Hour))).obj())
		h.r.lateRuns = rate.NewLimiter(rate.Limit(perSecond), lateRunsBurst)
		h.clock.SetTime(at(75 * time.Second))
		h.r.lateRuns.ReserveN(h.clock.Now(), lateRunsBurst) // ten other late runs went just now
		return h
	}
	stamped := func(h *harness, before string) bool {
		return h.pod(t).Annotations[networkstatus.AnnotationNetworkTriggerTime] != before
	}

	t.Run("held, then run at its turn", func(t *testing.T) {
		answer, writes := same, 0
		h := start(t, 1, &answer, &writes)
		trigger := h.pod(t).Annotations[networkstatus.AnnotationNetworkTriggerTime]
		res := h.mustReconcile(t)
		if stamped(h, trigger) || writes != 0 || res.RequeueAfter != time.Second {
			t.Fatalf("stamped %v, %d writes, requeue after %s; want held for 1s without a write", stamped(h, trigger), writes, res.RequeueAfter)
		}
		h.clock.Step(res.RequeueAfter)
		h.mustReconcile(t)
		if !stamped(h, trigger) {
			t.Fatal("not run at its turn")
		}
		webhookRun(t, h, h.clock.Now())
		if s := h.state(t); s.Paused.Duration != 71*time.Second || s.Attempts != 2 {
			t.Errorf("after the run: paused %s, attempts %d; want 71s (due at 5s, run at 76s) and 2", s.Paused.Duration, s.Attempts)
		}
		if _, ok := h.r.held.Load(types.NamespacedName{Namespace: testNamespace, Name: testPodName}); ok {
			t.Error("the held entry outlived the stamp")
		}
	})
	t.Run("the caches change: run at once", func(t *testing.T) {
		answer, writes := same, 0
		h := start(t, 1, &answer, &writes)
		trigger := h.pod(t).Annotations[networkstatus.AnnotationNetworkTriggerTime]
		h.mustReconcile(t)
		answer = other
		h.mustReconcile(t)
		if !stamped(h, trigger) {
			t.Error("held although the caches show another outcome")
		}
		if tokens := h.r.lateRuns.TokensAt(h.clock.Now()); tokens < 0 {
			t.Errorf("the token of the run that went early was not given back: %v tokens", tokens)
		}
	})
	t.Run("held at most until the refresh slot", func(t *testing.T) {
		answer, writes := same, 0
		h := start(t, 0.001, &answer, &writes)
		refresh := refreshDue(uid, t0, 10*time.Minute)
		trigger := h.pod(t).Annotations[networkstatus.AnnotationNetworkTriggerTime]
		res := h.mustReconcile(t)
		if want := refresh.Sub(h.clock.Now()); stamped(h, trigger) || res.RequeueAfter != want {
			t.Fatalf("stamped %v, requeue after %s; want held until the refresh slot, %s", stamped(h, trigger), res.RequeueAfter, want)
		}
		h.clock.SetTime(refresh)
		h.mustReconcile(t)
		if !stamped(h, trigger) {
			t.Error("not run at the refresh slot")
		}
	})
}
