package network

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	policyv1alpha1 "github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
	"github.com/okg-extensions/network-plugin-policy/pkg/networkretry"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

const (
	exhaustedEventNote = "Network of plugin Kubernetes-NodePort is not Ready after 7 attempts in the 5m0s retry window of policy " +
		testPolicy + "; last error: apiCallError: exceeded quota: services.nodeports=0; exhausted action: "
	recreateSuffix = " (the pod is deleted so that its owner recreates it)"
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
			pod:           newPod().scheduledAt(at(2 * time.Minute)).notReady().retry(newState(last)).gate().obj(),
			now:           at(7 * time.Minute),
			wantEvents:    []string{"Warning NetworkRetryExhausted " + exhaustedEventNote + "Event"},
			wantExhausted: ptrTime(metav1.NewTime(at(7 * time.Minute))),
			wantConditions: append([]corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue,
				LastTransitionTime: metav1.NewTime(at(2 * time.Minute))}}, falseCondition("Event", at(7*time.Minute))...),
			wantMetric: map[policyv1alpha1.ExhaustedAction]float64{"Event": 1},
		},
		"Recreate action deletes the pod": {
			pod:         newPod().notReady().retry(newState(last, action("Recreate"))).gate().obj(),
			now:         at(5 * time.Minute),
			wantEvents:  []string{"Warning NetworkRetryExhausted " + exhaustedEventNote + "Recreate" + recreateSuffix},
			wantDeleted: true,
			wantMetric:  map[policyv1alpha1.ExhaustedAction]float64{"Recreate": 1},
		},
		"plugin succeeded but network not Ready": {
			pod: newPod().notReady().retry(newState(last, func(s *networkretry.State) { s.LastError = nil })).obj(),
			now: at(6 * time.Minute),
			wantEvents: []string{"Warning NetworkRetryExhausted Network of plugin Kubernetes-NodePort is not Ready after 7 attempts in the 5m0s retry window of policy " +
				testPolicy + "; last error: none (the plugin succeeded but the network is not Ready); exhausted action: Event"},
			wantExhausted: ptrTime(metav1.NewTime(at(6 * time.Minute))),
			wantMetric:    map[policyv1alpha1.ExhaustedAction]float64{"Event": 1},
		},
		"already exhausted, Event: no second event, condition made False": {
			pod:            newPod().notReady().retry(newState(last, exhaustedAt(at(5*time.Minute)))).gate().obj(),
			now:            at(20 * time.Minute),
			wantExhausted:  ptrTime(metav1.NewTime(at(5 * time.Minute))),
			wantConditions: falseCondition("Event", at(20*time.Minute)),
		},
		"already exhausted, Recreate, pod still there: deleted again, no event": {
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
				if len(h.deletes) != 1 || h.deletes[0].Preconditions == nil || h.deletes[0].Preconditions.UID == nil ||
					*h.deletes[0].Preconditions.UID != tc.pod.UID {
					t.Errorf("deletes = %+v, want one with the UID precondition %s", h.deletes, tc.pod.UID)
				}
				return
			}
			if pod == nil {
				t.Fatal("pod deleted")
			}
			if len(h.deletes) != 0 {
				t.Errorf("deletes = %+v, want none", h.deletes)
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
	pod := newPod().notReady().retry(newState(action("Recreate"))).gate().finalizer().obj()
	h := newHarness(t, at(5*time.Minute), interceptor.Funcs{}, pod)
	for range 3 {
		h.mustReconcile(t)
		h.clock.Step(time.Minute)
	}
	if len(h.deletes) != 1 {
		t.Errorf("deletes = %d, want 1", len(h.deletes))
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

// TestRecreateAfterFailedDelete: when the delete fails the reconcile returns the error and the
// exhausted mark stays; the next reconcile deletes the pod without a second event.
func TestRecreateAfterFailedDelete(t *testing.T) {
	failures := 1
	funcs := interceptor.Funcs{Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
		if failures > 0 {
			failures--
			return errInjected
		}
		return c.Delete(ctx, obj, opts...)
	}}
	pod := newPod().notReady().retry(newState(action("Recreate"))).obj()
	h := newHarness(t, at(5*time.Minute), funcs, pod)
	if _, err := h.reconcile(t); err == nil {
		t.Fatal("first reconcile: want the delete error")
	}
	if s := h.state(t); s.Exhausted == nil {
		t.Fatal("exhausted not marked before the delete")
	}
	h.clock.Step(10 * time.Second)
	h.mustReconcile(t)
	if h.pod(t) != nil {
		t.Error("pod not deleted by the second reconcile")
	}
	if len(h.deletes) != 2 {
		t.Errorf("deletes = %d, want 2", len(h.deletes))
	}
	if got := h.events(); len(got) != 1 {
		t.Errorf("events = %q, want exactly one", got)
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
			funcs := interceptor.Funcs{Delete: func(context.Context, client.WithWatch, client.Object, ...client.DeleteOption) error {
				return tc.err
			}}
			pod := newPod().notReady().retry(newState(action("Recreate"), exhaustedAt(at(5*time.Minute)))).obj()
			h := newHarness(t, at(6*time.Minute), funcs, pod)
			if res, err := h.reconcile(t); err != nil || res != (ctrl.Result{}) {
				t.Errorf("Reconcile = %+v, %v; want no requeue, no error", res, err)
			}
			if len(h.deletes) != 1 {
				t.Errorf("deletes = %d, want 1", len(h.deletes))
			}
		})
	}
}
