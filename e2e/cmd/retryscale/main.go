// Command retryscale is the retry load test behind `make bench-retry-scale` and the "Network
// retries at scale" section of docs/benchmarks.md ("Scale" and "Events and memory
// under many retries"). It holds thousands of pods whose network cannot become Ready and
// measures what the manager's retry loop costs and how well it keeps its schedule.
//
// Set-up. One local cluster from e2e/cluster: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler and kwok with -nodes fake nodes (110 pods each; by default one per 100 pods,
// so every pod is scheduled and gets an IP). The manager built from ./cmd/manager runs as
// config/default deploys it ((*cluster.ControlPlane).StartManager): its ServiceAccount and
// RBAC, the Deployment's flags (--max-concurrent-reconciles=10, --min-retry-interval=1s),
// two replicas with leader election, behind a loopback proxy that stands in for the webhook
// Service; no provider config (OKG's defaults). Two namespaces, retryscale-big and
// retryscale-small, each with a ResourceQuota of services.nodeports 0, so that the
// Kubernetes-NodePort plugin's Service create always fails (apiCallError, exceeded quota).
// A root policy makes Kubernetes-NodePort Asynchronous with retry interval 5s, maxInterval
// 30s and window -window (default 2h, longer than the run: no window closes).
//
// Load. -pods-big pods (4,990) in retryscale-big, then -pods-small (10) in retryscale-small,
// created -in-flight (20) at a time: network-type Kubernetes-NodePort, network-conf
// PortProtocols 7777/UDP, one container with port 7777/UDP. Each is admitted NotReady and
// retried by the leader's network controller for the whole run.
//
// Measurements, from the end of the creates, every -sample (15s) for -duration (30m):
//   - each replica process's CPU time (utime + stime of /proc/<pid>/stat) and RSS (VmRSS of
//     /proc/<pid>/status), the pid from cluster.Replica.Process; which replica leads;
//   - the leader's workqueue_depth{name="network-retry"} and npp_network_retries_total;
//   - the manager's API writes (client-go's rest_client_requests_total for POST, PUT,
//     PATCH and DELETE), its npp_network_retries_from_cache_total (retries counted without
//     a write) and npp_network_retry_lateness_seconds (every retry on the schedule, real or
//     counted: how many came more than 1 s late), summed over the replicas;
//   - from a watch on the pods (every version, in order): the retry state annotation
//     policy.game.kruise.io/network-retry decoded with pkg/networkretry. Whenever attempts
//     goes from n to n+1, the new lastAttempt is compared with when the retry was due by the
//     state before it (lastAttempt + backoff(n), interval floor 1s): the lateness. Retries
//     that came more than a second early are stamps at once when the pod got its node or IP
//     (not on the schedule) and are counted apart. Reported: p50, p99 and max lateness, and
//     the pods with a retry more than one interval (5s) late;
//   - per namespace, the time from a pod's creation and from its scheduling to its first
//     plugin run, and the lateness of its first on-schedule retry (max over the pods);
//   - the Event objects of the namespaces (core/v1 and events.k8s.io/v1, one storage, both
//     listed), grouped per pod and distinct error (type, reason, action, note): the target is
//     one Event object per group over all replicas (the manager records through
//     eventrecorder.StableNameSink). client-go's reportingInstance is the reporting
//     controller and the hostname, which replicas on one machine share, so the table also
//     groups by it, for runs on several machines.
//
// Failover (-kill-leader-after D, with -ready-pods for the rest of a fleet: game servers
// whose Kubernetes-HostPort network works, in retryscale-ready). D after the creates, the
// leader's retry rate (npp_network_retries_total + npp_network_retries_from_cache_total) is
// taken over 30 s, then the leader is SIGKILLed (no Lease release) and started again at once,
// as the kubelet restarts a crashed container. Every second for -failover-window (2m):
// which replica leads (leader_election_master_status), each replica's retries and API
// writes. Reported: when the new leader led and when its retries resumed, against the 15 s
// lease; the retries due in that gap (the rate before times the gap); the written retries
// due in the window and their lateness; the retries that ran more than a second early (what
// a second stamp of one attempt would be); the write rate, mean and peak, against the
// quiet-retry budget (under 10 writes/s).
//
// Report: a markdown table over time (a row every 2 minutes), RSS and CPU per replica at the
// start, after 10 minutes and at the end with the RSS slope over the last 20 minutes, the
// lateness figures, the first-run figures and the Event counts, and each target of docs/benchmarks.md
// (RSS under 200 MB and flat over the last 20 minutes, at most one Event object per pod per
// distinct error, no pod more than one interval late) marked met or missed. It goes to
// standard output, and to -out when given; progress goes to standard error.
//
// Usage (repository root; control-plane binaries from KUBEBUILDER_ASSETS or bin/k8s/):
//
//	go run ./e2e/cmd/retryscale [-pods-big 4990] [-pods-small 10] [-duration 30m]
//	    [-sample 15s] [-in-flight 20] [-nodes 0] [-out report.md] [-dir DIR]
//	    [-manager-args '--max-concurrent-reconciles=40']
//	    [-ready-pods 4500 -kill-leader-after 5m -failover-window 2m]
//
// A smoke run: -pods-big 300 -pods-small 10 -duration 3m. The cluster and the manager are
// always stopped at the end (Ctrl-C stops the run early); -timeout (default -duration + 30m)
// bounds the whole run. It makes no assertion: it measures and reports.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

func main() {
	var o options
	flag.IntVar(&o.podsBig, "pods-big", 4990, "Pods in the big namespace (retryscale-big), created first.")
	flag.IntVar(&o.podsSmall, "pods-small", 10, "Pods in the small namespace (retryscale-small), created right after the big one's.")
	flag.IntVar(&o.readyPods, "ready-pods", 0, "Game servers whose network works (Kubernetes-HostPort) in retryscale-ready, created first: the rest of the fleet.")
	flag.DurationVar(&o.killLeaderAfter, "kill-leader-after", 0, "SIGKILL the leader this long after the creates (0: never) and measure the failover; needs room for 30s before and -failover-window after within -duration.")
	flag.DurationVar(&o.failoverWindow, "failover-window", 2*time.Minute, "How long the failover is sampled, every second.")
	flag.IntVar(&o.nodes, "nodes", 0, "kwok fake nodes (110 pods each); 0 means one per 100 pods.")
	flag.IntVar(&o.inFlight, "in-flight", 20, "Pod creates in flight.")
	flag.DurationVar(&o.duration, "duration", 30*time.Minute, "How long to sample after the creates.")
	flag.DurationVar(&o.sample, "sample", 15*time.Second, "Sampling period.")
	flag.DurationVar(&o.reportEvery, "report-every", 2*time.Minute, "Spacing of the rows of the report's time table.")
	flag.DurationVar(&o.window, "window", 2*time.Hour, "Retry window of the policy; at least -duration + 30m, so that no window closes during the run.")
	var timeout time.Duration
	flag.DurationVar(&timeout, "timeout", 0, "Bound of the whole run; 0 means -duration + 30m.")
	flag.StringVar(&o.out, "out", "", "Also write the markdown report to this file.")
	flag.StringVar(&o.dir, "dir", "", "Working directory of the cluster (logs, kubeconfig), kept; empty means a temporary one, removed at the end.")
	flag.StringVar(&o.crds, "crds", "crds", "Directory of the CRD YAML files to install.")
	flag.StringVar(&o.manager, "manager", "", "Manager binary; empty builds ./cmd/manager into the working directory.")
	var managerArgs string
	flag.StringVar(&managerArgs, "manager-args", "", "Further manager flags after the Deployment's, space-separated (for experiments, such as --max-concurrent-reconciles=40; the default runs the manager as deployed).")
	flag.Parse()
	o.command = strings.Join(append([]string{"go run ./e2e/cmd/retryscale"}, os.Args[1:]...), " ")
	o.timeout = timeout
	o.managerArgs = strings.Fields(managerArgs)
	if o.timeout <= 0 {
		o.timeout = o.duration + 30*time.Minute
	}
	ctrllog.SetLogger(zap.New(zap.WriteTo(os.Stderr)))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "retryscale:", err)
		stop()
		os.Exit(1)
	}
}
