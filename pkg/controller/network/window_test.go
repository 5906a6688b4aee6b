package network

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/okg-extensions/network-plugin-policy/pkg/networkretry"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// TestPendingPodIsNeverExhausted: a pod that is not scheduled has no running window, however
// long ago its state's since is: it is retried on the backoff schedule (requeued for the next
// attempt, not for a deadline), and its condition says the window starts at scheduling.
func TestPendingPodIsNeverExhausted(t *testing.T) {
	pod := newPod().pending().notReady().retry(newState(attempts(9, at(time.Hour)))).gate().obj()
	h := newHarness(t, at(time.Hour+30*time.Second), interceptor.Funcs{}, pod)
	res := h.mustReconcile(t)
	if diff := cmp.Diff(ctrl.Result{RequeueAfter: 30 * time.Second}, res); diff != "" {
		t.Errorf("result (-want,+got):\n%s", diff)
	}
	if got := h.events(); len(got) != 0 {
		t.Errorf("events = %q, want none (no NetworkRetryExhausted)", got)
	}
	if s := h.state(t); s.Exhausted != nil {
		t.Errorf("exhausted = %s, want unset", s.Exhausted)
	}
	c := networkCondition(h.pod(t))
	if c == nil || c.Status != corev1.ConditionFalse || c.Reason != ReasonNetworkNotReady ||
		!strings.Contains(c.Message, "retry window starts when the pod is scheduled") {
		t.Errorf("condition = %+v, want False %s saying the window starts at scheduling", c, ReasonNetworkNotReady)
	}
	// Its attempt is due at 1h + 1m: stamped then, still not exhausted.
	h.clock.SetTime(at(time.Hour + time.Minute))
	h.mustReconcile(t)
	if got := h.pod(t).Annotations[networkstatus.AnnotationNetworkTriggerTime]; got != "2026-03-01T13:01:00Z" {
		t.Errorf("network-trigger-time = %q, want the backoff's 13:01:00", got)
	}
	if got := h.events(); len(got) != 0 {
		t.Errorf("events = %q, want none", got)
	}
}

// TestWindowStartsAtScheduling: the window of a pod scheduled after its first failure counts
// from the scheduling: open past since + window, and the pod is requeued no later than the
// scheduling + window.
func TestWindowStartsAtScheduling(t *testing.T) {
	// Failed at t0 (window 5m), scheduled at t0+10m, last attempt at t0+10m: the window closes
	// at t0+15m, the next attempt (attempt 9, backoff capped at 1m) is at t0+11m.
	pod := newPod().scheduledAt(at(10 * time.Minute)).notReady().retry(newState(attempts(9, at(10*time.Minute)))).gate().obj()
	h := newHarness(t, at(10*time.Minute+30*time.Second), interceptor.Funcs{}, pod)
	res := h.mustReconcile(t)
	if diff := cmp.Diff(ctrl.Result{RequeueAfter: 30 * time.Second}, res); diff != "" {
		t.Errorf("result (-want,+got):\n%s", diff)
	}
	if got := h.events(); len(got) != 0 {
		t.Errorf("events = %q, want none: the window is open until t0+15m", got)
	}
	c := networkCondition(h.pod(t))
	if c == nil || c.Status != corev1.ConditionFalse || !strings.Contains(c.Message, "until 2026-03-01T12:15:00Z") {
		t.Errorf("condition = %+v, want False until 12:15:00", c)
	}
	// The attempts on schedule (a minute apart), the last one early.
	for _, d := range []time.Duration{11 * time.Minute, 12 * time.Minute, 13 * time.Minute, 14 * time.Minute, 14*time.Minute + 50*time.Second} {
		h.clock.SetTime(at(d))
		webhookRun(t, h, at(d))
	}
	if res := h.mustReconcile(t); res.RequeueAfter != 10*time.Second {
		t.Errorf("RequeueAfter = %s, want 10s (the deadline comes before the next attempt)", res.RequeueAfter)
	}
	h.clock.SetTime(at(15 * time.Minute))
	h.mustReconcile(t)
	if got := h.events(); len(got) != 1 || !strings.HasPrefix(got[0], "Warning "+ReasonNetworkRetryExhausted) {
		t.Errorf("events = %q, want one NetworkRetryExhausted at the scheduling + window", got)
	}
}

// TestScheduledSinceLastRunRetriesAtOnce: a pod bound to its node after the plugin last ran is
// stamped at once, without waiting for the backoff; the stamp after it follows the backoff.
func TestScheduledSinceLastRunRetriesAtOnce(t *testing.T) {
	// Attempt 5 at t0+1m (backoff 1m): the next attempt is due at t0+2m; the pod was bound at
	// t0+1m10s.
	pod := newPod().scheduledAt(at(70 * time.Second)).notReady().retry(newState(attempts(5, at(time.Minute)))).obj()
	h := newHarness(t, at(71*time.Second), interceptor.Funcs{}, pod)
	h.mustReconcile(t)
	if got := h.pod(t).Annotations[networkstatus.AnnotationNetworkTriggerTime]; got != "2026-03-01T12:01:11Z" {
		t.Fatalf("network-trigger-time = %q, want an immediate stamp at 12:01:11", got)
	}
	// The webhook has not recorded it yet: no second stamp, however often reconciled.
	h.clock.Step(2 * time.Second)
	h.mustReconcile(t)
	if got := h.pod(t).Annotations[networkstatus.AnnotationNetworkTriggerTime]; got != "2026-03-01T12:01:11Z" {
		t.Errorf("network-trigger-time = %q, want no second stamp", got)
	}
	if got := h.retries(); got != 1 {
		t.Errorf("retries = %v, want 1", got)
	}
}

// TestGotNodeOrIPRetriesAtOnce: an update that gives the pod a node or an IP (the watch event,
// through the controller's event handler) makes the next reconcile stamp at once, once.
func TestGotNodeOrIPRetriesAtOnce(t *testing.T) {
	cases := map[string]struct {
		old, new *corev1.Pod
	}{
		"got its node": {
			old: newPod().pending().notReady().retry(newState()).obj(),
			new: newPod().notReady().retry(newState()).obj(),
		},
		"got its IP": {
			old: newPod().notReady().retry(newState()).obj(),
			new: newPod().notReady().retry(newState()).podIP("10.0.0.7").obj(),
		},
		"got its first network-status": {
			old: newPod().podIP("10.0.0.7").obj(),
			new: newPod().notReady().retry(newState()).podIP("10.0.0.7").obj(),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, at(2*time.Second), interceptor.Funcs{}, tc.new)
			q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
			defer q.ShutDown()
			h.r.podEvents().Update(context.Background(), event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.new}, q)
			if q.Len() != 1 {
				t.Fatalf("queue length = %d, want the pod queued", q.Len())
			}
			h.mustReconcile(t) // not due before t0+5s
			if got := h.pod(t).Annotations[networkstatus.AnnotationNetworkTriggerTime]; got != "2026-03-01T12:00:02Z" {
				t.Fatalf("network-trigger-time = %q, want an immediate stamp", got)
			}
			h.clock.Step(time.Second)
			h.mustReconcile(t)
			if got := h.retries(); got != 1 {
				t.Errorf("retries = %v, want 1: the mark is spent by the stamp", got)
			}
		})
	}
	t.Run("other updates do not mark", func(t *testing.T) {
		p := newPod().notReady().retry(newState()).podIP("10.0.0.7").obj()
		h := newHarness(t, at(2*time.Second), interceptor.Funcs{}, p)
		q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
		defer q.ShutDown()
		relabeled := p.DeepCopy()
		relabeled.Labels = map[string]string{"x": "y"}
		h.r.podEvents().Update(context.Background(), event.UpdateEvent{ObjectOld: p, ObjectNew: relabeled}, q)
		h.mustReconcile(t)
		if got := h.retries(); got != 0 {
			t.Errorf("retries = %v, want 0 before the backoff", got)
		}
	})
}

// TestGotNodeOrIPPredicate: only an update that adds a node or an IP matches.
func TestGotNodeOrIPPredicate(t *testing.T) {
	pending := newPod().pending().obj()
	bound := newPod().obj()
	withIP := newPod().podIP("10.0.0.7").obj()
	p := GotNodeOrIP()
	cases := map[string]struct {
		old, new *corev1.Pod
		want     bool
	}{
		"bound":                {old: pending, new: bound, want: true},
		"got an IP":            {old: bound, new: withIP, want: true},
		"bound with an IP":     {old: pending, new: withIP, want: true},
		"unchanged node":       {old: bound, new: bound},
		"IP kept":              {old: withIP, new: withIP},
		"IP lost (not a gain)": {old: withIP, new: bound},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := p.Update(event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.new}); got != tc.want {
				t.Errorf("Update = %v, want %v", got, tc.want)
			}
		})
	}
	if p.Create(event.CreateEvent{Object: withIP}) || p.Delete(event.DeleteEvent{Object: withIP}) || p.Generic(event.GenericEvent{Object: withIP}) {
		t.Error("create, delete or generic event matched")
	}
}

// TestWroteFirstStatusPredicate: only an update that gives a scheduled pod its first
// network-status, NotReady, matches.
func TestWroteFirstStatusPredicate(t *testing.T) {
	none := newPod().obj()
	p := WroteFirstStatus()
	cases := map[string]struct {
		old, new *corev1.Pod
		want     bool
	}{
		"first status NotReady":  {old: none, new: newPod().notReady().obj(), want: true},
		"first status Ready":     {old: none, new: newPod().ready().obj()},
		"status already there":   {old: newPod().notReady().obj(), new: newPod().notReady().podIP("10.0.0.7").obj()},
		"not scheduled":          {old: newPod().pending().obj(), new: newPod().pending().notReady().obj()},
		"malformed first status": {old: none, new: newPod().annotation(networkstatus.AnnotationNetworkStatus, "{").obj()},
		"no status at all":       {old: none, new: newPod().podIP("10.0.0.7").obj()},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := p.Update(event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.new}); got != tc.want {
				t.Errorf("Update = %v, want %v", got, tc.want)
			}
		})
	}
	if p.Create(event.CreateEvent{Object: none}) || p.Delete(event.DeleteEvent{Object: none}) || p.Generic(event.GenericEvent{Object: none}) {
		t.Error("create, delete or generic event matched")
	}
}

// TestMinRetryInterval: the platform floor raises a policy's interval (and maxInterval).
func TestMinRetryInterval(t *testing.T) {
	s := newState(func(s *networkretry.State) {
		s.Interval.Duration, s.MaxInterval.Duration = time.Millisecond, time.Millisecond
	})
	pod := newPod().notReady().retry(s).obj()
	h := newHarness(t, at(2*time.Second), interceptor.Funcs{}, pod)
	h.r.opts.MinRetryInterval = 10 * time.Second
	if res := h.mustReconcile(t); res.RequeueAfter != 8*time.Second {
		t.Errorf("RequeueAfter = %s, want 8s (the first attempt at the 10s floor)", res.RequeueAfter)
	}
	h.clock.SetTime(at(10 * time.Second))
	if res := h.mustReconcile(t); res.RequeueAfter != 10*time.Second {
		t.Errorf("RequeueAfter after the stamp = %s, want 10s", res.RequeueAfter)
	}
	if got := h.retries(); got != 1 {
		t.Errorf("retries = %v, want 1", got)
	}
}

// TestConditionWhileRetrying: the network-ready condition is False (NetworkNotReady) while the
// network is retried, also for a once-Ready network that broke (condition True before), and
// is written once, not at every attempt.
func TestConditionWhileRetrying(t *testing.T) {
	pod := newPod().notReady().retry(newState()).gate().condition(corev1.ConditionTrue, ReasonNetworkReady, t0).obj()
	writes := 0
	funcs := interceptor.Funcs{SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
		writes++
		return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
	}}
	h := newHarness(t, at(5*time.Second), funcs, pod)
	h.mustReconcile(t)
	want := []corev1.PodCondition{{Type: conditionNetworkReady, Status: corev1.ConditionFalse, Reason: ReasonNetworkNotReady,
		Message: "Network of plugin Kubernetes-NodePort is not Ready (last error apiCallError: exceeded quota: services.nodeports=0); " +
			"retried under policy " + testPolicy + " until 2026-03-01T12:05:00Z",
		LastTransitionTime: metav1.NewTime(at(5 * time.Second)), ObservedGeneration: 1}}
	if diff := cmp.Diff(want, h.pod(t).Status.Conditions); diff != "" {
		t.Errorf("conditions (-want,+got):\n%s", diff)
	}
	// The webhook records each stamp's attempt; the next ones are due at 15s and 35s.
	for _, step := range []struct{ run, next time.Duration }{{5 * time.Second, 15 * time.Second}, {15 * time.Second, 35 * time.Second}} {
		webhookRun(t, h, at(step.run))
		h.clock.SetTime(at(step.next))
		h.mustReconcile(t)
	}
	if writes != 1 {
		t.Errorf("status writes = %d, want 1 (the condition does not change between attempts)", writes)
	}
	if got := h.retries(); got != 3 {
		t.Errorf("retries = %v, want 3", got)
	}
}

// TestNotReadyWithoutStateCondition: a NotReady network without a retry state (the webhook
// writes one at its next run) makes the condition False.
func TestNotReadyWithoutStateCondition(t *testing.T) {
	h := newHarness(t, at(time.Second), interceptor.Funcs{}, newPod().notReady().gate().obj())
	if res := h.mustReconcile(t); res != (ctrl.Result{}) {
		t.Errorf("result = %+v, want none", res)
	}
	c := networkCondition(h.pod(t))
	if c == nil || c.Status != corev1.ConditionFalse || c.Reason != ReasonNetworkNotReady {
		t.Errorf("condition = %+v, want False %s", c, ReasonNetworkNotReady)
	}
}

// TestSpendMark: a node-or-IP mark is spent by its stamp; an address mark whose run left the
// network not Ready is kept for addressReruns more stamps, and spent by one that made it
// Ready; a newer mark stored meanwhile is never touched.
func TestSpendMark(t *testing.T) {
	r := &Reconciler{}
	key := types.NamespacedName{Namespace: testNamespace, Name: testPodName}
	notReady, ready := newPod().notReady().obj(), newPod().ready().obj()

	placed := placedMark{uid: "u", resourceVersion: "1"}
	r.placed.Store(key, placed)
	if r.spendMark(key, placed, notReady) {
		t.Error("a node-or-IP mark kept")
	}
	if _, ok := r.placed.Load(key); ok {
		t.Error("a node-or-IP mark not spent")
	}

	m := placedMark{uid: "u", resourceVersion: "2", address: true}
	r.placed.Store(key, m)
	for i := range addressReruns {
		if !r.spendMark(key, m, notReady) {
			t.Fatalf("rerun %d: the address mark was spent while the network is not Ready", i+1)
		}
		got, _ := r.placed.Load(key)
		m = got.(placedMark)
	}
	if r.spendMark(key, m, notReady) {
		t.Errorf("the address mark kept beyond %d reruns", addressReruns)
	}

	m = placedMark{uid: "u", resourceVersion: "3", address: true}
	r.placed.Store(key, m)
	if r.spendMark(key, m, ready) {
		t.Error("an address mark kept after the run made the network Ready")
	}

	newer := placedMark{uid: "u", resourceVersion: "5"}
	r.placed.Store(key, newer)
	r.spendMark(key, placedMark{uid: "u", resourceVersion: "4", address: true}, notReady)
	if got, _ := r.placed.Load(key); got != newer {
		t.Errorf("mark = %+v, want the newer %+v untouched", got, newer)
	}
}
