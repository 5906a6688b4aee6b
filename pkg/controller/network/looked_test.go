package network

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// TestNothingBeforeTheGuardLooked: until the OKG guard has looked at kruise-game-manager
// (Options.Looked false), neither controller acts on a pod of a registered type: a retry long
// due, a window closed with Recreate, a pod admitted without the webhook are all left as
// they are and looked at again after lookRequeue; once the guard has looked, the same pods
// are acted on.
func TestNothingBeforeTheGuardLooked(t *testing.T) {
	t.Run("network controller", func(t *testing.T) {
		for name, pod := range map[string]*podBuilder{
			"retry due":                    newPod().notReady().retry(newState()),
			"window closed, with Recreate": newPod().notReady().retry(newState(window(time.Minute), action("Recreate"))).gate(),
		} {
			t.Run(name, func(t *testing.T) {
				h := newHarness(t, at(10*time.Minute), interceptor.Funcs{}, pod.obj())
				looked := false
				h.r = NewReconciler(h.client, h.recorder, Options{Clock: h.clock, Metrics: h.metrics, Looked: func() bool { return looked }})
				before := h.pod(t)
				res := h.mustReconcile(t)
				if diff := cmp.Diff(ctrl.Result{RequeueAfter: lookRequeue}, res); diff != "" {
					t.Errorf("result before the first look (-want,+got):\n%s", diff)
				}
				if diff := cmp.Diff(before, h.pod(t)); diff != "" {
					t.Errorf("pod changed before the first look (-before,+after):\n%s", diff)
				}
				if got := h.events(); len(got) != 0 {
					t.Errorf("events before the first look = %q, want none", got)
				}
				if len(h.evictions) != 0 {
					t.Errorf("evictions before the first look = %d, want none", len(h.evictions))
				}

				looked = true
				h.mustReconcile(t)
				if cmp.Equal(before, h.pod(t)) && len(h.evictions) == 0 {
					t.Errorf("after the first look the pod was not acted on")
				}
			})
		}
	})
	t.Run("catch-up controller", func(t *testing.T) {
		h := newHarness(t, at(3*time.Second), interceptor.Funcs{}, newPod().obj())
		looked := false
		r := NewCatchUpReconciler(h.client, h.recorder, Options{Clock: h.clock, Metrics: h.metrics, Looked: func() bool { return looked }},
			CatchUpOptions{NetworkTypes: []string{testPlugin}})
		r.once.Do(func() { r.started = t0 })
		if diff := cmp.Diff(ctrl.Result{RequeueAfter: lookRequeue}, reconcileCatchUp(t, r)); diff != "" {
			t.Errorf("result before the first look (-want,+got):\n%s", diff)
		}
		if got := h.pod(t).Annotations[networkstatus.AnnotationNetworkTriggerTime]; got != "" {
			t.Errorf("trigger stamped before the first look: %q", got)
		}
		looked = true
		reconcileCatchUp(t, r)
		if got := h.pod(t).Annotations[networkstatus.AnnotationNetworkTriggerTime]; got == "" {
			t.Errorf("no trigger stamped after the first look")
		}
	})
}
