package pod

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	policyv1alpha1 "github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/policy"
	"github.com/okg-extensions/network-plugin-policy/pkg/policyaudit"
)

// TestAuditPolicyChangesNothing: an Audit policy that would admit a failing synchronous
// plugin's pod NotReady, and would give a succeeding one a readiness gate and a shorter
// timeout, leaves the webhook's responses byte for byte as they are without it, and its
// events too.
func TestAuditPolicyChangesNothing(t *testing.T) {
	canary := npp(testNS, "canary", func(s *policyv1alpha1.NetworkPluginPolicySpec) {
		s.Enforcement = ptr.To(policyv1alpha1.EnforcementAudit)
		s.FailureMode = ptr.To(policyv1alpha1.FailureModeAsynchronous)
		s.ReadinessGate = ptr.To(true)
		s.Timeout = &metav1.Duration{Duration: time.Second}
	})
	cases := map[string]func(e *env) string{
		"synchronous plugin fails: denied": func(e *env) string {
			e.sync.err = plugin.Errorf(plugin.InternalError, "no free host port")
			return syncName
		},
		"asynchronous plugin succeeds": func(*env) string { return asyncNm },
		"asynchronous plugin fails": func(e *env) string {
			e.async.err = plugin.Errorf(plugin.APICallError, "exceeded quota")
			return asyncNm
		},
	}
	for name, setup := range cases {
		t.Run(name, func(t *testing.T) {
			respond := func(e *env) ([]byte, []string) {
				req := request(t, admissionv1.Create, gamePod(setup(e)), nil, false)
				b, err := json.Marshal(e.handler.Handle(context.Background(), req))
				if err != nil {
					t.Fatal(err)
				}
				return b, drain(e.recorder)
			}
			want, wantEvents := respond(newEnv(t))
			got, gotEvents := respond(newEnv(t, canary))
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("response with the Audit policy (-without,+with):\n%s", diff)
			}
			if diff := cmp.Diff(wantEvents, gotEvents); diff != "" {
				t.Errorf("events with the Audit policy (-without,+with):\n%s", diff)
			}
		})
	}
}

// TestAuditOutcomeText: what nppctl explain and the audit log lines say a decision does.
func TestAuditOutcomeText(t *testing.T) {
	d := policy.Decision{Mode: policyv1alpha1.FailureModeAsynchronous, Timeout: 8 * time.Second,
		Retry: policy.RetrySchedule{Window: 5 * time.Minute, Interval: 5 * time.Second, MaxInterval: time.Minute, ExhaustedAction: policyv1alpha1.ExhaustedActionEvent}}
	for errType, want := range map[string]string{
		"":             "admitted; timeout 8s; readinessGate false; retry interval 5s, maxInterval 1m0s",
		"apiCallError": "admitted NotReady (Asynchronous, retried for 5m0s, then Event); timeout 8s",
	} {
		if got := AuditOutcomeText(d, errType, false); !strings.HasPrefix(got, want) {
			t.Errorf("AuditOutcomeText(%q) = %q, want prefix %q", errType, got, want)
		}
	}
	d.Mode = policyv1alpha1.FailureModeSynchronous
	if got := AuditOutcomeText(d, "internalError", false); !strings.HasPrefix(got, "denied (Synchronous); timeout 8s") {
		t.Errorf("AuditOutcomeText(Synchronous) = %q", got)
	}
	if got := AuditOutcomeText(d, "internalError", true); !strings.HasPrefix(got, "admitted NotReady (Synchronous, but this update leaves the network alone; retried for 5m0s, then Event)") {
		t.Errorf("AuditOutcomeText(Synchronous, an update that leaves the network alone) = %q", got)
	}
}

// auditSink collects what the handler records for status.audit.
type auditSink struct{ records []string }

func (s *auditSink) Record(ref policy.PolicyRef, outcome policy.AuditOutcome, _ *policyaudit.Sample) {
	s.records = append(s.records, fmt.Sprintf("%s %s", ref.Name, outcome))
}

// TestDryRunRecordsNoAudit: a dry-run admission (sideEffects NoneOnDryRun) reaches no
// policy's status.audit; the same admission for real does.
func TestDryRunRecordsNoAudit(t *testing.T) {
	canary := npp(testNS, "canary", func(s *policyv1alpha1.NetworkPluginPolicySpec) {
		s.Enforcement = ptr.To(policyv1alpha1.EnforcementAudit)
		s.ReadinessGate = ptr.To(true)
	})
	for _, dryRun := range []bool{true, false} {
		e := newEnv(t, canary)
		sink := &auditSink{}
		e.handler.AuditRecorder = sink
		e.handler.Handle(context.Background(), request(t, admissionv1.Create, gamePod(asyncNm), nil, dryRun))
		if got := len(sink.records) > 0; got == dryRun {
			t.Errorf("dry run %v: audit records %v", dryRun, sink.records)
		}
	}
}
