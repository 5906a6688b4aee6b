package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	policyv1alpha1 "github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
	"github.com/okg-extensions/network-plugin-policy/e2e/cluster"
	policyclient "github.com/okg-extensions/network-plugin-policy/pkg/client/clientset/versioned"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// Namespaces of the load: big holds -pods-big pods, small -pods-small, ready the -ready-pods
// game servers whose network works.
const (
	nsBig   = "retryscale-big"
	nsSmall = "retryscale-small"
	nsReady = "retryscale-ready"
)

// Labels and network of the load's pods.
const (
	// labelApp selects the load's pods (the tracker's watch).
	labelApp   = "app"
	appValue   = "retryscale"
	nodePortTy = "Kubernetes-NodePort"
	nodePortCf = `[{"name":"PortProtocols","value":"7777/UDP"}]`
	readyValue = "retryscale-ready"
	hostPortTy = "Kubernetes-HostPort"
	hostPortCf = `[{"name":"ContainerPorts","value":"game:7777/UDP"}]`
	// policyName is the root policy that makes Kubernetes-NodePort Asynchronous.
	policyName = "retryscale-nodeport"
)

// Retry schedule of the policy, as the measurement: 5s doubling up to 30s.
const (
	retryInterval    = 5 * time.Second
	retryMaxInterval = 30 * time.Second
	// minRetryInterval is the Deployment's --min-retry-interval, the controller's floor.
	minRetryInterval = time.Second
)

// podsPerNode is the pods one kwok node of e2e/cluster takes (its capacity is 110); nodes
// are sized with headroom.
const podsPerNode = 100

// options are the command's flags.
type options struct {
	// podsBig and podsSmall are the pods of the two namespaces.
	podsBig, podsSmall int
	// nodes is the number of kwok nodes; 0 means enough for every pod.
	nodes int
	// inFlight is the number of pod creates in flight.
	inFlight int
	// duration is how long to sample once every pod is created; sample the sampling period;
	// reportEvery the spacing of the rows of the report's time table.
	duration, sample, reportEvery time.Duration
	// window is the policy's retry window; it must outlast the run.
	window time.Duration
	// timeout bounds the whole run.
	timeout time.Duration
	// out is an optional file the report is also written to.
	out string
	// dir is the cluster's working directory; empty means a temporary one.
	dir string
	// crds is the directory of the CRD YAML files.
	crds string
	// manager is the manager binary; empty builds ./cmd/manager into the working directory.
	manager string
	// managerArgs are further manager flags, after the Deployment's.
	managerArgs []string
	// command is the command line as run, for the report.
	command string
	// readyPods are game servers whose network becomes Ready (Kubernetes-HostPort), in
	// nsReady, created before the others: the rest of a fleet around the retrying pods.
	readyPods int
	// killLeaderAfter, when positive, SIGKILLs the leader that long after the creates
	// (runFailover); failoverWindow is how long the failover is sampled every second.
	killLeaderAfter, failoverWindow time.Duration
}

// validate checks the flags: positive counts and periods, a window longer than the
// sampling plus set-up so that no pod's window closes during the run.
func (o options) validate() error {
	switch {
	case o.podsBig <= 0 || o.podsSmall <= 0:
		return fmt.Errorf("-pods-big and -pods-small must be positive, got %d and %d", o.podsBig, o.podsSmall)
	case o.inFlight <= 0:
		return fmt.Errorf("-in-flight must be positive, got %d", o.inFlight)
	case o.duration <= 0 || o.sample <= 0 || o.reportEvery <= 0:
		return fmt.Errorf("-duration, -sample and -report-every must be positive")
	case o.window < o.duration+30*time.Minute:
		return fmt.Errorf("-window %s must be at least -duration + 30m (%s): no pod's window may close during the run", o.window, o.duration+30*time.Minute)
	case o.nodes < 0:
		return fmt.Errorf("-nodes must not be negative, got %d", o.nodes)
	case o.nodes > 0 && o.nodes*110 < o.podsBig+o.podsSmall+o.readyPods:
		return fmt.Errorf("-nodes %d hold %d pods, fewer than the %d of the run", o.nodes, o.nodes*110, o.podsBig+o.podsSmall+o.readyPods)
	case o.readyPods < 0:
		return fmt.Errorf("-ready-pods must not be negative, got %d", o.readyPods)
	case o.killLeaderAfter < 0 || (o.killLeaderAfter > 0 && o.killLeaderAfter+rateWindow+o.failoverWindow > o.duration):
		return fmt.Errorf("-kill-leader-after %s plus %s to measure the rate before and -failover-window %s must fit in -duration %s", o.killLeaderAfter, rateWindow, o.failoverWindow, o.duration)
	}
	return nil
}

// run starts the cluster and the manager, creates the namespaces, quotas, the policy and
// the pods, samples for o.duration and prints the report; the cluster is stopped whatever
// happens.
func run(ctx context.Context, o options) error {
	if err := o.validate(); err != nil {
		return err
	}
	if o.nodes == 0 {
		o.nodes = (o.podsBig + o.podsSmall + o.readyPods + podsPerNode - 1) / podsPerNode
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	begin := time.Now()
	rep := &report{
		Command: o.command, Date: begin.UTC().Format(time.RFC3339), CPUs: runtime.NumCPU(),
		GoVersion: runtime.Version(), Revision: cluster.Revision(ctx), PodsBig: o.podsBig, PodsSmall: o.podsSmall, ReadyPods: o.readyPods,
		Nodes: o.nodes, InFlight: o.inFlight, Window: o.window, Duration: o.duration, Sample: o.sample, ReportEvery: o.reportEvery,
		LoadAverageStart: cluster.LoadAverage(),
	}
	cp, cfg, err := cluster.StartForLoad(ctx, cluster.LoadOptions{Dir: o.dir, FakeNodes: o.nodes, CRDs: o.crds})
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
	if o.manager == "" {
		if o.manager, err = cluster.BuildManager(ctx, cp.Dir); err != nil {
			return err
		}
	}
	mgr, err := cp.StartManager(ctx, cluster.ManagerOptions{Binary: o.manager, Args: o.managerArgs})
	if err != nil {
		return fmt.Errorf("start manager: %w", err)
	}
	rep.Replicas = len(mgr.Replicas)
	rep.ManagerArgs = strings.Join(append(mgr.Deployment.Container().Args, o.managerArgs...), " ")
	for _, ns := range []string{nsReady, nsBig, nsSmall} {
		if err := prepareNamespace(ctx, cs, ns); err != nil {
			return err
		}
	}
	if err := createPolicy(ctx, pcs, mgr, o.window); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "retryscale: cluster (%d kwok nodes), manager (%d replicas), namespaces and policy ready in %s; logs in %s\n",
		o.nodes, len(mgr.Replicas), time.Since(begin).Round(100*time.Millisecond), cp.Dir)

	tr := newTracker(minRetryInterval)
	stopWatch, err := watchPods(ctx, cs, tr)
	if err != nil {
		return err
	}
	defer stopWatch()

	createStart := time.Now()
	created, failed := createPods(ctx, cs, o)
	rep.CreateSeconds = time.Since(createStart).Seconds()
	rep.Created, rep.CreateErrors = created, failed
	fmt.Fprintf(os.Stderr, "retryscale: %d pods created (%d failed) in %s\n", created, failed, time.Since(createStart).Round(100*time.Millisecond))
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("interrupted during the creates: %w", err)
	}

	failover := make(chan error, 1)
	if o.killLeaderAfter > 0 {
		go func() {
			select {
			case <-ctx.Done():
				failover <- ctx.Err()
				return
			case <-time.After(time.Until(createStart.Add(o.killLeaderAfter))):
			}
			f, err := runFailover(ctx, mgr, tr, o.failoverWindow, createStart)
			rep.Failover = f
			failover <- err
		}()
	} else {
		failover <- nil
	}
	if err := sampleLoop(ctx, cs, mgr, tr, o, rep, createStart); err != nil {
		return err
	}
	if err := <-failover; err != nil {
		return fmt.Errorf("failover: %w", err)
	}
	ev, err := countEvents(ctx, cs, []string{nsBig, nsSmall})
	if err != nil {
		return err
	}
	rep.Events = ev
	rep.tracker, rep.start = tr, createStart
	rep.Final = tr.summary(retryInterval)
	rep.SmallFirst = tr.firstRetries(nsSmall)
	rep.BigFirst = tr.firstRetries(nsBig)
	rep.LoadAverageEnd = cluster.LoadAverage()
	rep.TotalSeconds = time.Since(begin).Seconds()

	text := rep.markdown()
	fmt.Print(text)
	if o.out != "" {
		if err := os.WriteFile(o.out, []byte(text), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", o.out, err)
		}
		fmt.Fprintf(os.Stderr, "retryscale: report written to %s\n", o.out)
	}
	return nil
}

// prepareNamespace creates namespace ns with a ResourceQuota of services.nodeports 0, waits
// until the quota's status holds it (the quota admission plugin enforces only a quota with
// status) and until the default ServiceAccount exists (pods are rejected before).
func prepareNamespace(ctx context.Context, cs kubernetes.Interface, ns string) error {
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", ns, err)
	}
	q := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "no-nodeports", Namespace: ns},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceServicesNodePorts: resource.MustParse("0")}},
	}
	if _, err := cs.CoreV1().ResourceQuotas(ns).Create(ctx, q, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create the ResourceQuota of %s: %w", ns, err)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err := wait.PollUntilContextCancel(wctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		got, err := cs.CoreV1().ResourceQuotas(ns).Get(ctx, q.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		if _, ok := got.Status.Hard[corev1.ResourceServicesNodePorts]; !ok {
			return false, nil
		}
		_, err = cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("namespace %s: quota status or default ServiceAccount not there within a minute: %w", ns, err)
	}
	return nil
}

// createPolicy creates the root policy that makes Kubernetes-NodePort Asynchronous with the
// retry schedule 5s..30s in window, and waits until every replica's store accepted it.
func createPolicy(ctx context.Context, pcs policyclient.Interface, mgr *cluster.Manager, window time.Duration) error {
	p := &policyv1alpha1.NetworkPluginPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: policyName, Namespace: mgr.Namespace},
		Spec: policyv1alpha1.NetworkPluginPolicySpec{
			Plugins:     []string{nodePortTy},
			FailureMode: ptr.To(policyv1alpha1.FailureModeAsynchronous),
			Retry: &policyv1alpha1.RetryPolicy{
				Window:          &metav1.Duration{Duration: window},
				Interval:        &metav1.Duration{Duration: retryInterval},
				MaxInterval:     &metav1.Duration{Duration: retryMaxInterval},
				ExhaustedAction: ptr.To(policyv1alpha1.ExhaustedActionEvent),
			},
		},
	}
	if _, err := pcs.PolicyV1alpha1().NetworkPluginPolicies(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create NetworkPluginPolicy %s/%s: %w", p.Namespace, p.Name, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	err := wait.PollUntilContextCancel(wctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		for _, r := range mgr.Replicas {
			n, err := r.Metric(ctx, "npp_policies", `reason="Accepted"`)
			if err != nil || n < 1 {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("policy %s/%s not accepted by every replica within 2 minutes: %w", p.Namespace, p.Name, err)
	}
	return nil
}

// watchPods starts a pod informer on the load's pods that feeds every version to tr, and
// waits for its first sync; the returned function stops it.
func watchPods(ctx context.Context, cs kubernetes.Interface, tr *tracker) (func(), error) {
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = labels.Set{labelApp: appValue}.String()
	}))
	inf := f.Core().V1().Pods().Informer()
	observe := func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok {
			tr.observe(p, time.Now())
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    observe,
		UpdateFunc: func(_, obj any) { observe(obj) },
	}); err != nil {
		return nil, fmt.Errorf("pod informer: %w", err)
	}
	stop := make(chan struct{})
	f.Start(stop)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		close(stop)
		return nil, errors.New("pod informer did not sync")
	}
	return func() { close(stop); f.Shutdown() }, nil
}

// pod returns pod i of namespace ns: network-type Kubernetes-NodePort, network-conf
// PortProtocols 7777/UDP, one container with port 7777/UDP, no grace period. In nsReady the
// network is Kubernetes-HostPort (ContainerPorts game:7777/UDP), which works, and the label
// app is readyValue, so the tracker does not follow them.
func pod(ns string, i int) *corev1.Pod {
	if ns == nsReady {
		p := pod(nsBig, i)
		p.Namespace, p.Labels[labelApp] = ns, readyValue
		p.Annotations[networkstatus.AnnotationNetworkType] = hostPortTy
		p.Annotations[networkstatus.AnnotationNetworkConf] = hostPortCf
		return p
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("game-%05d", i), Namespace: ns,
			Labels: map[string]string{labelApp: appValue},
			Annotations: map[string]string{
				networkstatus.AnnotationNetworkType: nodePortTy,
				networkstatus.AnnotationNetworkConf: nodePortCf,
			},
		},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []corev1.Container{{
				Name: "game", Image: "game-server:1.0",
				Ports: []corev1.ContainerPort{{Name: "game", ContainerPort: 7777, Protocol: corev1.ProtocolUDP}},
			}},
		},
	}
}

// createPods creates the ready namespace's pods, the big namespace's, then the small namespace's, o.inFlight at a
// time in that order; a create that fails is tried up to 3 times. It returns the pods
// created and those that failed.
func createPods(ctx context.Context, cs kubernetes.Interface, o options) (created, failed int) {
	type job struct {
		ns string
		i  int
	}
	jobs := make(chan job)
	var ok, bad atomic.Int64
	var wg sync.WaitGroup
	for range o.inFlight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				var err error
				for range 3 {
					if _, err = cs.CoreV1().Pods(j.ns).Create(ctx, pod(j.ns, j.i), metav1.CreateOptions{}); err == nil || apierrors.IsAlreadyExists(err) || ctx.Err() != nil {
						break
					}
					time.Sleep(200 * time.Millisecond)
				}
				if err != nil && !apierrors.IsAlreadyExists(err) {
					bad.Add(1)
					if bad.Load() <= 5 {
						fmt.Fprintf(os.Stderr, "retryscale: create %s/%s: %v\n", j.ns, pod(j.ns, j.i).Name, err)
					}
					continue
				}
				ok.Add(1)
			}
		}()
	}
	send := func(ns string, n int) {
		for i := range n {
			select {
			case jobs <- job{ns, i}:
			case <-ctx.Done():
				return
			}
		}
	}
	send(nsReady, o.readyPods)
	send(nsBig, o.podsBig)
	send(nsSmall, o.podsSmall)
	close(jobs)
	wg.Wait()
	return int(ok.Load()), int(bad.Load())
}
