package network

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	policyv1alpha1 "github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
	"github.com/okg-extensions/network-plugin-policy/pkg/networkretry"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

const (
	exhaustedEventNote = "Network of plugin Kubernetes-NodePort is not Ready after 7 attempts in the 5m0s retry window of policy " +
		testPolicy + "; last error: apiCallError: exceeded quota: services.nodeports=0; exhausted action: "
	recreateSuffix = " (the pod is evicted so that its owner recreates it)"
)

// TestReconcileExhausted: when the window closes the controller records one
// NetworkRetryExhausted event, sets the condition False, marks the state exhausted and takes
// the exhausted action; a state already marked exhausted gets no second event.
func TestReconcileExhausted(t *testing.T) {
	last := attempts(7, at(255*time.Second))
	falseCondition := func(a string, since time.Time) []corev1.PodCondition {
		return []corev1.PodCondition{{Type: conditionNetworkReady, Status: corev1.ConditionFalse, Reason: ReasonNetworkRetryExhausted,
			Message: exhaustedEventNote + a, LastTransitionTime: metav1.NewTime(since), ObservedGeneration: 1}}
	}
	cases := map[string]struct {
		pod            *corev1.Pod
		now            time.Time
		wantEvents     []string
		wantExhausted  *metav1.Time
		wantConditions []corev1.PodCondition
		wantDeleted    bool
		wantMetric     map[policyv1alpha1.ExhaustedAction]float64
	}{
		"Event action, with the gate": {
			pod:            newPod().notReady().retry(newState(last)).gate().obj(),
			now:            at(5 * time.Minute),
			wantEvents:     []string{"Warning NetworkRetryExhausted " + exhaustedEventNote + "Event"},
			wantExhausted:  ptrTime(metav1.NewTime(at(5 * time.Minute))),
			wantConditions: falseCondition("Event", at(5*time.Minute)),
			wantMetric:     map[policyv1alpha1.ExhaustedAction]float64{"Event": 1},
		},
		"Event action, without the gate": {
			pod:           newPod().notReady().retry(newState(last)).obj(),
			now:           at(5 * time.Minute),
			wantEvents:    []string{"Warning NetworkRetryExhausted " + exhaustedEventNote + "Event"},
			wantExhausted: ptrTime(metav1.NewTime(at(5 * time.Minute))),
			wantMetric:    map[policyv1alpha1.ExhaustedAction]float64{"Event": 1},
		},
		"exhausted for an earlier incarnation: this pod's own window closed, marked for its UID": {
			pod:            newPod().uid("uid-lobby-0-b").notReady().retry(newState(last, exhaustedFor(at(2*time.Minute), "uid-lobby-0"))).gate().obj(),
			now:            at(5 * time.Minute),
			wantEvents:     []string{"Warning NetworkRetryExhausted " + exhaustedEventNote + "Event"},
			wantExhausted:  ptrTime(metav1.NewTime(at(5 * time.Minute))),
			wantConditions: falseCondition("Event", at(5*time.Minute)),
			wantMetric:     map[policyv1alpha1.ExhaustedAction]float64{"Event": 1},
		},
		"scheduled late: the window counts from the scheduling": {
			pod:           newPod().scheduledAt(at(2 * time.Minute)).notReady().retry(newState(attempts(7, at(6*time.Minute+30*time.Second)))).gate().obj(),
			now:           at(7 * time.Minute),
			wantEvents:    []string{"Warning NetworkRetryExhausted " + exhaustedEventNote + "Event"},
			wantExhausted: ptrTime(metav1.NewTime(at(7 * time.Minute))),
			wantConditions: append([]corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue,
				LastTransitionTime: metav1.NewTime(at(2 * time.Minute))}}, falseCondition("Event", at(7*time.Minute))...),
			wantMetric: map[policyv1alpha1.ExhaustedAction]float64{"Event": 1},
		},
		"Recreate action evicts the pod": {
			pod:         newPod().notReady().retry(newState(last, action("Recreate"))).gate().obj(),
			now:         at(5 * time.Minute),
			wantEvents:  []string{"Warning NetworkRetryExhausted " + exhaustedEventNote + "Recreate" + recreateSuffix},
			wantDeleted: true,
			wantMetric:  map[policyv1alpha1.ExhaustedAction]float64{"Recreate": 1},
		},
		"plugin succeeded but network not Ready": {
			pod: newPod().notReady().retry(newState(last, func(s *networkretry.State) { s.LastError = nil })).obj(),
			now: at(5*time.Minute + 30*time.Second),
			wantEvents: []string{"Warning NetworkRetryExhausted Network of plugin Kubernetes-NodePort is not Ready after 7 attempts in the 5m0s retry window of policy " +
				testPolicy + "; last error: none (the plugin succeeded but the network is not Ready); exhausted action: Event"},
			wantExhausted: ptrTime(metav1.NewTime(at(5*time.Minute + 30*time.Second))),
			wantMetric:    map[policyv1alpha1.ExhaustedAction]float64{"Event": 1},
		},
		"already exhausted, Event: no second event, condition made False": {
			pod:            newPod().notReady().retry(newState(last, exhaustedAt(at(5*time.Minute)))).gate().obj(),
			now:            at(20 * time.Minute),
			wantExhausted:  ptrTime(metav1.NewTime(at(5 * time.Minute))),
			wantConditions: falseCondition("Event", at(20*time.Minute)),
		},
		"already exhausted, Recreate, pod still there: evicted again, no event": {
			pod:         newPod().notReady().retry(newState(last, action("Recreate"), exhaustedAt(at(5*time.Minute)))).obj(),
			now:         at(5*time.Minute + 3*time.Second),
			wantDeleted: true,
		},
		"already exhausted, window lengthened since: stays closed, no trigger": {
			pod:           newPod().notReady().retry(newState(last, window(time.Hour), exhaustedAt(at(5*time.Minute)))).obj(),
			now:           at(20 * time.Minute),
			wantExhausted: ptrTime(metav1.NewTime(at(5 * time.Minute))),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, tc.now, interceptor.Funcs{}, tc.pod)
			if res := h.mustReconcile(t); res != (ctrl.Result{}) {
				t.Errorf("result %+v, want no requeue", res)
			}
			if diff := cmp.Diff(tc.wantEvents, h.events(), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("events (-want,+got):\n%s", diff)
			}
			for _, a := range []policyv1alpha1.ExhaustedAction{"Event", "Recreate"} {
				if got := h.exhausted(a); got != tc.wantMetric[a] {
					t.Errorf("npp_network_retry_windows_exhausted_total{action=%s} = %v, want %v", a, got, tc.wantMetric[a])
				}
			}
			if h.retries() != 0 {
				t.Errorf("npp_network_retries_total = %v, want 0", h.retries())
			}
			pod := h.pod(t)
			if tc.wantDeleted {
				if pod != nil {
					t.Fatal("pod not deleted")
				}
				if len(h.evictions) != 1 || h.evictions[0].Preconditions == nil || h.evictions[0].Preconditions.UID == nil ||
					*h.evictions[0].Preconditions.UID != tc.pod.UID {
					t.Errorf("evictions = %+v, want one with the UID precondition %s", h.evictions, tc.pod.UID)
				}
				return
			}
			if pod == nil {
				t.Fatal("pod deleted")
			}
			if len(h.evictions) != 0 {
				t.Errorf("evictions = %+v, want none", h.evictions)
			}
			if _, ok := pod.Annotations[networkstatus.AnnotationNetworkTriggerTime]; ok {
				t.Error("network-trigger-time stamped after the window closed")
			}
			if diff := cmp.Diff(tc.wantExhausted, h.state(t).Exhausted); diff != "" {
				t.Errorf("exhausted (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantConditions, pod.Status.Conditions, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("conditions (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestRecreateDeletesOnce: a pod that lingers while terminating (a finalizer) is deleted once,
// with one event, however often it is reconciled.
func TestRecreateDeletesOnce(t *testing.T) {
	pod := newPod().notReady().retry(newState(onSchedule, action("Recreate"))).gate().finalizer().obj()
	h := newHarness(t, at(5*time.Minute), interceptor.Funcs{}, pod)
	for range 3 {
		h.mustReconcile(t)
		h.clock.Step(time.Minute)
	}
	if len(h.evictions) != 1 {
		t.Errorf("deletes = %d, want 1", len(h.evictions))
	}
	if got := h.events(); len(got) != 1 {
		t.Errorf("events = %q, want one NetworkRetryExhausted", got)
	}
	if got := h.pod(t); got == nil || got.DeletionTimestamp == nil {
		t.Errorf("pod = %v, want it terminating", got)
	}
	if got := h.exhausted("Recreate"); got != 1 {
		t.Errorf("npp_network_retry_windows_exhausted_total{action=Recreate} = %v, want 1", got)
	}
}

// TestRecreateAfterRefusedEviction: when a PodDisruptionBudget refuses the eviction (429) the
// reconcile requeues after RecreateRetryInterval with a NetworkRecreateRefused event, and
// the exhausted mark stays; the next reconcile evicts the pod without a second
// NetworkRetryExhausted event.
func TestRecreateAfterRefusedEviction(t *testing.T) {
	failures := 1
	funcs := interceptor.Funcs{SubResourceCreate: func(ctx context.Context, c client.Client, sub string, obj, subObj client.Object, opts ...client.SubResourceCreateOption) error {
		if failures > 0 {
			failures--
			return apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10)
		}
		return c.SubResource(sub).Create(ctx, obj, subObj, opts...)
	}}
	pod := newPod().notReady().retry(newState(onSchedule, action("Recreate"))).obj()
	h := newHarness(t, at(5*time.Minute), funcs, pod)
	if res := h.mustReconcile(t); res.RequeueAfter != RecreateRetryInterval {
		t.Fatalf("first reconcile: result %+v, want a requeue after %s", res, RecreateRetryInterval)
	}
	if s := h.state(t); s.Exhausted == nil {
		t.Fatal("exhausted not marked before the eviction")
	}
	if got := h.events(); len(got) != 2 || !strings.HasPrefix(got[1], "Warning NetworkRecreateRefused ") || !strings.Contains(got[1], "disruption budget") {
		t.Errorf("events = %q, want NetworkRetryExhausted then NetworkRecreateRefused naming the budget", got)
	}
	h.clock.Step(RecreateRetryInterval)
	h.mustReconcile(t)
	if h.pod(t) != nil {
		t.Error("pod not evicted by the second reconcile")
	}
	if len(h.evictions) != 2 {
		t.Errorf("evictions = %d, want 2", len(h.evictions))
	}
	if got := h.events(); len(got) != 0 {
		t.Errorf("events = %q, want no more", got)
	}
	if got := testutil.ToFloat64(h.metrics.recreates.WithLabelValues(RecreateRefused)); got != 1 {
		t.Errorf("npp_network_recreates_total{result=refused} = %v, want 1", got)
	}
	if got := testutil.ToFloat64(h.metrics.recreates.WithLabelValues(RecreateEvicted)); got != 1 {
		t.Errorf("npp_network_recreates_total{result=evicted} = %v, want 1", got)
	}
}

// TestRecreateNeverDeletesABarePod: a pod without a controller owner is never evicted or
// deleted, however often it is reconciled; one NetworkRecreateSkipped event says why.
func TestRecreateNeverDeletesABarePod(t *testing.T) {
	pod := newPod().bare().notReady().retry(newState(onSchedule, action("Recreate"))).obj()
	h := newHarness(t, at(5*time.Minute), interceptor.Funcs{}, pod)
	for range 3 {
		h.mustReconcile(t)
		h.clock.Step(time.Minute)
	}
	if len(h.evictions) != 0 || h.pod(t) == nil {
		t.Fatalf("evictions = %+v, pod stored %t; want none, the pod kept", h.evictions, h.pod(t) != nil)
	}
	got := h.events()
	if len(got) != 2 || !strings.HasPrefix(got[1], "Warning NetworkRecreateSkipped ") || !strings.Contains(got[1], "no controller owner") {
		t.Errorf("events = %q, want NetworkRetryExhausted and one NetworkRecreateSkipped", got)
	}
}

// TestRecreateRateLimitPerNamespace: with a limit of 2 a minute, 5 pods of one namespace whose
// windows close together: 2 are evicted at once, the others are requeued for their turn and
// evicted as tokens come back; a pod of another namespace is not held up by them.
func TestRecreateRateLimitPerNamespace(t *testing.T) {
	var pods []*corev1.Pod
	for i := range 5 {
		p := newPod().notReady().retry(newState(onSchedule, action("Recreate"))).obj()
		p.Name, p.UID = fmt.Sprintf("lobby-%d", i), types.UID(fmt.Sprintf("uid-lobby-%d", i))
		pods = append(pods, p)
	}
	other := newPod().notReady().retry(newState(onSchedule, action("Recreate"))).obj()
	other.Namespace = "other"
	h := newHarness(t, at(5*time.Minute), interceptor.Funcs{}, append(pods, other)...)
	h.r = NewReconciler(h.client, h.recorder, Options{Clock: h.clock, Metrics: h.metrics, MaxRecreatesPerNamespacePerMinute: 2})
	reconcile := func(ns, name string) ctrl.Result {
		t.Helper()
		res, err := h.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	var waits []time.Duration
	for _, p := range pods {
		waits = append(waits, reconcile(p.Namespace, p.Name).RequeueAfter)
	}
	if len(h.evictions) != 2 {
		t.Fatalf("evictions at once = %d, want 2 (the namespace's burst)", len(h.evictions))
	}
	if want := []time.Duration{0, 0, 30 * time.Second, 30 * time.Second, 30 * time.Second}; !slices.Equal(waits, want) {
		t.Errorf("requeues = %v, want %v", waits, want)
	}
	if reconcile(other.Namespace, other.Name); len(h.evictions) != 3 {
		t.Errorf("the other namespace's pod waited for this one's limit: evictions = %d, want 3", len(h.evictions))
	}
	h.clock.Step(30 * time.Second)
	for _, p := range pods[2:] {
		reconcile(p.Namespace, p.Name)
	}
	if len(h.evictions) != 4 {
		t.Errorf("evictions 30s later = %d, want 4 (one more token)", len(h.evictions))
	}
	if got := testutil.ToFloat64(h.metrics.recreates.WithLabelValues(RecreateRateLimited)); got != 5 {
		t.Errorf("npp_network_recreates_total{result=rate_limited} = %v, want 5", got)
	}
}

// TestRecreateGoneOrReplaced: the delete carries the UID of the pod that exhausted its window;
// the API server answers Conflict when a same-name successor (a StatefulSet pod) replaced it,
// and NotFound when it is gone. Both mean there is nothing left to delete: no error.
func TestRecreateGoneOrReplaced(t *testing.T) {
	cases := map[string]struct {
		err error
	}{
		"replaced by a successor": {err: apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, testPodName,
			errors.New("Precondition failed: UID in precondition: uid-lobby-0, UID in object meta: uid-successor"))},
		"already gone": {err: apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, testPodName)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			funcs := interceptor.Funcs{SubResourceCreate: func(context.Context, client.Client, string, client.Object, client.Object, ...client.SubResourceCreateOption) error {
				return tc.err
			}}
			pod := newPod().notReady().retry(newState(action("Recreate"), exhaustedAt(at(5*time.Minute)))).obj()
			h := newHarness(t, at(6*time.Minute), funcs, pod)
			if res, err := h.reconcile(t); err != nil || res != (ctrl.Result{}) {
				t.Errorf("Reconcile = %+v, %v; want no requeue, no error", res, err)
			}
			if len(h.evictions) != 1 {
				t.Errorf("evictions = %d, want 1", len(h.evictions))
			}
		})
	}
}

// TestForeignNetworkTypeIsNeverActedOn: a pod whose network type is not a registered plugin
// (an OKG cloud type, a near-miss) is never retried, marked, evicted or given an event,
// whatever retry state and network-status its annotations claim: here a retry state whose
// window closed with action Recreate, and a NotReady status with the readiness gate.
func TestForeignNetworkTypeIsNeverActedOn(t *testing.T) {
	for _, networkType := range []string{"AlibabaCloud-SLB", "kubernetes-nodeport"} {
		t.Run(networkType, func(t *testing.T) {
			pod := newPod().annotation(networkstatus.AnnotationNetworkType, networkType).notReady().
				retry(newState(onSchedule, action("Recreate"))).gate().obj()
			h := newHarness(t, at(time.Hour), interceptor.Funcs{}, pod)
			h.r = NewReconciler(h.client, h.recorder, Options{Clock: h.clock, Metrics: h.metrics,
				NetworkTypes: []string{"Kubernetes-HostPort", "Kubernetes-NodePort", "Kubernetes-Ingress"}})
			if res := h.mustReconcile(t); res != (ctrl.Result{}) {
				t.Errorf("result %+v, want nothing to requeue", res)
			}
			got := h.pod(t)
			if got == nil || len(h.evictions) != 0 {
				t.Fatalf("pod evicted or deleted: %+v", h.evictions)
			}
			if diff := cmp.Diff(pod.Annotations, got.Annotations); diff != "" {
				t.Errorf("annotations changed (-before,+after):\n%s", diff)
			}
			if len(got.Status.Conditions) != 0 || len(h.events()) != 0 {
				t.Errorf("conditions %+v or events written for a foreign type", got.Status.Conditions)
			}
		})
	}
}

// TestRefusedEvictionGivesItsTurnBack: with a limit of 1 Recreate a minute, an eviction that a
// PodDisruptionBudget refuses does not use up the namespace's turn: the retry 10 s later is
// evicted, not rate-limited for the rest of the minute.
func TestRefusedEvictionGivesItsTurnBack(t *testing.T) {
	refusals := 1
	funcs := interceptor.Funcs{SubResourceCreate: func(ctx context.Context, c client.Client, sub string, obj, subObj client.Object, opts ...client.SubResourceCreateOption) error {
		if refusals > 0 {
			refusals--
			return apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10)
		}
		return c.SubResource(sub).Create(ctx, obj, subObj, opts...)
	}}
	h := newHarness(t, at(5*time.Minute), funcs, newPod().notReady().retry(newState(onSchedule, action("Recreate"))).obj())
	h.r = NewReconciler(h.client, h.recorder, Options{Clock: h.clock, Metrics: h.metrics, MaxRecreatesPerNamespacePerMinute: 1})
	if res := h.mustReconcile(t); res.RequeueAfter != RecreateRetryInterval {
		t.Fatalf("refused eviction: result %+v, want a requeue after %s", res, RecreateRetryInterval)
	}
	h.clock.Step(RecreateRetryInterval)
	h.mustReconcile(t)
	if h.pod(t) != nil {
		t.Errorf("pod not evicted 10s after a refused eviction: the refusal used up the namespace's turn")
	}
	if got := testutil.ToFloat64(h.metrics.recreates.WithLabelValues(RecreateRateLimited)); got != 0 {
		t.Errorf("npp_network_recreates_total{result=rate_limited} = %v, want 0", got)
	}
}

// TestPredictedRefusalNeverClosesAWindow: a window whose last failure the plugin only
// predicted from the caches (a cached ResourceQuota: FromCache) is not closed on it, even
// with Recreate: the controller has one more attempt made (a trigger stamp), which the API
// server answers; once the last failure is the API server's own, the window closes.
func TestPredictedRefusalNeverClosesAWindow(t *testing.T) {
	last := attempts(7, at(255*time.Second))
	predicted := func(s *networkretry.State) { s.LastError.FromCache = true }
	h := newHarness(t, at(5*time.Minute), interceptor.Funcs{}, newPod().notReady().retry(newState(last, action("Recreate"), predicted)).gate().obj())
	res := h.mustReconcile(t)
	pod := h.pod(t)
	if pod == nil || len(h.evictions) != 0 || len(h.events()) != 0 {
		t.Fatalf("pod %v, evictions %+v, events %q: want the pod kept, no eviction, no event", pod != nil, h.evictions, h.events())
	}
	if h.state(t).Exhausted != nil {
		t.Error("window marked exhausted on a refusal predicted from the cache")
	}
	if _, stamped := pod.Annotations[networkstatus.AnnotationNetworkTriggerTime]; !stamped && res.RequeueAfter <= 0 {
		t.Errorf("no trigger stamp and result %+v: the attempt the API server answers is not scheduled", res)
	}

	h = newHarness(t, at(5*time.Minute), interceptor.Funcs{}, newPod().notReady().retry(newState(last, action("Recreate"))).gate().obj())
	h.mustReconcile(t)
	if h.pod(t) != nil {
		t.Error("the API server's own refusal at the window's end: want the pod evicted")
	}
}

// TestExhaustedRunsOnceWhenItsLoadBalancerGetsAnAddress: a pod whose window closed (Event
// action) gets one more plugin run, a trigger stamp, when its load-balancer Service, which
// the pod controls (or one of its lines' Services, "<pod>-<line>", selecting it), gets an
// address: the cloud did what the retries waited for. Not for a
// node or IP the pod got, nor for the Service of an earlier pod of the name; and again, a
// second apart, at most addressReruns times while the run leaves the network not Ready.
func TestExhaustedRunsOnceWhenItsLoadBalancerGetsAnAddress(t *testing.T) {
	last := attempts(7, at(255*time.Second))
	service := func(owner types.UID, ingress bool) *corev1.Service {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: testPodName, ResourceVersion: "7",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: testPodName, UID: owner, Controller: ptr.To(true)}}},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer}}
		if ingress {
			svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "198.51.100.7"}}
		}
		return svc
	}
	for name, tc := range map[string]struct {
		mark      func(h *harness, pod *corev1.Pod)
		wantStamp bool
	}{
		"its Service got an address: one run": {mark: func(h *harness, pod *corev1.Pod) {
			q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
			defer q.ShutDown()
			h.r.loadBalancerEvents().Update(context.Background(), event.UpdateEvent{ObjectOld: service(pod.UID, false), ObjectNew: service(pod.UID, true)}, q)
		}, wantStamp: true},
		"one of its lines' Services got an address: one run": {mark: func(h *harness, pod *corev1.Pod) {
			// AlibabaCloud-Multi-NLBs: a Service per line, "<pod>-<line>", selecting the pod.
			q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
			defer q.ShutDown()
			line := func(ingress bool) *corev1.Service {
				svc := service(pod.UID, ingress)
				svc.Name = testPodName + "-dx"
				svc.Spec.Selector = map[string]string{"statefulset.kubernetes.io/pod-name": testPodName}
				return svc
			}
			h.r.loadBalancerEvents().Update(context.Background(), event.UpdateEvent{ObjectOld: line(false), ObjectNew: line(true)}, q)
		}, wantStamp: true},
		"its GameServerSet's pool Service got an address: one run": {mark: func(h *harness, pod *corev1.Pod) {
			// AlibabaCloud-AutoNLBs: "<gss>-<isp>-<k>", the GameServerSet's, selecting its pods.
			q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
			defer q.ShutDown()
			pool := func(ingress bool) *corev1.Service {
				svc := service(pod.UID, ingress)
				svc.Name = "lobby-bgp-0"
				svc.OwnerReferences = []metav1.OwnerReference{{APIVersion: "game.kruise.io/v1alpha1", Kind: "GameServerSet", Name: "lobby", UID: "uid-gss", Controller: ptr.To(true)}}
				svc.Spec.Selector = map[string]string{"game.kruise.io/owner-gss": "lobby"}
				svc.Spec.Ports = []corev1.ServicePort{{Name: "udp-0-7777", Port: 1000}}
				return svc
			}
			h.r.loadBalancerEvents().Update(context.Background(), event.UpdateEvent{ObjectOld: pool(false), ObjectNew: pool(true)}, q)
		}, wantStamp: true},
		"an earlier pod's Service: nothing": {mark: func(h *harness, _ *corev1.Pod) {
			q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
			defer q.ShutDown()
			h.r.loadBalancerEvents().Update(context.Background(), event.UpdateEvent{ObjectOld: service("uid-earlier", false), ObjectNew: service("uid-earlier", true)}, q)
		}},
		"the pod got a node or an IP: nothing": {mark: func(h *harness, pod *corev1.Pod) {
			h.r.placed.Store(client.ObjectKeyFromObject(pod), placedMark{uid: pod.UID, resourceVersion: "9"})
		}},
	} {
		t.Run(name, func(t *testing.T) {
			pod := newPod().label("game.kruise.io/owner-gss", "lobby").notReady().retry(newState(last, exhaustedAt(at(5*time.Minute)))).obj()
			h := newHarness(t, at(20*time.Minute), interceptor.Funcs{}, pod)
			tc.mark(h, pod)
			h.mustReconcile(t)
			_, stamped := h.pod(t).Annotations[networkstatus.AnnotationNetworkTriggerTime]
			if stamped != tc.wantStamp {
				t.Fatalf("network-trigger-time stamped %v, want %v", stamped, tc.wantStamp)
			}
			if h.retries() != 0 || len(h.events()) != 0 {
				t.Errorf("retries %v, events %v: want none (not a retry, the pod stays exhausted)", h.retries(), h.events())
			}
			if diff := cmp.Diff(ptrTime(metav1.NewTime(at(5*time.Minute))), h.state(t).Exhausted); diff != "" {
				t.Errorf("exhausted (-want,+got):\n%s", diff)
			}
			// No webhook here, so the run leaves the network not Ready: the mark gets
			// addressReruns more stamps a second apart (a webhook replica whose Service
			// informer lagged), then it is spent and nothing is stamped again.
			stamps := 0
			for range addressReruns + 3 {
				before := h.pod(t).Annotations[networkstatus.AnnotationNetworkTriggerTime]
				h.clock.Step(time.Second)
				h.mustReconcile(t)
				if h.pod(t).Annotations[networkstatus.AnnotationNetworkTriggerTime] != before {
					stamps++
				}
			}
			if want := map[bool]int{true: addressReruns}[tc.wantStamp]; stamps != want {
				t.Errorf("%d more stamps, want %d", stamps, want)
			}
		})
	}
}

// eipAnswer are AlibabaCloud-EIP's answer fields of a PodEIP.
var eipAnswer = [][]string{{"status", "eipAddress"}, {"status", "privateIPAddress"}}

// TestResultEventsMarkOnlyANewAnswer: the watch on a controller's answers (PodEIP, PodDNAT)
// gives the pod of the object's name one more run, even exhausted, when the object is created
// with an answer or its answer fields change; an object created without one, a change of its
// spec or of another status field only (Terway's podLastSeen heartbeat), and a delete give
// none (there is no new answer to read). With ResultKind.PodLabel (AmazonWebServices-NLB's
// objects, "<pod>-<port>") the pod is the one the object's label names, and an object
// without the label runs none.
func TestResultEventsMarkOnlyANewAnswer(t *testing.T) {
	last := attempts(7, at(255*time.Second))
	podEIP := func(rv string, status map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"allocationID": "eip-1"}}}
		u.SetAPIVersion("alibabacloud.com/v1beta1")
		u.SetKind("PodEIP")
		u.SetNamespace(testNamespace)
		u.SetName(testPodName)
		u.SetResourceVersion(rv)
		if status != nil {
			u.Object["status"] = status
		}
		return u
	}
	answered := map[string]any{"eipAddress": "203.0.113.7"}
	heartbeat := map[string]any{"eipAddress": "203.0.113.7", "podLastSeen": "2026-12-06T12:00:00Z"}
	for name, tc := range map[string]struct {
		event     func(h *harness, q workqueue.TypedRateLimitingInterface[reconcile.Request])
		wantStamp bool
	}{
		"created with its answer": {event: func(h *harness, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.r.resultEvents(plugin.ResultKind{Answer: eipAnswer}).Create(context.Background(), event.CreateEvent{Object: podEIP("1", answered)}, q)
		}, wantStamp: true},
		"its status written": {event: func(h *harness, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.r.resultEvents(plugin.ResultKind{Answer: eipAnswer}).Update(context.Background(), event.UpdateEvent{ObjectOld: podEIP("1", nil), ObjectNew: podEIP("2", answered)}, q)
		}, wantStamp: true},
		"created without a status": {event: func(h *harness, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.r.resultEvents(plugin.ResultKind{Answer: eipAnswer}).Create(context.Background(), event.CreateEvent{Object: podEIP("1", nil)}, q)
		}},
		"a change of the spec only": {event: func(h *harness, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.r.resultEvents(plugin.ResultKind{Answer: eipAnswer}).Update(context.Background(), event.UpdateEvent{ObjectOld: podEIP("1", answered), ObjectNew: podEIP("2", answered)}, q)
		}},
		"a heartbeat (a field that is not the answer)": {event: func(h *harness, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.r.resultEvents(plugin.ResultKind{Answer: eipAnswer}).Update(context.Background(), event.UpdateEvent{ObjectOld: podEIP("1", answered), ObjectNew: podEIP("2", heartbeat)}, q)
		}},
		"an object of another name labelled with the pod's (ResultKind.PodLabel)": {event: func(h *harness, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			u := podEIP("1", answered)
			u.SetName(testPodName + "-30001")
			u.SetLabels(map[string]string{"statefulset.kubernetes.io/pod-name": testPodName})
			h.r.resultEvents(plugin.ResultKind{Answer: eipAnswer, PodLabel: "statefulset.kubernetes.io/pod-name"}).Create(context.Background(), event.CreateEvent{Object: u}, q)
		}, wantStamp: true},
		"an object without the pod label (ResultKind.PodLabel)": {event: func(h *harness, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.r.resultEvents(plugin.ResultKind{Answer: eipAnswer, PodLabel: "statefulset.kubernetes.io/pod-name"}).Create(context.Background(), event.CreateEvent{Object: podEIP("1", answered)}, q)
		}},
		"deleted": {event: func(h *harness, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.r.resultEvents(plugin.ResultKind{Answer: eipAnswer}).Delete(context.Background(), event.DeleteEvent{Object: podEIP("1", answered)}, q)
		}},
	} {
		t.Run(name, func(t *testing.T) {
			pod := newPod().notReady().retry(newState(last, exhaustedAt(at(5*time.Minute)))).obj()
			h := newHarness(t, at(20*time.Minute), interceptor.Funcs{}, pod)
			q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
			defer q.ShutDown()
			tc.event(h, q)
			if queued := q.Len() == 1; queued != tc.wantStamp {
				t.Errorf("queued %t, want %t", queued, tc.wantStamp)
			}
			h.mustReconcile(t)
			if _, stamped := h.pod(t).Annotations[networkstatus.AnnotationNetworkTriggerTime]; stamped != tc.wantStamp {
				t.Errorf("stamped %t, want %t", stamped, tc.wantStamp)
			}
		})
	}
}

// TestResultEventsOfAGameServerSet: an object whose answer is for a GameServerSet's game
// servers (ResultKind.GameServerSetLabel: AlibabaCloud-AutoNLBs-V2's NLB objects) gives each
// game server of the GameServerSet its label names one more run, even exhausted; a game
// server of another GameServerSet gets none.
func TestResultEventsOfAGameServerSet(t *testing.T) {
	last := attempts(7, at(255*time.Second))
	nlb := func(gss string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"loadBalancerId": "nlb-1"}}}
		u.SetAPIVersion("nlboperator.alibabacloud.com/v1")
		u.SetKind("NLB")
		u.SetNamespace(testNamespace)
		u.SetName("gs-bgp-0")
		u.SetResourceVersion("3")
		u.SetLabels(map[string]string{"game.kruise.io/nlb-pool-gss": gss})
		return u
	}
	for gss, want := range map[string]bool{"gs": true, "other": false} {
		t.Run(gss, func(t *testing.T) {
			pod := newPod().notReady().retry(newState(last, exhaustedAt(at(5*time.Minute)))).label(networkstatus.LabelOwnerGSS, "gs").obj()
			h := newHarness(t, at(20*time.Minute), interceptor.Funcs{}, pod)
			q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
			defer q.ShutDown()
			h.r.resultEvents(plugin.ResultKind{Answer: [][]string{{"status", "loadBalancerId"}}, GameServerSetLabel: "game.kruise.io/nlb-pool-gss"}).Create(context.Background(), event.CreateEvent{Object: nlb(gss)}, q)
			if queued := q.Len() == 1; queued != want {
				t.Errorf("queued %t, want %t", queued, want)
			}
			h.mustReconcile(t)
			if _, stamped := h.pod(t).Annotations[networkstatus.AnnotationNetworkTriggerTime]; stamped != want {
				t.Errorf("stamped %t, want %t", stamped, want)
			}
		})
	}
}

// TestSharedServiceAddressRunsItsGameServers: a shared Service (the shared-port plugins' one
// Service per load balancer: its selector is the load-balancer label alone, valued with its
// name) that gets its address gives every game server it selects one more run, even
// exhausted; a game server it does not select gets none, nor does a user's Service that
// selects by more than that label.
func TestSharedServiceAddressRunsItsGameServers(t *testing.T) {
	last := attempts(7, at(255*time.Second))
	shared := func(ingress bool) *corev1.Service {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: "lb-a", ResourceVersion: "7"},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"service.k8s.alibaba/loadbalancer-id": "lb-a"}}}
		if ingress {
			svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "198.51.100.7"}}
		}
		return svc
	}
	for name, tc := range map[string]struct {
		label     string
		other     bool
		wantStamp bool
	}{
		"selected":     {label: "lb-a", wantStamp: true},
		"not selected": {label: "lb-b"},
		// A user's Service that selects the pod by another label is not a shared one.
		"a user's Service": {label: "lb-a", other: true},
	} {
		t.Run(name, func(t *testing.T) {
			pod := newPod().label("service.k8s.alibaba/loadbalancer-id", tc.label).notReady().retry(newState(last, exhaustedAt(at(5*time.Minute)))).obj()
			h := newHarness(t, at(20*time.Minute), interceptor.Funcs{}, pod)
			h.r.opts.SharedServiceLabel = "service.k8s.alibaba/loadbalancer-id"
			q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
			defer q.ShutDown()
			before, after := shared(false), shared(true)
			if tc.other {
				before.Spec.Selector = map[string]string{"app": "lobby", "service.k8s.alibaba/loadbalancer-id": "lb-a"}
				after.Spec.Selector = before.Spec.Selector
			}
			h.r.loadBalancerEvents().Update(context.Background(), event.UpdateEvent{ObjectOld: before, ObjectNew: after}, q)
			h.mustReconcile(t)
			if _, stamped := h.pod(t).Annotations[networkstatus.AnnotationNetworkTriggerTime]; stamped != tc.wantStamp {
				t.Errorf("stamped %t, want %t", stamped, tc.wantStamp)
			}
		})
	}
}

// TestAddressAsTheWindowClosesIsNotLost: a load-balancer address that comes as the retry
// window closes gets the pod its one more run whatever the order of the two.
//   - The address event is handled before the window is found closed (the same second, in
//     a fleet run): the run comes first (a trigger stamp, no exhausted mark yet), and the
//     window closes after it only while the network is still not Ready. Before the fix the
//     window's close dropped the address mark and wrote the exhausted mark: the pod stayed
//     NotReady for good with an address.
//   - The address event is handled while the exhausted mark is being written: its mark is
//     kept, and the request it queued stamps the exhausted pod.
func TestAddressAsTheWindowClosesIsNotLost(t *testing.T) {
	last := attempts(7, at(255*time.Second))
	addressed := func(h *harness, pod *corev1.Pod) {
		q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
		defer q.ShutDown()
		svc := func(ingress bool) *corev1.Service {
			s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: testPodName, ResourceVersion: "7",
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: testPodName, UID: pod.UID, Controller: ptr.To(true)}}},
				Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer}}
			if ingress {
				s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "198.51.100.7"}}
			}
			return s
		}
		h.r.loadBalancerEvents().Update(context.Background(), event.UpdateEvent{ObjectOld: svc(false), ObjectNew: svc(true)}, q)
	}
	stamped := func(t *testing.T, h *harness) bool {
		_, ok := h.pod(t).Annotations[networkstatus.AnnotationNetworkTriggerTime]
		return ok
	}

	t.Run("the address before the window is found closed", func(t *testing.T) {
		pod := newPod().notReady().retry(newState(last)).obj()
		h := newHarness(t, at(5*time.Minute), interceptor.Funcs{}, pod)
		addressed(h, pod)
		h.mustReconcile(t)
		if !stamped(t, h) || h.state(t).Exhausted != nil {
			t.Fatalf("stamped %v, exhausted %v: want the run first, no exhausted mark yet", stamped(t, h), h.state(t).Exhausted)
		}
		// No webhook here: the runs leave the network not Ready, so once the address mark's
		// reruns are spent the window closes, once.
		for range addressReruns + 2 {
			h.clock.Step(time.Second)
			h.mustReconcile(t)
		}
		events := h.events()
		if h.state(t).Exhausted == nil || len(events) != 1 || !strings.Contains(events[0], ReasonNetworkRetryExhausted) {
			t.Errorf("exhausted %v, events %v: want the window closed once after the run", h.state(t).Exhausted, events)
		}
	})

	t.Run("the address while the exhausted mark is written", func(t *testing.T) {
		pod := newPod().notReady().retry(newState(last)).obj()
		var h *harness
		fired := false
		h = newHarness(t, at(5*time.Minute), interceptor.Funcs{
			Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
				if err := c.Patch(ctx, obj, patch, opts...); err != nil {
					return err
				}
				if p, ok := obj.(*corev1.Pod); ok && !fired && strings.Contains(p.Annotations[networkretry.Annotation], `"exhausted"`) {
					fired = true
					addressed(h, pod) // the Service informer's handler, on another goroutine in the manager
				}
				return nil
			},
		}, pod)
		h.mustReconcile(t)
		if !fired || h.state(t).Exhausted == nil || stamped(t, h) {
			t.Fatalf("address during the mark %v, exhausted %v, stamped %v: want the window closed first", fired, h.state(t).Exhausted, stamped(t, h))
		}
		h.clock.Step(time.Second)
		h.mustReconcile(t) // the request the address queued
		if !stamped(t, h) {
			t.Error("the exhausted pod whose Service got its address as the window closed was not run once more")
		}
	})
}

// TestAnswerOnThePodIsUrgent: an update that gives one of the pod's plugin's result
// annotations (Options.ResultAnnotations: an EIP plugin's allocated address) a new value
// marks the pod as an address does: queued in the urgent lane, and run once more even when
// its window is exhausted. The same answer again, an emptied one, an annotation another
// network type reads, or an answer while the manager steps back from the type marks nothing;
// a later event that gives the pod its IP does not replace the answer's mark.
func TestAnswerOnThePodIsUrgent(t *testing.T) {
	const key, other = "example.com/allocated-eip", "example.com/other-answer"
	last := attempts(7, at(255*time.Second))
	base := func() *podBuilder {
		return newPod().notReady().retry(newState(last, exhaustedAt(at(5*time.Minute))))
	}
	for name, tc := range map[string]struct {
		old, new   *corev1.Pod
		stepBack   bool
		wantUrgent bool
	}{
		"a new answer": {old: base().obj(), new: base().annotation(key, "203.0.113.7").obj(), wantUrgent: true},
		"a new answer while the manager steps back from the type (nobody puts back a tenant's)": {old: base().obj(), new: base().annotation(key, "203.0.113.7").obj(), stepBack: true},
		"a changed answer":     {old: base().annotation(key, "203.0.113.7").obj(), new: base().annotation(key, "203.0.113.8").obj(), wantUrgent: true},
		"the same answer":      {old: base().annotation(key, "203.0.113.7").obj(), new: base().annotation(key, "203.0.113.7").label("x", "y").obj()},
		"an emptied answer":    {old: base().annotation(key, "203.0.113.7").obj(), new: base().annotation(key, "").obj()},
		"another type's field": {old: base().obj(), new: base().annotation(other, "203.0.113.7").obj()},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, at(20*time.Minute), interceptor.Funcs{}, tc.new)
			h.r.opts.ResultAnnotations = map[string][]string{testPlugin: {key}, "Other-EIP": {other}}
			h.r.opts.StepBack = func(string) (bool, string) { return tc.stepBack, "" }
			q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
			defer q.ShutDown()
			h.r.podEvents().Update(context.Background(), event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.new}, q)
			req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: testNamespace, Name: testPodName}}
			if got := h.r.urgent(req); got != tc.wantUrgent {
				t.Errorf("urgent %t, want %t", got, tc.wantUrgent)
			}
			if tc.stepBack {
				return // the pod is kruise-game-manager's: nothing is run
			}
			h.mustReconcile(t)
			if _, stamped := h.pod(t).Annotations[networkstatus.AnnotationNetworkTriggerTime]; stamped != tc.wantUrgent {
				t.Errorf("exhausted pod stamped for one more run %t, want %t", stamped, tc.wantUrgent)
			}
		})
	}
	// An answer's mark is not replaced by a later event that gives the pod its IP: its run
	// stays urgent.
	h := newHarness(t, at(20*time.Minute), interceptor.Funcs{}, base().obj())
	h.r.opts.ResultAnnotations = map[string][]string{testPlugin: {key}}
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	noIP := base().podIP("").annotation(key, "203.0.113.7")
	h.r.podEvents().Update(context.Background(), event.UpdateEvent{ObjectOld: base().podIP("").obj(), ObjectNew: noIP.obj()}, q)
	h.r.podEvents().Update(context.Background(), event.UpdateEvent{ObjectOld: noIP.obj(), ObjectNew: base().podIP("10.0.0.7").annotation(key, "203.0.113.7").obj()}, q)
	if !h.r.urgent(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: testNamespace, Name: testPodName}}) {
		t.Error("an answer's mark replaced by the IP's: not urgent")
	}
}
