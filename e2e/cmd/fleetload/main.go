// Command fleetload is the time-to-playable measurement behind `make bench-fleet` and the
// "Time to playable" section of docs/benchmarks.md: a StatefulSet scaled from 0 to -pods
// game servers at once (podManagementPolicy Parallel), as a matchmaking peak does, and how
// long each server takes from its CREATE until it runs and until its network is Ready.
//
// Set-up. One local cluster from e2e/cluster: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler and kwok with -nodes fake nodes (110 pods each). The manager built from
// ./cmd/manager runs as config/default deploys it ((*cluster.ControlPlane).StartManager): its
// ServiceAccount and RBAC, the Deployment's flags, two replicas; no provider config (OKG's
// defaults: host ports 8000-9000) unless an slb phase runs (below), and no policy (the
// built-in defaults: HostPort Synchronous, NodePort and the load balancers Asynchronous,
// retried every 5 s).
//
// Phases, one after the other in their own namespace, each a StatefulSet of -pods replicas
// created at once and deleted (and its pods gone) before the next:
//   - baseline: the same pods without game.kruise.io/network-type, which the webhook's
//     matchConditions keep away from it: the cluster's own CREATE to Running;
//   - nodeport: Kubernetes-NodePort, PortProtocols 7777/UDP;
//   - hostport: Kubernetes-HostPort, ContainerPorts game:7777/UDP;
//   - slb, once per -service-syncs value (1,10): AlibabaCloud-SLB, SlbIds of -lb-ids (6)
//     SLBs of 200 listener ports each ([alibabacloud.slb] 500-699, the most OKG's range rule
//     allows), PortProtocols 7777/UDP, the pods labelled game.kruise.io/owner-gss as a
//     GameServerSet's are. The manager then reads a provider configuration with
//     [alibabacloud.slb] and OKG's Kubernetes defaults, under the built-in default policy
//     (Asynchronous, 60 s window, Event). The load balancers come from the box's cloud
//     (e2e/cloudbox: Kubernetes' service controller in this process with that many workers,
//     kube-controller-manager's --concurrent-service-syncs, whose default is 1), every call
//     to the cloud taking -cloud-latency (200ms). The phase also records each Service's
//     first ingress address, and reports per pod CREATE to ingress (the cloud's part),
//     CREATE to network Ready, Ready minus ingress, and what OKG's rule (a re-drive of the
//     plugin about every 5 s, none after 60 s) would give on the same ingress times; target:
//     network Ready p99 at most 1 s after the ingress p99. At its end the cloud's latency is
//     taken away and the phase waits until the Services are gone (the garbage collector, the
//     service controller's finalizer), so the next finds the SLBs' ports free;
//   - floor, once per -service-syncs value: the same pods, Services and cloud as slb without
//     the manager (the pods carry no network type): a watcher in this process (startFloor)
//     makes each pod's Service and, as soon as it has an ingress address, patches the pod's
//     network-status Ready: one watch delivery and one PATCH, the floor the cluster itself
//     allows for Ready − ingress on this machine, to judge the slb phases against.
//   - eip: Volcengine-EIP (an empty network-conf: a new EIP with OKG's attributes); the
//     manager's provider configuration adds [volcengine]. The box's EIP controller
//     (e2e/cloudbox EIPs, a kube-system ServiceAccount, the default result writers) answers
//     each pod -cloud-latency after it sees the pod's IP and the request, writing the
//     allocated EIP onto the pod. Reported as the slb phases are, the answer's arrival in
//     place of the ingress: an EIP plugin's load is one pod write per game server, no
//     Service;
//   - floor-eip: the eip phase's pods and EIP controller without the manager (the pods carry
//     the EIP request themselves and no network type): a watcher (startEIPFloor) patches a
//     pod's network-status Ready as soon as it has the answer.
//   - sharedport, once per -service-syncs value: AlibabaCloud-SLB-SharedPort on -pods/200
//     SLBs (200 game servers each, the most one serves): one Service per SLB selecting its
//     game servers, so that one address makes 200 networks Ready (the network controller's
//     markSelected). A pod's ingress is the later of its SLB's Service's first ingress and
//     its own CREATE;
//   - floor-sharedport, once per -service-syncs value: the same without the manager: a
//     watcher (startSharedFloor) labels each pod with its SLB, creates the SLB's Service,
//     and patches every pod the Service selects Ready as soon as it has an address.
//
// Measurements, from a watch on each phase's pods (every version, in order, timestamps taken
// by this process when the event arrives): CREATE (the pod's first event) to Running
// (status.phase) and CREATE to network Ready (game.kruise.io/network-status
// currentNetworkState Ready), p50, p99 and max per phase; the target of docs/benchmarks.md
// (network Ready p99 at most 1.25 times the baseline's Running p99 plus 2 s) marked met or
// missed. The same from the StatefulSet's create (the scale-up), which includes each pod's
// admission (the pod is seen only once it is stored) and the StatefulSet controller's pace.
// A phase whose pods do not all get there within -phase-timeout is reported with the count
// that did. The slb phases are judged by their own target, not the baseline's.
//
// With -audit the API server also keeps an audit log (auditPolicy: Metadata level, every
// ServiceAccount's request and every pod write), and the report adds, per phase, the
// manager's requests by verb and resource and the pod writes that called the admission
// webhook, by writer, per game server: which calls the counts above are. The log costs the
// API server time, so the time figures of such a run are not those of a run without it.
//
// Report: markdown to standard output, and to -out when given; progress goes to standard
// error. It makes no assertion: it measures and reports.
//
// Usage (repository root; control-plane binaries from KUBEBUILDER_ASSETS or bin/k8s/):
//
//	go run ./e2e/cmd/fleetload [-pods 1000] [-nodes 0] [-phases baseline,nodeport,hostport,slb,floor,eip,floor-eip,sharedport,floor-sharedport]
//	    [-service-syncs 1,10] [-cloud-latency 200ms] [-lb-ids 6] [-manager-args '...'] [-pprof] [-audit]
//	    [-phase-timeout 10m] [-out report.md] [-dir DIR]
//
// A smoke run: -pods 50.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// options are the command's flags.
type options struct {
	pods         int
	nodes        int
	phases       []string
	phaseTimeout time.Duration
	timeout      time.Duration
	out          string
	dir          string
	crds         string
	command      string
	// serviceSyncs, cloudLatency and lbIDs shape the slb phases: one per service-controller
	// worker count, the box's cloud's delay per call, the SLB ids in the network-conf.
	serviceSyncs []int
	cloudLatency time.Duration
	lbIDs        int
	// managerArgs are further manager flags, after the Deployment's (experiments only).
	managerArgs []string
	// pprof serves each replica's net/http/pprof on loopback (URLs on standard error).
	pprof bool
	// audit records the API server's audit log and reports the requests per game server
	// by verb and resource (audit.go).
	audit bool
}

func main() {
	var o options
	var phases, syncs string
	flag.IntVar(&o.pods, "pods", 1000, "Replicas of each phase's StatefulSet, created at once.")
	flag.IntVar(&o.nodes, "nodes", 0, "kwok fake nodes (110 pods each); 0 means enough for -pods with a fifth to spare.")
	flag.StringVar(&phases, "phases", "baseline,nodeport,hostport,slb", "Phases to run, in order: baseline, nodeport, hostport, slb, floor, eip, floor-eip, sharedport, floor-sharedport.")
	flag.StringVar(&syncs, "service-syncs", "1,10", "For slb, floor, sharedport and floor-sharedport: the service controller's workers (kube-controller-manager's --concurrent-service-syncs, default 1), one slb phase per value.")
	flag.DurationVar(&o.cloudLatency, "cloud-latency", 200*time.Millisecond, "For slb: how long each call to the box's cloud takes.")
	var managerArgs string
	flag.StringVar(&managerArgs, "manager-args", "", "Further manager flags after the Deployment's, space-separated (experiments, such as --max-concurrent-reconciles=40; the default runs the manager as deployed).")
	flag.BoolVar(&o.pprof, "pprof", false, "Serve each manager replica's net/http/pprof on a loopback port, printed on standard error, for profiles taken during a phase (go tool pprof URL/debug/pprof/profile?seconds=30).")
	flag.BoolVar(&o.audit, "audit", false, "Record the API server's audit log (Metadata level: every ServiceAccount's request and every pod write) and report, per phase, the manager's requests per game server by verb and resource, and the pod writes that called the admission webhook by writer. The log costs the API server time: time figures of an -audit run are not comparable with a run without it. The log is removed at the end, or kept under -dir (audit/).")
	flag.IntVar(&o.lbIDs, "lb-ids", 6, "For slb: SLB ids in the network-conf, 200 listener ports each.")
	flag.DurationVar(&o.phaseTimeout, "phase-timeout", 10*time.Minute, "Bound on one phase's wait for Running and network Ready.")
	flag.DurationVar(&o.timeout, "timeout", 60*time.Minute, "Bound on the whole run.")
	flag.StringVar(&o.out, "out", "", "Also write the report to this file.")
	flag.StringVar(&o.dir, "dir", "", "Directory for the cluster's data and logs (default: a new temporary one).")
	flag.StringVar(&o.crds, "crds", "crds", "Directory of the CRDs to install.")
	flag.Parse()
	ctrllog.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	for _, p := range strings.Split(phases, ",") {
		if _, ok := phaseKinds[p]; !ok {
			fmt.Fprintf(os.Stderr, "fleetload: -phases: %q is not one of baseline, nodeport, hostport, slb, floor, eip, floor-eip, sharedport, floor-sharedport\n", p)
			os.Exit(2)
		}
		o.phases = append(o.phases, p)
	}
	for _, v := range strings.Split(syncs, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "fleetload: -service-syncs: %q is not a positive integer\n", v)
			os.Exit(2)
		}
		o.serviceSyncs = append(o.serviceSyncs, n)
	}
	if (slices.Contains(o.phases, "slb") || slices.Contains(o.phases, "floor")) && o.lbIDs*(slbMaxPort-slbMinPort+1) < o.pods {
		fmt.Fprintf(os.Stderr, "fleetload: -lb-ids: %d SLBs of %d ports each cannot hold -pods %d\n", o.lbIDs, slbMaxPort-slbMinPort+1, o.pods)
		os.Exit(2)
	}
	if o.pods < 1 {
		fmt.Fprintln(os.Stderr, "fleetload: -pods must be at least 1")
		os.Exit(2)
	}
	if o.nodes == 0 {
		o.nodes = (o.pods*6/5 + 109) / 110
	}
	o.managerArgs = strings.Fields(managerArgs)
	o.command = "go run ./e2e/cmd/fleetload " + strings.Join(os.Args[1:], " ")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "fleetload:", err)
		stop()
		os.Exit(1)
	}
}
