package policy

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
	policycel "github.com/okg-extensions/network-plugin-policy/pkg/policy/cel"
)

// RuleViolation is one network-conf rule (spec.networkConfRules of a root policy) that does
// not hold for a pod's network-conf.
type RuleViolation struct {
	// Policy is the root policy. Read-only: it is shared with the Store's snapshot.
	Policy *PolicyRef
	// Rule is the rule's name.
	Rule string
	// Message is the rule's message, or "rule <name> does not hold".
	Message string
	// Fields are the fields of the network variable the rule reads (loadBalancerIDs,
	// ports, ...), sorted; a plugin maps them to its parameters (plugin.NetworkView).
	Fields []string
	// Err is set when the rule did not evaluate (an error, the per-call limit or the
	// budget): it counts as not holding (fail closed).
	Err error
	// Audit marks a rule of an Audit policy: it refuses nothing; it would have.
	Audit bool
}

// String is "rule NAME of root policy NS/NAME@GEN: MESSAGE", with the evaluation error when
// there was one.
func (v RuleViolation) String() string {
	s := fmt.Sprintf("rule %s of root policy %s: %s", v.Rule, v.Policy, v.Message)
	if v.Err != nil {
		s += " (the rule could not be evaluated, which counts as not holding: " + v.Err.Error() + ")"
	}
	return s
}

// collectRules picks, from cands, the root policies with network-conf rules that select the
// pod: by their plugins (collect) and namespaceSelector only, never by what the pod's author
// writes. A namespaceSelector that cannot be matched because the Namespace could not be read
// selects (fail closed). Audit policies' rules go to auditRules. Only the main resolution
// collects them.
func (res *Resolution) collectRules(cands []candidate, nsLabels labels.Set) {
	if res.auditAs != nil {
		return
	}
	for i := range cands {
		p := cands[i].policy
		if len(p.rules) == 0 || p.ref.Namespace != res.snap.rootNamespace {
			continue
		}
		if p.namespaceSelector != nil && !res.in.NamespaceUnknown && !p.namespaceSelector.Matches(nsLabels) {
			continue
		}
		if p.audit {
			res.auditRules = append(res.auditRules, p)
		} else {
			res.rules = append(res.rules, p)
		}
	}
}

// HasNetworkConfRules reports whether a root policy's network-conf rules select the pod, so
// that the caller builds the network view only then.
func (res *Resolution) HasNetworkConfRules() bool {
	return len(res.rules) > 0 || len(res.auditRules) > 0
}

// CheckNetworkConf evaluates the network-conf rules that select the pod against network, the
// pod's network-conf as its plugin reads it, and returns those that do not hold: every rule
// of every Enforce root policy (conjunction), then those of Audit policies (marked Audit).
// Each policy's rules have a cost budget of their own (policycel.DefaultBudget), so that
// neither tenant policies' expressions nor another root policy's rules can spend it; a rule
// that errors or runs out of budget does not hold. Each violation is counted in
// npp_network_conf_rule_violations_total (dry runs and GameServerSet validations included).
func (res *Resolution) CheckNetworkConf(ctx context.Context, network *policycel.Network) []RuleViolation {
	if !res.HasNetworkConfRules() {
		return nil
	}
	in := res.in
	vars := policycel.Variables{
		Object:  in.Pod,
		Request: policycel.Request{Operation: in.Request.Operation, UserInfo: in.Request.UserInfo, DryRun: in.Request.DryRun},
		Plugin:  policycel.Plugin{Name: in.Plugin.Name, Alias: in.Plugin.Alias, Synchronous: in.Plugin.Synchronous},
		Network: network,
	}
	if in.OldPod != nil {
		vars.OldObject = in.OldPod
	}
	if in.Namespace != nil {
		vars.Namespace = in.Namespace
	}
	var out []RuleViolation
	check := func(p *CompiledPolicy, audit bool) {
		act := policycel.NewActivationWithBudget(vars, policycel.DefaultBudget)
		for _, r := range p.rules {
			ok, err := r.program.EvalBool(ctx, act)
			if err == nil && ok {
				continue
			}
			if err != nil {
				res.evalError(ctx, p, "networkConfRules "+r.name, err)
			}
			msg := r.message
			if msg == "" {
				msg = "rule " + r.name + " does not hold"
			}
			enforcement := v1alpha1.EnforcementEnforce
			if audit {
				enforcement = v1alpha1.EnforcementAudit
			}
			res.metrics.ruleViolations.WithLabelValues(p.ref.Namespace, p.ref.Name, r.name, string(enforcement)).Inc()
			out = append(out, RuleViolation{Policy: &p.ref, Rule: r.name, Message: msg, Fields: r.fields, Err: err, Audit: audit})
		}
	}
	for _, p := range res.rules {
		check(p, false)
	}
	for _, p := range res.auditRules {
		check(p, true)
	}
	return out
}

// AuditRulePolicies returns the Audit root policies whose network-conf rules select the pod
// (whether or not they hold), for their status.audit counts.
func (res *Resolution) AuditRulePolicies() []PolicyRef {
	out := make([]PolicyRef, 0, len(res.auditRules))
	for _, p := range res.auditRules {
		out = append(out, p.ref)
	}
	return out
}
