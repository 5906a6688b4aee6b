//go:build faults

package faults

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/okg-extensions/network-plugin-policy/pkg/networkretry"
)

// TestLeaderKilledWithRecreatesPending: 20 NodePort game servers of a StatefulSet whose
// Services a services.nodeports quota of 0 refuses exhaust an 8 s window with
// exhaustedAction Recreate together. The namespace's Recreate limit (10 a minute) evicts 10
// at once and keeps the others waiting; the quota is raised (so that the replacements get
// their network and do not compete for the Recreates left), and the leader gets SIGKILL.
// Required: every one of
// the 20 original pods is evicted within two minutes (no Recreate is lost with the leader's
// memory), and no pod gets its NetworkRetryExhausted event twice (the exhausted mark is on
// the pod, written before the action).
func TestLeaderKilledWithRecreatesPending(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "leader")
	if _, err := cs.CoreV1().ResourceQuotas(ns).Create(ctx, &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "nodeports"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceServicesNodePorts: resource.MustParse("0")}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if out, err := kubectl(t, fmt.Sprintf(`
apiVersion: policy.game.kruise.io/v1alpha1
kind: NetworkPluginPolicy
metadata: {name: recreate, namespace: %s}
spec:
  plugins: ["Kubernetes-NodePort"]
  retry: {window: 8s, interval: 2s, maxInterval: 4s, exhaustedAction: Recreate}
`, ns), "apply", "-f", "-"); err != nil {
		t.Fatalf("apply policy: %v\n%s", err, out)
	}
	// The quota admission plugin enforces a quota once its status is computed.
	eventually(t, 30*time.Second, "quota status computed", func(ctx context.Context) (bool, error) {
		q, err := cs.CoreV1().ResourceQuotas(ns).Get(ctx, "nodeports", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		_, ok := q.Status.Hard[corev1.ResourceServicesNodePorts]
		return ok, nil
	})
	time.Sleep(time.Second) // the policy in both replicas' caches
	createStatefulSet(t, ns, "rc", 20, gameServer(ns, "rc", "Kubernetes-NodePort", nodePortConf))
	original := map[types.UID]string{}
	eventually(t, time.Minute, "20 pods", func(ctx context.Context) (bool, error) {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil || len(pods.Items) < 20 {
			return false, err
		}
		for _, p := range pods.Items {
			original[p.UID] = p.Name
		}
		return len(original) >= 20, nil
	})
	// remaining returns the original pods still stored, and how many of them are marked
	// exhausted (their Recreate pending).
	remaining := func(ctx context.Context) (left, pending int, err error) {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return 0, 0, err
		}
		for _, p := range pods.Items {
			if _, ok := original[p.UID]; !ok || p.DeletionTimestamp != nil {
				continue
			}
			left++
			if s, err := networkretry.FromPod(&p); err == nil && s != nil && s.ExhaustedFor(p.UID) {
				pending++
			}
		}
		return left, pending, nil
	}
	eventually(t, 2*time.Minute, "the namespace's Recreate limit used up with Recreates pending", func(ctx context.Context) (bool, error) {
		left, pending, err := remaining(ctx)
		return err == nil && left <= 10 && pending > 0, err
	})
	// The replacements would exhaust their windows too and compete for the namespace's
	// Recreates: let them have their network, so the Recreates left are the originals'.
	q, err := cs.CoreV1().ResourceQuotas(ns).Get(ctx, "nodeports", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	q.Spec.Hard[corev1.ResourceServicesNodePorts] = resource.MustParse("100")
	if _, err := cs.CoreV1().ResourceQuotas(ns).Update(ctx, q, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	leader, err := mgr.Leader(ctx)
	if err != nil || leader == nil {
		t.Fatalf("no leader: %v", err)
	}
	left, pending, _ := remaining(ctx)
	leader.Kill()
	killed := time.Now()
	t.Cleanup(func() {
		if err := leader.Start(context.Background()); err != nil {
			t.Errorf("restart %s: %v", leader.Name, err)
		}
	})
	took := eventually(t, 2*time.Minute, "every original pod evicted after the leader was killed", func(ctx context.Context) (bool, error) {
		left, _, err := remaining(ctx)
		return err == nil && left == 0, err
	})
	evs, err := cs.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	twice, exhausted := 0, 0
	for _, e := range evs.Items {
		if e.Reason != "NetworkRetryExhausted" {
			continue
		}
		if _, ok := original[e.Regarding.UID]; !ok {
			continue
		}
		exhausted++
		if e.Series != nil && e.Series.Count > 1 {
			twice++
			t.Errorf("pod %s got NetworkRetryExhausted %d times", e.Regarding.Name, e.Series.Count)
		}
	}
	t.Logf("fault: leader %s killed with %d original pods left, %d of them with their Recreate pending: all evicted %s after the kill (%s); %d NetworkRetryExhausted events for the 20 pods, %d repeated",
		leader.Name, left, pending, took.Round(100*time.Millisecond), time.Since(killed).Round(100*time.Millisecond), exhausted, twice)
}
