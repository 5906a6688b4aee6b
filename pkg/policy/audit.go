package policy

import (
	"context"
	"errors"
	"slices"

	policycel "github.com/okg-extensions/network-plugin-policy/pkg/policy/cel"
)

// AuditOutcome is how an Audit policy's would-be decision compares with the decision in
// force; it is the outcome label of npp_policy_audit_decisions_total.
type AuditOutcome string

const (
	// AuditSame: the policy, had it been Enforce, would have decided as the decision in
	// force (mode, timeout, readiness gate and retry schedule all equal).
	AuditSame AuditOutcome = "same"
	// AuditDiffers: it would have decided otherwise in at least one field.
	AuditDiffers AuditOutcome = "differs"
	// AuditNotEvaluated: the request's CEL cost budget was spent before the policy's
	// expressions could be evaluated; nothing is known of its decision.
	AuditNotEvaluated AuditOutcome = "not_evaluated"
)

// AuditResult is the decision one Audit policy would have made for the resolved call.
type AuditResult struct {
	// Policy is the Audit policy. Read-only: it is shared with the Store's snapshot.
	Policy *PolicyRef
	// Outcome compares Decision with the decision in force.
	Outcome AuditOutcome
	// Decision is what would have been decided had the policy been Enforce (the other
	// Audit policies still left out), its Explanation included; zero for
	// AuditNotEvaluated.
	Decision Decision
}

// Audit returns, for each Audit policy (spec.enforcement: Audit) naming the plugin that
// would have taken part in the call, in precedence order, the decision it would have made
// had it alone been Enforce, compared with inForce (the decision the webhook applies, made
// by Decision or Failed before), and counts each in npp_policy_audit_decisions_total.
//
// An Audit policy takes part when its selectors and matchConditions match and it supplies
// a group or bounds the call. One that does not match, or that more specific policies
// outrank in every group it sets, would have decided nothing and is left out (a
// matchCondition that fails at runtime counts as not matching, as for Enforce policies).
//
// The Audit policies' expressions are evaluated after the decision in force is final, on
// the same CEL activation and cost budget, and every expression is evaluated at most once
// per request: Audit can never change the decision in force or take budget from it, and
// cannot make a request cost more than its one budget (TestHeavyAuditPolicyStaysInTheBudget).
// A policy whose decision needed an expression that the spent budget left unevaluated is
// AuditNotEvaluated. Audit is for one request, like the Resolution.
func (res *Resolution) Audit(ctx context.Context, inForce Decision) []AuditResult {
	if len(res.audits) == 0 {
		return nil
	}
	act := res.activation()
	out := make([]AuditResult, 0, len(res.audits))
	for _, p := range res.audits {
		r := AuditResult{Policy: &p.ref}
		if act.Budget().Spent() {
			r.Outcome = AuditNotEvaluated
		} else {
			sub := &Resolution{in: res.in, metrics: res.metrics, budget: res.budget, act: act, snap: res.snap,
				auditAs: p, matched: res.matched, budgetReported: true}
			sub.walk(ctx, res.snap)
			governs := slices.Contains(sub.winners[:], p) || slices.Contains(sub.bounds, p)
			switch {
			case !governs && lostForBudget(sub.losers, p):
				r.Outcome = AuditNotEvaluated
			case !governs:
				continue
			default:
				r.Decision = sub.Decision(ctx)
				switch {
				case sub.notEvaluated:
					r.Outcome, r.Decision = AuditNotEvaluated, Decision{}
				case sameDecision(r.Decision, inForce):
					r.Outcome = AuditSame
				default:
					r.Outcome = AuditDiffers
				}
			}
		}
		res.metrics.auditDecisions.WithLabelValues(p.ref.Namespace, p.ref.Name, string(r.Outcome)).Inc()
		out = append(out, r)
	}
	return out
}

// lostForBudget reports whether losers say that p's matchConditions were left unevaluated
// for lack of budget, or stopped by it (policycel.ErrOutOfBudget).
func lostForBudget(losers []Loser, p *CompiledPolicy) bool {
	for _, l := range losers {
		if l.Policy == &p.ref && (l.Reason == LostBudget || l.Reason == LostConditionError && errors.Is(l.Err, policycel.ErrOutOfBudget)) {
			return true
		}
	}
	return false
}

// sameDecision reports whether a and b decide alike: mode, timeout, readiness gate and
// retry schedule (their explanations may differ).
func sameDecision(a, b Decision) bool {
	return a.Mode == b.Mode && a.Timeout == b.Timeout && a.ReadinessGate == b.ReadinessGate && a.Retry == b.Retry
}
