package policy

import (
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Metrics are the policy engine's Prometheus metrics, prefix npp_. Per-policy series carry
// only the labels namespace and name.
type Metrics struct {
	// policies is npp_policies{reason}: stored policies by the reason of their Ready
	// condition (Accepted, InvalidExpression, InvalidSpec).
	policies *prometheus.GaugeVec
	// compileErrors is npp_policy_compile_errors_total{namespace,name}.
	compileErrors *prometheus.CounterVec
	// evalErrors is npp_cel_evaluation_errors_total{namespace,name}: runtime errors of any
	// expression of the policy, out-of-budget ones included.
	evalErrors *prometheus.CounterVec
	// outOfBudget is npp_cel_out_of_budget_total{namespace,name}: evaluations stopped by the
	// per-call cost limit or the per-request budget.
	outOfBudget *prometheus.CounterVec
	// budgetSpent is npp_cel_request_budget_spent_total: resolutions whose CEL cost budget
	// ran out, so that further expressions were not evaluated.
	budgetSpent prometheus.Counter
	// notEvaluated is npp_cel_not_evaluated_total: expressions not evaluated because their
	// request's budget was spent (matchConditions then count as not matched).
	notEvaluated prometheus.Counter
	// resolveDuration is npp_policy_resolution_duration_seconds.
	resolveDuration prometheus.Histogram
	// boundsOnError is npp_policy_bounds_applied_on_error_total{namespace,name}: bounds of a
	// root policy applied to a pod although its matchConditions could not be evaluated.
	boundsOnError *prometheus.CounterVec
	// auditDecisions is npp_policy_audit_decisions_total{namespace,name,outcome}: would-be
	// decisions of Audit policies (Resolution.Audit) by outcome (AuditOutcome).
	auditDecisions *prometheus.CounterVec
	// ruleViolations is npp_network_conf_rule_violations_total{namespace,name,rule,enforcement}:
	// spec.networkConfRules that did not hold for a pod (errors included), by root policy, rule
	// and enforcement (Enforce or Audit).
	ruleViolations *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them with reg. Errors come from
// reg.Register, for example when they are registered twice.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		policies: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "npp_policies",
			Help: "NetworkPluginPolicies in the policy store, by the reason of their Ready condition (Accepted, InvalidExpression, InvalidSpec).",
		}, []string{"reason"}),
		compileErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "npp_policy_compile_errors_total",
			Help: "Policy generations that failed to compile and were left out of the policy store, by policy.",
		}, []string{"namespace", "name"}),
		evalErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "npp_cel_evaluation_errors_total",
			Help: "CEL expressions that failed at runtime (a matchCondition then does not match; failure and window expressions fall back to static values), by policy.",
		}, []string{"namespace", "name"}),
		outOfBudget: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "npp_cel_out_of_budget_total",
			Help: "CEL evaluations stopped by the per-call cost limit or the per-request cost budget, by policy.",
		}, []string{"namespace", "name"}),
		budgetSpent: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "npp_cel_request_budget_spent_total",
			Help: "Policy resolutions (one per admission request) whose CEL cost budget ran out; the expressions after that point were not evaluated.",
		}),
		notEvaluated: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "npp_cel_not_evaluated_total",
			Help: "CEL expressions not evaluated because their request's cost budget was spent (a matchCondition then counts as not matched).",
		}),
		boundsOnError: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "npp_policy_bounds_applied_on_error_total",
			Help: "Resolutions in which a root policy's bounds applied although its matchConditions failed at runtime or were not evaluated for lack of budget (bounds fail closed), by root policy.",
		}, []string{"namespace", "name"}),
		auditDecisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "npp_policy_audit_decisions_total",
			Help: "Decisions an Audit policy (spec.enforcement: Audit) would have made at admissions it would have taken part in, by policy and outcome: same (as the decision in force), differs, or not_evaluated (the request's CEL cost budget was spent first).",
		}, []string{"namespace", "name", "outcome"}),
		ruleViolations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "npp_network_conf_rule_violations_total",
			Help: "Network-conf rules (spec.networkConfRules of root policies) that did not hold for a pod's network-conf, an evaluation error or a spent budget included, by policy, rule and enforcement (Enforce: refused as a parameterError; Audit: would have been).",
		}, []string{"namespace", "name", "rule", "enforcement"}),
		resolveDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "npp_policy_resolution_duration_seconds",
			Help:    "Time of one step of a policy resolution (the walk over the candidate policies, or the decision for the failed call), CEL evaluation included.",
			Buckets: []float64{1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 1e-3, 1e-2, 0.1},
		}),
	}
	for _, c := range []prometheus.Collector{m.policies, m.compileErrors, m.evalErrors, m.outOfBudget, m.budgetSpent, m.notEvaluated, m.resolveDuration, m.boundsOnError, m.auditDecisions, m.ruleViolations} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register policy metrics: %w", err)
		}
	}
	return m, nil
}

// DefaultMetrics returns the metrics registered in controller-runtime's metrics.Registry,
// created on first use. It panics if that registration fails.
var DefaultMetrics = sync.OnceValue(func() *Metrics {
	m, err := NewMetrics(ctrlmetrics.Registry)
	if err != nil {
		panic(err)
	}
	return m
})

// forget drops the per-policy series of a deleted policy.
func (m *Metrics) forget(namespace, name string) {
	labels := prometheus.Labels{"namespace": namespace, "name": name}
	m.compileErrors.Delete(labels)
	m.evalErrors.Delete(labels)
	m.outOfBudget.Delete(labels)
	m.boundsOnError.Delete(labels)
	m.auditDecisions.DeletePartialMatch(labels)
	m.ruleViolations.DeletePartialMatch(labels)
}
