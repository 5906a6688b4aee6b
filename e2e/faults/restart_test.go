//go:build faults

package faults

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/okg-extensions/network-plugin-policy/pkg/networkretry"
)

// apiServerDown is how long the API server is away in TestAPIServerRestartedWhileRetrying.
const apiServerDown = 45 * time.Second

// TestAPIServerRestartedWhileRetrying: 200 NodePort game servers whose Services a
// services.nodeports quota of 0 refuses are retrying under a 90 s window; the API server is
// stopped for 45 s and started again. Required: retries resume (every pod is attempted again
// after the restart); the outage uses up no window (each pod's paused time grows by at least
// the outage less its backoff, and no pod exhausts its window); and once the quota is raised
// every pod gets exactly one Service, owned by it.
func TestAPIServerRestartedWhileRetrying(t *testing.T) {
	const n = 200
	ctx := context.Background()
	ns := newNamespace(t, "apirestart")
	setNodePortQuota(t, ns, 0)
	applyNodePortPolicy(t, ns, "patient", "  retry: {window: 90s, interval: 5s, maxInterval: 10s, exhaustedAction: Event}")
	time.Sleep(time.Second)
	createStatefulSet(t, ns, "ar", n, gameServer(ns, "ar", "Kubernetes-NodePort", nodePortConf))
	states := func(ctx context.Context) (map[string]*networkretry.State, error) {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		out := map[string]*networkretry.State{}
		for _, p := range pods.Items {
			if s, err := networkretry.FromPod(&p); err == nil && s != nil {
				out[p.Name] = s
			}
		}
		return out, nil
	}
	var before map[string]*networkretry.State
	eventually(t, 2*time.Minute, fmt.Sprintf("%d pods retrying", n), func(ctx context.Context) (bool, error) {
		s, err := states(ctx)
		before = s
		if err != nil || len(s) < n {
			return false, err
		}
		for _, st := range s {
			if st.Attempts < 2 {
				return false, nil
			}
		}
		return true, nil
	})
	// The leader cannot renew its Lease while the API server is away and exits, as a
	// leader that lost its Lease does (its pod's container would be restarted); the other
	// replica takes over. Both run again for the next tests.
	t.Cleanup(func() {
		if err := mgr.Start(context.Background()); err != nil {
			t.Errorf("start the manager's replicas again: %v", err)
		}
	})
	down := time.Now()
	if err := cp.RestartAPIServer(ctx, apiServerDown); err != nil {
		t.Fatalf("restart the API server: %v", err)
	}
	back := time.Now()
	var after map[string]*networkretry.State
	took := eventually(t, 2*time.Minute, "every pod attempted again after the restart", func(ctx context.Context) (bool, error) {
		s, err := states(ctx)
		after = s
		if err != nil || len(s) < n {
			return false, err
		}
		for name, st := range s {
			if !st.LastAttempt.After(back.Add(-time.Second)) || st.Attempts <= before[name].Attempts {
				return false, nil
			}
		}
		return true, nil
	})
	// The run after the outage was about the outage late, less the backoff it was waiting for.
	short, minPaused := 0, time.Duration(1<<62)
	for name, st := range after {
		grew := st.Paused.Duration - before[name].Paused.Duration
		minPaused = min(minPaused, grew)
		if grew < apiServerDown-st.MaxInterval.Duration-5*time.Second {
			short++
			if short <= 3 {
				t.Errorf("pod %s: paused grew by %s over a %s outage", name, grew, apiServerDown)
			}
		}
		if st.Exhausted != nil {
			t.Errorf("pod %s exhausted its window at %s (outage from %s to %s)", name, st.Exhausted, down.Format(time.RFC3339), back.Format(time.RFC3339))
		}
	}

	setNodePortQuota(t, ns, 1000)
	ready := eventually(t, 3*time.Minute, "every network Ready once the quota is raised", func(ctx context.Context) (bool, error) {
		return allNetworksReady(ctx, ns, n)
	})
	svcs, err := cs.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owners := map[string]int{}
	for _, s := range svcs.Items {
		for _, o := range s.OwnerReferences {
			owners[string(o.UID)]++
		}
	}
	twice := 0
	for _, p := range pods.Items {
		if owners[string(p.UID)] != 1 {
			twice++
			t.Errorf("pod %s owns %d Services, want 1", p.Name, owners[string(p.UID)])
		}
	}
	t.Logf("fault: API server down %s with %d pods retrying: every pod attempted again %s after it was back; paused grew by at least %s per pod (%d short); 0 windows exhausted; %d Services for %d pods (%d pods without exactly one); every network Ready %s after the quota was raised",
		apiServerDown, n, took.Round(100*time.Millisecond), minPaused.Round(time.Second), short, len(svcs.Items), len(pods.Items), twice, ready.Round(100*time.Millisecond))
}
