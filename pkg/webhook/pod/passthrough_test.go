package pod

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	policyv1alpha1 "github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
	"github.com/okg-extensions/network-plugin-policy/pkg/networkretry"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// pluginLabels returns the values (counters) or sample counts (histograms) of the series of
// c, summed by "<plugin>/<outcome or result>".
func pluginLabels(t *testing.T, c prometheus.Collector) map[string]float64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 100)
	c.Collect(ch)
	close(ch)
	out := map[string]float64{}
	for m := range ch {
		var pb dto.Metric
		if err := m.Write(&pb); err != nil {
			t.Fatal(err)
		}
		var pluginLabel, kind string
		for _, l := range pb.GetLabel() {
			switch l.GetName() {
			case "plugin":
				pluginLabel = l.GetValue()
			case "outcome", "result":
				kind = l.GetValue()
			}
		}
		v := pb.GetCounter().GetValue()
		if pb.Histogram != nil {
			v = float64(pb.GetHistogram().GetSampleCount())
		}
		out[pluginLabel+"/"+kind] += v
	}
	return out
}

// TestUnregisteredTypePassesThrough: a network type that is neither registered nor a
// near-miss (OKG's cloud types) is admitted untouched on every operation, dry run or not,
// whatever the policies say (even one that names it, or a catch-all Synchronous one): no
// patch, no warning, no event, no plugin run, counted as passed_through with plugin label
// unknown.
func TestUnregisteredTypePassesThrough(t *testing.T) {
	policies := []*policyv1alpha1.NetworkPluginPolicy{
		npp(testRoot, "strict-all", func(s *policyv1alpha1.NetworkPluginPolicySpec) {
			s.FailureMode = ptr.To(policyv1alpha1.FailureModeSynchronous)
		}),
		npp(testNS, "slb", func(s *policyv1alpha1.NetworkPluginPolicySpec) {
			s.Plugins = []string{"AlibabaCloud-SLB"}
			s.FailureMode = ptr.To(policyv1alpha1.FailureModeSynchronous)
			s.ReadinessGate = ptr.To(true)
		}),
	}
	for _, networkType := range []string{"AlibabaCloud-SLB", "TencentCloud-CLB", "Test-Sync-v2", "Test-Family", "unknown"} {
		for _, op := range []admissionv1.Operation{admissionv1.Create, admissionv1.Update, admissionv1.Delete} {
			for _, dryRun := range []bool{false, true} {
				t.Run(networkType+"/"+string(op), func(t *testing.T) {
					e := newEnv(t, policies...)
					pod := gamePod(networkType, AnnotationTraceparent, "00-abc-def-01")
					var old *corev1.Pod
					if op == admissionv1.Update {
						old = gamePod(networkType)
					}
					resp := e.handler.Handle(context.Background(), request(t, op, pod, old, dryRun))
					if !resp.Allowed || len(resp.Patches) != 0 || resp.PatchType != nil {
						t.Fatalf("allowed %v, patches %v, result %v; want allowed without a patch", resp.Allowed, resp.Patches, resp.Result)
					}
					if len(resp.Warnings) != 0 || len(resp.AuditAnnotations) != 0 {
						t.Errorf("warnings %q, audit annotations %v; want none", resp.Warnings, resp.AuditAnnotations)
					}
					if evs := drain(e.recorder); len(evs) != 0 {
						t.Errorf("events %q, want none", evs)
					}
					if n := e.sync.calls.Load() + e.async.calls.Load(); n != 0 {
						t.Errorf("plugins ran %d times", n)
					}
					want := map[string]float64{"unknown/passed_through": 1}
					if got := pluginLabels(t, e.handler.Metrics.Decisions); !equalCounts(got, want) {
						t.Errorf("npp_admission_decisions_total = %v, want %v", got, want)
					}
					if got := pluginLabels(t, e.handler.Metrics.PluginDuration); len(got) != 0 {
						t.Errorf("npp_plugin_duration_seconds = %v, want no series", got)
					}
				})
			}
		}
	}
}

func equalCounts(a, b map[string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestNearMissIsAParameterError: a near-miss of a registered name is a parameterError
// decided by policy, whose message suggests the name; the metrics label it unknown. A
// policy that lists the exact misspelling, or "*", decides it; one that lists only the
// registered name does not.
func TestNearMissIsAParameterError(t *testing.T) {
	t.Run("denied by the built-in default, labelled unknown", func(t *testing.T) {
		e := newEnv(t)
		resp := e.handler.Handle(context.Background(), request(t, admissionv1.Create, gamePod("test-sync"), nil, false))
		if resp.Allowed || !strings.Contains(resp.Result.Message, "did you mean Test-Sync?") {
			t.Fatalf("allowed %v, result %v; want denied suggesting Test-Sync", resp.Allowed, resp.Result)
		}
		if e.sync.calls.Load() != 0 {
			t.Errorf("the suggested plugin ran")
		}
		want := map[string]float64{"unknown/denied": 1}
		if got := pluginLabels(t, e.handler.Metrics.Decisions); !equalCounts(got, want) {
			t.Errorf("npp_admission_decisions_total = %v, want %v", got, want)
		}
	})
	t.Run("a policy for the registered name does not decide it", func(t *testing.T) {
		e := newEnv(t, npp(testNS, "sync-async", func(s *policyv1alpha1.NetworkPluginPolicySpec) {
			s.Plugins = []string{syncName}
			s.FailureMode = ptr.To(policyv1alpha1.FailureModeAsynchronous)
		}))
		resp := e.handler.Handle(context.Background(), request(t, admissionv1.Create, gamePod("Test-Snyc"), nil, false))
		if resp.Allowed || !strings.Contains(resp.Result.Message, "denied by built-in default") {
			t.Errorf("allowed %v, result %v; want denied by the built-in default", resp.Allowed, resp.Result)
		}
	})
	for name, entry := range map[string]string{"the exact misspelling": "Test-Snyc", "a catch-all": "*"} {
		t.Run("admitted NotReady by a policy naming "+name, func(t *testing.T) {
			e := newEnv(t, npp(testNS, "lenient", func(s *policyv1alpha1.NetworkPluginPolicySpec) {
				s.Plugins = []string{entry}
				s.FailureMode = ptr.To(policyv1alpha1.FailureModeAsynchronous)
			}))
			req := request(t, admissionv1.Create, gamePod("Test-Snyc"), nil, false)
			resp := e.handler.Handle(context.Background(), req)
			got := admitted(t, req, resp)
			if st, _ := networkstatus.StatusFromPod(got); st == nil || st.CurrentNetworkState != networkstatus.NetworkNotReady {
				t.Errorf("network-status = %+v, want NotReady", st)
			}
			if st, _ := networkretry.FromPod(got); st == nil || st.LastError == nil || !strings.Contains(st.LastError.Message, "did you mean Test-Sync?") {
				t.Errorf("retry state = %+v, want the parameterError recorded", st)
			}
			if len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], "did you mean Test-Sync?") {
				t.Errorf("warnings = %q", resp.Warnings)
			}
			want := map[string]float64{"unknown/admitted_not_ready": 1}
			if got := pluginLabels(t, e.handler.Metrics.Decisions); !equalCounts(got, want) {
				t.Errorf("npp_admission_decisions_total = %v, want %v", got, want)
			}
		})
	}
	t.Run("DELETE: nothing to clean up", func(t *testing.T) {
		e := newEnv(t)
		resp := e.handler.Handle(context.Background(), request(t, admissionv1.Delete, gamePod("test-sync"), nil, false))
		if !resp.Allowed || e.sync.calls.Load() != 0 || len(drain(e.recorder)) != 0 {
			t.Errorf("allowed %v, plugin calls %d; want allowed without a run or an event", resp.Allowed, e.sync.calls.Load())
		}
	})
}

// TestRegisteredPluginsAreLabelledByName: a registered plugin's requests carry its name
// in both metrics.
func TestRegisteredPluginsAreLabelledByName(t *testing.T) {
	e := newEnv(t)
	e.async.ready = true
	e.handler.Handle(context.Background(), request(t, admissionv1.Create, gamePod(asyncNm), nil, false))
	if got, want := pluginLabels(t, e.handler.Metrics.Decisions), map[string]float64{asyncNm + "/allowed": 1}; !equalCounts(got, want) {
		t.Errorf("npp_admission_decisions_total = %v, want %v", got, want)
	}
	if got, want := pluginLabels(t, e.handler.Metrics.PluginDuration), map[string]float64{asyncNm + "/success": 1}; !equalCounts(got, want) {
		t.Errorf("npp_plugin_duration_seconds = %v, want %v", got, want)
	}
}

// TestStepBackPassesEveryPodThrough: while the manager steps back (kruise-game-manager still
// runs the Kubernetes plugins), even a registered Synchronous type is admitted untouched on
// CREATE, with the reason as a warning, no plugin run, counted as passed_through.
func TestStepBackPassesEveryPodThrough(t *testing.T) {
	e := newEnv(t)
	e.handler.StepBack = func(string) (bool, string) { return true, "OKG's provider is on" }
	resp := e.handler.Handle(context.Background(), request(t, admissionv1.Create, gamePod(syncName), nil, false))
	if !resp.Allowed || len(resp.Patches) != 0 {
		t.Fatalf("allowed %v, patches %v; want allowed without a patch", resp.Allowed, resp.Patches)
	}
	if len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], "OKG's provider is on") {
		t.Errorf("warnings %q, want the reason", resp.Warnings)
	}
	if n := e.sync.calls.Load() + e.async.calls.Load(); n != 0 {
		t.Errorf("plugins ran %d times", n)
	}
	want := map[string]float64{syncName + "/passed_through": 1}
	if got := pluginLabels(t, e.handler.Metrics.Decisions); !equalCounts(got, want) {
		t.Errorf("npp_admission_decisions_total = %v, want %v", got, want)
	}
}

// TestOwnedAnnotationsRevertedWithoutAPlugin: a request no plugin runs for (no network type,
// or a type without a plugin) that brings, changes or removes one of the manager's own
// annotations gets it put back, with a warning: an UPDATE that drops the network type while
// it forges an exhausted retry state keeps the stored one, and a pod created without a type
// but with a retry state has it dropped; so putting the type back later finds only what the
// manager wrote. Nothing else is patched.
func TestOwnedAnnotationsRevertedWithoutAPlugin(t *testing.T) {
	forged := `{"plugin":"Test-Async","exhausted":"2026-01-01T00:00:00Z","exhaustedAction":"Recreate"}`
	typeless := func(annotations ...string) *corev1.Pod {
		p := gamePod("", annotations...)
		delete(p.Annotations, networkstatus.AnnotationNetworkType)
		return p
	}
	cases := map[string]struct {
		op        admissionv1.Operation
		pod, old  *corev1.Pod
		want      map[string]string // the owned annotations of the admitted pod
		wantPatch bool
	}{
		"UPDATE drops the type and forges a retry state": {op: admissionv1.Update,
			old:  gamePod(asyncNm, AnnotationDecision, "Asynchronous by built-in default"),
			pod:  typeless(AnnotationDecision, "Asynchronous by built-in default", networkretry.Annotation, forged),
			want: map[string]string{AnnotationDecision: "Asynchronous by built-in default"}, wantPatch: true},
		"UPDATE of a typeless pod removes the decision": {op: admissionv1.Update,
			old: typeless(AnnotationDecision, "Asynchronous by built-in default"), pod: typeless(),
			want: map[string]string{AnnotationDecision: "Asynchronous by built-in default"}, wantPatch: true},
		"CREATE without a type, with a retry state": {op: admissionv1.Create,
			pod: typeless(networkretry.Annotation, forged), want: map[string]string{}, wantPatch: true},
		"CREATE of a cloud type with a decision": {op: admissionv1.Create,
			pod: gamePod("AlibabaCloud-SLB", AnnotationDecision, "x"), want: map[string]string{}, wantPatch: true},
		"UPDATE of a typeless pod, owned annotations unchanged": {op: admissionv1.Update,
			old: typeless(AnnotationDecision, "d"), pod: typeless(AnnotationDecision, "d", "x", "y"),
			want: map[string]string{AnnotationDecision: "d"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			req := request(t, tc.op, tc.pod, tc.old, false)
			resp := e.handler.Handle(context.Background(), req)
			if (len(resp.Patches) > 0) != tc.wantPatch {
				t.Fatalf("patches %v, want a patch %t", resp.Patches, tc.wantPatch)
			}
			got := admitted(t, req, resp)
			owned := map[string]string{}
			for k, v := range got.Annotations {
				if strings.HasPrefix(k, OwnedAnnotationPrefix) {
					owned[k] = v
				}
			}
			if len(owned) != len(tc.want) {
				t.Errorf("owned annotations %v, want %v", owned, tc.want)
			}
			for k, v := range tc.want {
				if owned[k] != v {
					t.Errorf("%s = %q, want %q", k, owned[k], v)
				}
			}
			if got.Annotations["x"] != tc.pod.Annotations["x"] {
				t.Errorf("annotation x = %q, want it untouched", got.Annotations["x"])
			}
			if tc.wantPatch && (len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], "written by network-plugin-policy only")) {
				t.Errorf("warnings %q, want one naming the owned annotations", resp.Warnings)
			}
		})
	}
}
