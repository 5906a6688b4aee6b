package network

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/okg-extensions/network-plugin-policy/pkg/networkretry"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// TestReconcileLeavesPodAlone covers the branches that must not write anything: each pod
// below has a retry whose next attempt is long due, or whose window has closed, so a write
// would show.
func TestReconcileLeavesPodAlone(t *testing.T) {
	due := newState()                                           // next attempt at t0+5s
	closed := newState(window(time.Minute), action("Recreate")) // window closed at t0+1m
	cases := map[string]struct {
		pod *corev1.Pod
	}{
		"network disabled": {
			pod: newPod().notReady().retry(due).label(networkstatus.LabelNetworkDisabled, "true").obj(),
		},
		"network disabled, window closed with Recreate": {
			pod: newPod().notReady().retry(closed).gate().label(networkstatus.LabelNetworkDisabled, "true").obj(),
		},
		"pod terminating": {
			pod: newPod().notReady().retry(due).terminating().obj(),
		},
		"pod terminating, window closed with Recreate": {
			pod: newPod().notReady().retry(closed).gate().terminating().obj(),
		},
		"not Ready without a retry state and without the gate": {
			pod: newPod().notReady().obj(),
		},
		"not Ready without a retry state, condition already False": {
			pod: newPod().notReady().gate().conditionMessage(corev1.ConditionFalse, ReasonNetworkNotReady,
				"Network of plugin "+testPlugin+" is not Ready", at(time.Minute)).obj(),
		},
		"no network-status, no retry state, with the gate": {
			pod: newPod().gate().obj(),
		},
		"no network-status and no retry state": {
			pod: newPod().obj(),
		},
		"no network-type annotation": {
			pod: newPod().withoutAnnotation(networkstatus.AnnotationNetworkType).notReady().retry(due).obj(),
		},
		"disabled and Ready with a retry state": {
			pod: newPod().ready().retry(due).gate().label(networkstatus.LabelNetworkDisabled, "true").obj(),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, at(10*time.Minute), interceptor.Funcs{}, tc.pod)
			before := h.pod(t)
			res, err := h.reconcile(t)
			if err != nil {
				t.Fatalf("Reconcile: %v", err)
			}
			if diff := cmp.Diff(ctrl.Result{}, res); diff != "" {
				t.Errorf("result (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(before, h.pod(t)); diff != "" {
				t.Errorf("pod changed (-before,+after):\n%s", diff)
			}
			if got := h.events(); len(got) != 0 {
				t.Errorf("events = %q, want none", got)
			}
			if len(h.evictions) != 0 {
				t.Errorf("deletes = %d, want none", len(h.evictions))
			}
		})
	}
}

func TestReconcilePodGone(t *testing.T) {
	h := newHarness(t, t0, interceptor.Funcs{})
	res, err := h.reconcile(t)
	if err != nil || res != (ctrl.Result{}) {
		t.Errorf("Reconcile = %+v, %v; want no requeue, no error", res, err)
	}
}

// TestReconcileInvalidState: a retry-state annotation that does not parse, or holds values the
// manager never writes (a forged one), is reported with a Warning event naming the annotation
// and the problem at every reconcile, never retried, and the network-ready condition is set
// False (reason NetworkRetryStateInvalid) once: nothing else of the pod changes.
func TestReconcileInvalidState(t *testing.T) {
	cases := map[string]struct {
		value     string
		wantInErr string
	}{
		"not JSON": {
			value:     "{not json",
			wantInErr: "want a JSON retry state",
		},
		"zero window": {
			value:     `{"plugin":"Kubernetes-NodePort","since":"2026-03-01T12:00:00Z","attempts":1,"window":"0s","interval":"5s","maxInterval":"1m0s"}`,
			wantInErr: "want window > 0",
		},
		"maxInterval below interval": {
			value:     `{"plugin":"Kubernetes-NodePort","since":"2026-03-01T12:00:00Z","attempts":1,"window":"5m","interval":"10s","maxInterval":"5s"}`,
			wantInErr: "maxInterval >= interval",
		},
		"since in the future (forged)": {
			value: `{"plugin":"Kubernetes-NodePort","since":"2099-01-01T00:00:00Z","lastAttempt":"2099-01-01T00:00:00Z","attempts":2,` +
				`"window":"5m","interval":"5s","maxInterval":"1m","exhaustedAction":"Event"}`,
			wantInErr: "since: 2099-01-01T00:00:00Z is in the future",
		},
		"attempts wrapped (forged)": {
			value: `{"plugin":"Kubernetes-NodePort","since":"2026-03-01T12:00:00Z","lastAttempt":"2026-03-01T12:00:00Z","attempts":-2147483270,` +
				`"window":"5m","interval":"5s","maxInterval":"1m","exhaustedAction":"Event"}`,
			wantInErr: "attempts: want 1 to",
		},
		"exhausted without the pod UID (forged)": {
			value: `{"plugin":"Kubernetes-NodePort","since":"2026-03-01T12:00:00Z","lastAttempt":"2026-03-01T12:00:00Z","attempts":1,` +
				`"window":"5m","interval":"5s","maxInterval":"1m","exhaustedAction":"Recreate","exhausted":"2026-03-01T12:00:01Z"}`,
			wantInErr: "exhausted: set without exhaustedUID",
		},
		"another plugin's state": {
			value: `{"plugin":"Kubernetes-HostPort","since":"2026-03-01T12:00:00Z","lastAttempt":"2026-03-01T12:00:00Z","attempts":1,` +
				`"window":"5m","interval":"5s","maxInterval":"1m","exhaustedAction":"Recreate"}`,
			wantInErr: `plugin: "Kubernetes-HostPort" is not the pod's network type "Kubernetes-NodePort"`,
		},
		"no exhaustedAction": {
			value: `{"plugin":"Kubernetes-NodePort","since":"2026-03-01T12:00:00Z","lastAttempt":"2026-03-01T12:00:00Z","attempts":1,` +
				`"window":"5m","interval":"5s","maxInterval":"1m"}`,
			wantInErr: `exhaustedAction: want Event or Recreate, got ""`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pod := newPod().notReady().gate().annotation(networkretry.Annotation, tc.value).obj()
			h := newHarness(t, at(time.Hour), interceptor.Funcs{}, pod)
			before := h.pod(t)
			// The first reconcile stamps a trigger, so the webhook's plugin run replaces the
			// state; the second, in the same second, does not stamp again (no hot loop).
			for i := range 2 {
				res, err := h.reconcile(t)
				if err != nil || res.RequeueAfter <= 0 || res.RequeueAfter > invalidStateRetry {
					t.Fatalf("Reconcile %d = %+v, %v; want a requeue within %s and no error", i, res, err, invalidStateRetry)
				}
			}
			after := h.pod(t)
			if got := after.Annotations[networkstatus.AnnotationNetworkTriggerTime]; got == "" {
				t.Errorf("no trigger stamp: the invalid state would never be replaced")
			}
			delete(after.Annotations, networkstatus.AnnotationNetworkTriggerTime)
			c := networkCondition(after)
			if c == nil || c.Status != corev1.ConditionFalse || c.Reason != ReasonNetworkRetryStateInvalid || !strings.Contains(c.Message, tc.wantInErr) {
				t.Errorf("network-ready condition = %+v, want False, reason %s, message containing %q", c, ReasonNetworkRetryStateInvalid, tc.wantInErr)
			}
			// Nothing but the condition and the one trigger stamp changed.
			after.Status.Conditions, after.ResourceVersion = nil, before.ResourceVersion
			if diff := cmp.Diff(before, after); diff != "" {
				t.Errorf("pod changed beyond the condition (-before,+after):\n%s", diff)
			}
			if len(h.evictions) != 0 {
				t.Errorf("deletes = %d, want none", len(h.evictions))
			}
			got := h.events()
			if len(got) != 2 {
				t.Fatalf("events = %q, want one per reconcile", got)
			}
			for _, e := range got {
				for _, want := range []string{"Warning " + ReasonNetworkRetryStateInvalid + " ", networkretry.Annotation, tc.wantInErr} {
					if !strings.Contains(e, want) {
						t.Errorf("event %q does not contain %q", e, want)
					}
				}
			}
			if got := h.retries(); got != 0 {
				t.Errorf("retries = %v, want 0", got)
			}
		})
	}
}

// TestTruncate: event notes stay within the apiserver's limit and valid UTF-8.
func TestTruncate(t *testing.T) {
	cases := map[string]struct {
		in   string
		n    int
		want string
	}{
		"short":           {in: "abc", n: 5, want: "abc"},
		"exact":           {in: "abcde", n: 5, want: "abcde"},
		"cut":             {in: "abcdefgh", n: 6, want: "abc..."},
		"cut before rune": {in: "ab\u00e9\u00e9\u00e9", n: 6, want: "ab..."},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, truncate(tc.in, tc.n)); diff != "" {
				t.Errorf("truncate (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestLongPluginErrorIsTruncated: a huge plugin error does not make the event note exceed the
// apiserver's 1024-byte limit.
func TestLongPluginErrorIsTruncated(t *testing.T) {
	s := newState(window(time.Minute), attempts(3, at(50*time.Second)))
	s.LastError.Message = strings.Repeat("x", 5000)
	h := newHarness(t, at(time.Minute), interceptor.Funcs{}, newPod().notReady().retry(s).obj())
	h.mustReconcile(t)
	got := h.events()
	if len(got) != 1 {
		t.Fatalf("events = %q, want 1", got)
	}
	note := strings.TrimPrefix(got[0], "Warning "+ReasonNetworkRetryExhausted+" ")
	if len(note) > maxNoteBytes || !strings.HasSuffix(note, "...") {
		t.Errorf("note has %d bytes (want <= %d, ending in ...)", len(note), maxNoteBytes)
	}
}

// TestMetricsRegistration: metrics register once per registry, and any number of reconcilers
// can share the default ones without a duplicate-registration panic.
func TestMetricsRegistration(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := NewMetrics(reg); err != nil {
		t.Fatalf("first NewMetrics: %v", err)
	}
	if _, err := NewMetrics(reg); err == nil {
		t.Error("second NewMetrics on the same registry: want an error")
	}
	r1 := NewReconciler(nil, events.NewFakeRecorder(1), Options{})
	r2 := NewReconciler(nil, events.NewFakeRecorder(1), Options{})
	if r1.opts.Metrics == nil || r1.opts.Metrics != r2.opts.Metrics {
		t.Error("reconcilers with default options do not share DefaultMetrics()")
	}
	if r1.opts.ControllerName != DefaultControllerName || r1.opts.Clock == nil || r1.opts.MaxConcurrentReconciles != DefaultMaxConcurrentReconciles ||
		r1.opts.MinRetryInterval != DefaultMinRetryInterval {
		t.Errorf("defaults not applied: %+v", r1.opts)
	}
}
