// Command localcluster is what `make run` runs: it starts a local control plane (etcd and
// kube-apiserver, see e2e/cluster), installs the CRDs, runs the
// manager against it in the foreground (its log goes to this terminal), prints the kubeconfig
// and a kubectl line to try, and stops everything it started on Ctrl-C or when the manager
// exits.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/okg-extensions/network-plugin-policy/e2e/cluster"
)

func main() {
	manager := flag.String("manager", "bin/manager", "Path of the manager binary to run against the local control plane.")
	crds := flag.String("crds", "crds", "Directory of the CRD YAML files to install.")
	dir := flag.String("dir", "bin/local-cluster", "Working directory of the control plane (data, logs, kubeconfig); emptied at start.")
	rootNS := flag.String("root-namespace", "npp-system", "Root namespace passed to the manager (config/samples/ creates it).")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *manager, *crds, *dir, *rootNS); err != nil {
		fmt.Fprintln(os.Stderr, "localcluster:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, manager, crds, dir, rootNS string) error {
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
	cp, err := cluster.Start(ctx, cluster.Options{Dir: dir, Log: os.Stdout})
	if err != nil {
		return err
	}
	defer cp.Stop()
	if _, err := cluster.InstallCRDs(cp.Config, crds); err != nil {
		return err
	}

	probe, metrics := cluster.FreePort(), cluster.FreePort()
	mgr, err := cp.AddProcess("manager", os.Stdout, manager,
		"--kubeconfig="+cp.KubeconfigPath,
		"--root-namespace="+rootNS,
		"--health-probe-bind-address=127.0.0.1:"+strconv.Itoa(probe),
		"--metrics-bind-address=127.0.0.1:"+strconv.Itoa(metrics),
	)
	if err != nil {
		return err
	}
	if err := cluster.WaitHTTP(ctx, mgr, http.DefaultClient, "http://127.0.0.1:"+strconv.Itoa(probe)+"/readyz"); err != nil {
		return err
	}

	fmt.Printf(`
Local control plane and manager ready in %s.
  kubeconfig:  %[2]s
  manager:     readyz http://127.0.0.1:%[3]d/readyz, metrics http://127.0.0.1:%[4]d/metrics, log %[5]s
  try:         export KUBECONFIG=%[2]s; kubectl apply -f config/samples/ && kubectl get npp -A
Ctrl-C stops everything.
`, time.Since(start).Round(100*time.Millisecond), cp.KubeconfigPath, probe, metrics, mgr.LogPath)

	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			fmt.Println("\nStopping the manager and the control plane...")
			return nil
		case <-tick.C:
			if exited, err := mgr.Exited(); exited {
				return fmt.Errorf("the manager exited (%v); see %s", err, mgr.LogPath)
			}
		}
	}
}
