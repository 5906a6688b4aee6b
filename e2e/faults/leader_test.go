//go:build faults

package faults

import (
	"context"
	"testing"
	"time"

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
	setNodePortQuota(t, ns, 0)
	applyNodePortPolicy(t, ns, "recreate", "  retry: {window: 8s, interval: 2s, maxInterval: 4s, exhaustedAction: Recreate}")
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
	setNodePortQuota(t, ns, 100)
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
