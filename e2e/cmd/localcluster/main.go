// Command localcluster is what `make run` runs: a whole local cluster (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and kwok fake nodes, see e2e/cluster), the CRDs, the
// manager running on this machine with the webhook configurations of config/webhook pointed at
// it, a cloud in a box for the load-balancer samples (e2e/cloudbox: Kubernetes' service
// controller with a load-balancer cloud; startCloud), and config/samples/ applied (policies and
// game-server StatefulSets). It then prints,
// live, each game-server pod's network state and the policy that decided it. A manager
// replica that exits (a crash, a SIGKILL, a leader that lost its lease) is started again after
// a back-off, as the kubelet restarts a container (supervise.go), and the replicas' restarts
// are shown above the pods. It stops everything it started on Ctrl-C, or when a replica keeps
// failing at start.
package main

import (
	"context"
	"encoding/json"
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
	"k8s.io/klog/v2"

	"github.com/okg-extensions/network-plugin-policy/e2e/cloudbox"
	"github.com/okg-extensions/network-plugin-policy/e2e/cluster"
	"github.com/okg-extensions/network-plugin-policy/e2e/realnode"
	"github.com/okg-extensions/network-plugin-policy/pkg/networkretry"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/alibabacloud"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/hwcloud"
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
	realCount := flag.Int("real-nodes", 0, "Number of real nodes (kubelet, containerd, runc, CNI, kube-proxy) beside the fake ones, running echo game servers whose reachability the table shows; needs Linux, root and what make controlplane installs. Everything then runs in a network namespace of its own.")
	flag.Parse()

	var reals *realNodes
	if *realCount > 0 {
		h := realnode.InIsolation()
		if h == nil {
			// The outer run: check, build the images here (the module proxy is out of the
			// namespace's reach), run again inside the namespace, put the host back.
			if why := realnode.Unsupported(os.Getenv("KUBEBUILDER_ASSETS")); why != "" {
				fmt.Fprintln(os.Stderr, "localcluster: --real-nodes needs", why)
				os.Exit(1)
			}
			os.Exit(realnode.Isolated("npp-run", func(dir string) ([]string, error) {
				root, err := filepath.Abs(".")
				if err != nil {
					return nil, err
				}
				fmt.Println("Building the sandbox and echo game-server images...")
				imgs, err := realnode.BuildGameImages(root, filepath.Join(dir, "images"))
				if err != nil {
					return nil, err
				}
				b, err := json.Marshal(imgs)
				return []string{envImages + "=" + string(b)}, err
			}))
		}
		reals = &realNodes{harness: h, count: *realCount}
		if err := json.Unmarshal([]byte(os.Getenv(envImages)), &reals.images); err != nil {
			fmt.Fprintln(os.Stderr, "localcluster:", envImages+":", err)
			os.Exit(1)
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *manager, *crds, *samples, *dir, *nodes, *managerLog, reals); err != nil {
		fmt.Fprintln(os.Stderr, "localcluster:", err)
		os.Exit(1)
	}
}

// envImages carries the game images (realnode.GameImages, JSON) to the run inside the
// namespace.
const envImages = "NPP_RUN_IMAGES"

// realNodes are the real nodes to start (--real-nodes), inside the harness's namespace.
type realNodes struct {
	harness *realnode.Harness
	count   int
	images  realnode.GameImages
}

// alibabaCRDs are the stand-ins for the CRDs of Alibaba's PodEIP, PodDNAT, NLB and EIP
// (relative to the repository's root, where make run runs), which the EIP, NATGW and
// AutoNLBs-V2 samples' controllers write; okgCRDs are the stand-ins for OKG's GameServerSet
// and GameServer CRDs, whose GameServerSets the AutoNLBs samples read.
const (
	alibabaCRDs = "e2e/cloudbox/testdata/crds"
	okgCRDs     = "e2e/takeover/testdata/crds"
)

func run(ctx context.Context, manager, crds, samples, dir string, nodes int, managerLog bool, reals *realNodes) error {
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
	if _, err := cluster.InstallCRDs(cp.Config, crds, alibabaCRDs, okgCRDs); err != nil {
		return err
	}
	var echo io.Writer
	if managerLog {
		echo = os.Stdout
	}
	providerConfig := filepath.Join(dir, "provider.toml")
	if err := os.WriteFile(providerConfig, []byte(localProviderConfig), 0o644); err != nil {
		return err
	}
	mgr, err := cp.StartManager(ctx, cluster.ManagerOptions{Binary: manager, Echo: echo, ProviderConfig: providerConfig})
	if err != nil {
		return err
	}
	cloud, err := startCloud(ctx, cp, filepath.Join(dir, "cloudbox.log"))
	if err != nil {
		return err
	}
	cs := kubernetes.NewForConfigOrDie(cp.Config)
	var realNames map[string]bool
	if reals != nil {
		// The box's load balancers carry packets to the real nodes' pods: kube-proxy for the
		// ELB, the box's own rules for the SLB (kube-proxy skips OKG's SLB Services).
		if err := realnode.RouteLoadBalancers(); err != nil {
			return err
		}
		if err := cloud.Forward(ctx, cp.Config); err != nil {
			return fmt.Errorf("forward the cloud in a box's listeners: %w", err)
		}
		if realNames, err = reals.start(ctx, cp, cs); err != nil {
			return err
		}
		defer reals.stop(cs)
	}
	if samples != "" {
		cmd := exec.CommandContext(ctx, "kubectl", "apply", "-f", samples)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+cp.KubeconfigPath)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("kubectl apply -f %s: %w", samples, err)
		}
	}

	withReal := ""
	try := fmt.Sprintf("export KUBECONFIG=%s; kubectl get npp -A; kubectl get pods -A -o wide", cp.KubeconfigPath)
	if reals != nil {
		withReal = fmt.Sprintf(" and %d real nodes", reals.count)
		// The API server listens in the namespace: kubectl must run there too.
		try = fmt.Sprintf("sudo nsenter --net=%s kubectl --kubeconfig %s get pods -A -o wide", realnode.NetnsPath(reals.harness.Netns), cp.KubeconfigPath)
	}
	fmt.Printf(`
Local cluster (%d fake nodes%s) and manager ready in %s: %d replicas as config/default deploys
them (ServiceAccount %s, its RBAC, the Deployment's flags), webhooks behind %s.
  kubeconfig:  %s
  try:         %s
`, nodes, withReal, time.Since(start).Round(100*time.Millisecond), len(mgr.Replicas), mgr.ServiceAccount, mgr.WebhookURL, cp.KubeconfigPath, try)
	for _, r := range mgr.Replicas {
		fmt.Printf("  %s:   %s/readyz, %s/metrics (token of %s), log %s\n",
			r.Name, r.ProbeURL, r.MetricsURL, cluster.ScraperServiceAccount, r.Process().LogPath)
	}
	fmt.Println("Ctrl-C stops everything; an exited replica is restarted. Replicas, game-server pods and their networks:")

	names := make([]string, len(mgr.Replicas))
	for i, r := range mgr.Replicas {
		names[i] = r.Name
	}
	sup := newSupervisor(time.Now(), names...)
	type startResult struct {
		i   int
		err error
	}
	restarted := make(chan startResult, len(mgr.Replicas))
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	last := ""
	for {
		select {
		case <-ctx.Done():
			fmt.Println("\nStopping the manager and the cluster...")
			return nil
		case res := <-restarted:
			r := mgr.Replicas[res.i]
			if res.err == nil {
				sup.started(res.i, time.Now())
				fmt.Printf("\n%s %s restarted and ready\n", time.Now().Format(time.TimeOnly), r.Name)
				continue
			}
			r.Kill() // whatever is left of a start that never became ready
			delay, giveUp := sup.exited(res.i, time.Now(), "not ready after a restart")
			if giveUp {
				return fmt.Errorf("manager replica %s keeps failing at start (%d times in a row): %v", r.Name, maxFailuresAtStart, res.err)
			}
			go restartAfter(ctx, res.i, r, delay, func(i int, err error) { restarted <- startResult{i, err} })
			continue
		case <-tick.C:
		}
		for i, r := range mgr.Replicas {
			if sup.replicas[i].restarting {
				continue // its Start holds the replica until it reports
			}
			p := r.Process()
			exited, err := p.Exited()
			if !exited {
				continue
			}
			r.Kill() // out of the webhook proxy's endpoints; the process is already gone
			why := "exited"
			if err != nil {
				why = err.Error()
			}
			delay, giveUp := sup.exited(i, time.Now(), why)
			if giveUp {
				return fmt.Errorf("manager replica %s keeps failing at start (%d times in a row, last: %s); see %s", r.Name, maxFailuresAtStart, why, p.LogPath)
			}
			fmt.Printf("\n%s %s exited (%s); restarting it in %s (log %s)\n", time.Now().Format(time.TimeOnly), r.Name, why, delay, p.LogPath)
			go restartAfter(ctx, i, r, delay, func(i int, err error) { restarted <- startResult{i, err} })
		}
		table, err := networkTable(ctx, cs, realNames)
		if err != nil {
			fmt.Fprintln(os.Stderr, "list pods:", err)
			continue
		}
		table = sup.table() + "\n" + table
		if table != last {
			fmt.Printf("\n%s\n%s", time.Now().Format(time.TimeOnly), table)
			last = table
		}
	}
}

// restartAfter starts replica r (index i) again after delay, unless ctx ends first, and
// reports the start's result (nil once /readyz answers) through done.
func restartAfter(ctx context.Context, i int, r *cluster.Replica, delay time.Duration, done func(int, error)) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(delay):
	}
	done(i, r.Start(ctx))
}

// networkTable renders one line per pod that carries a network type. When realNodes is not
// nil it has a REACHABLE column: for pods on those nodes with a Ready network, whether each
// external address of the network-status answers (reachable).
func networkTable(ctx context.Context, cs kubernetes.Interface, realNodes map[string]bool) (string, error) {
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
		row := []string{p.Namespace + "/" + p.Name, typ, nodeOf(&p), string(p.Status.Phase), state, external}
		if realNodes != nil {
			row = append(row, reachable(&p, realNodes))
		}
		rows = append(rows, strings.Join(append(row, retry, decision), "\t"))
	}
	sort.Strings(rows)
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	if realNodes != nil {
		fmt.Fprintln(w, "POD\tNETWORK TYPE\tNODE\tPHASE\tNETWORK\tEXTERNAL\tREACHABLE\tRETRY\tDECIDED BY")
	} else {
		fmt.Fprintln(w, "POD\tNETWORK TYPE\tNODE\tPHASE\tNETWORK\tEXTERNAL\tRETRY\tDECIDED BY")
	}
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

// addresses shows as as "<ip>:<port>" per port, and an address without ports (an EIP) as
// its IP; an address without an IP (an NLB's) by its endPoint.
func addresses(as []networkstatus.NetworkAddress) string {
	var out []string
	for _, a := range as {
		host := a.IP
		if host == "" {
			host = a.EndPoint
		}
		if len(a.Ports) == 0 && host != "" {
			out = append(out, host)
		}
		for _, port := range a.Ports {
			if port.Port != nil {
				out = append(out, fmt.Sprintf("%s:%s", host, port.Port.String()))
			}
		}
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, ",")
}

// localProviderConfig is the manager's provider configuration in `make run`: OKG's
// Kubernetes defaults, and the SLB, SLB-SharedPort, NLB-SharedPort, Multi-NLBs, AutoNLBs,
// AutoNLBs-V2, EIP, NATGW and ELB plugins (config/samples/cloud-gameservers.yaml) with OKG's repository ranges,
// TencentCloud-CLB, trusting the results of the box's tke-extend-network-controller, and
// AmazonWebServices-NLB on the box's ACK elbv2 controller and AWS Load Balancer Controller.
const localProviderConfig = `[kubernetes]
enable = true
[kubernetes.hostPort]
min_port = 8000
max_port = 9000

[alibabacloud]
enable = true
[alibabacloud.slb]
min_port = 500
max_port = 700
block_ports = [593]
[alibabacloud.nlb]
min_port = 1000
max_port = 1502
block_ports = [1025, 1434, 1068]

[hwcloud]
enable = true
[hwcloud.elb]
min_port = 500
max_port = 700

[tencentcloud]
enable = true
result_writers = ["system:serviceaccount:tke-extend-network-controller:tke-extend-network-controller"]

[aws]
enable = true
[aws.nlb]
min_port = 30001
max_port = 30050
`

// raidQuota is the listener quota of the samples' slb-raid at start, raidQuotaFor how long
// it lasts: the third raid game server waits on the cloud, retried, until the quota is raised.
// With real nodes, the echo game servers' echoQuotaLB has a quota of one listener for as
// long: the second of them waits too.
const (
	// eipQuota is how many EIPs Terway's stand-in binds until raidQuotaFor has passed.
	eipQuota     = 1
	raidLB       = "slb-raid"
	raidQuota    = 2
	raidQuotaFor = 2 * time.Minute
	echoQuotaLB  = "echo-slb-quota"
)

// startCloud runs the cloud in a box (e2e/cloudbox: Kubernetes' service controller with a
// load-balancer cloud) against cp for the SLB and ELB samples, with slb-raid's listener quota
// at raidQuota and echoQuotaLB's at 1 for raidQuotaFor, then raised. The service controller's log (klog: its Events,
// its retries) goes to logPath, not to the terminal, whose table shows what matters.
func startCloud(ctx context.Context, cp *cluster.ControlPlane, logPath string) (*cloudbox.Cloud, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	// Errors too: klog copies those at or above stderrthreshold (ERROR by default) to
	// stderr whatever its output.
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	for k, v := range map[string]string{"logtostderr": "false", "stderrthreshold": "FATAL"} {
		if err := fs.Set(k, v); err != nil {
			return nil, err
		}
	}
	klog.SetOutput(f)
	cloud := cloudbox.New(alibabacloud.AnnotationLBID, hwcloud.AnnotationELBID)
	cloud.IDLabel = alibabacloud.LabelLBID
	// AlibabaCloud-AutoNLBs' pool Services (NLB class, zone maps, no id) get NLBs of their own.
	cloud.AutoCreate = map[string]string{alibabacloud.AnnotationZoneMaps: alibabacloud.AnnotationLBID}
	cloud.SetQuota(raidLB, raidQuota)
	cloud.SetQuota(echoQuotaLB, 1)
	if err := cloudbox.Start(ctx, cp.Config, cloud, 2); err != nil {
		return nil, fmt.Errorf("start the cloud in a box: %w", err)
	}
	// Terway's and the DNAT controller's stand-ins, for the EIP and NATGW samples: one EIP
	// at first, so the second lobby game server waits.
	results := &cloudbox.AlibabaResults{}
	results.SetEIPQuota(eipQuota)
	if err := cloudbox.StartAlibabaResults(ctx, cp.Config, results); err != nil {
		return nil, fmt.Errorf("start the box's Alibaba network controllers: %w", err)
	}
	// Alibaba's EIP and NLB operators' stand-ins, for the AutoNLBs-V2 sample.
	if err := cloudbox.StartAlibabaOperators(ctx, cp.Config, &cloudbox.AlibabaOperators{}); err != nil {
		return nil, fmt.Errorf("start the box's Alibaba operators: %w", err)
	}
	// tke-extend-network-controller's stand-in, for the TencentCloud-CLB sample (brawl): the
	// port pool of its GameServerSet.
	tke := &cloudbox.TKEPortMapping{}
	tke.SetPool("game-cloud-brawl", cloudbox.TKEPool{LBID: "lb-brawl", Address: "203.0.113.80", MinPort: 30000, MaxPort: 30099})
	if err := cloudbox.StartTKEPortMapping(ctx, cp.Config, tke); err != nil {
		return nil, fmt.Errorf("start the box's tke-extend-network-controller: %w", err)
	}
	// ACK's elbv2 controller's and the AWS Load Balancer Controller's stand-ins, for the
	// AmazonWebServices-NLB sample (skirmish).
	if err := cloudbox.StartAWSELB(ctx, cp.Config, &cloudbox.AWSELB{}); err != nil {
		return nil, fmt.Errorf("start the box's AWS controllers: %w", err)
	}
	go func() {
		select {
		case <-ctx.Done():
		case <-time.After(raidQuotaFor):
			cloud.SetQuota(raidLB, 0)
			cloud.SetQuota(echoQuotaLB, 0)
			results.SetEIPQuota(0)
			fmt.Printf("\n%s the cloud in a box raised the listener quotas of %s and %s and the EIP quota: the game servers waiting on them turn Ready\n", time.Now().Format(time.TimeOnly), raidLB, echoQuotaLB)
		}
	}()
	return cloud, nil
}
