package admission

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
	"github.com/okg-extensions/network-plugin-policy/pkg/client/clientset/versioned"
)

// readyColumn returns the READY printer column of `kubectl get npp` for ns/name.
func readyColumn(t *testing.T, ns, name string) string {
	t.Helper()
	out, err := kubectl(t, "", "get", "npp", "-n", ns, name, "--no-headers", "-o", "custom-columns=READY:.status.conditions[?(@.type==\"Ready\")].status")
	if err != nil {
		t.Fatalf("kubectl get npp: %v\n%s", err, out)
	}
	return strings.TrimSpace(out)
}

// TestPolicyValidationAndStatus: a policy applied with kubectl reaches the store
// and is Ready; invalid ones are rejected by the validating webhook, also with
// --dry-run=server; a policy that slipped in while the webhook was away turns Ready False
// (InvalidExpression) and True again once fixed, in the status and the printer column.
func TestPolicyValidationAndStatus(t *testing.T) {
	ns := newNamespace(t, "policies", nil)
	ctx := context.Background()
	pc := versioned.NewForConfigOrDie(cp.Config)
	manifest := func(expr string) string {
		return fmt.Sprintf(`
apiVersion: policy.game.kruise.io/v1alpha1
kind: NetworkPluginPolicy
metadata: {name: lobby, namespace: %s}
spec:
  plugins: ["Kubernetes-NodePort"]
  matchConditions:
  - {name: not-canary, expression: %q}
  failureMode: Asynchronous
`, ns, expr)
	}
	ready := func(want metav1.ConditionStatus, reason string, contains string) {
		t.Helper()
		eventually(t, 30*time.Second, fmt.Sprintf("Ready=%s (%s)", want, reason), func(ctx context.Context) (bool, error) {
			p, err := pc.PolicyV1alpha1().NetworkPluginPolicies(ns).Get(ctx, "lobby", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			c := meta.FindStatusCondition(p.Status.Conditions, policyv1alpha1.ConditionReady)
			return c != nil && c.Status == want && c.Reason == reason && strings.Contains(c.Message, contains) &&
				p.Status.ObservedGeneration == p.Generation, nil
		})
		if got := readyColumn(t, ns, "lobby"); got != string(want) {
			t.Errorf("READY column = %q, want %q", got, want)
		}
	}

	applyPolicy(t, manifest("!('canary' in object.metadata.labels)"))
	ready(metav1.ConditionTrue, policyv1alpha1.ReasonAccepted, "")
	waitForPolicy(t, ns, "lobby", "Kubernetes-NodePort") // in the store: it decides

	broken := manifest("object.metadata.labels['canary' == 'x'")
	for _, args := range [][]string{{"apply", "--dry-run=server", "-f", "-"}, {"apply", "-f", "-"}} {
		out, err := kubectl(t, broken, args...)
		if err == nil || !strings.Contains(out, "spec.matchConditions[0].expression") || !strings.Contains(out, "Syntax error") {
			t.Errorf("kubectl %s of a syntax error: %v\n%s\nwant a denial naming spec.matchConditions[0].expression", strings.Join(args, " "), err, out)
		}
	}
	out, err := kubectl(t, fmt.Sprintf(`
apiVersion: policy.game.kruise.io/v1alpha1
kind: NetworkPluginPolicy
metadata: {name: selector, namespace: %s}
spec:
  plugins: ["*"]
  namespaceSelector: {matchLabels: {tier: prod}}
`, ns), "apply", "--dry-run=server", "-f", "-")
	if err == nil || !strings.Contains(out, "spec.namespaceSelector") {
		t.Errorf("namespaceSelector outside the root namespace: %v\n%s\nwant a denial naming spec.namespaceSelector", err, out)
	}
	out, err = kubectl(t, fmt.Sprintf(`
apiVersion: policy.game.kruise.io/v1alpha1
kind: NetworkPluginPolicy
metadata: {name: hostport-async, namespace: %s}
spec:
  plugins: ["Kubernetes-HostPort"]
  failureMode: Asynchronous
`, ns), "apply", "--dry-run=server", "-f", "-")
	if err != nil || !strings.Contains(out, "Warning:") {
		t.Errorf("Asynchronous HostPort without Recreate: %v\n%s\nwant it accepted with an admission warning", err, out)
	}

	// A broken policy that slipped in (the validating webhook was not installed) is reported
	// and ignored; fixing it makes it Ready again.
	if err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx,
		mgr.Webhooks.Validating, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	reinstalled := false
	reinstall := func() {
		if !reinstalled {
			reinstalled = true
			if err := mgr.InstallWebhooks(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(reinstall)
	applyPolicy(t, broken)
	ready(metav1.ConditionFalse, policyv1alpha1.ReasonInvalidExpression, "spec.matchConditions[0].expression")
	reinstall()
	applyPolicy(t, manifest("!('canary' in object.metadata.labels)"))
	ready(metav1.ConditionTrue, policyv1alpha1.ReasonAccepted, "")
}
