package admission

import (
	"context"
	"fmt"
	"testing"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// recreatePolicy is a NodePort policy whose short window ends in Recreate.
func recreatePolicy(ns string) string {
	return fmt.Sprintf(`
apiVersion: policy.game.kruise.io/v1alpha1
kind: NetworkPluginPolicy
metadata: {name: nodeport-recreate, namespace: %s}
spec:
  plugins: ["Kubernetes-NodePort"]
  retry: {window: 6s, interval: 2s, maxInterval: 4s, exhaustedAction: Recreate}
`, ns)
}

// TestRecreateHonoursDisruptionBudgetsAndSparesBarePods: a NodePort game server of a
// StatefulSet whose network cannot be built (services.nodeports quota 0) exhausts a 6 s window
// with exhaustedAction Recreate. A PodDisruptionBudget that allows no disruption refuses the
// eviction: the pod stays (same UID) and gets a NetworkRecreateRefused event. Once the budget
// is gone the eviction goes through and the StatefulSet brings a new pod. A bare pod (no
// controller owner) under the same policy is never deleted and gets a NetworkRecreateSkipped
// event.
func TestRecreateHonoursDisruptionBudgetsAndSparesBarePods(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "recreate", nil)
	setNodePortQuota(t, ns, 0)
	applyPolicy(t, recreatePolicy(ns))
	waitForPolicy(t, ns, "nodeport-recreate", "Kubernetes-NodePort")
	if _, err := cs.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "in-match", Namespace: ns},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptrIntOrString(intstr.FromInt32(1)),
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "guarded"}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createStatefulSet(t, ns, "guarded", 1, gamePodTemplate("guarded", "Kubernetes-NodePort", nodePortConf))
	bare := probePod(ns, "Kubernetes-NodePort")
	bare.Name, bare.GenerateName = "bare", ""
	bare.Annotations[networkstatus.AnnotationNetworkConf] = nodePortConf
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, bare, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	var uid string
	eventually(t, 2*time.Minute, "eviction of guarded-0 refused by its PodDisruptionBudget", func(ctx context.Context) (bool, error) {
		ok, err := hasEvent(ctx, ns, "guarded-0", "NetworkRecreateRefused", "disruption budget")
		if !ok || err != nil {
			return false, err
		}
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "guarded-0", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		uid = string(p.UID)
		return p.DeletionTimestamp == nil, nil
	})
	eventually(t, time.Minute, "bare pod exhausted, not deleted, NetworkRecreateSkipped", func(ctx context.Context) (bool, error) {
		return hasEvent(ctx, ns, "bare", "NetworkRecreateSkipped", "no controller owner")
	})
	// Several more refusals come and go (every RecreateRetryInterval); the pod is still the same.
	time.Sleep(3 * time.Second)
	if p, err := cs.CoreV1().Pods(ns).Get(ctx, "guarded-0", metav1.GetOptions{}); err != nil || string(p.UID) != uid || p.DeletionTimestamp != nil {
		t.Fatalf("guarded-0 under its PodDisruptionBudget: %v (uid %s, want %s), want it kept", err, p.UID, uid)
	}
	if p, err := cs.CoreV1().Pods(ns).Get(ctx, "bare", metav1.GetOptions{}); err != nil || p.DeletionTimestamp != nil {
		t.Fatalf("bare pod: %v, want it kept", err)
	}

	if err := cs.PolicyV1().PodDisruptionBudgets(ns).Delete(ctx, "in-match", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "guarded-0 evicted and recreated by its StatefulSet once the budget is gone", func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "guarded-0", metav1.GetOptions{})
		if err != nil {
			return false, ignoreNotFound(err)
		}
		return string(p.UID) != uid, nil
	})
	if p, err := cs.CoreV1().Pods(ns).Get(ctx, "bare", metav1.GetOptions{}); err != nil || p.DeletionTimestamp != nil {
		t.Errorf("bare pod after the budget went: %v, want it kept", err)
	}
}

func ptrIntOrString(v intstr.IntOrString) *intstr.IntOrString { return &v }
