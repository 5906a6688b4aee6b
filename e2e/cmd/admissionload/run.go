package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/okg-extensions/network-plugin-policy/e2e/cluster"
	policyclient "github.com/okg-extensions/network-plugin-policy/pkg/client/clientset/versioned"
)

// namespace holds the pods of the load test; the manager's webhook's namespaceSelector does
// not exclude it and it has no ResourceQuota.
const namespace = "admissionload"

// hostPortMin is the lowest port of the HostPort range written to the provider config;
// minHostPorts the fewest ports in it.
const (
	hostPortMin  = 10000
	minHostPorts = 1000
)

// cleanupTimeout bounds the bulk deletion between phases.
const cleanupTimeout = 2 * time.Minute

// options are the command's flags.
type options struct {
	// pods is the number of pods created per kind in each phase.
	pods int
	// nodes is the number of kwok fake nodes (110 pods each).
	nodes int
	// concurrency lists the phases: the number of creates in flight in each, in order.
	concurrency []int
	// policies is the number of NetworkPluginPolicies loaded before the phases.
	policies int
	// warmup is the number of dry-run creates of each kind before each phase.
	warmup int
	// noopProcess runs the no-op webhook in a process of its own instead of this one.
	noopProcess bool
	// networkReady lets the network controller retry the measured pods while the phases run
	// and measures nodeport time to network Ready; false keeps the controller off them.
	networkReady bool
	// readyTimeout bounds the wait for the nodeport pods' network Ready after a phase.
	readyTimeout time.Duration
	// policyTimeout bounds the wait for the policies to be in both stores and Ready.
	policyTimeout time.Duration
	// timeout bounds the whole run.
	timeout time.Duration
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

// validate checks the flags against each other: positive counts, enough node capacity for
// one phase's pods, a HostPort range that fits below 65536.
func (o options) validate() error {
	if o.pods <= 0 || o.warmup < 0 || o.policies < 0 || len(o.concurrency) == 0 {
		return fmt.Errorf("-pods must be positive, -warmup and -policies not negative, -concurrency not empty")
	}
	for _, c := range o.concurrency {
		if c <= 0 {
			return fmt.Errorf("-concurrency %v: every phase needs at least 1 create in flight", o.concurrency)
		}
	}
	if capacity, perPhase := 110*o.nodes, int(numKinds)*o.pods; capacity < perPhase {
		return fmt.Errorf("%d nodes hold %d pods, fewer than the %d of one phase", o.nodes, capacity, perPhase)
	}
	if hostPortMin+o.hostPorts()-1 > 65535 {
		return fmt.Errorf("-pods %d with %d phases needs %d host ports from %d, past 65535", o.pods, len(o.concurrency), o.hostPorts(), hostPortMin)
	}
	return nil
}

// hostPorts returns the size of the HostPort range: enough for every HostPort pod of every
// phase at once (so that no allocation depends on the replicas having seen the previous
// phase's deletions), at least minHostPorts.
func (o options) hostPorts() int { return max(minHostPorts, o.pods*len(o.concurrency)) }

// run starts the cluster, the manager, the no-op webhook and the policies, runs the phases,
// and writes the report; the cluster is stopped whatever happens. Errors are those of the
// set-up, of the deletions between phases and of writing the report; failed creates are
// counted in the report, not returned.
func run(ctx context.Context, o options) error {
	if err := o.validate(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	begin := time.Now()
	rep := &report{
		Command: o.command, Date: begin.UTC().Format(time.RFC3339), CPUs: runtime.NumCPU(),
		GoVersion: runtime.Version(), Pods: o.pods, Nodes: o.nodes, Warmup: o.warmup,
		LoadAverageStart: cluster.LoadAverage(), Revision: cluster.Revision(ctx),
		HostPortRange: fmt.Sprintf("%d-%d", hostPortMin, hostPortMin+o.hostPorts()-1), NetworkReady: o.networkReady,
		NoopProcess: o.noopProcess,
	}
	cp, cfg, err := cluster.StartForLoad(ctx, cluster.LoadOptions{Dir: o.dir, FakeNodes: o.nodes, CRDs: o.crds, KeepWarnings: true})
	if err != nil {
		return err
	}
	defer cp.Stop()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("create client: %w", err)
	}
	pcs, err := policyclient.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("create policy client: %w", err)
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create namespace %s: %w", namespace, err)
	}
	if o.manager == "" {
		if o.manager, err = cluster.BuildManager(ctx, cp.Dir); err != nil {
			return err
		}
	}
	provider := filepath.Join(cp.Dir, "provider-config.toml")
	toml := fmt.Sprintf("[kubernetes]\nenable = true\n\n[kubernetes.hostPort]\nmin_port = %d\nmax_port = %d\n", hostPortMin, hostPortMin+o.hostPorts()-1)
	if err := os.WriteFile(provider, []byte(toml), 0o644); err != nil {
		return fmt.Errorf("write provider config: %w", err)
	}
	mgr, err := cp.StartManager(ctx, cluster.ManagerOptions{Binary: o.manager, ProviderConfig: provider})
	if err != nil {
		return fmt.Errorf("start manager: %w", err)
	}
	rep.Replicas = len(mgr.Replicas)
	if err := waitServiceAccount(ctx, cs, namespace); err != nil {
		return err
	}
	noop, err := startNoopWebhook(ctx, cp, filepath.Join(cp.Dir, "noop-certs"), o.noopProcess)
	if err != nil {
		return err
	}
	defer noop.stop()
	if err := noop.install(ctx, cs, cp.PKI.CACertPEM, namespace, managerTimeoutSeconds(mgr.Deployment.Mutating)); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "admissionload: cluster (%d fake nodes), manager (%d replicas) and no-op webhook ready in %s; logs in %s; loading %d policies\n",
		o.nodes, len(mgr.Replicas), time.Since(begin).Round(100*time.Millisecond), cp.Dir, o.policies)
	nsCount, waited, err := loadPolicySet(ctx, cs, pcs, mgr, namespace, o.policies, loadRetry(o.networkReady), o.policyTimeout)
	if err != nil {
		return err
	}
	rep.Policies, rep.PolicyNamespaces, rep.PoliciesWaitSeconds = o.policies, nsCount, waited.Seconds()

	watcher, err := startReadyWatch(ctx, cs, namespace)
	if err != nil {
		return err
	}
	defer watcher.stop()
	gen := podGenerator{namespace: namespace}
	quiet := rest.CopyConfig(cfg)
	quiet.WarningHandler = rest.NoWarnings{} // "dry run: network plugin ... was not run", once per warm-up pod
	quietCS, err := kubernetes.NewForConfig(quiet)
	if err != nil {
		return fmt.Errorf("create client: %w", err)
	}
	rep.SetupSeconds = time.Since(begin).Seconds()

	for i, c := range o.concurrency {
		phase := phaseReport{Name: phaseName(c), Concurrency: c}
		id := fmt.Sprintf("p%d", i+1)
		if err := warmUp(ctx, quietCS, gen, id, o.warmup); err != nil {
			return err
		}
		before, err := mgr.Metric(ctx, "npp_admission_decisions_total", `operation="CREATE"`)
		if err != nil {
			return err
		}
		serverBefore, err := readServerTotals(ctx, mgr, noop)
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "admissionload: phase %q: creating %d pods of each kind (%v), %d at a time\n", phase.Name, o.pods, kinds, c)
		phase.LoadAverageBefore = cluster.LoadAverage()
		res := createPods(ctx, cs, gen, id, o.pods, c)
		phase.LoadAverageAfter = cluster.LoadAverage()
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("interrupted during the creates of phase %q: %w", phase.Name, err)
		}
		serverAfter, err := readServerTotals(ctx, mgr, noop)
		if err != nil {
			return err
		}
		after, err := mgr.Metric(ctx, "npp_admission_decisions_total", `operation="CREATE"`)
		if err != nil {
			return err
		}
		phase.fill(res)
		phase.ManagerCreateDecisions = int(after - before)
		phase.ServerTime = serverTimeBetween(serverBefore, serverAfter)

		fmt.Fprintf(os.Stderr, "admissionload: phase %q: creates done in %s\n", phase.Name, res.elapsed.Round(100*time.Millisecond))
		if o.networkReady {
			fmt.Fprintf(os.Stderr, "admissionload: phase %q: waiting up to %s for %d nodeport networks to be Ready\n", phase.Name, o.readyTimeout, len(res.sent))
			waitStart := time.Now()
			readyAt, err := watcher.waitAll(ctx, res.sent, o.readyTimeout)
			if err != nil {
				return fmt.Errorf("interrupted while waiting for network Ready: %w", err)
			}
			phase.ReadyWaitSeconds = time.Since(waitStart).Seconds()
			phase.NetworkReady = summarizeReady(res.sent, readyAt)
		}
		rep.Phases = append(rep.Phases, phase)
		if i < len(o.concurrency)-1 {
			if err := deleteAll(ctx, cs, namespace, cleanupTimeout); err != nil {
				return err
			}
		}
	}
	rep.LoadAverageEnd = cluster.LoadAverage()
	rep.TotalSeconds = time.Since(begin).Seconds()

	fmt.Print(rep.text())
	if o.out != "" {
		if err := rep.write(o.out); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "admissionload: report written to %s\n", o.out)
	}
	if failed := rep.checkFailures(); len(failed) > 0 {
		return fmt.Errorf("the run's own checks failed, its figures do not count:\n  %s", strings.Join(failed, "\n  "))
	}
	return nil
}

// deleteAll deletes every pod of ns at once (DeleteCollection, grace period 0: each DELETE
// still goes through admission) and waits, up to timeout, until the pods and the Services
// the NodePort pods owned (deleted by the garbage collector) are gone, so that the next phase
// starts on a small etcd and a quiet controller. Errors: the DeleteCollection call, or pods
// or Services still there at the timeout.
func deleteAll(ctx context.Context, cs kubernetes.Interface, ns string, timeout time.Duration) error {
	start := time.Now()
	if err := cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{}); err != nil {
		return fmt.Errorf("delete the pods of %s: %w", ns, err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var pods, services int
	err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		s, err := cs.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		pods, services = len(p.Items), len(s.Items)
		return pods == 0 && services == 0, nil
	})
	if err != nil {
		return fmt.Errorf("%d pods and %d Services of %s left %s after the bulk delete: %w", pods, services, ns, timeout, err)
	}
	fmt.Fprintf(os.Stderr, "admissionload: pods and their Services of %s deleted in %s\n", ns, time.Since(start).Round(100*time.Millisecond))
	return nil
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
