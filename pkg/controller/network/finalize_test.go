package network

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// testFinalizer is a PodFinalizer whose Finalize answers err and counts its calls.
type testFinalizer struct {
	err   error
	calls int
}

func (f *testFinalizer) Finalizer() string { return "example.com/test" }
func (f *testFinalizer) Finalize(context.Context, client.Client, *corev1.Pod) error {
	f.calls++
	return f.err
}

// TestFinalizeTerminatingPod: a terminating pod of a type whose plugin adds a finalizer keeps
// it while Finalize waits (a RetryError: looked at again after finalizeRequeue) or fails (an
// error, the workqueue's back-off), and loses it once Finalize returns nil; before the OKG
// guard's first look, Finalize is not called.
func TestFinalizeTerminatingPod(t *testing.T) {
	pod := newPod().obj()
	pod.Finalizers = []string{"example.com/test", "example.com/other"}
	now := metav1.NewTime(t0)
	pod.DeletionTimestamp = &now
	f := &testFinalizer{err: plugin.Errorf(plugin.RetryError, "waiting for Services")}
	h := newHarness(t, at(time.Minute), interceptor.Funcs{}, pod)
	looked := false
	h.r = NewReconciler(h.client, h.recorder, Options{Clock: h.clock, Metrics: h.metrics, Looked: func() bool { return looked },
		Finalizers: map[string]plugin.PodFinalizer{testPlugin: f}})
	if res := h.mustReconcile(t); res.RequeueAfter != lookRequeue || f.calls != 0 {
		t.Fatalf("before the first look: %+v, %d calls", res, f.calls)
	}
	looked = true
	if res := h.mustReconcile(t); res != (ctrl.Result{RequeueAfter: finalizeRequeue}) || !slices.Contains(h.pod(t).Finalizers, "example.com/test") {
		t.Fatalf("waiting: %+v, finalizers %v", res, h.pod(t).Finalizers)
	}
	f.err = plugin.Errorf(plugin.APICallError, "delete refused")
	if _, err := h.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(pod)}); err == nil || !slices.Contains(h.pod(t).Finalizers, "example.com/test") {
		t.Fatalf("failing: %v, finalizers %v", err, h.pod(t).Finalizers)
	}
	f.err = nil
	h.mustReconcile(t)
	if got := h.pod(t).Finalizers; !slices.Equal(got, []string{"example.com/other"}) {
		t.Fatalf("finalizers after Finalize returned nil: %v, want example.com/other only", got)
	}
}

// TestFinalizerReleasedWhenTypeChanged: a terminating pod that carries a plugin's finalizer
// but no longer names the plugin's network type (changed, or the annotation removed) is let
// go without Finalize (nothing is deleted on another type's conf), with a
// NetworkFinalizerReleased Event; before the OKG guard's first look, or while the manager
// steps back from the plugin's provider, it is left alone, as is a pod of a type whose
// provider this manager does not serve (not registered).
func TestFinalizerReleasedWhenTypeChanged(t *testing.T) {
	for _, c := range []struct {
		name        string
		networkType *string
	}{{"type changed", ptr.To("Kubernetes-HostPort")}, {"type removed", nil}} {
		t.Run(c.name, func(t *testing.T) {
			pod := newPod().obj()
			if c.networkType == nil {
				delete(pod.Annotations, networkstatus.AnnotationNetworkType)
			} else {
				pod.Annotations[networkstatus.AnnotationNetworkType] = *c.networkType
			}
			pod.Finalizers = []string{"example.com/test", "example.com/other"}
			now := metav1.NewTime(t0)
			pod.DeletionTimestamp = &now
			f := &testFinalizer{err: plugin.Errorf(plugin.RetryError, "waiting for Services")}
			h := newHarness(t, at(time.Minute), interceptor.Funcs{}, pod)
			h.r = NewReconciler(h.client, h.recorder, Options{Clock: h.clock, Metrics: h.metrics, Finalizers: map[string]plugin.PodFinalizer{testPlugin: f}})
			h.mustReconcile(t)
			if got := h.pod(t).Finalizers; f.calls != 0 || !slices.Equal(got, []string{"example.com/other"}) {
				t.Fatalf("Finalize called %d times, finalizers %v; want none and example.com/other only", f.calls, got)
			}
			if ev := h.events(); len(ev) != 1 || !strings.Contains(ev[0], ReasonFinalizerReleased) {
				t.Errorf("events %q, want one %s", ev, ReasonFinalizerReleased)
			}
		})
	}
	t.Run("stepping back", func(t *testing.T) {
		pod := newPod().obj()
		pod.Annotations[networkstatus.AnnotationNetworkType] = "Kubernetes-HostPort"
		pod.Finalizers = []string{"example.com/test"}
		now := metav1.NewTime(t0)
		pod.DeletionTimestamp = &now
		h := newHarness(t, at(time.Minute), interceptor.Funcs{}, pod)
		looked := false
		h.r = NewReconciler(h.client, h.recorder, Options{Clock: h.clock, Metrics: h.metrics, Looked: func() bool { return looked },
			StepBack:   func(networkType string) (bool, string) { return networkType == testPlugin, "OKG serves it" },
			Finalizers: map[string]plugin.PodFinalizer{testPlugin: &testFinalizer{}}})
		if res := h.mustReconcile(t); res.RequeueAfter != lookRequeue {
			t.Fatalf("before the first look: %+v", res)
		}
		looked = true
		if res := h.mustReconcile(t); res.RequeueAfter != stepBackRequeue || !slices.Contains(h.pod(t).Finalizers, "example.com/test") {
			t.Fatalf("while OKG serves the plugin's provider: %+v, finalizers %v; want it left to OKG", res, h.pod(t).Finalizers)
		}
	})
	t.Run("provider not served here", func(t *testing.T) {
		pod := newPod().obj()
		pod.Finalizers = []string{"example.com/test"}
		now := metav1.NewTime(t0)
		pod.DeletionTimestamp = &now
		f := &testFinalizer{}
		h := newHarness(t, at(time.Minute), interceptor.Funcs{}, pod)
		h.r = NewReconciler(h.client, h.recorder, Options{Clock: h.clock, Metrics: h.metrics, NetworkTypes: []string{"Other"},
			Finalizers: map[string]plugin.PodFinalizer{testPlugin: f}})
		h.mustReconcile(t)
		if got := h.pod(t).Finalizers; f.calls != 0 || !slices.Equal(got, []string{"example.com/test"}) {
			t.Fatalf("Finalize called %d times, finalizers %v; want the pod left alone", f.calls, got)
		}
	})
}
