// Command memcurve is the memory measurement behind `make bench-memory` and the "Memory
// against cluster size" section of docs/benchmarks.md: how the manager's resident memory
// grows with the pods of a cluster, of which a share are game servers.
//
// Set-up. One local cluster from e2e/cluster: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler and kwok with -nodes fake nodes. The manager built from ./cmd/manager runs as
// config/default deploys it ((*cluster.ControlPlane).StartManager): its ServiceAccount and
// RBAC, the Deployment's flags, two replicas; every provider the manager serves enabled
// (-providers all; slb: OKG's defaults and AlibabaCloud-SLB alone), the stand-in of OKG's
// GameServerSet CRD (-okg-crds) and of the cloud controllers' CRDs (-cloud-crds) installed,
// so that every informer of the GameServerSet and cloud work runs. Beside it
// runs the baseline, this command again with -baseline-cache: a controller-runtime cache of
// every Pod and Node with managedFields stripped and nothing else, which is what the
// manager's pod and node caches held before they kept only what the manager reads
// (kubernetes.TransformPod, kubernetes.TransformNode).
//
// Load. The pods are created in steps up to each total of -steps (5000,20000,50000), -in-flight
// (64) at a time; -game-share (0.10) of each total are game servers (network-type
// Kubernetes-HostPort, ContainerPorts game:7777/UDP) in namespace memcurve-games, the others
// ordinary workload pods in memcurve-apps (two containers with environment, resources,
// probes, volume mounts; labels as a Deployment gives them). Every pod names its node
// (round robin over the fake nodes, so the scheduler is not the bottleneck), and kwok runs it:
// status Running with conditions, container statuses and an IP, as a kubelet reports it.
//
// Measurements, after each step, once kwok reports every pod Running and -settle (30s) more
// have passed: the RSS (VmRSS of /proc/<pid>/status) of each manager replica and of the
// baseline, sampled every 5s for -sample (30s); the maximum is reported. Before the first
// step the same is measured on the empty cluster. Beside it, each replica's CPU time
// (utime + stime of /proc/<pid>/stat): over the step (from the previous step's measurement
// to this one's: the pods' creation, watch events and collections) and over the sampling
// (the steady state). -variants adds replicas with other runtime settings (GOGC,
// GOMEMLIMIT), of another build (an earlier commit's manager) or with another provider
// configuration (providers=slb), so that a lever's memory and CPU are measured in the same
// run as the Deployment's.
//
// Cold start (-restart), after the last step: one list of every pod, in pages of 500 as
// client-go's reflector lists and in one response (the floor of a cache's first sync); then
// a replica that does not lead is stopped (SIGTERM) and started again, and the time from its
// start to /readyz 200 is reported beside the manager's own "Network plugins initialised"
// took (readiness waits for the plugins' informers) and its API writes until -sample after.
//
// Report: a markdown table with one row per step (pods, game servers, RSS of each replica
// and of the baseline, MB), and the RSS per 1,000 pods of the growth between the first and
// last steps for both. It goes to standard output, and to -out when given; progress goes to
// standard error. It makes no assertion: it measures and reports.
//
// Usage (repository root; control-plane binaries from KUBEBUILDER_ASSETS or bin/k8s/):
//
//	go run ./e2e/cmd/memcurve [-steps 5000,20000,50000] [-game-share 0.10] [-nodes 40]
//	    [-in-flight 64] [-settle 30s] [-sample 30s] [-out report.md] [-dir DIR]
//	    [-variants name[@/path/to/manager][:KEY=value,...];...] [-providers all|slb]
//	    [-okg-crds DIR] [-cloud-crds DIR] [-restart]
//
// A smoke run: -steps 500,1000 -settle 5s -sample 5s.
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

// options are the command's flags.
type options struct {
	steps     []int
	gameShare float64
	nodes     int
	inFlight  int
	settle    time.Duration
	sample    time.Duration
	timeout   time.Duration
	out       string
	dir       string
	crds      string
	okgCRDs   string
	cloudCRDs string
	// providers names the replicas' provider configuration (providerConfigs): all or slb.
	providers string
	manager   string
	command   string
	// heapProfiles is the directory of the replicas' heap profiles; empty: none taken.
	heapProfiles string
	// restart measures a cold start after the last step (restartReplica).
	restart bool
	// variants are further replicas of the same Deployment with runtime settings changed,
	// measured beside the two as deployed.
	variants []variant
}

// variant is one -variants entry: a replica named name, running binary (empty: the
// manager's) with env after the Deployment's, and the provider configuration providers
// (providerConfigs; empty: -providers).
type variant struct {
	name      string
	binary    string
	env       []string
	providers string
}

// parseVariants parses "name[@binary]:KEY=value,KEY=value;name@binary;..." (empty: none):
// each entry names an environment, another manager binary, or both. The key "providers"
// (lower case, never an environment variable the manager reads) is not environment: its
// value, a name of providerConfigs, is the replica's provider configuration.
func parseVariants(s string) ([]variant, error) {
	var out []variant
	for _, part := range strings.Split(s, ";") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		head, env, _ := strings.Cut(part, ":")
		name, binary, _ := strings.Cut(head, "@")
		if name == "" || (env == "" && binary == "") {
			return nil, fmt.Errorf("%q: expected name:KEY=value[,KEY=value], name@/path/to/manager or name@/path/to/manager:KEY=value", part)
		}
		v := variant{name: name, binary: binary}
		var kvs []string
		if env != "" {
			kvs = strings.Split(env, ",")
		}
		for _, kv := range kvs {
			k, val, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return nil, fmt.Errorf("%q: %q is not KEY=value", part, kv)
			}
			if k == "providers" {
				if _, known := providerConfigs[val]; !known {
					return nil, fmt.Errorf("%q: providers=%q: expected all or slb", part, val)
				}
				v.providers = val
				continue
			}
			v.env = append(v.env, kv)
		}
		out = append(out, v)
	}
	return out, nil
}

func main() {
	var o options
	var steps string
	var baseline bool
	var kubeconfig string
	flag.StringVar(&steps, "steps", "5000,20000,50000", "Cluster sizes to measure at, in pods, increasing, comma-separated.")
	flag.Float64Var(&o.gameShare, "game-share", 0.10, "Share of the pods that are game servers (Kubernetes-HostPort), 0-1.")
	flag.IntVar(&o.nodes, "nodes", 40, "kwok fake nodes the pods are spread over.")
	flag.IntVar(&o.inFlight, "in-flight", 64, "Pod creates in flight.")
	flag.DurationVar(&o.settle, "settle", 30*time.Second, "Wait after every pod of a step runs, before sampling.")
	flag.DurationVar(&o.sample, "sample", 30*time.Second, "Sampling time per step (every 5s).")
	flag.DurationVar(&o.timeout, "timeout", 90*time.Minute, "Bound on the whole run.")
	flag.StringVar(&o.out, "out", "", "Also write the report to this file.")
	flag.StringVar(&o.dir, "dir", "", "Directory for the cluster's data and logs (default: a new temporary one).")
	flag.StringVar(&o.crds, "crds", "crds", "Directory of the CRDs to install.")
	flag.StringVar(&o.okgCRDs, "okg-crds", "e2e/takeover/testdata/crds", "Directory of the stand-in of OKG's GameServerSet CRD to install.")
	flag.StringVar(&o.cloudCRDs, "cloud-crds", "e2e/cloudbox/testdata/crds", "Directory of the stand-ins of the cloud controllers' CRDs (Alibaba, Tencent, AWS) to install.")
	flag.StringVar(&o.providers, "providers", "all", "The replicas' provider configuration: all (every provider the manager serves enabled) or slb (OKG's defaults and AlibabaCloud-SLB). A -variants entry may name another with providers=NAME.")
	flag.StringVar(&o.manager, "manager", "", "Manager binary to measure (default: built from ./cmd/manager).")
	flag.StringVar(&o.heapProfiles, "heap-profiles", "", "Also save each replica's heap profile (net/http/pprof, in use and allocated) at every step into this directory, as heap-<pods>-manager-<i>.pb.gz; read them with go tool pprof -sample_index=inuse_space.")
	flag.BoolVar(&o.restart, "restart", false, "After the last step, list every pod once (the floor) and restart a replica that does not lead, timing it until /readyz.")
	var variants string
	flag.StringVar(&variants, "variants", "", "Further manager replicas measured beside the two as deployed, each with environment after the Deployment's, another manager binary, or both: name[@/path/to/manager][:KEY=value[,KEY=value]];... (for example gogc50:GOGC=50;request:GOMEMLIMIT=268435456, or before@/tmp/manager-before to measure an earlier build). Each is one more replica of the same Deployment, behind the same webhook, in the same leader election.")
	flag.BoolVar(&baseline, "baseline-cache", false, "Internal: run the baseline cache against -kubeconfig until stopped.")
	flag.StringVar(&kubeconfig, "baseline-kubeconfig", "", "Internal (-baseline-cache): the kubeconfig to use.")
	flag.Parse()
	ctrllog.SetLogger(zap.New(zap.WriteTo(os.Stderr)))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if baseline {
		if err := runBaselineCache(ctx, kubeconfig); err != nil {
			fmt.Fprintln(os.Stderr, "memcurve -baseline-cache:", err)
			os.Exit(1)
		}
		return
	}
	var err error
	if o.steps, err = parseSteps(steps); err != nil {
		fmt.Fprintln(os.Stderr, "memcurve: -steps:", err)
		os.Exit(2)
	}
	if o.variants, err = parseVariants(variants); err != nil {
		fmt.Fprintln(os.Stderr, "memcurve: -variants:", err)
		os.Exit(2)
	}
	if _, known := providerConfigs[o.providers]; !known {
		fmt.Fprintf(os.Stderr, "memcurve: -providers %q: expected all or slb\n", o.providers)
		os.Exit(2)
	}
	if o.gameShare < 0 || o.gameShare > 1 || o.nodes < 1 || o.inFlight < 1 {
		fmt.Fprintln(os.Stderr, "memcurve: -game-share must be 0-1, -nodes and -in-flight at least 1")
		os.Exit(2)
	}
	o.command = "go run ./e2e/cmd/memcurve " + strings.Join(os.Args[1:], " ")
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "memcurve:", err)
		stop()
		os.Exit(1)
	}
}

// parseSteps parses "5000,20000,50000": positive, strictly increasing pod totals.
func parseSteps(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q: expected a positive number of pods", f)
		}
		if len(out) > 0 && n <= out[len(out)-1] {
			return nil, fmt.Errorf("%d after %d: expected increasing totals", n, out[len(out)-1])
		}
		out = append(out, n)
	}
	return out, nil
}
