package network

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/okg-extensions/network-plugin-policy/pkg/networkretry"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// TestRecheckUnverifiedReadyNetwork: a Ready pod that the webhook could not check (the
// unverified mark) gets a trigger stamp when the next check is due (5s after the mark, then
// backing off with the time since it), its network-status and its True readiness-gate
// condition untouched; a pod without the mark gets none.
func TestRecheckUnverifiedReadyNetwork(t *testing.T) {
	since := at(0)
	cases := map[string]struct {
		pod         *corev1.Pod
		now         time.Time
		wantStamp   string
		wantRequeue time.Duration
	}{
		"due: 5s after the mark": {
			pod:         newPod().ready().gate().condition(corev1.ConditionTrue, ReasonNetworkReady, at(0)).annotation(networkretry.UnverifiedAnnotation, networkretry.FormatUnverified(since)).obj(),
			now:         at(5 * time.Second),
			wantStamp:   at(5 * time.Second).Format(time.RFC3339),
			wantRequeue: 5 * time.Second,
		},
		"not due yet": {
			pod:         newPod().ready().annotation(networkretry.UnverifiedAnnotation, networkretry.FormatUnverified(since)).obj(),
			now:         at(2 * time.Second),
			wantRequeue: 3 * time.Second,
		},
		"backing off: 40s after a stamp 40s into it": {
			pod: newPod().ready().annotation(networkretry.UnverifiedAnnotation, networkretry.FormatUnverified(since)).
				trigger(at(40 * time.Second)).obj(),
			now:         at(79 * time.Second),
			wantStamp:   at(40 * time.Second).Format(time.RFC3339),
			wantRequeue: time.Second,
		},
		"capped at a minute": {
			pod: newPod().ready().annotation(networkretry.UnverifiedAnnotation, networkretry.FormatUnverified(since)).
				trigger(at(10 * time.Minute)).obj(),
			now:         at(11 * time.Minute),
			wantStamp:   at(11 * time.Minute).Format(time.RFC3339),
			wantRequeue: time.Minute,
		},
		"no mark: nothing": {
			pod: newPod().ready().obj(),
			now: at(time.Hour),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, tc.now, interceptor.Funcs{}, tc.pod)
			res := h.mustReconcile(t)
			if res.RequeueAfter != tc.wantRequeue {
				t.Errorf("requeue after %s, want %s", res.RequeueAfter, tc.wantRequeue)
			}
			got := h.pod(t)
			if v := got.Annotations[networkstatus.AnnotationNetworkTriggerTime]; v != tc.wantStamp {
				t.Errorf("trigger = %q, want %q", v, tc.wantStamp)
			}
			if got.Annotations[networkstatus.AnnotationNetworkStatus] != tc.pod.Annotations[networkstatus.AnnotationNetworkStatus] {
				t.Error("network-status changed")
			}
			if c := networkCondition(got); hasReadinessGate(got) && (c == nil || c.Status != corev1.ConditionTrue) {
				t.Errorf("readiness-gate condition = %+v, want True kept", c)
			}
			if _, ok := got.Annotations[networkretry.Annotation]; ok {
				t.Error("retry state written: a window would start")
			}
			wantChecks := 0.0
			if tc.wantStamp != "" && tc.wantStamp != tc.pod.Annotations[networkstatus.AnnotationNetworkTriggerTime] {
				wantChecks = 1
			}
			if got := testutil.ToFloat64(h.metrics.rechecks.WithLabelValues(testPlugin)); got != wantChecks {
				t.Errorf("npp_network_rechecks_total = %v, want %v", got, wantChecks)
			}
		})
	}
}
