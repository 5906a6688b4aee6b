package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/okg-extensions/network-plugin-policy/e2e/cloudbox"
	"github.com/okg-extensions/network-plugin-policy/e2e/cluster"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/alibabacloud"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/volcengine"
)

// phaseKind is the network of a phase's pods: none for the baseline.
type phaseKind struct{ networkType, conf string }

// phaseKinds are the phases by name; slb's conf is set from -lb-ids (slbConf).
var phaseKinds = map[string]phaseKind{
	"baseline": {},
	"nodeport": {networkType: "Kubernetes-NodePort", conf: `[{"name":"PortProtocols","value":"7777/UDP"}]`},
	"hostport": {networkType: "Kubernetes-HostPort", conf: `[{"name":"ContainerPorts","value":"game:7777/UDP"}]`},
	"slb":      {networkType: "AlibabaCloud-SLB"},
	"floor":    {},
	// eip: Volcengine-EIP asking for a new EIP (OKG's attributes), answered by the box's EIP
	// controller (cloudbox.EIPs) -cloud-latency after it sees the pod's IP.
	"eip":       {networkType: volcengine.EIPName, conf: `[]`},
	"floor-eip": {},
	// sharedport: AlibabaCloud-SLB-SharedPort on -pods/200 SLBs (sharedConf): one Service
	// per SLB, selecting its 200 game servers.
	"sharedport":       {networkType: alibabacloud.SLBSharedPortName},
	"floor-sharedport": {},
}

// phase is one run of a StatefulSet: its name in the report, its namespace, its network and,
// for a load-balancer phase, the service controller's workers (0: no cloud); eip marks an
// EIP phase (the box's EIP controller runs); floor marks a floor phase (startFloor,
// startEIPFloor).
type phase struct {
	name, namespace string
	kind            phaseKind
	syncs           int
	eip             bool
	shared          bool
	floor           bool
}

// expand returns the phases of o in order: slb and floor once per -service-syncs value.
func expand(o options) []phase {
	var out []phase
	for _, name := range o.phases {
		kind := phaseKinds[name]
		switch name {
		case "slb":
			kind.conf = slbConf(o.lbIDs)
			for _, n := range o.serviceSyncs {
				out = append(out, phase{name: fmt.Sprintf("slb (service syncs %d)", n), namespace: fmt.Sprintf("fleet-slb-%d", n), kind: kind, syncs: n})
			}
		case "floor":
			for _, n := range o.serviceSyncs {
				out = append(out, phase{name: fmt.Sprintf("floor (service syncs %d)", n), namespace: fmt.Sprintf("fleet-floor-%d", n), kind: kind, syncs: n, floor: true})
			}
		case "sharedport", "floor-sharedport":
			floor := name == "floor-sharedport"
			if !floor {
				kind.conf = sharedConf(o.pods)
			}
			for _, n := range o.serviceSyncs {
				out = append(out, phase{name: fmt.Sprintf("%s (service syncs %d)", name, n), namespace: fmt.Sprintf("fleet-%s-%d", name, n), kind: kind, syncs: n, shared: true, floor: floor})
			}
		case "eip":
			out = append(out, phase{name: name, namespace: "fleet-eip", kind: kind, eip: true})
		case "floor-eip":
			out = append(out, phase{name: "floor (eip)", namespace: "fleet-floor-eip", kind: kind, eip: true, floor: true})
		default:
			out = append(out, phase{name: name, namespace: "fleet-" + name, kind: kind})
		}
	}
	return out
}

// podTimes are one pod's first event, first Running and first network Ready, as this
// process saw them (zero when not yet), and the SLB its alibabacloud.LabelLBID label names
// (a shared-Service phase: the Service of that name serves it).
type podTimes struct {
	created, running, ready time.Time
	lb                      string
}

// tracker records podTimes from a pod watch.
type tracker struct {
	mu   sync.Mutex
	pods map[string]*podTimes
}

// observe records what pod shows at now.
func (t *tracker) observe(pod *corev1.Pod, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p, ok := t.pods[pod.Name]
	if !ok {
		p = &podTimes{created: now}
		t.pods[pod.Name] = p
	}
	if p.running.IsZero() && pod.Status.Phase == corev1.PodRunning {
		p.running = now
	}
	if p.ready.IsZero() && networkstatus.IsReady(pod) {
		p.ready = now
	}
	if id := pod.Labels[alibabacloud.LabelLBID]; id != "" {
		p.lb = id
	}
}

// counts returns how many pods were seen, are Running and have their network Ready.
func (t *tracker) counts() (seen, running, ready int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range t.pods {
		seen++
		if !p.running.IsZero() {
			running++
		}
		if !p.ready.IsZero() {
			ready++
		}
	}
	return seen, running, ready
}

// durations returns the durations to Running and to network Ready of the pods that got
// there, from each pod's CREATE (its first event) or, when from is not zero, from from (the
// scale-up).
func (t *tracker) durations(from time.Time) (running, ready []time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range t.pods {
		start := p.created
		if !from.IsZero() {
			start = from
		}
		if !p.running.IsZero() {
			running = append(running, p.running.Sub(start))
		}
		if !p.ready.IsZero() {
			ready = append(ready, p.ready.Sub(start))
		}
	}
	return running, ready
}

// stats are nearest-rank percentiles of a phase's durations.
type stats struct {
	n             int
	p50, p99, max time.Duration
}

// summarize returns the stats of ds.
func summarize(ds []time.Duration) stats {
	if len(ds) == 0 {
		return stats{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := func(q float64) time.Duration {
		i := int(q*float64(len(s))+0.999999) - 1
		return s[min(max(i, 0), len(s)-1)]
	}
	return stats{n: len(s), p50: rank(0.50), p99: rank(0.99), max: s[len(s)-1]}
}

// phaseResult is one phase's measurements.
type phaseResult struct {
	name           string
	running, ready stats
	// fromScaleUp are the same from the StatefulSet's create, which the pods' CREATEs
	// (admission included) follow: what players wait after a scale-up.
	runningFromScaleUp, readyFromScaleUp stats
	pods                                 int
	took                                 time.Duration
	// lb is set for a load-balancer phase.
	lb *lbResult
	// waits are the network controller's ready-queue waits during the phase, by lane.
	waits map[string]laneWait
	// calls are the manager's API calls and admission requests during the phase.
	calls apiCalls
	// audit are the phase's requests as the API server's audit log has them (-audit).
	audit *auditCounts
}

// run starts the cluster and the manager and runs the phases.
func run(ctx context.Context, o options) error {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	begin := time.Now()
	// The revision of the manager this run builds (read now: the checkout may change while
	// it runs).
	revision := cluster.Revision(ctx)
	lo := cluster.LoadOptions{Dir: o.dir, FakeNodes: o.nodes, CRDs: o.crds}
	var auditLog string
	if o.audit {
		// Under -dir the log is kept with the cluster's; otherwise it is removed at the end
		// (about 60 MB a run of 1,000 game servers), once the report holds what it was read for.
		dir, err := filepath.Abs(filepath.Join(o.dir, "audit"))
		if err != nil {
			return err
		}
		if o.dir == "" {
			tmp, err := os.MkdirTemp("", "fleetload-audit-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(tmp)
			dir = tmp
		} else if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if lo.APIServerFlags, auditLog, err = auditFlags(dir); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "fleetload: the API server's audit log is %s\n", auditLog)
	}
	cp, cfg, err := cluster.StartForLoad(ctx, lo)
	if err != nil {
		return err
	}
	defer cp.Stop()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("create client: %w", err)
	}
	binary, err := cluster.BuildManager(ctx, cp.Dir)
	if err != nil {
		return err
	}
	phases := expand(o)
	mo := cluster.ManagerOptions{Binary: binary, Args: o.managerArgs, Pprof: o.pprof}
	if slices.ContainsFunc(phases, func(p phase) bool { return p.syncs > 0 || p.eip }) {
		mo.ProviderConfig = filepath.Join(cp.Dir, "provider.toml")
		config := providerConfig
		if slices.ContainsFunc(phases, func(p phase) bool { return p.eip }) {
			config += eipProviderConfig
		}
		if err := os.WriteFile(mo.ProviderConfig, []byte(config), 0o644); err != nil {
			return err
		}
		if err := logCloudTo(filepath.Join(cp.Dir, "cloudbox.log")); err != nil {
			return fmt.Errorf("the cloud's log: %w", err)
		}
	}
	mgr, err := cp.StartManager(ctx, mo)
	if err != nil {
		return fmt.Errorf("start manager: %w", err)
	}
	fmt.Fprintf(os.Stderr, "fleetload: cluster (%d kwok nodes) and manager (%d replicas) ready in %s; logs in %s\n",
		o.nodes, len(mgr.Replicas), time.Since(begin).Round(100*time.Millisecond), cp.Dir)
	for _, r := range mgr.Replicas {
		if r.PprofURL != "" {
			fmt.Fprintf(os.Stderr, "fleetload: %s pprof at %s/debug/pprof/\n", r.Name, r.PprofURL)
		}
	}
	var results []phaseResult
	for _, p := range phases {
		before, err := scrapeQueueWaits(ctx, mgr)
		if err != nil {
			return fmt.Errorf("phase %s: the queue's metrics: %w", p.name, err)
		}
		callsBefore, err := scrapeAPICalls(ctx, mgr)
		if err != nil {
			return fmt.Errorf("phase %s: the API call metrics: %w", p.name, err)
		}
		from := time.Now()
		r, err := runPhase(ctx, cs, cfg, o, p)
		if err != nil {
			return fmt.Errorf("phase %s: %w", p.name, err)
		}
		if auditLog != "" {
			to := time.Now()
			time.Sleep(2 * time.Second) // the log's batches written
			counts, err := readAudit(auditLog, mgr.ServiceAccount, from, to)
			if err != nil {
				return fmt.Errorf("phase %s: the audit log: %w", p.name, err)
			}
			r.audit = &counts
		}
		after, err := scrapeQueueWaits(ctx, mgr)
		if err != nil {
			return fmt.Errorf("phase %s: the queue's metrics: %w", p.name, err)
		}
		r.waits = after.since(before)
		callsAfter, err := scrapeAPICalls(ctx, mgr)
		if err != nil {
			return fmt.Errorf("phase %s: the API call metrics: %w", p.name, err)
		}
		r.calls = callsAfter.since(callsBefore)
		results = append(results, r)
	}
	text := report(o, results, runtime.NumCPU(), revision, time.Since(begin))
	fmt.Print(text)
	if o.out != "" {
		if err := os.WriteFile(o.out, []byte(text), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", o.out, err)
		}
	}
	return nil
}

// runPhase creates the phase's namespace and StatefulSet, waits until every pod runs (and
// for a game-server phase has its network Ready) or o.phaseTimeout, then deletes the
// StatefulSet and waits until its pods are gone. A load-balancer phase first starts the box's
// cloud (Kubernetes' service controller with p.syncs workers, o.cloudLatency per call),
// records each Service's first ingress too, and at the end takes the latency away and waits
// until the Services are gone before it stops the cloud.
func runPhase(ctx context.Context, cs kubernetes.Interface, cfg *rest.Config, o options, p phase) (phaseResult, error) {
	ns, name := p.namespace, p.name
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return phaseResult{}, err
	}
	if err := cluster.WaitForDefaultServiceAccount(ctx, cs, ns); err != nil {
		return phaseResult{}, err
	}
	tr := &tracker{pods: map[string]*podTimes{}}
	lbs := &lbTimes{ingress: map[string]time.Time{}}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	inf := factory.Core().V1().Pods().Informer()
	observe := func(pod *corev1.Pod, now time.Time) {
		tr.observe(pod, now)
		if p.eip {
			lbs.observeAnswer(pod, now)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { observe(obj.(*corev1.Pod), time.Now()) },
		UpdateFunc: func(_, obj any) { observe(obj.(*corev1.Pod), time.Now()) },
	}); err != nil {
		return phaseResult{}, err
	}
	var cloud *cloudbox.Cloud
	if p.syncs > 0 {
		if _, err := factory.Core().V1().Services().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { lbs.observe(obj.(*corev1.Service), time.Now()) },
			UpdateFunc: func(_, obj any) { lbs.observe(obj.(*corev1.Service), time.Now()) },
		}); err != nil {
			return phaseResult{}, err
		}
		cloudCtx, stopCloud := context.WithCancel(ctx)
		defer stopCloud()
		cloud = cloudbox.New(alibabacloud.AnnotationLBID)
		cloud.IDLabel = alibabacloud.LabelLBID
		cloud.SetDelay(o.cloudLatency)
		if err := cloudbox.Start(cloudCtx, cfg, cloud, p.syncs); err != nil {
			return phaseResult{}, fmt.Errorf("start the cloud in a box: %w", err)
		}
		switch {
		case p.floor && p.shared:
			if err := startSharedFloor(cloudCtx, cs, factory); err != nil {
				return phaseResult{}, fmt.Errorf("start the floor watcher: %w", err)
			}
		case p.floor:
			if err := startFloor(cloudCtx, cs, factory); err != nil {
				return phaseResult{}, fmt.Errorf("start the floor watcher: %w", err)
			}
		}
	}
	var eips *cloudbox.EIPs
	if p.eip {
		eipCtx, stopEIPs := context.WithCancel(ctx)
		defer stopEIPs()
		eips = &cloudbox.EIPs{}
		eips.SetDelay(o.cloudLatency)
		if err := cloudbox.StartEIPs(eipCtx, cfg, eips); err != nil {
			return phaseResult{}, fmt.Errorf("start the box's EIP controller: %w", err)
		}
		if p.floor {
			if err := startEIPFloor(eipCtx, cs, factory); err != nil {
				return phaseResult{}, fmt.Errorf("start the floor watcher: %w", err)
			}
		}
	}
	stop := make(chan struct{})
	defer close(stop)
	factory.Start(stop)
	factory.WaitForCacheSync(stop)

	kind := p.kind
	start := time.Now()
	sts := statefulSet(ns, o.pods, kind)
	if p.eip && p.floor {
		// The pods ask the box's EIP controller for an EIP themselves, as Volcengine-EIP's
		// CREATE would have them ask.
		sts.Spec.Template.Annotations[volcengine.AnnotationEIPAllocate] = `{"type": "Elastic"}`
	}
	if _, err := cs.AppsV1().StatefulSets(ns).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
		return phaseResult{}, fmt.Errorf("create StatefulSet: %w", err)
	}
	game := kind.networkType != "" || p.floor
	err := wait.PollUntilContextTimeout(ctx, time.Second, o.phaseTimeout, false, func(context.Context) (bool, error) {
		seen, running, ready := tr.counts()
		lbs.mu.Lock()
		ingress := len(lbs.ingress)
		lbs.mu.Unlock()
		fmt.Fprintf(os.Stderr, "fleetload: %s t=%s seen %d running %d ingress %d network Ready %d\n", name, time.Since(start).Round(time.Second), seen, running, ingress, ready)
		return running >= o.pods && (!game || ready >= o.pods), nil
	})
	if err != nil && ctx.Err() != nil {
		return phaseResult{}, ctx.Err()
	}
	took := time.Since(start)
	running, ready := tr.durations(time.Time{})
	runningSU, readySU := tr.durations(start)
	res := phaseResult{name: name, running: summarize(running), ready: summarize(ready),
		runningFromScaleUp: summarize(runningSU), readyFromScaleUp: summarize(readySU), pods: o.pods, took: took}
	if cloud != nil || eips != nil {
		in, after, okg := measureLB(tr, lbs, p.shared)
		res.lb = &lbResult{latency: o.cloudLatency, ingress: summarize(in), readyAfterIngress: summarize(after), okg: summarize(okg)}
	}
	if cloud != nil {
		cloud.SetDelay(0) // the clean-up is not measured
	}

	if err := cs.AppsV1().StatefulSets(ns).Delete(ctx, "fleet", metav1.DeleteOptions{}); err != nil {
		return res, fmt.Errorf("delete StatefulSet: %w", err)
	}
	if err := cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{}); err != nil {
		return res, fmt.Errorf("delete pods: %w", err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 2*time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil && len(pods.Items) == 0, nil
	}); err != nil {
		return res, fmt.Errorf("pods of %s not gone: %w", ns, err)
	}
	if p.shared {
		// A shared Service has no owner (OKG's neither): deleted here, as a GameServerSet's
		// deletion would.
		svcs, err := cs.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return res, fmt.Errorf("list the Services of %s: %w", ns, err)
		}
		for _, svc := range svcs.Items {
			if err := cs.CoreV1().Services(ns).Delete(ctx, svc.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return res, fmt.Errorf("delete Service %s/%s: %w", ns, svc.Name, err)
			}
		}
	}
	if cloud != nil {
		// The garbage collector deletes the pods' Services, the service controller removes
		// their listeners and its finalizer: the next phase finds the SLBs' ports free.
		if err := wait.PollUntilContextTimeout(ctx, 2*time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
			svcs, err := cs.CoreV1().Services(ns).List(ctx, metav1.ListOptions{Limit: 1})
			return err == nil && len(svcs.Items) == 0, nil
		}); err != nil {
			return res, fmt.Errorf("the Services of %s not gone: %w", ns, err)
		}
	}
	return res, nil
}

// statefulSet is the phase's StatefulSet "fleet": n replicas created in parallel, one game
// container with port 7777/UDP, the network type and conf of kind, no grace period.
func statefulSet(ns string, n int, kind phaseKind) *appsv1.StatefulSet {
	labels := map[string]string{"app": "fleet", "game.kruise.io/owner-gss": "fleet"}
	annotations := map[string]string{}
	if kind.networkType != "" {
		annotations[networkstatus.AnnotationNetworkType] = kind.networkType
		annotations[networkstatus.AnnotationNetworkConf] = kind.conf
	}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "fleet", Namespace: ns},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To(int32(n)),
			PodManagementPolicy: appsv1.ParallelPodManagement,
			ServiceName:         "fleet",
			Selector:            &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: annotations},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To[int64](0),
					Containers: []corev1.Container{{
						Name: "game", Image: "game-server:1.0",
						Ports: []corev1.ContainerPort{{Name: "game", ContainerPort: 7777, Protocol: corev1.ProtocolUDP}},
					}},
				},
			},
		},
	}
}
