// Command admissionload is the admission load test behind `make bench-admission` and the
// "Admission" section of docs/benchmarks.md. It measures pod CREATE admission latency through
// a real kube-apiserver with the manager deployed as config/default deploys it, against no
// webhook and against a no-op webhook, in one run.
//
// Set-up. One local cluster from e2e/cluster: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler and -nodes kwok fake nodes (enough that every pod of a phase is scheduled).
// The manager built from ./cmd/manager is started by (*cluster.ControlPlane).StartManager as
// config/default deploys it: its ServiceAccount token and RBAC, the Deployment's flags and
// replicas (two), leader election, secured metrics, its own certificate rotation, both
// replicas behind a round-robin loopback TCP proxy that stands in for the webhook Service.
// Its provider config sets [kubernetes.hostPort] to 10000 and up, enough ports for every
// HostPort pod of the run even if no deletion were ever seen. Next to it, in this process, a
// no-op mutating webhook: a controller-runtime webhook.Server (HTTP/1.1 only, like the
// manager) with a serving certificate from the control plane's CA, reached through its own
// loopback proxy of the same kind, so that both webhooks pay the same proxy hop. It decodes
// the AdmissionReview and the pod (JSON, with controller-runtime's decoder, as the manager)
// and admits it with a one-operation JSON patch (it adds one annotation). Its
// MutatingWebhookConfiguration selects only the noop pods (objectSelector on a label; pod
// CREATE in the load namespace), failurePolicy Fail, sideEffects None, and the manager's
// timeoutSeconds. With -noop-process the no-op server runs in a process of its own (this
// program again, with the internal -serve-noop-* flags), as the manager's replicas do, so
// that neither webhook shares a process with the load's client. Then -policies NetworkPluginPolicies (1000) are created, a mix in the root
// namespace, the load namespace and 98 other namespaces (see policySet), and the run waits
// until both replicas' stores hold them all (npp_policies{reason="Accepted"} of each replica)
// and every one has a current Ready status.
//
// Kinds. Four kinds of pods, identical (one UDP game port, the same labels and a phase
// annotation) but for:
//   - none: nothing more; no webhook is called (the manager's matchConditions skip pods
//     without game.kruise.io/network-type, the no-op's objectSelector skips the kind);
//   - noop: the no-op webhook's label value; only the no-op webhook is called;
//   - hostport: network-type Kubernetes-HostPort, network-conf ContainerPorts game:7777/UDP;
//     only the manager is called (a host port is allocated, the readiness gate added);
//   - nodeport: network-type Kubernetes-NodePort, network-conf PortProtocols 7777/UDP; only
//     the manager is called.
//
// Phases. For each entry of -concurrency (default 1 then 4), -pods pods of each kind (500)
// are created by that many workers. Every worker's sequence is round robin over the kinds
// (one pod of each kind per round, the first kind rotating from round to round), so all
// kinds see the same cluster state, the same background work and the same client. Before a
// phase, -warmup dry-run creates of each kind open the connections (not measured; the first
// also waits until the apiserver calls the no-op webhook). Latency is the wall-clock time of
// the client's Create call (request, admission, storage, response); the client's rate limiter
// is set far above what the workers send, so it never waits. Every returned pod is checked
// against its kind (only noop pods carry the no-op annotation, only hostport and nodeport pods
// carry the manager's network-decision annotation, and hostport pods a host port on their
// container port); contradictions are counted as "unexpected". A run with failed creates,
// unexpected pods or a manager decision count that differs from the creates sent exits 1
// after its report: its figures do not count. Between phases every
// pod of the load namespace is deleted at once (DeleteCollection, each DELETE through
// admission) and the run waits until the pods and the NodePort Services are gone.
//
// Report, per phase and kind: count, errors, unexpected, p50, p90, p99, max and mean over the
// successful creates (nearest-rank percentiles, ms) and the size of the kind's first pod as
// the apiserver returned it (JSON bytes: what admission added); hostport and nodeport against noop and
// noop against none, as the difference (ms) and the ratio at p50 and p99, with the target of
// docs/benchmarks.md (at most +0.3 ms at p50 and 1.1x at p99 over the no-op) marked met or missed; the
// increase of the manager's npp_admission_decisions_total{operation="CREATE"} over the
// phase's creates, summed over the replicas, which must equal the hostport and nodeport
// creates sent (every such pod and no other reached the manager); the mean time per request
// inside each webhook server (controller-runtime's controller_runtime_webhook_latency_seconds
// of the no-op, from this process, and of the manager's pod webhook, summed over the
// replicas), which separates the handlers' own cost from the rest of the round trip; and the
// time from the CREATE sent to a pod informer (a watch, no polling) first seeing the nodeport
// pod's game.kruise.io/network-status Ready (the controller's first retry after the policy's
// 5 s interval, the UPDATE that creates the Service), bounded by -ready-timeout. The machine's
// load average is recorded around each phase.
//
// Network retries. As deployed, the network controller retries the hostport and nodeport
// pods (an UPDATE through the manager, a Service for NodePort) from 5 s after their CREATE,
// so later creates of a phase run alongside that work, in the manager's replicas too.
// -network-ready=false gives the measured pods' policy a 20 m retry interval instead: no
// retry runs during the phases, the manager serves only the measured CREATEs, and the time
// to network Ready is not measured.
//
// Usage (repository root; the control-plane binaries come from KUBEBUILDER_ASSETS or
// bin/k8s/, see e2e/cluster):
//
//	go run ./e2e/cmd/admissionload [-pods 500] [-concurrency 1,4] [-policies 1000]
//	    [-nodes 0] [-noop-process] [-network-ready=false] [-out report.json|report.txt]
//
// The text report always goes to standard output; -out also writes it to a file, as JSON
// when the name ends in .json. The program ends by itself: every wait is bounded and -timeout
// (12m) bounds the whole run; with the defaults it takes about 4 minutes on 2 cores. Ctrl-C
// stops it early. The cluster, the manager and the no-op webhook are always stopped. It makes
// no timed assertion: it measures and reports.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

func main() {
	var o options
	concurrency := "1,4"
	flag.IntVar(&o.pods, "pods", 500, "Pods created per kind (none, noop, hostport, nodeport) in each phase.")
	flag.StringVar(&concurrency, "concurrency", concurrency, "Phases, in order: creates in flight in each, comma-separated (1 is sequential).")
	flag.IntVar(&o.policies, "policies", 1000, "NetworkPluginPolicies loaded before the phases.")
	flag.IntVar(&o.nodes, "nodes", 0, "kwok fake nodes (110 pods each); 0 means enough for one phase's pods: ceil(4*pods/100).")
	flag.IntVar(&o.warmup, "warmup", 10, "Dry-run creates of each kind before each phase, not measured.")
	flag.BoolVar(&o.networkReady, "network-ready", true, "Let the network controller retry the hostport and nodeport pods while the phases run (their policy's interval 5s) and measure nodeport time to network Ready; false sets that interval to 20m, so no retry runs alongside the creates, and skips the Ready figures.")
	flag.DurationVar(&o.readyTimeout, "ready-timeout", 2*time.Minute, "How long to wait, after a phase's creates, for its nodeport pods' networks to be Ready.")
	flag.DurationVar(&o.policyTimeout, "policy-timeout", 3*time.Minute, "How long to wait, after the policy creates, for both replicas' stores to hold them and for all to be Ready.")
	flag.DurationVar(&o.timeout, "timeout", 12*time.Minute, "Bound of the whole run.")
	flag.StringVar(&o.out, "out", "", "Also write the report to this file: JSON when the name ends in .json, text otherwise.")
	flag.StringVar(&o.dir, "dir", "", "Working directory of the cluster (logs, kubeconfig), kept; empty means a temporary one, removed at the end.")
	flag.StringVar(&o.crds, "crds", "crds", "Directory of the CRD YAML files to install.")
	flag.StringVar(&o.manager, "manager", "", "Manager binary; empty builds ./cmd/manager into the working directory.")
	flag.BoolVar(&o.noopProcess, "noop-process", false, "Run the no-op webhook in a process of its own (this program again), as the manager's replicas run, instead of in this one.")
	var serve struct {
		port, metricsPort int
		certs             string
	}
	flag.IntVar(&serve.port, "serve-noop-port", 0, "Internal (-noop-process): only serve the no-op webhook on this loopback port.")
	flag.IntVar(&serve.metricsPort, "serve-noop-metrics-port", 0, "Internal (-noop-process): the no-op webhook's /metrics port.")
	flag.StringVar(&serve.certs, "serve-noop-certs", "", "Internal (-noop-process): the no-op webhook's tls.crt and tls.key directory.")
	flag.Parse()
	o.command = strings.Join(append([]string{"go run ./e2e/cmd/admissionload"}, os.Args[1:]...), " ")
	for _, f := range strings.Split(concurrency, ",") {
		c, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			fmt.Fprintf(os.Stderr, "admissionload: -concurrency %q: %v\n", concurrency, err)
			os.Exit(2)
		}
		o.concurrency = append(o.concurrency, c)
	}
	if o.nodes <= 0 {
		o.nodes = (int(numKinds)*o.pods + 99) / 100
	}
	ctrllog.SetLogger(zap.New(zap.WriteTo(os.Stderr)))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if serve.port > 0 {
		if err := serveNoop(ctx, serve.port, serve.metricsPort, serve.certs); err != nil {
			fmt.Fprintln(os.Stderr, "admissionload: no-op webhook:", err)
			stop()
			os.Exit(1)
		}
		return
	}
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "admissionload:", err)
		stop()
		os.Exit(1)
	}
}
