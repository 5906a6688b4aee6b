package pod

import (
	"context"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/utils/ptr"

	policyv1alpha1 "github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
	"github.com/okg-extensions/network-plugin-policy/pkg/networkretry"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// noForbidden is a root policy whose network-conf rule refuses a parameter named Forbidden.
func noForbidden(audit bool) *policyv1alpha1.NetworkPluginPolicy {
	return npp(testRoot, "no-forbidden", func(s *policyv1alpha1.NetworkPluginPolicySpec) {
		s.NetworkConfRules = []policyv1alpha1.NetworkConfRule{{Name: "no-forbidden-param",
			Expression: "network.parameters.all(p, p.name != 'Forbidden')", Message: "the platform forbids the parameter Forbidden"}}
		if audit {
			s.Enforcement = ptr.To(policyv1alpha1.EnforcementAudit)
		}
	})
}

// TestNetworkConfRulesRefuseBeforeThePluginRuns: a root policy's network-conf rule that
// does not hold is a parameterError naming the rule, its policy and its message, decided as
// any parameterError (the built-in Synchronous of Test-Sync denies; Test-Async admits
// NotReady with a retry state), and the plugin does not run, so nothing is claimed or
// written; a dry run is refused alike. A pod whose network is Ready (by the manager's own
// status) keeps it through an UPDATE that leaves its network-conf alone, with a warning, its
// plugin run read-only. An Audit policy's rule refuses nothing and is recorded as differing.
func TestNetworkConfRulesRefuseBeforeThePluginRuns(t *testing.T) {
	conf := `[{"name":"Forbidden","value":"1"}]`
	const want = "refused by rule no-forbidden-param of root policy npp-system/no-forbidden@1: the platform forbids the parameter Forbidden"
	for _, dryRun := range []bool{false, true} {
		e := newEnv(t, noForbidden(false))
		req := request(t, admissionv1.Create, gamePod(syncName, networkstatus.AnnotationNetworkConf, conf), nil, dryRun)
		resp := e.handler.Handle(context.Background(), req)
		if resp.Allowed || !strings.Contains(resp.Result.Message, want) || !strings.Contains(resp.Result.Message, "(parameterError)") {
			t.Errorf("dry run %v: Test-Sync CREATE allowed %v, %q; want denied with %q", dryRun, resp.Allowed, resp.Result.Message, want)
		}
		if n := e.sync.calls.Load(); n != 0 {
			t.Errorf("dry run %v: the plugin ran %d times, want none", dryRun, n)
		}
	}

	// A network-conf that cannot be described to the rules is refused, not left unchecked.
	e := newEnv(t, noForbidden(false))
	req := request(t, admissionv1.Create, gamePod(syncName, networkstatus.AnnotationNetworkConf, `[{"name":`), nil, false)
	if resp := e.handler.Handle(context.Background(), req); resp.Allowed || e.sync.calls.Load() != 0 || !strings.Contains(resp.Result.Message, networkstatus.AnnotationNetworkConf) {
		t.Errorf("unreadable network-conf: allowed %v, plugin calls %d, %q; want denied naming the annotation, the plugin not run", resp.Allowed, e.sync.calls.Load(), resp.Result.Message)
	}

	e = newEnv(t, noForbidden(false))
	req = request(t, admissionv1.Create, gamePod(asyncNm, networkstatus.AnnotationNetworkConf, conf), nil, false)
	got := admitted(t, req, e.handler.Handle(context.Background(), req))
	st, err := networkretry.FromPod(got)
	if err != nil || st == nil || st.LastError == nil || !strings.Contains(st.LastError.Message, want) {
		t.Errorf("Test-Async CREATE: retry state %+v (%v), want its last error to be the refusal", st, err)
	}
	if n := e.async.calls.Load(); n != 0 {
		t.Errorf("Test-Async: the plugin ran %d times, want none", n)
	}

	// A live network is kept: the pod became Ready, with the status the manager wrote, before
	// the rule existed. Its plugin runs read-only: one that would write is refused after all.
	// A Ready status the manager did not write (no digest) gets no exemption, nor does a
	// network-conf change.
	readyStatus := `{"currentNetworkState":"Ready","createTime":"2026-01-02T03:04:05Z","lastTransitionTime":"2026-01-02T03:04:05Z"}`
	for _, tc := range []struct {
		name       string
		signed     bool
		confChange bool
		wouldWrite bool
		wantKept   bool
	}{
		{name: "the manager's Ready status", signed: true, wantKept: true},
		{name: "a Ready status nobody checked", signed: false},
		{name: "a network-conf change", signed: true, confChange: true},
		{name: "a run that would write", signed: true, wouldWrite: true},
	} {
		e = newEnv(t, noForbidden(false))
		e.async.ready = true
		if tc.wouldWrite {
			e.async.err = plugin.Wrap(plugin.APICallError, plugin.ErrWouldWrite, "claim listener ports")
		}
		ready := gamePod(asyncNm, networkstatus.AnnotationNetworkConf, conf, networkstatus.AnnotationNetworkStatus, readyStatus)
		if tc.signed {
			ready.Annotations[AnnotationStatusDigest] = StatusDigest(readyStatus)
		}
		touched := ready.DeepCopy()
		touched.Labels = map[string]string{"version": "2"}
		if tc.confChange {
			touched.Annotations[networkstatus.AnnotationNetworkConf] = `[{"name":"Forbidden","value":"2"}]`
		}
		req = request(t, admissionv1.Update, touched, ready, false)
		resp := e.handler.Handle(context.Background(), req)
		got = admitted(t, req, resp)
		st, _ := networkstatus.StatusFromPod(got)
		kept := st != nil && st.CurrentNetworkState == networkstatus.NetworkReady &&
			slices.ContainsFunc(resp.Warnings, func(w string) bool { return strings.Contains(w, "keeps its live network") && strings.Contains(w, want) })
		if kept != tc.wantKept {
			t.Errorf("%s: status %+v, warnings %q; kept %v, want %v", tc.name, st, resp.Warnings, kept, tc.wantKept)
		}
	}

	// Audit: admitted as if the rule did not exist; recorded as differing.
	e = newEnv(t, noForbidden(true))
	sink := &auditSink{}
	e.handler.AuditRecorder = sink
	req = request(t, admissionv1.Create, gamePod(syncName, networkstatus.AnnotationNetworkConf, conf), nil, false)
	admitted(t, req, e.handler.Handle(context.Background(), req))
	if e.sync.calls.Load() != 1 || !slices.Contains(sink.records, "no-forbidden differs") {
		t.Errorf("Audit: plugin calls %d, records %v; want the plugin run and a differing record", e.sync.calls.Load(), sink.records)
	}
}
