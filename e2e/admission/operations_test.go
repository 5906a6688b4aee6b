package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestStateGaugesOnEveryReplica: two NodePort game servers stuck on a services.nodeports
// quota of 0 show, on every replica's secured /metrics (not only the leader's), as Retrying in
// npp_network_pods, in npp_network_not_ready_pods_by_namespace for their namespace and in
// npp_network_not_ready_oldest_seconds; and `nppctl status --live` lists the namespace's
// two Retrying pods with the quota error and the time left in their window, and the leader.
func TestStateGaugesOnEveryReplica(t *testing.T) {
	ns := newNamespace(t, "state-gauges", nil)
	setNodePortQuota(t, ns, 0)
	applyPolicy(t, nodePortPolicy(ns, "10m"))
	waitForPolicy(t, ns, "nodeport-retry", "Kubernetes-NodePort")
	createStatefulSet(t, ns, "stuck", 2, gamePodTemplate("stuck", "Kubernetes-NodePort", nodePortConf))

	for _, r := range mgr.Replicas {
		eventually(t, time.Minute, r.Name+": the two pods Retrying in its state gauges", func(ctx context.Context) (bool, error) {
			byNS, err := r.Metric(ctx, "npp_network_not_ready_pods_by_namespace", fmt.Sprintf("namespace=%q", ns), `plugin="Kubernetes-NodePort"`)
			if err != nil || byNS != 2 {
				return false, err
			}
			retrying, err := r.Metric(ctx, "npp_network_pods", `plugin="Kubernetes-NodePort"`, `state="Retrying"`)
			if err != nil || retrying < 2 {
				return false, err
			}
			oldest, err := r.Metric(ctx, "npp_network_not_ready_oldest_seconds", `plugin="Kubernetes-NodePort"`)
			return err == nil && oldest > 0, err
		})
	}

	nppctl := filepath.Join(t.TempDir(), "nppctl")
	if out, err := exec.Command("go", "build", "-o", nppctl, "github.com/okg-extensions/network-plugin-policy/cmd/nppctl").CombinedOutput(); err != nil {
		t.Fatalf("go build nppctl: %v\n%s", err, out)
	}
	out, err := exec.Command(nppctl, "status", "-n", ns, "--kubeconfig", cp.KubeconfigPath, "--root-namespace", rootNS, "-o", "json").Output()
	if err != nil {
		t.Fatalf("nppctl status: %v\n%s", err, out)
	}
	var st struct {
		Networks []struct {
			Namespace, Plugin string
			Retrying          int
		}
		Retrying []struct {
			Pod, LastError, WindowLeft string
		}
		Manager *struct{ Leader string }
	}
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatalf("nppctl status -o json: %v\n%s", err, out)
	}
	if len(st.Networks) != 1 || st.Networks[0].Retrying != 2 || st.Networks[0].Plugin != "Kubernetes-NodePort" {
		t.Errorf("nppctl status networks = %+v, want one row of 2 Retrying Kubernetes-NodePort pods", st.Networks)
	}
	if len(st.Retrying) != 2 {
		t.Fatalf("nppctl status retrying = %+v, want stuck-0 and stuck-1", st.Retrying)
	}
	for _, r := range st.Retrying {
		if r.WindowLeft == "" || r.WindowLeft == "closed" || !strings.Contains(r.LastError, "apiCallError") || !strings.Contains(r.LastError, "services.nodeports") {
			t.Errorf("nppctl status: %+v, want the quota error and time left in the window", r)
		}
	}
	if st.Manager == nil || st.Manager.Leader == "" {
		t.Errorf("nppctl status: manager %+v, want the Lease's holder", st.Manager)
	}
}
