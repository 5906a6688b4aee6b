// Command admissionload is the admission load test behind `make bench-admission` and the
// "Admission" section of docs/benchmarks.md. On one real local cluster (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and kwok fake nodes from e2e/cluster), with the
// manager built from ./cmd/manager running on this machine and the webhook configurations of
// config/webhook pointed at it, it measures in one run:
//
//  1. Admission latency of pod CREATE through the real kube-apiserver, with and without the
//     mutating pod webhook. "With" pods carry game.kruise.io/network-type (-plugin) and
//     game.kruise.io/network-conf (-conf); "without" pods are identical but for those two
//     annotations, so the webhook configuration's matchConditions keep them away from the
//     webhook and the apiserver never calls it. The two kinds are interleaved (pairs, the
//     order inside a pair alternating) and sent by -concurrency workers, so both see the
//     same cluster state, the same background work and the same client. Latency is the
//     wall-clock time of the client's Create call (request, admission, storage, response);
//     the client's rate limiter is set far above what the workers can send, so it never
//     waits. Reported per kind: p50, p90, p99, max and mean over the successful creates
//     (nearest-rank percentiles), and the count of failed creates. A few dry-run creates of
//     each kind first warm the connections (not counted).
//  2. Time from pod creation to network Ready for the pods that went through the webhook:
//     from the moment the client sent the CREATE to the moment a pod informer (a watch, no
//     polling) first sees game.kruise.io/network-status with "currentNetworkState":"Ready".
//     For Kubernetes-NodePort this is the webhook's CREATE (NotReady), the network
//     controller's first retry after the decision's interval (built-in default 5s), the
//     webhook's UPDATE that creates the Service, and a further retry when the pod had no IP
//     yet. Reported: p50, p99, max and how many pods were not Ready within -ready-timeout.
//
// It also reads the manager's npp_admission_decisions_total for CREATE before and after the
// measured creates, as a check that every "with" pod and no "without" pod reached the
// webhook, and the load average of the machine before and after.
//
// Usage (repository root; the control-plane binaries come from KUBEBUILDER_ASSETS or
// bin/k8s/, see e2e/cluster):
//
//	go run ./e2e/cmd/admissionload [-pods 500] [-nodes 0] [-plugin Kubernetes-NodePort]
//	    [-concurrency 4] [-out report.json|report.txt]
//
// The text report always goes to standard output; -out also writes it to a file, as JSON
// when the name ends in .json. The program ends by itself (bounded by -ready-timeout after
// the creates); Ctrl-C stops it early. The cluster and the manager are always stopped. It
// makes no timed assertion: it measures and reports.
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
)

func main() {
	var o options
	flag.IntVar(&o.pods, "pods", 500, "Pods created per kind (with and without the webhook): twice this many in all.")
	flag.IntVar(&o.nodes, "nodes", 0, "kwok fake nodes (110 pods each); 0 means enough for all pods: ceil(2*pods/100).")
	flag.StringVar(&o.plugin, "plugin", "Kubernetes-NodePort", "Network type (game.kruise.io/network-type) of the pods that go through the webhook.")
	flag.StringVar(&o.conf, "conf", `[{"name":"PortProtocols","value":"7777/UDP"}]`, "Network conf (game.kruise.io/network-conf) of the pods that go through the webhook.")
	flag.IntVar(&o.concurrency, "concurrency", 4, "Creates in flight at once.")
	flag.IntVar(&o.warmup, "warmup", 10, "Dry-run creates of each kind before the measurement, not counted.")
	flag.DurationVar(&o.readyTimeout, "ready-timeout", 5*time.Minute, "How long to wait, after the last create, for the webhook pods' networks to be Ready.")
	flag.StringVar(&o.out, "out", "", "Also write the report to this file: JSON when the name ends in .json, text otherwise.")
	flag.StringVar(&o.dir, "dir", "", "Working directory of the cluster (logs, kubeconfig), kept; empty means a temporary one, removed at the end.")
	flag.StringVar(&o.crds, "crds", "crds", "Directory of the CRD YAML files to install.")
	flag.StringVar(&o.manager, "manager", "", "Manager binary; empty builds ./cmd/manager into the working directory.")
	flag.Parse()
	o.command = strings.Join(append([]string{"go run ./e2e/cmd/admissionload"}, os.Args[1:]...), " ")
	if o.nodes <= 0 {
		o.nodes = (2*o.pods + 99) / 100
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "admissionload:", err)
		stop()
		os.Exit(1)
	}
}
