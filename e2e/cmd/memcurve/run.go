package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/okg-extensions/network-plugin-policy/e2e/cluster"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// Namespaces of the load.
const (
	nsGames = "memcurve-games"
	nsApps  = "memcurve-apps"
)

// labelLoad marks every pod of the load.
const labelLoad = "memcurve.policy.game.kruise.io/load"

// sampleEvery is the RSS sampling period.
const sampleEvery = 5 * time.Second

// row is one step's measurements.
type row struct {
	pods, games int
	// replicas is the maximum RSS of each manager replica over the sampling, bytes.
	replicas []int64
	// heap is the maximum go_memstats_heap_inuse_bytes of each replica over the sampling:
	// the live heap and the garbage not yet collected, without what the runtime holds
	// but does not use.
	heap []int64
	// cpuStep is each replica's CPU time from the previous measurement's end to this one's;
	// cpuSample its CPU time during the sampling.
	cpuStep, cpuSample []time.Duration
	// baseline is the baseline cache's maximum RSS, bytes.
	baseline int64
	// ready is how long the step's pods took from the first create to all Running.
	ready time.Duration
}

// providerConfigs are the manager's provider configurations by -providers name.
//   - slb: OKG's defaults, and the AlibabaCloud-SLB plugin with a port range of its own, so
//     that the load-balancer plugins' informers (Services, Service Events) run as they do on
//     a cloud cluster;
//   - all: every provider the manager serves enabled ([alibabacloud], [hwcloud],
//     [volcengine], [jdcloud], [tencentcloud], [aws]), so that every informer of their
//     plugins runs: Services and Service Events, Alibaba's PodEIP, PodDNAT, EIP and NLB
//     kinds, Tencent's CLBPodBinding, AWS's TargetGroup, Listener and TargetGroupBinding
//     (their CRDs from -cloud-crds installed).
//
// No pod uses them: the pods are HostPort game servers and workload pods.
var providerConfigs = map[string]string{
	"slb": `[alibabacloud]
enable = true
[alibabacloud.slb]
min_port = 500
max_port = 699
`,
	"all": `[alibabacloud]
enable = true
[alibabacloud.slb]
min_port = 500
max_port = 699
[alibabacloud.nlb]
min_port = 500
max_port = 699
[hwcloud]
enable = true
[hwcloud.elb]
min_port = 500
max_port = 699
[hwcloud.cce]
allow_elb_autocreate = true
[hwcloud.cce.elb]
min_port = 700
max_port = 799
[volcengine]
enable = true
[volcengine.clb]
min_port = 500
max_port = 699
[jdcloud]
enable = true
[jdcloud.nlb]
min_port = 500
max_port = 699
[tencentcloud]
enable = true
[aws]
enable = true
[aws.nlb]
min_port = 30001
max_port = 30050
`,
}

// run starts the cluster, the manager and the baseline, creates the steps' pods and measures.
func run(ctx context.Context, o options) error {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	begin := time.Now()
	// The revision of the manager this run builds (read now: the checkout may change while
	// it runs).
	revision := cluster.Revision(ctx)
	cp, cfg, err := cluster.StartForLoad(ctx, cluster.LoadOptions{Dir: o.dir, FakeNodes: o.nodes, CRDs: o.crds})
	if err != nil {
		return err
	}
	defer cp.Stop()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("create client: %w", err)
	}
	binary := o.manager
	if binary == "" {
		if binary, err = cluster.BuildManager(ctx, cp.Dir); err != nil {
			return err
		}
	}
	// The informers of the GameServerSet and cloud work: OKG's GameServerSet kind (the
	// guard's list), and a load-balancer plugin, whose Init lists Services and whose
	// cloud-event reading watches Service Events.
	if _, err := cluster.InstallCRDs(cp.Config, o.okgCRDs); err != nil {
		return err
	}
	// The cloud kinds' CRDs (stand-ins with the fields the plugins use), whichever
	// configuration the replicas read: installed CRDs with no plugin to read them cost the
	// manager nothing.
	if _, err := cluster.InstallCRDs(cp.Config, o.cloudCRDs); err != nil {
		return err
	}
	configPath := func(name string) (string, error) {
		path := filepath.Join(cp.Dir, "provider-"+name+".toml")
		return path, os.WriteFile(path, []byte(providerConfigs[name]), 0o644)
	}
	mopts := cluster.ManagerOptions{Binary: binary, Pprof: o.heapProfiles != ""}
	if mopts.ProviderConfig, err = configPath(o.providers); err != nil {
		return err
	}
	if len(o.variants) > 0 {
		mopts.Replicas = deployedReplicas + len(o.variants)
		mopts.ReplicaEnv = make([][]string, deployedReplicas)
		mopts.ReplicaBinary = make([]string, deployedReplicas)
		mopts.ReplicaArgs = make([][]string, deployedReplicas)
		for _, v := range o.variants {
			mopts.ReplicaEnv = append(mopts.ReplicaEnv, v.env)
			mopts.ReplicaBinary = append(mopts.ReplicaBinary, v.binary)
			var args []string
			if v.providers != "" {
				path, err := configPath(v.providers)
				if err != nil {
					return err
				}
				args = []string{"--provider-config=" + path}
			}
			mopts.ReplicaArgs = append(mopts.ReplicaArgs, args)
		}
	}
	mgr, err := cp.StartManager(ctx, mopts)
	if err != nil {
		return fmt.Errorf("start manager: %w", err)
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find this command's executable for the baseline: %w", err)
	}
	base, err := cp.AddProcess("memcurve-baseline", nil, self, "-baseline-cache", "-baseline-kubeconfig", cp.KubeconfigPath)
	if err != nil {
		return fmt.Errorf("start the baseline cache: %w", err)
	}
	for _, ns := range []string{nsGames, nsApps} {
		if err := prepareNamespace(ctx, cs, ns); err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "memcurve: cluster (%d kwok nodes), manager (%d replicas) and baseline ready in %s; logs in %s\n",
		o.nodes, len(mgr.Replicas), time.Since(begin).Round(100*time.Millisecond), cp.Dir)

	procs := func() []*cluster.Process {
		var out []*cluster.Process
		for _, r := range mgr.Replicas {
			out = append(out, r.Process())
		}
		return append(out, base)
	}
	lastCPU, err := cpuTimes(procs())
	if err != nil {
		return err
	}
	measure := func(pods, games int, ready time.Duration) (row, error) {
		if err := sleep(ctx, o.settle); err != nil {
			return row{}, err
		}
		before, err := cpuTimes(procs())
		if err != nil {
			return row{}, err
		}
		peak, heap, err := sampleRSS(ctx, procs(), o.sample, func(i int) int64 {
			if i >= len(mgr.Replicas) {
				return 0
			}
			v, err := mgr.Replicas[i].Metric(ctx, "go_memstats_heap_inuse_bytes")
			if err != nil {
				return 0
			}
			return int64(v)
		})
		if err != nil {
			return row{}, err
		}
		after, err := cpuTimes(procs())
		if err != nil {
			return row{}, err
		}
		r := row{pods: pods, games: games, replicas: peak[:len(peak)-1], heap: heap[:len(heap)-1], baseline: peak[len(peak)-1], ready: ready}
		for i := range mgr.Replicas {
			r.cpuStep = append(r.cpuStep, after[i]-lastCPU[i])
			r.cpuSample = append(r.cpuSample, after[i]-before[i])
		}
		lastCPU = after
		if o.heapProfiles != "" {
			for _, rep := range mgr.Replicas {
				if err := saveHeapProfile(ctx, rep.PprofURL, filepath.Join(o.heapProfiles, fmt.Sprintf("heap-%d-%s.pb.gz", pods, rep.Name))); err != nil {
					return row{}, err
				}
			}
		}
		fmt.Fprintf(os.Stderr, "memcurve: %d pods (%d game servers): replicas %v MB, baseline %.0f MB\n", pods, games, mbs(r.replicas), mb(r.baseline))
		return r, nil
	}
	rows := []row{}
	empty, err := measure(0, 0, 0)
	if err != nil {
		return err
	}
	rows = append(rows, empty)
	games, apps := 0, 0
	for _, total := range o.steps {
		wantGames := int(float64(total)*o.gameShare + 0.5)
		start := time.Now()
		if err := createPods(ctx, cs, o, games, wantGames, apps, total-wantGames); err != nil {
			return err
		}
		games, apps = wantGames, total-wantGames
		if err := waitRunning(ctx, cs, total); err != nil {
			return err
		}
		ready := time.Since(start)
		fmt.Fprintf(os.Stderr, "memcurve: %d pods Running (%s)\n", total, ready.Round(time.Second))
		r, err := measure(total, games, ready)
		if err != nil {
			return err
		}
		rows = append(rows, r)
	}
	names := make([]string, len(mgr.Replicas))
	for i, rep := range mgr.Replicas {
		names[i] = rep.Name
		if i >= deployedReplicas {
			v := o.variants[i-deployedReplicas]
			what := slices.Clip(v.env)
			if v.providers != "" {
				what = append(what, "providers="+v.providers)
			}
			names[i] += " (" + v.name + ": " + strings.TrimSpace(strings.Join(append(what, v.binary), " ")) + ")"
		}
	}
	var cold *coldStart
	if o.restart {
		if cold, err = restartReplica(ctx, cs, mgr, cp.Dir, rows[len(rows)-1].pods, o.sample); err != nil {
			return err
		}
	}
	text := report(o, names, rows, runtime.NumCPU(), revision, time.Since(begin))
	if cold != nil {
		text += cold.markdown()
	}
	fmt.Print(text)
	if o.out != "" {
		if err := os.WriteFile(o.out, []byte(text), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", o.out, err)
		}
	}
	return nil
}

// runBaselineCache runs a controller-runtime cache of every Pod and Node with managedFields
// stripped (the manager's pod and node caches before its transforms) until ctx ends.
func runBaselineCache(ctx context.Context, kubeconfig string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	c, err := cache.New(cfg, cache.Options{DefaultTransform: cache.TransformStripManagedFields()})
	if err != nil {
		return err
	}
	for _, obj := range []client.Object{&corev1.Pod{}, &corev1.Node{}} {
		if _, err := c.GetInformer(ctx, obj, cache.BlockUntilSynced(false)); err != nil {
			return err
		}
	}
	return c.Start(ctx)
}

// prepareNamespace creates ns and waits until its default ServiceAccount exists.
func prepareNamespace(ctx context.Context, cs kubernetes.Interface, ns string) error {
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", ns, err)
	}
	return cluster.WaitForDefaultServiceAccount(ctx, cs, ns)
}

// createPods creates game pods fromGames..toGames-1 and workload pods fromApps..toApps-1,
// o.inFlight at a time; a create that fails is tried up to 3 times, and one that still
// fails ends the run (the measurement would be of another cluster size).
func createPods(ctx context.Context, cs kubernetes.Interface, o options, fromGames, toGames, fromApps, toApps int) error {
	type job struct {
		game bool
		i    int
	}
	jobs := make(chan job)
	var failed atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for range o.inFlight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				p := workloadPod(j.i, o.nodes)
				if j.game {
					p = gamePod(j.i, o.nodes)
				}
				var err error
				for range 3 {
					if _, err = cs.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err == nil || apierrors.IsAlreadyExists(err) || ctx.Err() != nil {
						err = nil
						break
					}
					time.Sleep(200 * time.Millisecond)
				}
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Errorf("create %s/%s: %w", p.Namespace, p.Name, err))
				}
			}
		}()
	}
	// Game servers and workload pods interleave, as they arrive in a real cluster.
	g, a := fromGames, fromApps
	for g < toGames || a < toApps {
		var j job
		if g < toGames && (a >= toApps || (g-fromGames)*(toApps-fromApps) <= (a-fromApps)*(toGames-fromGames)) {
			j, g = job{game: true, i: g}, g+1
		} else {
			j, a = job{i: a}, a+1
		}
		select {
		case jobs <- j:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(jobs)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	if n := failed.Load(); n > 0 {
		return fmt.Errorf("%d creates failed, the first: %v", n, firstErr.Load())
	}
	return nil
}

// waitRunning waits until total pods exist in the load's namespaces and none of the load is
// other than Running. The Running check lists from the API server's watch cache
// (resourceVersion 0) with a field selector, so the tool receives only the pods not yet
// Running; the count is a one-item list per namespace (remainingItemCount, which a list
// without selectors carries).
func waitRunning(ctx context.Context, cs kubernetes.Interface, total int) error {
	return wait.PollUntilContextTimeout(ctx, 2*time.Second, 30*time.Minute, false, func(ctx context.Context) (bool, error) {
		list, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: labelLoad, FieldSelector: "status.phase!=Running", ResourceVersion: "0"})
		if err != nil || len(list.Items) > 0 {
			return false, nil
		}
		n := 0
		for _, ns := range []string{nsGames, nsApps} {
			page, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{Limit: 1})
			if err != nil {
				return false, nil
			}
			n += len(page.Items)
			if page.RemainingItemCount != nil {
				n += int(*page.RemainingItemCount)
			}
		}
		return n >= total, nil
	})
}

// sampleRSS samples the RSS of the processes every sampleEvery for d and returns each one's
// maximum, bytes, and the maximum of heapOf(i) for each (0 where it has none). A process that cannot be read (it exited) is an error naming its log: the
// measurement would be wrong.
func sampleRSS(ctx context.Context, procs []*cluster.Process, d time.Duration, heapOf func(i int) int64) (rss, heap []int64, err error) {
	rss, heap = make([]int64, len(procs)), make([]int64, len(procs))
	deadline := time.Now().Add(d)
	for {
		for i, p := range procs {
			u, err := cluster.ReadProc(p.Pid())
			if err != nil {
				return nil, nil, fmt.Errorf("read process %d (log %s): %w", p.Pid(), p.LogPath, err)
			}
			rss[i] = max(rss[i], u.RSSBytes)
			heap[i] = max(heap[i], heapOf(i))
		}
		if !time.Now().Before(deadline) {
			return rss, heap, nil
		}
		if err := sleep(ctx, sampleEvery); err != nil {
			return nil, nil, err
		}
	}
}

// deployedReplicas is config/default's spec.replicas: the replicas as deployed come first,
// the -variants after them.
const deployedReplicas = 2

// cpuTimes returns the CPU time (user + system) of each process.
func cpuTimes(procs []*cluster.Process) ([]time.Duration, error) {
	out := make([]time.Duration, len(procs))
	for i, p := range procs {
		u, err := cluster.ReadProc(p.Pid())
		if err != nil {
			return nil, fmt.Errorf("read process %d (log %s): %w", p.Pid(), p.LogPath, err)
		}
		out[i] = u.CPU
	}
	return out, nil
}

// sleep waits d or until ctx ends (its error).
func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// basePod is what game and workload pods share: the load label, a node (round robin), no
// grace period, and a container as a typical workload has it.
func basePod(ns, name string, i, nodes int) *corev1.Pod {
	env := make([]corev1.EnvVar, 0, 12)
	for k := range 12 {
		env = append(env, corev1.EnvVar{Name: fmt.Sprintf("SETTING_%02d", k), Value: fmt.Sprintf("value-%02d-of-a-typical-length", k)})
	}
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}},
		PeriodSeconds: 10, FailureThreshold: 3}
	res := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
			Labels:      map[string]string{labelLoad: "true", "app.kubernetes.io/name": ns, "pod-template-hash": "5d8f7c9b6d"},
			Annotations: map[string]string{}},
		Spec: corev1.PodSpec{
			NodeName:                      cluster.NodeName(i % nodes),
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []corev1.Container{{
				Name: "main", Image: "registry.example/team/service:1.24.3", Env: env, Resources: res,
				LivenessProbe: probe, ReadinessProbe: probe,
				VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/service"}, {Name: "cache", MountPath: "/var/cache/service"}},
			}, {
				Name: "sidecar", Image: "registry.example/platform/log-shipper:3.1.0", Env: env[:4], Resources: res,
			}},
			Volumes: []corev1.Volume{
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "service-config"}}}},
				{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			},
		},
	}
}

// workloadPod is workload pod i: not a game server.
func workloadPod(i, nodes int) *corev1.Pod {
	p := basePod(nsApps, fmt.Sprintf("app-%06d", i), i, nodes)
	p.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}}
	return p
}

// gamePod is game server i: Kubernetes-HostPort with ContainerPorts game:7777/UDP.
func gamePod(i, nodes int) *corev1.Pod {
	p := basePod(nsGames, fmt.Sprintf("gs-%06d", i), i, nodes)
	p.Annotations[networkstatus.AnnotationNetworkType] = "Kubernetes-HostPort"
	p.Annotations[networkstatus.AnnotationNetworkConf] = `[{"name":"ContainerPorts","value":"main:7777/UDP"}]`
	p.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "game", ContainerPort: 7777, Protocol: corev1.ProtocolUDP}}
	return p
}

// saveHeapProfile writes the heap profile served at base's /debug/pprof/heap to path.
func saveHeapProfile(ctx context.Context, base, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/debug/pprof/heap", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("heap profile: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("heap profile %s: %s", base, resp.Status)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
