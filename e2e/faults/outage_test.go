//go:build faults

package faults

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
	podwebhook "github.com/okg-extensions/network-plugin-policy/pkg/webhook/pod"
)

// outage is how long both replicas are down.
const outage = 60 * time.Second

// TestBothReplicasDown60s: both replicas are killed (SIGKILL) for 60 s while game servers
// keep arriving, under a namespace policy that asks for the readiness gate on NodePort.
// Required and counted:
//   - HostPort creates (one every 5 s) are refused by the API server with the sync entry's
//     webhook error, which names the manager's webhook; none is admitted without its port;
//   - the NodePort StatefulSet's 10 pods are admitted (the async entry is failurePolicy
//     Ignore) and every one has its network Ready after the manager is back; the time from
//     the manager's return to the last Ready network is reported;
//   - the pods admitted during the outage carry no readiness gate (a pod's readinessGates
//     cannot be added after creation), although the policy asks for one: reported, and
//     written in docs/reliability.md.
func TestBothReplicasDown60s(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "outage")
	applyNodePortPolicy(t, ns, "gated", "  readinessGate: true")
	time.Sleep(2 * time.Second) // the informer cache of both replicas

	for _, r := range mgr.Replicas {
		r.Kill()
	}
	down := time.Now()
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			_ = mgr.Start(context.Background())
		}
	})
	createStatefulSet(t, ns, "np", 10, gameServer(ns, "np", "Kubernetes-NodePort", nodePortConf))
	refused, admitted := 0, 0
	for time.Since(down) < outage {
		_, err := cs.CoreV1().Pods(ns).Create(ctx, gameServer(ns, "hp", "Kubernetes-HostPort", hostPortConf), metav1.CreateOptions{})
		switch {
		case err == nil:
			admitted++
		case strings.Contains(err.Error(), podwebhook.SyncWebhookName):
			refused++
		default:
			t.Errorf("HostPort create during the outage: %v, want the webhook error naming %s", err, podwebhook.SyncWebhookName)
		}
		time.Sleep(5 * time.Second)
	}
	if admitted != 0 {
		t.Errorf("%d HostPort pods admitted while no replica answered (without their host port), want 0", admitted)
	}
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=np"})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 10 {
		t.Fatalf("%d NodePort pods created during the outage, want 10 (async entry, failurePolicy Ignore)", len(pods.Items))
	}
	gated := 0
	for _, p := range pods.Items {
		if len(p.Spec.ReadinessGates) > 0 {
			gated++
		}
	}

	if err := mgr.Start(ctx); err != nil {
		t.Fatalf("start the manager again: %v", err)
	}
	restarted = true
	back := time.Now()
	took := eventually(t, 3*time.Minute, "every NodePort network Ready after the manager is back", func(ctx context.Context) (bool, error) {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=np"})
		if err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			st, err := networkstatus.StatusFromPod(&p)
			if err != nil || st == nil || st.CurrentNetworkState != networkstatus.NetworkReady {
				return false, nil
			}
		}
		return true, nil
	})
	t.Logf("fault: both replicas down %s: %d HostPort creates refused with the sync entry's error, %d admitted; %d NodePort pods admitted, %d of them with the readiness gate the policy asks for; every NodePort network Ready %s after the manager was ready again (%s after it was started)",
		outage, refused, admitted, len(pods.Items), gated, took.Round(100*time.Millisecond), time.Since(back).Round(100*time.Millisecond))
}
