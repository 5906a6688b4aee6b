package network

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
	podwebhook "github.com/okg-extensions/network-plugin-policy/pkg/webhook/pod"
)

const testDecision = "Asynchronous by built-in default"

// webhookAnswers is an interceptor that plays the mutating webhook: every pod patch gets the
// network-decision annotation in the same write.
func webhookAnswers() interceptor.Funcs {
	return interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
		if err := c.Patch(ctx, obj, patch, opts...); err != nil {
			return err
		}
		a := obj.GetAnnotations()
		a[podwebhook.AnnotationDecision] = testDecision
		obj.SetAnnotations(a)
		return c.Update(ctx, obj)
	}}
}

// catchUp returns a CatchUpReconciler on h's client, clock, recorder and metrics.
func catchUp(h *harness, o CatchUpOptions) *CatchUpReconciler {
	return NewCatchUpReconciler(h.client, h.recorder, Options{Clock: h.clock, Metrics: h.metrics}, o)
}

func reconcileCatchUp(t *testing.T, r *CatchUpReconciler) ctrl.Result {
	t.Helper()
	res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: testNamespace, Name: testPodName}})
	if err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	return res
}

func TestCatchUpReconcile(t *testing.T) {
	known := []string{"Kubernetes-HostPort", testPlugin}
	cases := map[string]struct {
		pod          *corev1.Pod
		now          time.Time
		funcs        interceptor.Funcs
		opts         CatchUpOptions
		wantTrigger  string // "" when none is written
		wantDecision string
		wantResult   ctrl.Result
		wantEvents   []string
	}{
		"admitted without the webhook: stamped, the webhook answers": {
			pod: newPod().obj(), now: at(3 * time.Second), funcs: webhookAnswers(),
			wantTrigger: at(3 * time.Second).Format(time.RFC3339), wantDecision: testDecision,
			wantEvents: []string{"Normal NetworkCatchUp Network plugin Kubernetes-NodePort ran on a pod admitted without the webhook: " + testDecision},
		},
		"admitted without the webhook: stamped, no answer, requeued after the interval": {
			pod: newPod().obj(), now: at(3 * time.Second),
			wantTrigger: at(3 * time.Second).Format(time.RFC3339), wantResult: ctrl.Result{RequeueAfter: 5 * time.Second},
		},
		"stamp not answered yet: no second stamp before the backoff": {
			pod: newPod().trigger(at(10 * time.Second)).obj(), now: at(12 * time.Second),
			wantTrigger: at(10 * time.Second).Format(time.RFC3339), wantResult: ctrl.Result{RequeueAfter: 8 * time.Second},
		},
		"someone else's future trigger is not ours": {
			pod: newPod().trigger(at(time.Hour)).obj(), now: at(0),
			wantTrigger: at(0).Format(time.RFC3339), wantResult: ctrl.Result{RequeueAfter: 5 * time.Second},
		},
		"decided by the webhook: nothing": {
			pod: newPod().annotation(podwebhook.AnnotationDecision, testDecision).obj(), now: at(0), wantDecision: testDecision,
		},
		"terminating: nothing": {pod: newPod().terminating().obj(), now: at(0)},
		"network disabled: nothing": {
			pod: newPod().label(networkstatus.LabelNetworkDisabled, "true").obj(), now: at(0),
		},
		"a type the webhook passes through: nothing": {
			pod: newPod().annotation(networkstatus.AnnotationNetworkType, "AlibabaCloud-SLB").obj(), now: at(0),
		},
		"webhook of this replica not serving yet: wait": {
			pod: newPod().obj(), now: at(0), opts: CatchUpOptions{WebhookReady: func() bool { return false }},
			wantResult: ctrl.Result{RequeueAfter: time.Second},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, tc.now, tc.funcs, tc.pod)
			opts := tc.opts
			opts.NetworkTypes = known
			r := catchUp(h, opts)
			r.once.Do(func() { r.started = t0 }) // the controller runs since the pod's creation
			if diff := cmp.Diff(tc.wantResult, reconcileCatchUp(t, r)); diff != "" {
				t.Errorf("result (-want,+got):\n%s", diff)
			}
			p := h.pod(t)
			if diff := cmp.Diff(tc.wantTrigger, p.Annotations[networkstatus.AnnotationNetworkTriggerTime]); diff != "" {
				t.Errorf("trigger time (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantDecision, p.Annotations[podwebhook.AnnotationDecision]); diff != "" {
				t.Errorf("decision (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantEvents, h.events()); diff != "" {
				t.Errorf("events (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestCatchUpSchedule follows the requeues of a pod whose webhook never answers: stamps at
// the base time, after Interval, then about twice as far from the base each time, capped at
// MaxInterval, none after Window, and one Warning event when it gives up. Reconciles at
// times in between (the pod's own update events) write nothing.
func TestCatchUpSchedule(t *testing.T) {
	h := newHarness(t, at(0), interceptor.Funcs{}, newPod().obj())
	r := catchUp(h, CatchUpOptions{NetworkTypes: []string{testPlugin}, Interval: 5 * time.Second, MaxInterval: time.Minute, Window: 2 * time.Minute})
	var stamps []time.Duration
	last := ""
	for i := 0; i < 50; i++ {
		res := reconcileCatchUp(t, r)
		if trig := h.pod(t).Annotations[networkstatus.AnnotationNetworkTriggerTime]; trig != last {
			stamps = append(stamps, h.clock.Now().Sub(t0))
			last = trig
			// The stamp's own update event: reconciled at once, nothing written.
			before := h.pod(t).ResourceVersion
			if again := reconcileCatchUp(t, r); again.RequeueAfter != res.RequeueAfter {
				t.Errorf("update event after the stamp at %s: requeue %s, want %s", stamps[len(stamps)-1], again.RequeueAfter, res.RequeueAfter)
			}
			if h.pod(t).ResourceVersion != before {
				t.Errorf("update event after the stamp at %s wrote the pod again", stamps[len(stamps)-1])
			}
		}
		if res.RequeueAfter == 0 {
			break
		}
		h.clock.Step(res.RequeueAfter)
	}
	s := time.Second
	if diff := cmp.Diff([]time.Duration{0, 5 * s, 10 * s, 20 * s, 40 * s, 80 * s}, stamps); diff != "" {
		t.Errorf("stamps after the base (-want,+got):\n%s", diff)
	}
	events := h.events()
	if len(events) != 1 || !strings.HasPrefix(events[0], "Warning NetworkCatchUpAbandoned ") {
		t.Errorf("events = %q, want one NetworkCatchUpAbandoned warning", events)
	}
}

// TestCatchUpBaseIsControllerStart: a pod created long before the controller started (an
// outage) is stamped at once and then on the short schedule, not at MaxInterval.
func TestCatchUpBaseIsControllerStart(t *testing.T) {
	h := newHarness(t, at(time.Hour), interceptor.Funcs{}, newPod().obj())
	r := catchUp(h, CatchUpOptions{})
	if diff := cmp.Diff(ctrl.Result{RequeueAfter: 5 * time.Second}, reconcileCatchUp(t, r)); diff != "" {
		t.Errorf("first result (-want,+got):\n%s", diff)
	}
	if got, want := h.pod(t).Annotations[networkstatus.AnnotationNetworkTriggerTime], at(time.Hour).Format(time.RFC3339); got != want {
		t.Errorf("trigger = %q, want %q", got, want)
	}
}
