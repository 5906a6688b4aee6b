package admission

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// Scenario 6: a policy edited with kubectl apply changes the next decision. The time from
// the end of `kubectl apply` to the first admission decided by the new version is measured
// (and reported, not asserted: see docs/benchmarks.md).
func TestPolicyEditTakesEffect(t *testing.T) {
	ns := newNamespace(t, "edit", nil)
	// A near-miss of a registered network type is a parameterError; the built-in default
	// denies it.
	probe := func(ctx context.Context) error {
		_, err := cs.CoreV1().Pods(ns).Create(ctx, probePod(ns, "Kubernetes-Hostport"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}
	if err := probe(context.Background()); err == nil || !strings.Contains(err.Error(), "(parameterError)") ||
		!strings.Contains(err.Error(), "denied by built-in default") {
		t.Fatalf("near-miss network type without a policy: %v, want a parameterError denied by built-in default", err)
	}

	policy := func(mode string) string {
		return fmt.Sprintf(`
apiVersion: policy.game.kruise.io/v1alpha1
kind: NetworkPluginPolicy
metadata: {name: unknown-types, namespace: %s}
spec:
  plugins: ["*"]
  failureMode: %s
`, ns, mode)
	}
	for _, step := range []struct {
		mode  string
		admit bool
	}{{"Asynchronous", true}, {"Synchronous", false}, {"Asynchronous", true}} {
		applyPolicy(t, policy(step.mode))
		took := eventually(t, 30*time.Second, "decision follows failureMode "+step.mode, func(ctx context.Context) (bool, error) {
			err := probe(ctx)
			if step.admit {
				return err == nil, nil
			}
			return err != nil && strings.Contains(err.Error(), "denied by policy "+ns+"/unknown-types@"), nil
		})
		t.Logf("kubectl apply (failureMode %s) -> next decision changed in %s", step.mode, took.Round(time.Millisecond))
	}
}

// Scenario 8: a pod without a network type never reaches the webhook (the apiserver's
// matchConditions filter it): the webhook's request counter does not move, while one pod
// with a network type moves it.
func TestPodWithoutNetworkTypeNeverReachesWebhook(t *testing.T) {
	ns := newNamespace(t, "plain", nil)
	ctx := context.Background()
	requests := func() float64 {
		v, err := mgr.Metric(ctx, "controller_runtime_webhook_requests_total", `webhook="/mutate-v1-pod"`)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	before := requests()
	plain := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: ns, Annotations: map[string]string{"example.com/other": "x"}},
		Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []corev1.Container{{Name: "c", Image: "app:1"}}},
	}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, plain, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Pods(ns).Patch(ctx, "plain", "application/merge-patch+json",
		[]byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Pods(ns).Delete(ctx, "plain", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if after := requests(); after != before {
		t.Errorf("webhook requests moved from %v to %v for a pod without %s", before, after, networkstatus.AnnotationNetworkType)
	}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, probePod(ns, "Kubernetes-NodePort"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Fatal(err)
	}
	if after := requests(); after != before+1 {
		t.Errorf("webhook requests moved from %v to %v for one pod with a network type, want +1", before, after)
	}
}
