package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/okg-extensions/network-plugin-policy/e2e/cluster"
)

// rootNamespace is the manager's --root-namespace (cluster-wide policies live there).
const rootNamespace = "npp-system"

// namespace holds the pods of the load test; the webhook's namespaceSelector does not exclude
// it and it has no ResourceQuota.
const namespace = "admissionload"

// clientQPS and clientBurst are the client's rate limits, far above what -concurrency workers
// can send to one local apiserver, so that the limiter never adds to a measured latency.
const (
	clientQPS   = 50000
	clientBurst = 100000
)

// options are the command's flags.
type options struct {
	// pods is the number of pods created per kind (with and without the webhook).
	pods int
	// nodes is the number of kwok fake nodes (110 pods each).
	nodes int
	// plugin is the network type of the pods that go through the webhook.
	plugin string
	// conf is the network-conf annotation of the pods that go through the webhook.
	conf string
	// concurrency is the number of creates in flight at once.
	concurrency int
	// warmup is the number of dry-run creates of each kind before the measurement.
	warmup int
	// readyTimeout bounds the wait for network Ready after the last create.
	readyTimeout time.Duration
	// out is the optional report file (JSON when it ends in .json).
	out string
	// dir is the cluster's working directory; empty means a temporary one.
	dir string
	// crds is the directory of the CRD YAML files.
	crds string
	// manager is the manager binary; empty means build ./cmd/manager.
	manager string
	// command is the command line as run, for the report.
	command string
}

// run starts the cluster and the manager, runs the load, waits for network Ready, and writes
// the report; the cluster is stopped whatever happens. Errors are those of the set-up and of
// writing the report; failed creates are counted in the report, not returned.
func run(ctx context.Context, o options) error {
	if o.pods <= 0 || o.concurrency <= 0 || o.warmup < 0 {
		return fmt.Errorf("-pods and -concurrency must be positive and -warmup not negative")
	}
	if capacity := 110 * o.nodes; capacity < 2*o.pods {
		return fmt.Errorf("%d nodes hold %d pods, fewer than the %d created", o.nodes, capacity, 2*o.pods)
	}
	rep := &report{
		Command: o.command, Date: time.Now().UTC().Format(time.RFC3339), CPUs: runtime.NumCPU(),
		GoVersion: runtime.Version(), Pods: o.pods, Nodes: o.nodes, Plugin: o.plugin, Conf: o.conf,
		Concurrency: o.concurrency, LoadAverageStart: loadAverage(), Revision: revision(ctx),
	}
	if o.dir != "" {
		dir, err := filepath.Abs(o.dir)
		if err != nil {
			return fmt.Errorf("resolve -dir: %w", err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", dir, err)
		}
		o.dir = dir
	}

	start := time.Now()
	cp, err := cluster.Start(ctx, cluster.Options{Dir: o.dir, Log: os.Stderr, FakeNodes: o.nodes})
	if err != nil {
		return fmt.Errorf("start cluster: %w", err)
	}
	defer cp.Stop()
	if _, err := cluster.InstallCRDs(cp.Config, o.crds); err != nil {
		return err
	}
	cfg := rest.CopyConfig(cp.Config)
	cfg.QPS, cfg.Burst = clientQPS, clientBurst
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("create client: %w", err)
	}
	for _, ns := range []string{rootNamespace, namespace} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create namespace %s: %w", ns, err)
		}
	}
	if o.manager == "" {
		if o.manager, err = buildManager(ctx, cp.Dir); err != nil {
			return err
		}
	}
	mgr, err := cp.StartManager(ctx, cluster.ManagerOptions{Binary: o.manager, RootNamespace: rootNamespace})
	if err != nil {
		return fmt.Errorf("start manager: %w", err)
	}
	if err := waitServiceAccount(ctx, cs, namespace); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "admissionload: cluster (%d fake nodes) and manager ready in %s; logs in %s\n",
		o.nodes, time.Since(start).Round(100*time.Millisecond), cp.Dir)

	watcher, err := startReadyWatch(ctx, cs, namespace)
	if err != nil {
		return err
	}
	defer watcher.stop()

	gen := podGenerator{namespace: namespace, plugin: o.plugin, conf: o.conf}
	quiet := rest.CopyConfig(cfg)
	quiet.WarningHandler = rest.NoWarnings{} // "dry run: network plugin ... was not run", once per warm-up pod
	quietCS, err := kubernetes.NewForConfig(quiet)
	if err != nil {
		return fmt.Errorf("create client: %w", err)
	}
	if err := warmUp(ctx, quietCS, gen, o.warmup); err != nil {
		return err
	}
	decisionsBefore, err := mgr.Metric(ctx, "npp_admission_decisions_total", `operation="CREATE"`)
	if err != nil {
		return err
	}
	rep.LoadAverageBefore = loadAverage()
	fmt.Fprintf(os.Stderr, "admissionload: creating %d pods with and %d without the webhook, %d at a time\n", o.pods, o.pods, o.concurrency)
	res := createPods(ctx, cs, gen, o.pods, o.concurrency)
	rep.CreateSeconds = res.elapsed.Seconds()
	rep.LoadAverageAfter = loadAverage()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("interrupted during the creates: %w", err)
	}
	decisionsAfter, err := mgr.Metric(ctx, "npp_admission_decisions_total", `operation="CREATE"`)
	if err != nil {
		return err
	}
	rep.WebhookCreateDecisions = int(decisionsAfter - decisionsBefore)
	rep.Admission.Webhook = summarize(res.latencies[kindWebhook], res.errors[kindWebhook], res.unexpected[kindWebhook])
	rep.Admission.NoWebhook = summarize(res.latencies[kindPlain], res.errors[kindPlain], res.unexpected[kindPlain])
	rep.Admission.OverheadP50Ms = round2(rep.Admission.Webhook.P50Ms - rep.Admission.NoWebhook.P50Ms)
	rep.Admission.OverheadP99Ms = round2(rep.Admission.Webhook.P99Ms - rep.Admission.NoWebhook.P99Ms)
	rep.Errors = res.firstErrors

	fmt.Fprintf(os.Stderr, "admissionload: creates done in %s; waiting up to %s for %d networks to be Ready\n",
		res.elapsed.Round(100*time.Millisecond), o.readyTimeout, len(res.sent))
	waitStart := time.Now()
	readyAt, err := watcher.waitAll(ctx, res.sent, o.readyTimeout)
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("interrupted while waiting for network Ready: %w", err)
	}
	rep.ReadyWaitSeconds = time.Since(waitStart).Seconds()
	rep.NetworkReady = summarizeReady(res.sent, readyAt)
	rep.LoadAverageEnd = loadAverage()

	fmt.Print(rep.text())
	if o.out != "" {
		if err := rep.write(o.out); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "admissionload: report written to %s\n", o.out)
	}
	return nil
}

// buildManager builds ./cmd/manager of the repository into dir/manager and returns its path.
// It does not write bin/manager (cluster.BuildManager's output), which others may be running.
func buildManager(ctx context.Context, dir string) (string, error) {
	root, err := cluster.RepoRoot()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "manager")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/manager")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/manager: %w\n%s", err, b)
	}
	return out, nil
}

// waitServiceAccount waits until kube-controller-manager has created the default
// ServiceAccount of ns: the ServiceAccount admission plugin rejects pods before that.
func waitServiceAccount(ctx context.Context, cs kubernetes.Interface, ns string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("wait for the default ServiceAccount of %s: %w", ns, err)
	}
	return nil
}

// revision returns `git describe --always --dirty` of the working tree the manager is built
// from, or "unknown" without git.
func revision(ctx context.Context) string {
	out, err := exec.CommandContext(ctx, "git", "describe", "--always", "--dirty").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

// loadAverage returns the 1, 5 and 15 minute load averages of /proc/loadavg, such as
// "1.16 0.94 1.78", or "unknown" where there is none (not Linux).
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	var one, five, fifteen string
	if _, err := fmt.Sscan(string(b), &one, &five, &fifteen); err != nil {
		return "unknown"
	}
	return one + " " + five + " " + fifteen
}
