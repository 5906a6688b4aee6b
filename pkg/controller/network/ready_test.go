package network

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/okg-extensions/network-plugin-policy/pkg/networkretry"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// TestReconcileReady: a Ready network clears the retry state, records one NetworkReady event
// saying how long it took, observes the time-to-Ready histogram and sets the readiness-gate
// condition True where the pod has the gate.
func TestReconcileReady(t *testing.T) {
	retried := newState(attempts(3, at(15*time.Second)))
	readyCondition := func(since time.Time) []corev1.PodCondition {
		return []corev1.PodCondition{{Type: conditionNetworkReady, Status: corev1.ConditionTrue, Reason: ReasonNetworkReady,
			Message: "Network of plugin " + testPlugin + " is Ready", LastTransitionTime: metav1.NewTime(since), ObservedGeneration: 1}}
	}
	cases := map[string]struct {
		pod            *corev1.Pod
		now            time.Time
		wantEvents     []string
		wantConditions []corev1.PodCondition
		wantObserved   uint64
		wantSeconds    float64
	}{
		"retry state cleared, no gate": {
			pod: newPod().ready().retry(retried).obj(),
			now: at(42*time.Second + 400*time.Millisecond),
			wantEvents: []string{"Normal NetworkReady Network of plugin Kubernetes-NodePort is Ready after 42s; 3 earlier plugin runs left it NotReady, the last one with apiCallError (retry policy " +
				testPolicy + ")"},
			wantObserved: 1, wantSeconds: 42,
		},
		"a new game server's first run only waited: said so, no failure": {
			pod: newPod().ready().retry(newState(func(s *networkretry.State) { s.LastError = nil })).obj(),
			now: at(time.Second),
			wantEvents: []string{"Normal NetworkReady Network of plugin Kubernetes-NodePort is Ready after 1s; 1 earlier plugin run left it NotReady, the last one waiting, without an error (retry policy " +
				testPolicy + ")"},
			wantObserved: 1, wantSeconds: 1,
		},
		"retry state cleared and condition set True, one event": {
			pod: newPod().ready().retry(retried).gate().obj(),
			now: at(90 * time.Second),
			wantEvents: []string{"Normal NetworkReady Network of plugin Kubernetes-NodePort is Ready after 1m30s; 3 earlier plugin runs left it NotReady, the last one with apiCallError (retry policy " +
				testPolicy + ")"},
			wantConditions: readyCondition(at(90 * time.Second)),
			wantObserved:   1, wantSeconds: 90,
		},
		"exhausted window, then Ready: condition False flips to True": {
			pod: newPod().ready().retry(newState(exhaustedAt(at(5*time.Minute)), attempts(9, at(5*time.Minute)))).gate().
				condition(corev1.ConditionFalse, ReasonNetworkRetryExhausted, at(5*time.Minute)).obj(),
			now: at(10 * time.Minute),
			wantEvents: []string{"Normal NetworkReady Network of plugin Kubernetes-NodePort is Ready after 10m0s; 9 earlier plugin runs left it NotReady, the last one with apiCallError (retry policy " +
				testPolicy + ")"},
			wantConditions: readyCondition(at(10 * time.Minute)),
			wantObserved:   1, wantSeconds: 600,
		},
		"no retry state, gate: condition True and the time since creation": {
			pod:            newPod().ready().gate().obj(),
			now:            at(3 * time.Second),
			wantEvents:     []string{"Normal NetworkReady Network of plugin Kubernetes-NodePort is Ready, 3s after the pod was created"},
			wantConditions: readyCondition(at(3 * time.Second)),
		},
		"no retry state, condition already True": {
			pod:            newPod().ready().gate().condition(corev1.ConditionTrue, ReasonNetworkReady, t0).obj(),
			now:            at(time.Hour),
			wantConditions: []corev1.PodCondition{{Type: conditionNetworkReady, Status: corev1.ConditionTrue, Reason: ReasonNetworkReady, LastTransitionTime: metav1.NewTime(t0)}},
		},
		"no retry state, no gate": {
			pod: newPod().ready().obj(),
			now: at(time.Hour),
		},
		"malformed retry state removed, gate: time since creation": {
			pod:            newPod().ready().gate().annotation(networkretry.Annotation, "{").obj(),
			now:            at(time.Minute),
			wantEvents:     []string{"Normal NetworkReady Network of plugin Kubernetes-NodePort is Ready, 1m0s after the pod was created"},
			wantConditions: readyCondition(at(time.Minute)),
		},
		"kubelet conditions are kept": {
			pod: func() *corev1.Pod {
				p := newPod().ready().gate().obj()
				p.Status.Conditions = []corev1.PodCondition{{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0)}}
				return p
			}(),
			now:        at(2 * time.Second),
			wantEvents: []string{"Normal NetworkReady Network of plugin Kubernetes-NodePort is Ready, 2s after the pod was created"},
			wantConditions: append([]corev1.PodCondition{{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0)}},
				readyCondition(at(2*time.Second))...),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, tc.now, interceptor.Funcs{}, tc.pod)
			for i := range 2 { // the second reconcile sees the written pod and does nothing more
				if res := h.mustReconcile(t); res != (ctrl.Result{}) {
					t.Errorf("reconcile %d: result %+v, want no requeue", i+1, res)
				}
			}
			pod := h.pod(t)
			if _, ok := pod.Annotations[networkretry.Annotation]; ok {
				t.Errorf("retry state still on the pod: %s", pod.Annotations[networkretry.Annotation])
			}
			if diff := cmp.Diff(tc.wantEvents, h.events(), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("events (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantConditions, pod.Status.Conditions, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("conditions (-want,+got):\n%s", diff)
			}
			count, sum := h.histogram(t, "npp_network_ready_duration_seconds", map[string]string{"plugin": testPlugin})
			if count != tc.wantObserved || sum != tc.wantSeconds {
				t.Errorf("npp_network_ready_duration_seconds count %d sum %v, want %d, %v", count, sum, tc.wantObserved, tc.wantSeconds)
			}
		})
	}
}

// TestUnwrittenReadyStatusOpensNoGate: a Ready network-status that the manager did not write
// (no matching status digest: a forged edit, a pod OKG or an earlier release admitted) never
// sets the readiness-gate condition True; the controller asks for a plugin run (a trigger
// stamp, at most every 30 s) and leaves a condition that is already True as it is, so an
// upgrade flips no live gate False.
func TestUnwrittenReadyStatusOpensNoGate(t *testing.T) {
	now := t0.Add(time.Minute)
	for name, tc := range map[string]struct {
		pod        *corev1.Pod
		wantStatus corev1.ConditionStatus // "" for no condition
		wantStamp  bool
	}{
		"forged Ready, gate closed":          {pod: newPod().ready().unwritten().gate().obj(), wantStamp: true},
		"earlier release's pod, gate open":   {pod: newPod().ready().unwritten().gate().condition(corev1.ConditionTrue, ReasonNetworkReady, t0).obj(), wantStatus: corev1.ConditionTrue, wantStamp: true},
		"asked 10 s ago: not asked again":    {pod: newPod().ready().unwritten().gate().trigger(now.Add(-10 * time.Second)).obj()},
		"the manager's own Ready: gate open": {pod: newPod().ready().gate().obj(), wantStatus: corev1.ConditionTrue},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, now, interceptor.Funcs{}, tc.pod)
			h.mustReconcile(t)
			pod := h.pod(t)
			var got corev1.ConditionStatus
			if c := networkCondition(pod); c != nil {
				got = c.Status
			}
			if got != tc.wantStatus {
				t.Errorf("condition %q, want %q", got, tc.wantStatus)
			}
			stamped := pod.Annotations[networkstatus.AnnotationNetworkTriggerTime] == now.UTC().Format(time.RFC3339)
			if stamped != tc.wantStamp {
				t.Errorf("trigger stamped now %t, want %t", stamped, tc.wantStamp)
			}
		})
	}
}

// TestReadyRunClearedTheState: the webhook's Ready run removes the retry state in the same
// write; the update's old pod carries it, and the Ready reconcile reports it as it would a
// state it removed itself (the NetworkReady Event's time and earlier runs, the histogram),
// timed at the update, and writes nothing but the readiness-gate condition. A state noted
// for another pod of the name, an update whose Ready status the manager did not write, and
// a new leader without the note fall back to the time since creation (gate) or nothing.
func TestReadyRunClearedTheState(t *testing.T) {
	retried := newState(attempts(3, at(15*time.Second)))
	after42 := "Normal NetworkReady Network of plugin Kubernetes-NodePort is Ready after 42s; 3 earlier plugin runs left it NotReady, the last one with apiCallError (retry policy " +
		testPolicy + ")"
	for name, tc := range map[string]struct {
		old, pod     *corev1.Pod
		noted        *corev1.Pod // the update's new pod, when not pod
		wantEvents   []string
		wantObserved uint64
		wantWrites   int // pod metadata writes
	}{
		"noted: reported from the old pod's state": {
			old: newPod().notReady().retry(retried).gate().obj(), pod: newPod().ready().gate().obj(),
			wantEvents: []string{after42}, wantObserved: 1,
		},
		"noted, no gate: reported all the same": {
			old: newPod().notReady().retry(retried).obj(), pod: newPod().ready().obj(),
			wantEvents: []string{after42}, wantObserved: 1,
		},
		"another pod of the name: the time since creation": {
			old: newPod().uid("old-uid").notReady().retry(retried).gate().obj(), noted: newPod().uid("old-uid").ready().gate().obj(),
			pod:        newPod().ready().gate().obj(),
			wantEvents: []string{"Normal NetworkReady Network of plugin Kubernetes-NodePort is Ready, 1m0s after the pod was created"},
		},
		"a Ready status the manager did not write: not noted, a check asked for": {
			old: newPod().notReady().retry(retried).gate().obj(), pod: newPod().ready().unwritten().gate().obj(),
			wantWrites: 1,
		},
		"another plugin's state: not noted": {
			old:        newPod().notReady().retry(newState(func(s *networkretry.State) { s.Plugin = "Kubernetes-HostPort" })).gate().obj(),
			pod:        newPod().ready().gate().obj(),
			wantEvents: []string{"Normal NetworkReady Network of plugin Kubernetes-NodePort is Ready, 1m0s after the pod was created"},
		},
		"a new leader, no note: the time since creation": {
			pod:        newPod().ready().gate().obj(),
			wantEvents: []string{"Normal NetworkReady Network of plugin Kubernetes-NodePort is Ready, 1m0s after the pod was created"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, at(42*time.Second+300*time.Millisecond), interceptor.Funcs{}, tc.pod)
			key := client.ObjectKeyFromObject(tc.pod)
			if tc.old != nil {
				noted := tc.noted
				if noted == nil {
					noted = h.pod(t)
				}
				q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
				defer q.ShutDown()
				h.r.podEvents().Update(context.Background(), event.UpdateEvent{ObjectOld: tc.old, ObjectNew: noted}, q)
			}
			h.clock.SetTime(at(time.Minute)) // the reconcile comes later: the note's time counts
			writes := h.countWrites()
			h.mustReconcile(t)
			if *writes != tc.wantWrites {
				t.Errorf("%d pod writes (metadata), want %d: the webhook removed the state", *writes, tc.wantWrites)
			}
			if diff := cmp.Diff(tc.wantEvents, h.events(), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("events (-want,+got):\n%s", diff)
			}
			count, sum := h.histogram(t, "npp_network_ready_duration_seconds", map[string]string{"plugin": testPlugin})
			if count != tc.wantObserved || (count > 0 && sum != 42) {
				t.Errorf("npp_network_ready_duration_seconds count %d sum %v, want %d (42 s each)", count, sum, tc.wantObserved)
			}
			if v, left := h.r.cleared.Load(key); left && v.(clearedState).state != nil {
				t.Error("the note outlived the Ready reconcile")
			}
		})
	}
}

// TestForgedReadyKeepsTheRetryState: a Ready network-status the manager did not write on a
// pod that is being retried ends nothing: the retry state stays, no NetworkReady is
// recorded, and the controller asks for a plugin run to check the status.
func TestForgedReadyKeepsTheRetryState(t *testing.T) {
	pod := newPod().ready().unwritten().retry(newState(attempts(3, at(15*time.Second)))).gate().obj()
	h := newHarness(t, at(time.Minute), interceptor.Funcs{}, pod)
	h.mustReconcile(t)
	got := h.pod(t)
	if got.Annotations[networkretry.Annotation] != pod.Annotations[networkretry.Annotation] {
		t.Errorf("retry state %q, want it kept: %q", got.Annotations[networkretry.Annotation], pod.Annotations[networkretry.Annotation])
	}
	if evs := h.events(); len(evs) != 0 {
		t.Errorf("events %q, want none", evs)
	}
	if count, _ := h.histogram(t, "npp_network_ready_duration_seconds", map[string]string{"plugin": testPlugin}); count != 0 {
		t.Errorf("npp_network_ready_duration_seconds observed %d times, want none", count)
	}
	if got.Annotations[networkstatus.AnnotationNetworkTriggerTime] != at(time.Minute).UTC().Format(time.RFC3339) {
		t.Error("no plugin run asked for, want a trigger stamp")
	}
}

// TestReadyReportedOnceWhenTheCacheIsAhead: client-go updates the cache before it calls the
// update handler, so a Ready reconcile can read the webhook's Ready write before its note
// exists. It reports the network from the pod's creation, and the handler that comes after
// it does not note that version once more: one NetworkReady, not two.
func TestReadyReportedOnceWhenTheCacheIsAhead(t *testing.T) {
	old := newPod().notReady().retry(newState(attempts(3, at(15*time.Second)))).gate().obj()
	h := newHarness(t, at(time.Minute), interceptor.Funcs{}, newPod().ready().gate().obj())
	read := h.pod(t) // the version the reconcile reads, and the handler's new object
	h.mustReconcile(t)
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	h.r.podEvents().Update(context.Background(), event.UpdateEvent{ObjectOld: old, ObjectNew: read}, q)
	h.mustReconcile(t)
	want := []string{"Normal NetworkReady Network of plugin Kubernetes-NodePort is Ready, 1m0s after the pod was created"}
	if diff := cmp.Diff(want, h.events()); diff != "" {
		t.Errorf("events (-want,+got):\n%s", diff)
	}
	if _, left := h.r.cleared.Load(client.ObjectKeyFromObject(read)); left {
		t.Error("a mark or note left after the handler came")
	}
}

// TestStateLeftByAnEarlierReleaseReportedOnce: a Ready pod that still carries its retry
// state (an earlier release's webhook left it) has it removed by the controller and
// reported; the update handler, which sees that removal as it would the webhook's, notes
// nothing more: one NetworkReady.
func TestStateLeftByAnEarlierReleaseReportedOnce(t *testing.T) {
	// No readiness gate: the removal is the reconcile's last write, the version the handler
	// sees (with a gate, the condition's write follows it, as its own update).
	before := newPod().ready().retry(newState(attempts(3, at(15*time.Second)))).obj()
	h := newHarness(t, at(42*time.Second), interceptor.Funcs{}, before)
	old := h.pod(t)
	h.mustReconcile(t)
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	h.r.podEvents().Update(context.Background(), event.UpdateEvent{ObjectOld: old, ObjectNew: h.pod(t)}, q)
	h.mustReconcile(t)
	if evs := h.events(); len(evs) != 1 || !strings.Contains(evs[0], "is Ready after 42s") {
		t.Errorf("events %q, want one NetworkReady after 42s", evs)
	}
	if count, _ := h.histogram(t, "npp_network_ready_duration_seconds", map[string]string{"plugin": testPlugin}); count != 1 {
		t.Errorf("npp_network_ready_duration_seconds observed %d times, want 1", count)
	}
}
