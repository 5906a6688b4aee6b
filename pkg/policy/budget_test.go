package policy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
	policycel "github.com/okg-extensions/network-plugin-policy/pkg/policy/cel"
)

// expensiveCondition is false for budgetPod and costs about 750,000 cost units on it (three quarters of
// the per-call limit): every pair of its 35 annotations of 2,000 characters is searched.
const expensiveCondition = "object.metadata.annotations.exists(k, object.metadata.annotations.exists(j, object.metadata.annotations[j].contains(k + '-never')))"

// budgetAnnotations are 35 annotations of 2,000 characters, 70 KB: within the apiserver's
// 256 KiB limit of a pod's annotations.
func budgetAnnotations() map[string]string {
	out := map[string]string{}
	for i := range 35 {
		out[fmt.Sprintf("game.example.com/blob-%d", i)] = strings.Repeat("x", 2000)
	}
	return out
}

// budgetPolicies returns n namespace policies in ns-42 whose one matchCondition is
// expensiveCondition, a root policy with bounds and a cheap condition, and a root policy
// without conditions that sets the timeout.
func budgetPolicies(n int) []*v1alpha1.NetworkPluginPolicy {
	out := []*v1alpha1.NetworkPluginPolicy{
		newPolicy(testRoot, "bounds", matchCondition("create", "request.operation == 'CREATE'"),
			bound(v1alpha1.PolicyBounds{MaxWindow: dur(10 * time.Minute)})),
		newPolicy(testRoot, "fallback", timeout(3*time.Second)),
	}
	for j := range n {
		out = append(out, newPolicy("ns-42", fmt.Sprintf("p-%03d", j), plugins("Kubernetes-NodePort"),
			matchCondition("expensive", expensiveCondition),
			mode(v1alpha1.FailureModeAsynchronous), timeout(time.Second), retry(v1alpha1.RetryPolicy{Window: dur(8760 * time.Hour)})))
	}
	return out
}

func budgetPod() Input {
	in := benchInput()
	in.Pod.Annotations = budgetAnnotations()
	return in
}

// TestBudget200ExpensiveTenantPolicies: 200 namespace policies whose expensive matchConditions
// are false. The request's budget runs out part of the way; the rest are not evaluated and
// lose with LostBudget, which is counted once per request and per expression. The root
// policies still apply: the bounds, matched first, and the fallback, which has no condition.
// Everything happens under the pod webhook's deadline, with no condition stopped by it.
func TestBudget200ExpensiveTenantPolicies(t *testing.T) {
	store := newTestStore(t, budgetPolicies(200)...)
	in := budgetPod()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // the pod webhook's timeoutSeconds
	defer cancel()

	res, err := NewResolver(store).Begin(ctx, in)
	if err != nil {
		t.Fatalf("Begin(): %v", err)
	}
	d := res.Failed(ctx, &PluginError{Type: "apiCallError", Message: "quota"})

	var evaluated, notEvaluated int
	for _, l := range d.Explanation.Losers {
		switch {
		case l.Reason == LostConditionFalse:
			evaluated++
		case l.Reason == LostBudget:
			notEvaluated++
		case l.Reason == LostConditionError && errors.Is(l.Err, policycel.ErrOutOfBudget):
			evaluated++ // the evaluation that went over the budget
		case l.Err != nil && errors.Is(l.Err, context.DeadlineExceeded):
			t.Fatalf("%s: stopped by the request deadline", l)
		default:
			t.Errorf("unexpected loser %s", l)
		}
	}
	if evaluated+notEvaluated != 200 || notEvaluated == 0 || evaluated == 0 {
		t.Fatalf("evaluated %d, not evaluated %d of 200; want both, summing to 200", evaluated, notEvaluated)
	}
	// The budget lets exactly as many evaluations run as fit, plus the one that goes over it
	// (stopped at the per-call limit at the latest).
	cost := conditionCost(t, store, in)
	if want := int((policycel.DefaultBudget + cost - 1) / cost); evaluated != want {
		t.Errorf("evaluated %d conditions of cost %d each, want %d for a budget of %d", evaluated, cost, want, policycel.DefaultBudget)
	}
	if got := testutil.ToFloat64(store.metrics.budgetSpent); got != 1 {
		t.Errorf("npp_cel_request_budget_spent_total = %v, want 1", got)
	}
	if got := testutil.ToFloat64(store.metrics.notEvaluated); got != float64(notEvaluated) {
		t.Errorf("npp_cel_not_evaluated_total = %v, want %d", got, notEvaluated)
	}
	if got := d.Explanation.Timeout.String(); got != "npp-system/fallback@1" {
		t.Errorf("timeout from %s, want the root fallback (no condition, so no budget needed)", got)
	}
	if d.Mode != v1alpha1.FailureModeAsynchronous || d.Explanation.Failure.Policy != nil {
		t.Errorf("failure from %s (%s), want the built-in default", d.Explanation.Failure, d.Mode)
	}
	if len(res.bounds) != 1 {
		t.Errorf("bounds matched = %d, want the root bounds, evaluated before the namespace policies", len(res.bounds))
	}
	if ctx.Err() != nil {
		t.Errorf("the request deadline passed during resolution")
	}
}

// conditionCost returns the actual cost of expensiveCondition on in's pod.
func conditionCost(t *testing.T, store *Store, in Input) int64 {
	t.Helper()
	p := store.Snapshot().namespaces["ns-42"].byPlugin["Kubernetes-NodePort"][0]
	res := &Resolution{in: in, budget: policycel.DefaultBudget}
	act := res.activation()
	if ok, err := p.conditions[0].program.EvalBool(context.Background(), act); err != nil || ok {
		t.Fatalf("expensive condition = %v, %v; want false", ok, err)
	}
	return policycel.DefaultBudget - act.Budget().Remaining()
}

// BenchmarkBudget200ExpensiveTenantPolicies measures the resolution of
// TestBudget200ExpensiveTenantPolicies: one admission request's whole CEL budget
// (go test -run XXX -bench Budget ./pkg/policy).
func BenchmarkBudget200ExpensiveTenantPolicies(b *testing.B) {
	resolver := NewResolver(newTestStore(b, budgetPolicies(200)...))
	in := budgetPod()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		res, err := resolver.Begin(ctx, in)
		if err != nil {
			b.Fatal(err)
		}
		res.Failed(ctx, &PluginError{Type: "apiCallError"})
	}
}
