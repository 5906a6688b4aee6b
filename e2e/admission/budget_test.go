package admission

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// budgetCondition is false and costs about 750,000 CEL cost units on budgetPod's 35
// annotations of 2,000 characters (pkg/policy's TestBudget200ExpensiveTenantPolicies uses the
// same): the request's budget of 10,000,000 is spent after about 13 of them.
const budgetCondition = "object.metadata.annotations.exists(k, object.metadata.annotations.exists(j, object.metadata.annotations[j].contains(k + '-never')))"

// The CEL budget 200 tenant policies whose expensive matchConditions are false.
// A pod is admitted within the webhook's deadline, decided by the root policy that has no
// condition; its request spent its CEL budget once (npp_cel_request_budget_spent_total) and
// left most conditions not evaluated (npp_cel_not_evaluated_total).
func TestBudget200ExpensiveTenantPolicies(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "budget", nil)
	fallback := "budget-" + ns
	root := fmt.Sprintf(`apiVersion: policy.game.kruise.io/v1alpha1
kind: NetworkPluginPolicy
metadata: {name: %s, namespace: %s}
spec:
  plugins: ["Kubernetes-NodePort"]
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: %s}}
  failureMode: Asynchronous
  timeout: 5s
`, fallback, rootNS, ns)
	applyPolicy(t, root)
	t.Cleanup(func() { _, _ = kubectl(t, root, "delete", "--ignore-not-found", "-f", "-") })
	var docs []string
	for i := range 200 {
		docs = append(docs, fmt.Sprintf(`apiVersion: policy.game.kruise.io/v1alpha1
kind: NetworkPluginPolicy
metadata: {name: expensive-%03d, namespace: %s}
spec:
  plugins: ["Kubernetes-NodePort"]
  matchConditions: [{name: expensive, expression: %q}]
  failureMode: Synchronous
`, i, ns, budgetCondition))
	}
	applyPolicy(t, strings.Join(docs, "---\n"))

	pod := func() *corev1.Pod {
		p := probePod(ns, "Kubernetes-NodePort") // no PortProtocols: a parameterError
		for i := range 35 {
			p.Annotations[fmt.Sprintf("game.example.com/blob-%d", i)] = strings.Repeat("x", 2000)
		}
		return p
	}
	metric := func(name string) float64 {
		v, err := mgr.Metric(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	// Barrier: four dry runs in a row (so both replicas, behind the round-robin proxy) each
	// spend one request's budget: every replica's store holds the 200 policies.
	streak := 0
	eventually(t, 2*time.Minute, "both replicas resolve over the 200 policies", func(ctx context.Context) (bool, error) {
		before := metric("npp_cel_request_budget_spent_total")
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod(), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			return false, err
		}
		if metric("npp_cel_request_budget_spent_total")-before == 1 {
			streak++
		} else {
			streak = 0
		}
		return streak >= 4, nil
	})

	spentBefore, notEvaluatedBefore := metric("npp_cel_request_budget_spent_total"), metric("npp_cel_not_evaluated_total")
	p := pod()
	p.GenerateName, p.Name = "", "lobby-0"
	start := time.Now()
	created, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
	took := time.Since(start)
	if err != nil {
		t.Fatalf("create pod: %v (after %s)", err, took)
	}
	t.Logf("pod admitted in %s with 200 expensive tenant policies", took.Round(time.Millisecond))
	if d, want := created.Annotations[annotationDecision], "Asynchronous by policy "+rootNS+"/"+fallback+"@1"; d != want {
		t.Errorf("decision %q, want %q", d, want)
	}
	if spent := metric("npp_cel_request_budget_spent_total") - spentBefore; spent != 1 {
		t.Errorf("npp_cel_request_budget_spent_total grew by %v, want 1", spent)
	}
	// About 13 conditions fit in the budget (the last one evaluated goes over it); the
	// others are not evaluated.
	if n := metric("npp_cel_not_evaluated_total") - notEvaluatedBefore; n < 150 || n >= 200 {
		t.Errorf("npp_cel_not_evaluated_total grew by %v, want most of the 200 conditions (150 to 199)", n)
	}
}
