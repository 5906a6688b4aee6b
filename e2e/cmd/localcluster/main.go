// Command localcluster is what `make run` runs: a whole local cluster (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and kwok fake nodes, see e2e/cluster), the CRDs, the
// manager running on this machine with the webhook configurations of config/webhook pointed at
// it, and config/samples/ applied (policies and game-server StatefulSets). It then prints,
// live, each game-server pod's network state and the policy that decided it, and stops
// everything it started on Ctrl-C or when the manager exits.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/okg-extensions/network-plugin-policy/e2e/cluster"
	"github.com/okg-extensions/network-plugin-policy/pkg/networkretry"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
	podwebhook "github.com/okg-extensions/network-plugin-policy/pkg/webhook/pod"
)

func main() {
	manager := flag.String("manager", "bin/manager", "Path of the manager binary to run against the local cluster.")
	crds := flag.String("crds", "crds", "Directory of the CRD YAML files to install.")
	samples := flag.String("samples", "config/samples", "Directory applied with kubectl once the manager is ready; empty applies nothing.")
	dir := flag.String("dir", "bin/local-cluster", "Working directory of the cluster (data, logs, kubeconfig); emptied at start.")
	nodes := flag.Int("nodes", 3, "Number of kwok fake nodes.")
	managerLog := flag.Bool("manager-log", false, "Copy the manager replicas' logs to this terminal (they are always in <dir>/manager-<i>.log).")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *manager, *crds, *samples, *dir, *nodes, *managerLog); err != nil {
		fmt.Fprintln(os.Stderr, "localcluster:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, manager, crds, samples, dir string, nodes int, managerLog bool) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("empty %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	start := time.Now()
	cp, err := cluster.Start(ctx, cluster.Options{Dir: dir, Log: os.Stdout, FakeNodes: nodes})
	if err != nil {
		return err
	}
	defer cp.Stop()
	if _, err := cluster.InstallCRDs(cp.Config, crds); err != nil {
		return err
	}
	var echo io.Writer
	if managerLog {
		echo = os.Stdout
	}
	mgr, err := cp.StartManager(ctx, cluster.ManagerOptions{Binary: manager, Echo: echo})
	if err != nil {
		return err
	}
	if samples != "" {
		cmd := exec.CommandContext(ctx, "kubectl", "apply", "-f", samples)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+cp.KubeconfigPath)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("kubectl apply -f %s: %w", samples, err)
		}
	}

	fmt.Printf(`
Local cluster (%d fake nodes) and manager ready in %s: %d replicas as config/default deploys
them (ServiceAccount %s, its RBAC, the Deployment's flags), webhooks behind %s.
  kubeconfig:  %s
  try:         export KUBECONFIG=%[6]s; kubectl get npp -A; kubectl get pods -A -o wide
`, nodes, time.Since(start).Round(100*time.Millisecond), len(mgr.Replicas), mgr.ServiceAccount, mgr.WebhookURL, cp.KubeconfigPath)
	for _, r := range mgr.Replicas {
		fmt.Printf("  %s:   %s/readyz, %s/metrics (token of %s), log %s\n",
			r.Name, r.ProbeURL, r.MetricsURL, cluster.ScraperServiceAccount, r.Process().LogPath)
	}
	fmt.Println("Ctrl-C stops everything. Game-server pods and their networks:")

	cs := kubernetes.NewForConfigOrDie(cp.Config)
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	last := ""
	for {
		select {
		case <-ctx.Done():
			fmt.Println("\nStopping the manager and the cluster...")
			return nil
		case <-tick.C:
		}
		for _, r := range mgr.Replicas {
			if exited, err := r.Process().Exited(); exited {
				return fmt.Errorf("manager replica %s exited (%v); see %s", r.Name, err, r.Process().LogPath)
			}
		}
		table, err := networkTable(ctx, cs)
		if err != nil {
			fmt.Fprintln(os.Stderr, "list pods:", err)
			continue
		}
		if table != last {
			fmt.Printf("\n%s\n%s", time.Now().Format(time.TimeOnly), table)
			last = table
		}
	}
}

// networkTable renders one line per pod that carries a network type.
func networkTable(ctx context.Context, cs kubernetes.Interface) (string, error) {
	pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	var rows []string
	for _, p := range pods.Items {
		typ := p.Annotations[networkstatus.AnnotationNetworkType]
		if typ == "" {
			continue
		}
		state, external := "-", "-"
		if st, err := networkstatus.StatusFromPod(&p); err != nil {
			state = "malformed"
		} else if st != nil {
			state = string(st.CurrentNetworkState)
			external = addresses(st.ExternalAddresses)
		}
		retry := "-"
		if rs, err := networkretry.FromPod(&p); err != nil {
			retry = "malformed"
		} else if rs != nil {
			retry = fmt.Sprintf("%d attempts", rs.Attempts)
			if rs.Attempts == 1 {
				retry = "1 attempt"
			}
			if rs.LastError != nil {
				retry += ", last " + rs.LastError.Type
			}
			if rs.Exhausted != nil {
				retry += ", exhausted"
			}
		}
		decision := p.Annotations[podwebhook.AnnotationDecision]
		if decision == "" {
			decision = "-"
		}
		rows = append(rows, strings.Join([]string{p.Namespace + "/" + p.Name, typ, nodeOf(&p), string(p.Status.Phase),
			state, external, retry, decision}, "\t"))
	}
	sort.Strings(rows)
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "POD\tNETWORK TYPE\tNODE\tPHASE\tNETWORK\tEXTERNAL\tRETRY\tDECIDED BY")
	for _, r := range rows {
		fmt.Fprintln(w, r)
	}
	_ = w.Flush()
	return b.String(), nil
}

func nodeOf(p *corev1.Pod) string {
	if p.Spec.NodeName == "" {
		return "-"
	}
	return p.Spec.NodeName
}

func addresses(as []networkstatus.NetworkAddress) string {
	var out []string
	for _, a := range as {
		for _, port := range a.Ports {
			if port.Port != nil {
				out = append(out, fmt.Sprintf("%s:%s", a.IP, port.Port.String()))
			}
		}
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, ",")
}
