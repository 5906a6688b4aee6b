package policy

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/utils/ptr"

	"github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
	policycel "github.com/okg-extensions/network-plugin-policy/pkg/policy/cel"
)

func audit() policyOption {
	return func(p *v1alpha1.NetworkPluginPolicy) { p.Spec.Enforcement = ptr.To(v1alpha1.EnforcementAudit) }
}

// withoutExplanation drops what may differ between two decisions that decide alike.
func withoutExplanation(d Decision) Decision {
	d.Explanation = Explanation{}
	return d
}

// TestAuditChangesNoDecision: an Audit policy more specific than every Enforce policy, with
// other values in every group and bounds of its own, changes nothing of the decision in
// force, for a call that succeeds and one that fails, its explanation included; Audit gives
// the decision it would have made.
func TestAuditChangesNoDecision(t *testing.T) {
	enforced := []*v1alpha1.NetworkPluginPolicy{
		newPolicy(testRoot, "platform", mode(v1alpha1.FailureModeAsynchronous), retry(v1alpha1.RetryPolicy{Window: dur(5 * time.Minute)})),
	}
	canary := newPolicy("ns-42", "canary", audit(), podSelector("app", "lobby"), plugins("Kubernetes-NodePort"),
		modeExpr("error.type == 'apiCallError' ? 'Synchronous' : 'Asynchronous'"), timeout(2*time.Second), readinessGate(true),
		retry(v1alpha1.RetryPolicy{Window: dur(time.Minute)}))
	rootAudit := newPolicy(testRoot, "audit-bounds", audit(), bound(v1alpha1.PolicyBounds{MaxWindow: dur(30 * time.Second)}))
	ctx := context.Background()
	for _, failed := range []bool{false, true} {
		t.Run(fmt.Sprintf("failed=%v", failed), func(t *testing.T) {
			decide := func(s *Store) (Decision, *Resolution) {
				res, err := NewResolver(s).Begin(ctx, benchInput())
				if err != nil {
					t.Fatal(err)
				}
				if failed {
					return res.Failed(ctx, &PluginError{Type: "apiCallError", Message: "quota"}), res
				}
				return res.Decision(ctx), res
			}
			want, _ := decide(newTestStore(t, enforced...))
			store := newTestStore(t, append(enforced, canary, rootAudit)...)
			got, res := decide(store)
			// The same decision, explanation included: an Audit policy is not even a loser.
			if diff := cmp.Diff(want, got, cmpopts.EquateErrors()); diff != "" {
				t.Errorf("decision in force changed by the Audit policies (-want,+got):\n%s", diff)
			}
			results := res.Audit(ctx, got)
			if len(results) != 2 {
				t.Fatalf("Audit = %d results, want 2", len(results))
			}
			c := results[0]
			if c.Policy.Name != "canary" || c.Outcome != AuditDiffers {
				t.Fatalf("first result %s %s, want canary differs", c.Policy, c.Outcome)
			}
			wantMode := v1alpha1.FailureModeAsynchronous // the static mode without an error
			if failed {
				wantMode = v1alpha1.FailureModeSynchronous
			}
			if c.Decision.Mode != wantMode || c.Decision.Timeout != 2*time.Second || !c.Decision.ReadinessGate || c.Decision.Retry.Window != time.Minute {
				t.Errorf("canary would decide %+v", withoutExplanation(c.Decision))
			}
			// The root Audit policy's bounds, alone Enforce, would cap the window of 5m.
			b := results[1]
			if b.Policy.Name != "audit-bounds" || b.Outcome != AuditSame {
				t.Errorf("second result %s %s, want audit-bounds same (its bounds cap namespace policies only)", b.Policy, b.Outcome)
			}
			if got := testutil.ToFloat64(store.metrics.auditDecisions.WithLabelValues("ns-42", "canary", "differs")); got != 1 {
				t.Errorf("npp_policy_audit_decisions_total{canary,differs} = %v, want 1", got)
			}
		})
	}
}

// TestAuditResults: which Audit policies take part, and their outcomes.
func TestAuditResults(t *testing.T) {
	cases := map[string]struct {
		policies []*v1alpha1.NetworkPluginPolicy
		want     map[string]AuditOutcome // by name; absent: no result
	}{
		"same values": {
			policies: []*v1alpha1.NetworkPluginPolicy{
				newPolicy(testRoot, "platform", timeout(3*time.Second)),
				newPolicy("ns-42", "copy", audit(), timeout(3*time.Second)),
			},
			want: map[string]AuditOutcome{"copy": AuditSame},
		},
		"podSelector does not match: no result": {
			policies: []*v1alpha1.NetworkPluginPolicy{newPolicy("ns-42", "other-app", audit(), podSelector("app", "arena"), timeout(time.Second))},
			want:     map[string]AuditOutcome{},
		},
		"matchCondition false: no result": {
			policies: []*v1alpha1.NetworkPluginPolicy{newPolicy("ns-42", "updates", audit(), matchCondition("update", "request.operation == 'UPDATE'"), timeout(time.Second))},
			want:     map[string]AuditOutcome{},
		},
		"outranked in every group it sets: no result": {
			policies: []*v1alpha1.NetworkPluginPolicy{
				newPolicy("ns-42", "tenant", podSelector("app", "lobby"), timeout(3*time.Second)),
				newPolicy(testRoot, "root-timeout", audit(), timeout(time.Second)),
			},
			want: map[string]AuditOutcome{},
		},
		"a root Audit policy with bounds that would cap a tenant": {
			policies: []*v1alpha1.NetworkPluginPolicy{
				newPolicy("ns-42", "tenant", retry(v1alpha1.RetryPolicy{Window: dur(time.Hour)})),
				newPolicy(testRoot, "cap", audit(), bound(v1alpha1.PolicyBounds{MaxWindow: dur(10 * time.Minute)})),
			},
			want: map[string]AuditOutcome{"cap": AuditDiffers},
		},
		"two Audit policies: each alone against the decision in force": {
			policies: []*v1alpha1.NetworkPluginPolicy{
				newPolicy("ns-42", "a", audit(), priority(2), timeout(time.Second)),
				newPolicy("ns-42", "b", audit(), priority(1), timeout(DefaultTimeout)),
			},
			want: map[string]AuditOutcome{"a": AuditDiffers, "b": AuditSame},
		},
	}
	ctx := context.Background()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			res, err := NewResolver(newTestStore(t, tc.policies...)).Begin(ctx, benchInput())
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]AuditOutcome{}
			for _, r := range res.Audit(ctx, res.Decision(ctx)) {
				got[r.Policy.Name] = r.Outcome
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("audit outcomes (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestHeavyAuditPolicyStaysInTheBudget: 20 Audit policies whose matchCondition is true and
// costs about 750,000 cost units each (15 million in all, one and a half budgets) beside an
// Enforce policy with a cheap one. The decision in force is made first, whole; the Audit
// policies spend what is left of the request's one budget, so the request's CEL work stays
// within the budget plus one call's limit, as without them; the rest are not_evaluated.
func TestHeavyAuditPolicyStaysInTheBudget(t *testing.T) {
	policies := []*v1alpha1.NetworkPluginPolicy{
		newPolicy("ns-42", "enforced", matchCondition("create", "request.operation == 'CREATE'"), timeout(3*time.Second)),
	}
	for j := range 20 {
		policies = append(policies, newPolicy("ns-42", fmt.Sprintf("heavy-%02d", j), audit(), priority(int32(100-j)), plugins("Kubernetes-NodePort"),
			matchCondition("expensive", "!("+expensiveCondition+")"), timeout(time.Second)))
	}
	store := newTestStore(t, policies...)
	in := budgetPod()
	ctx := context.Background()
	res, err := NewResolver(store).Begin(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	d := res.Failed(ctx, &PluginError{Type: "apiCallError", Message: "quota"})
	if d.Timeout != 3*time.Second || d.Explanation.Timeout.Policy.Name != "enforced" {
		t.Fatalf("decision in force: timeout %s from %s, want 3s from enforced", d.Timeout, d.Explanation.Timeout)
	}
	results := res.Audit(ctx, d)
	var evaluated, notEvaluated int
	for _, r := range results {
		switch r.Outcome {
		case AuditDiffers:
			evaluated++
		case AuditNotEvaluated:
			notEvaluated++
		default:
			t.Errorf("%s: %s, want differs or not_evaluated", r.Policy, r.Outcome)
		}
	}
	cost := conditionCost(t, newTestStore(t, budgetPolicies(1)...), in) // the negation adds a unit or so
	// Every evaluation that fit in what the enforced policy left, and the one that went
	// over it (discarded: not_evaluated), as for Enforce policies.
	fit := int((policycel.DefaultBudget - 1) / cost) // the cheap condition took a few units
	if evaluated+notEvaluated != 20 || evaluated < fit-1 || evaluated > fit {
		t.Errorf("evaluated %d, not evaluated %d of 20 heavy Audit policies of cost %d; want about %d evaluated", evaluated, notEvaluated, cost, fit)
	}
	if !res.act.Budget().Spent() {
		t.Errorf("budget left %d, want spent", res.act.Budget().Remaining())
	}
	if got := testutil.ToFloat64(store.metrics.budgetSpent); got != 0 {
		t.Errorf("npp_cel_request_budget_spent_total = %v, want 0: the decision in force had its budget", got)
	}
	if got := testutil.ToFloat64(store.metrics.notEvaluated); got != 0 {
		t.Errorf("npp_cel_not_evaluated_total = %v, want 0: the Audit policies' count as their not_evaluated outcome", got)
	}
	if got := testutil.ToFloat64(store.metrics.auditDecisions.WithLabelValues("ns-42", "heavy-19", "not_evaluated")); got != 1 {
		t.Errorf("npp_policy_audit_decisions_total{heavy-19,not_evaluated} = %v, want 1", got)
	}
}
