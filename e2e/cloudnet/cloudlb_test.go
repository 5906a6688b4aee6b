package cloudnet

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/okg-extensions/network-plugin-policy/e2e/cloudbox"
	"github.com/okg-extensions/network-plugin-policy/pkg/okgguard"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/alibabacloud"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/hwcloud"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/jdcloud"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/kubernetes"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/lb"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/volcengine"
)

// The load-balancer tables of the suite's provider configuration: every cloud provider this
// manager has plugins of is enabled ([tencentcloud] trusting the results of the box's
// tke-extend-network-controller, cloudbox.TKEControllerUser). SLB, NLB, ELB and CLB hand out 500-510 (CLB without 510);
// JdCloud-NLB 700-702 (max_port excluded), three listeners per load balancer, for the
// exhaustion tests; AmazonWebServices-NLB 30001-30003 (awsPorts).
const cloudProviderConfig = `
[alibabacloud]
enable = true
[alibabacloud.slb]
min_port = 500
max_port = 510
[alibabacloud.nlb]
min_port = 500
max_port = 510
[hwcloud]
enable = true
[hwcloud.elb]
min_port = 500
max_port = 510
[hwcloud.cce]
allow_elb_autocreate = true
[hwcloud.cce.elb]
min_port = 520
max_port = 530
block_ports = [521]
[volcengine]
enable = true
[volcengine.clb]
min_port = 500
max_port = 510
[jdcloud]
enable = true
[jdcloud.nlb]
min_port = 700
max_port = 703
[tencentcloud]
enable = true
result_writers = ["system:serviceaccount:tke-extend-network-controller:tke-extend-network-controller"]
[aws]
enable = true
[aws.nlb]
min_port = 30001
max_port = 30003
`

// jdcloudPorts is how many listeners a JdCloud NLB of the suite has room for.
const jdcloudPorts = 3

var (
	// cloud is the box's cloud: Kubernetes' service controller in the test process with a
	// load-balancer cloud that fails on demand (e2e/cloudbox), standing in for every
	// provider's cloud controller. startCloud starts it once.
	cloud     *cloudbox.Cloud
	cloudOnce sync.Once
)

// startCloud starts the box's cloud against the suite's cluster, once, for the rest of the
// run, with two service controller workers.
func startCloud(t *testing.T) *cloudbox.Cloud {
	t.Helper()
	cloudOnce.Do(func() {
		c := cloudbox.New(alibabacloud.AnnotationLBID, hwcloud.AnnotationELBID, volcengine.AnnotationCLBID, jdcloud.AnnotationNLBID)
		c.IDLabel = alibabacloud.LabelLBID
		// An Alibaba NLB-class Service with zone maps and no id (AlibabaCloud-AutoNLBs' pools)
		// asks the cloud for an NLB of its own; the box writes its id back as an annotation.
		c.AutoCreate = map[string]string{hwcloud.AnnotationELBAutoCreate: hwcloud.AnnotationELBID, alibabacloud.AnnotationZoneMaps: alibabacloud.AnnotationLBID}
		if err := cloudbox.Start(context.Background(), cp.Config, c, 2); err != nil {
			t.Fatalf("start the box's cloud: %v", err)
		}
		cloud = c
	})
	if cloud == nil {
		t.Fatal("the box's cloud did not start")
	}
	return cloud
}

// lbServer is a pod template of one load-balancer game server: network type, its LB-id
// parameter naming ids, and a UDP port.
func lbServer(app, networkType, idsParam, ids string) corev1.PodTemplateSpec {
	return gamePodTemplate(app, networkType, fmt.Sprintf(`[{"name":%q,"value":%q},{"name":"PortProtocols","value":"7777/UDP"}]`, idsParam, ids))
}

// externalAddress returns the first external address of a Ready network-status.
func externalAddress(p *corev1.Pod) (string, bool) {
	st, err := networkstatus.StatusFromPod(p)
	if err != nil || st == nil || st.CurrentNetworkState != networkstatus.NetworkReady || len(st.ExternalAddresses) == 0 {
		return "", false
	}
	return st.ExternalAddresses[0].IP, st.ExternalAddresses[0].IP != ""
}

// TestLoadBalancerPluginsReady: each of the six load-balancer plugins, served by the
// manager as deployed, gives a game server a Service on the load balancer its network-conf
// names; the box's cloud (Kubernetes' own service controller) gives the Service that load
// balancer's address; the network turns Ready with that address. HwCloud-CCE-ELB's
// auto-create mode too: the box creates the Service's own ELB, writes its id back as CCE
// does, and the network is Ready at its address on the first port of the range.
func TestLoadBalancerPluginsReady(t *testing.T) {
	c := startCloud(t)
	ns := newNamespace(t, "cloud-ready", nil)
	types := []struct{ app, networkType, param, lb string }{
		{"slb", alibabacloud.SLBName, alibabacloud.ParamSLBIDs, "ready-slb"},
		{"nlb", alibabacloud.NLBName, alibabacloud.ParamNLBIDs, "ready-nlb"},
		{"elb", hwcloud.ELBName, hwcloud.ParamELBIDs, "ready-elb"},
		{"clb", volcengine.CLBName, volcengine.ParamCLBIDs, "ready-clb"},
		{"jdnlb", jdcloud.NLBName, jdcloud.ParamNLBIDs, "ready-jdnlb"},
		{"cceelb", hwcloud.CCEELBName, hwcloud.AnnotationELBID, "ready-cce"},
	}
	for _, tc := range types {
		createStatefulSet(t, ns, tc.app, 1, lbServer(tc.app, tc.networkType, tc.param, tc.lb))
	}
	createStatefulSet(t, ns, "cceauto", 1, gamePodTemplate("cceauto", hwcloud.CCEELBName,
		`[{"name":"kubernetes.io/elb.autocreate","value":"{\"type\":\"public\"}"},{"name":"PortProtocols","value":"7777/UDP"}]`))
	types = append(types, struct{ app, networkType, param, lb string }{"cceauto", hwcloud.CCEELBName, "", "auto-" + ns + "-cceauto-0"})
	for _, tc := range types {
		eventually(t, 90*time.Second, tc.networkType+" network Ready at its load balancer's address", func(ctx context.Context) (bool, error) {
			pods, err := listPods(ctx, ns, tc.app)
			if err != nil || len(pods) != 1 {
				return false, err
			}
			ip, ok := externalAddress(&pods[0])
			if !ok {
				svc, err := cs.CoreV1().Services(ns).Get(ctx, pods[0].Name, metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				return false, fmt.Errorf("%s: network %s; Service annotations %v, ports %v, ingress %v", pods[0].Name, pods[0].Annotations[networkstatus.AnnotationNetworkStatus],
					svc.Annotations, svc.Spec.Ports, svc.Status.LoadBalancer.Ingress)
			}
			if ip != c.Address(tc.lb) {
				return false, fmt.Errorf("%s: external address %s, want %s's %s", pods[0].Name, ip, tc.lb, c.Address(tc.lb))
			}
			if tc.app == "cceauto" {
				svc, err := cs.CoreV1().Services(ns).Get(ctx, pods[0].Name, metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				if svc.Annotations[hwcloud.AnnotationELBID] != tc.lb || svc.Spec.Ports[0].Port != 520 {
					return false, fmt.Errorf("auto-created: Service id %q port %d, want %s on 520", svc.Annotations[hwcloud.AnnotationELBID], svc.Spec.Ports[0].Port, tc.lb)
				}
			}
			return true, nil
		})
	}
}

// lbPorts returns the listener ports of the Services of ns (metav1.NamespaceAll: of every
// namespace) on load balancer id (read from the annotation key), by Service name (by
// "<namespace>/<name>" across namespaces).
func lbPorts(ctx context.Context, ns, key, id string) (map[string][]int32, error) {
	svcs, err := cs.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string][]int32{}
	for _, s := range svcs.Items {
		if s.Annotations[key] != id {
			continue
		}
		name := s.Name
		if ns == metav1.NamespaceAll {
			name = s.Namespace + "/" + s.Name
		}
		for _, p := range s.Spec.Ports {
			out[name] = append(out[name], p.Port)
		}
	}
	return out, nil
}

// noPortTwice fails the test when a listener port of load balancer id (annotation key) is on
// two Services, of any namespace (ns names the test's own, for the messages): a load
// balancer is shared by every namespace that names it.
func noPortTwice(t *testing.T, ns, key, id string) {
	t.Helper()
	byNS, err := lbPorts(context.Background(), metav1.NamespaceAll, key, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(byNS) == 0 {
		t.Errorf("no Service on %s at all (namespace %s): nothing checked", id, ns)
	}
	ports := byNS
	seen := map[int32]string{}
	for name, ps := range ports {
		for _, p := range ps {
			if other, dup := seen[p]; dup {
				t.Errorf("port %d of %s on both %s and %s", p, id, other, name)
			}
			seen[p] = name
		}
	}
}

// TestLoadBalancerPortsExhausted: a JdCloud NLB with room for three listeners. Under a
// Synchronous policy the fourth game server's CREATE is denied, naming the load balancer;
// under an Asynchronous one it is admitted NotReady and turns Ready once a port is freed,
// when one of the first three and its Service are gone. No port is ever on two Services.
func TestLoadBalancerPortsExhausted(t *testing.T) {
	startCloud(t)
	ns := newNamespace(t, "cloud-full", nil)
	applyPolicy(t, fmt.Sprintf(`
apiVersion: policy.game.kruise.io/v1alpha1
kind: NetworkPluginPolicy
metadata: {name: full, namespace: %s}
spec:
  plugins: [%q]
  failureModeExpression: "('mode' in object.metadata.labels && object.metadata.labels['mode'] == 'sync') ? 'Synchronous' : 'Asynchronous'"
  retry: {window: 5m, interval: 2s, maxInterval: 4s}
`, ns, jdcloud.NLBName))
	waitForPolicy(t, ns, "full", jdcloud.NLBName)
	const id = "full-jdnlb"
	tmpl := lbServer("first", jdcloud.NLBName, jdcloud.ParamNLBIDs, id)
	createStatefulSet(t, ns, "first", jdcloudPorts, tmpl)
	eventually(t, 90*time.Second, "three game servers Ready on the load balancer", func(ctx context.Context) (bool, error) {
		pods, err := listPods(ctx, ns, "first")
		if err != nil || len(pods) != jdcloudPorts {
			return false, err
		}
		for i := range pods {
			if _, ok := externalAddress(&pods[i]); !ok {
				return false, nil
			}
		}
		return true, nil
	})

	sync := lbServer("sync", jdcloud.NLBName, jdcloud.ParamNLBIDs, id)
	sync.Labels["mode"] = "sync"
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sync-0", Labels: sync.Labels, Annotations: sync.Annotations}, Spec: sync.Spec}
	_, err := cs.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), id) || !strings.Contains(err.Error(), "denied by policy "+ns+"/full@") {
		t.Fatalf("a Synchronous game server for a full load balancer: error %v, want a denial naming %s and the policy", err, id)
	}

	async := lbServer("async", jdcloud.NLBName, jdcloud.ParamNLBIDs, id)
	pod = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "async-0", Labels: async.Labels, Annotations: async.Annotations}, Spec: async.Spec}
	if _, err := cs.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("an Asynchronous game server for a full load balancer denied: %v", err)
	}
	eventually(t, 30*time.Second, "the Asynchronous game server NotReady, retried", func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "async-0", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return networkState(p) == networkstatus.NetworkNotReady && retryState(t, p) != nil, nil
	})
	// One of the first three goes for good (the StatefulSet shrinks): its Service goes with
	// it, and its port serves the waiting game server.
	scaleStatefulSet(t, ns, "first", jdcloudPorts-1)
	eventually(t, 2*time.Minute, "the waiting game server Ready once a port is free", func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "async-0", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		_, ok := externalAddress(p)
		return ok, nil
	})
	noPortTwice(t, ns, jdcloud.AnnotationNLBID, id)
}

// TestCloudFailuresRetriedPastOKGsWindow: two cloud failures side by side, each past the 60 s
// after which OKG stops looking, under a policy whose window says 5 minutes.
//   - An SLB whose cloud allows one listener. The second game server's Service gets no
//     address (the service controller's SyncLoadBalancerFailed): its network stays NotReady
//     and is still retried after 70 s, with the cloud's message as the retry state's last
//     error (a cloudError) and in nppctl status; once the quota is raised the cloud gives the
//     address and the network is Ready.
//   - An ELB whose cloud takes 35 s a call (70 s for the service controller's look and
//     ensure): the game server's network turns Ready more than 60 s after its Service was
//     made, never exhausted.
func TestCloudFailuresRetriedPastOKGsWindow(t *testing.T) {
	c := startCloud(t)
	const id, slow = "quota-slb", "slow-elb"
	c.SetQuota(id, 1)
	ns := newNamespace(t, "cloud-quota", nil)
	c.SetDelayFor(slow, 35*time.Second)
	t.Cleanup(func() { c.SetDelayFor(slow, 0) })
	applyPolicy(t, fmt.Sprintf(`
apiVersion: policy.game.kruise.io/v1alpha1
kind: NetworkPluginPolicy
metadata: {name: patient, namespace: %s}
spec:
  plugins: [%q, %q]
  failureMode: Asynchronous
  retry: {window: 5m, interval: 5s, maxInterval: 10s}
`, ns, alibabacloud.SLBName, hwcloud.ELBName))
	waitForPolicy(t, ns, "patient", alibabacloud.SLBName)
	createStatefulSet(t, ns, "quota", 2, lbServer("quota", alibabacloud.SLBName, alibabacloud.ParamSLBIDs, id))
	createStatefulSet(t, ns, "slow", 1, lbServer("slow", hwcloud.ELBName, hwcloud.ParamELBIDs, slow))
	start := time.Now()
	var waiting string
	eventually(t, 90*time.Second, "one game server Ready, the other waiting on the cloud", func(ctx context.Context) (bool, error) {
		pods, err := listPods(ctx, ns, "quota")
		if err != nil || len(pods) != 2 {
			return false, err
		}
		var ready []string
		waiting = ""
		for i := range pods {
			if _, ok := externalAddress(&pods[i]); ok {
				ready = append(ready, pods[i].Name)
			} else {
				waiting = pods[i].Name
			}
		}
		return len(ready) == 1 && waiting != "", nil
	})
	if d := 70*time.Second - time.Since(start); d > 0 {
		time.Sleep(d)
	}
	p, err := cs.CoreV1().Pods(ns).Get(context.Background(), waiting, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := retryState(t, p)
	if networkState(p) == networkstatus.NetworkReady || st == nil || st.Exhausted != nil {
		t.Fatalf("%s 70 s in: network %s, retry state %+v; want NotReady and still retried", waiting, networkState(p), st)
	}
	if st.LastError == nil || st.LastError.Type != "cloudError" || !strings.Contains(st.LastError.Message, "SyncLoadBalancerFailed") ||
		!strings.Contains(st.LastError.Message, "QuotaExceeded") {
		t.Errorf("%s's last error %+v, want the cloud's SyncLoadBalancerFailed and its quota message as a cloudError", waiting, st.LastError)
	}
	out, err := exec.Command(buildNppctl(t), "status", "-n", ns, "--kubeconfig", cp.KubeconfigPath, "--root-namespace", rootNS).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "SyncLoadBalancerFailed") {
		t.Errorf("nppctl status does not show what the cloud said (%v):\n%s", err, out)
	}
	// A retry is a plugin run (attempts on the pod) or, while the manager's caches show the
	// same cloud error, a retry counted from the caches (the quiet-retry budget): either way
	// the retries go on.
	retries := func(ctx context.Context) float64 {
		var sum float64
		for _, name := range []string{"npp_network_retries_total", "npp_network_retries_from_cache_total"} {
			v, _ := mgr.Metric(ctx, name, `plugin="`+alibabacloud.SLBName+`"`)
			sum += v
		}
		return sum
	}
	before := retries(context.Background())
	eventually(t, 30*time.Second, "retries go on past OKG's 60 s", func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, waiting, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if st := retryState(t, p); st == nil || st.Exhausted != nil {
			return false, fmt.Errorf("retry state %+v", st)
		}
		return retries(ctx) > before, nil
	})
	c.SetQuota(id, 0)
	eventually(t, 2*time.Minute, "the waiting game server Ready once the quota is raised", func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, waiting, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ip, ok := externalAddress(p)
		return ok && ip == c.Address(id), nil
	})

	eventually(t, time.Minute, "the game server behind the slow cloud Ready", func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "slow-0", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if st := retryState(t, p); st != nil && st.Exhausted != nil {
			return false, fmt.Errorf("slow-0's window closed: %+v", st)
		}
		ip, ok := externalAddress(p)
		return ok && ip == c.Address(slow), nil
	})
	svc, err := cs.CoreV1().Services(ns).Get(context.Background(), "slow-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(svc.CreationTimestamp.Time); took < 60*time.Second {
		t.Errorf("slow-0 Ready %s after its Service was made, want the cloud's 70 s (past OKG's 60 s)", took)
	} else {
		t.Logf("slow-0 Ready %s after its Service was made", took.Round(time.Second))
	}
}

// TestTwoReplicasBurstOnANearlyFullLoadBalancer: an ELB with two free listener ports of its
// eleven, and a burst of six game servers created at once through both replicas (the proxy
// alternates): no port is on two Services, two of the six get a port and four wait.
func TestTwoReplicasBurstOnANearlyFullLoadBalancer(t *testing.T) {
	startCloud(t)
	ns := newNamespace(t, "cloud-burst", nil)
	const id, size = "burst-elb", 11
	createStatefulSet(t, ns, "fill", size-2, lbServer("fill", hwcloud.ELBName, hwcloud.ParamELBIDs, id))
	eventually(t, 2*time.Minute, "nine Services on the ELB", func(ctx context.Context) (bool, error) {
		ports, err := lbPorts(ctx, ns, hwcloud.AnnotationELBID, id)
		return len(ports) == size-2, err
	})
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tmpl := lbServer("burst", hwcloud.ELBName, hwcloud.ParamELBIDs, id)
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("burst-%d", i), Labels: tmpl.Labels, Annotations: tmpl.Annotations}, Spec: tmpl.Spec}
			if _, err := cs.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
				t.Errorf("create %s: %v", pod.Name, err)
			}
		}()
	}
	wg.Wait()
	eventually(t, time.Minute, "eleven Services on the ELB, and no more", func(ctx context.Context) (bool, error) {
		ports, err := lbPorts(ctx, ns, hwcloud.AnnotationELBID, id)
		return len(ports) == size, err
	})
	time.Sleep(5 * time.Second) // a late duplicate would show by now
	if ports, err := lbPorts(context.Background(), ns, hwcloud.AnnotationELBID, id); err != nil || len(ports) != size {
		t.Errorf("Services on %s: %v (%v); want %d", id, ports, err, size)
	}
	noPortTwice(t, ns, hwcloud.AnnotationELBID, id)
}

// TestCloudProviderHandOverAndRollback: the guard decides per provider. While OKG (its webhook
// configuration and its provider ConfigMap) serves [alibabacloud], the manager leaves the
// Alibaba Cloud types to it (an SLB pod is admitted untouched, npp_okg_coexistence says
// conflict for alibabacloud on both replicas, a Warning Event says why) and keeps serving the
// other providers (an ELB pod is decided; the replicas stay ready). With OKG's [alibabacloud]
// off, the handover is refused while a pod of an Alibaba Cloud type this manager does not
// serve exists (AlibabaCloud-AutoNLBs-V3, of a newer OKG than the one this manager follows),
// and the Event names the pod; once it is gone the manager serves SLB. Rollback, OKG's
// [alibabacloud] on again: SLB pods are OKG's again.
func TestCloudProviderHandOverAndRollback(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "cloud-handover", nil)
	setOKG := installOKG(t, "[kubernetes]\nenable = false\n[alibabacloud]\nenable = true\n")
	decided := func(ctx context.Context, networkType, param string) (bool, error) {
		tmpl := lbServer("probe", networkType, param, "handover")
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-", Namespace: ns, Annotations: tmpl.Annotations}, Spec: tmpl.Spec}
		got, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false, err
		}
		return got.Annotations["policy.game.kruise.io/network-decision"] != "", nil
	}
	conflicts := func(ctx context.Context) (float64, error) {
		return mgr.Metric(ctx, "npp_okg_coexistence", `provider="alibabacloud"`, `state="conflict"`)
	}
	event := func(contains string) func(ctx context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			evs, err := cs.EventsV1().Events(okgguard.DefaultConfigMapNamespace).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			for _, e := range evs.Items {
				if e.Reason == "AlibabaCloudProviderConflict" && strings.Contains(e.Note, contains) {
					return true, nil
				}
			}
			return false, nil
		}
	}

	eventually(t, 40*time.Second, "both replicas leave AlibabaCloud to OKG", func(ctx context.Context) (bool, error) {
		n, err := conflicts(ctx)
		return n == float64(len(mgr.Replicas)), err
	})
	eventually(t, 20*time.Second, "an SLB pod admitted untouched, an ELB pod decided", func(ctx context.Context) (bool, error) {
		slb, err := decided(ctx, alibabacloud.SLBName, alibabacloud.ParamSLBIDs)
		if err != nil || slb {
			return false, err
		}
		return decided(ctx, hwcloud.ELBName, hwcloud.ParamELBIDs)
	})
	eventually(t, 20*time.Second, "a Warning Event naming OKG's [alibabacloud]", event("[alibabacloud] enable = true"))
	for _, r := range mgr.Replicas {
		resp, err := http.Get(r.ProbeURL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s not ready (%s) while only AlibabaCloud steps back", r.Name, resp.Status)
		}
	}

	// A game server of an Alibaba Cloud type this manager has no plugin for, OKG's to serve.
	unserved := gamePodTemplate("anlb3", "AlibabaCloud-AutoNLBs-V3", "[]")
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "anlb3-0", Namespace: ns, Annotations: unserved.Annotations}, Spec: unserved.Spec}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	setOKG("[kubernetes]\nenable = false\n[alibabacloud]\nenable = false\n")
	eventually(t, 40*time.Second, "the handover refused while an AlibabaCloud-AutoNLBs-V3 pod exists, the Event naming it", event("pod "+ns+"/anlb3-0 (AlibabaCloud-AutoNLBs-V3)"))
	if n, err := conflicts(ctx); err != nil || n != float64(len(mgr.Replicas)) {
		t.Errorf("npp_okg_coexistence{provider=alibabacloud,state=conflict} = %v (%v) with the AutoNLBs-V3 pod there, want %d", n, err, len(mgr.Replicas))
	}
	if err := cs.CoreV1().Pods(ns).Delete(ctx, "anlb3-0", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 40*time.Second, "SLB served once the AutoNLBs-V3 pod is gone", func(ctx context.Context) (bool, error) {
		n, err := conflicts(ctx)
		if err != nil || n != 0 {
			return false, err
		}
		return decided(ctx, alibabacloud.SLBName, alibabacloud.ParamSLBIDs)
	})

	// Rollback: OKG serves [alibabacloud] again.
	setOKG("[kubernetes]\nenable = false\n[alibabacloud]\nenable = true\n")
	eventually(t, 40*time.Second, "SLB pods OKG's again after the rollback", func(ctx context.Context) (bool, error) {
		n, err := conflicts(ctx)
		if err != nil || n != float64(len(mgr.Replicas)) {
			return false, err
		}
		slb, err := decided(ctx, alibabacloud.SLBName, alibabacloud.ParamSLBIDs)
		return !slb, err
	})
}

// TestLoadBalancerNetworkDisabledAndMoved: an SLB game server Ready on one SLB. Its network
// disabled (label game.kruise.io/network-disabled=true), its Service becomes a ClusterIP
// Service and the network NotReady; enabled again, a LoadBalancer Service on the same listener
// port and Ready at the SLB's address. Its network-conf moved to another SLB, the Service
// follows it and the network is Ready at the new SLB's address.
func TestLoadBalancerNetworkDisabledAndMoved(t *testing.T) {
	c := startCloud(t)
	ns := newNamespace(t, "cloud-toggle", nil)
	const from, to = "toggle-a", "toggle-b"
	createStatefulSet(t, ns, "toggle", 1, lbServer("toggle", alibabacloud.SLBName, alibabacloud.ParamSLBIDs, from))
	readyAt := func(lb string) func(ctx context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			p, err := cs.CoreV1().Pods(ns).Get(ctx, "toggle-0", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			ip, ok := externalAddress(p)
			return ok && ip == c.Address(lb), nil
		}
	}
	eventually(t, time.Minute, "Ready on "+from, readyAt(from))
	svc, err := cs.CoreV1().Services(ns).Get(context.Background(), "toggle-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	port := svc.Spec.Ports[0].Port

	label := func(v string) {
		t.Helper()
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, networkstatus.LabelNetworkDisabled, v)
		if _, err := cs.CoreV1().Pods(ns).Patch(context.Background(), "toggle-0", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	serviceType := func(want corev1.ServiceType) func(ctx context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			svc, err := cs.CoreV1().Services(ns).Get(ctx, "toggle-0", metav1.GetOptions{})
			return err == nil && svc.Spec.Type == want, err
		}
	}
	label("true")
	eventually(t, 30*time.Second, "a ClusterIP Service while the network is disabled", serviceType(corev1.ServiceTypeClusterIP))
	label("false")
	eventually(t, 30*time.Second, "a LoadBalancer Service again", serviceType(corev1.ServiceTypeLoadBalancer))
	eventually(t, time.Minute, "Ready on "+from+" again", readyAt(from))
	if svc, err := cs.CoreV1().Services(ns).Get(context.Background(), "toggle-0", metav1.GetOptions{}); err != nil || svc.Spec.Ports[0].Port != port {
		t.Errorf("listener port after the toggle: %v (%v), want %d", svc.Spec.Ports, err, port)
	}

	conf := fmt.Sprintf(`[{"name":%q,"value":%q},{"name":"PortProtocols","value":"7777/UDP"}]`, alibabacloud.ParamSLBIDs, to)
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, networkstatus.AnnotationNetworkConf, conf)
	if _, err := cs.CoreV1().Pods(ns).Patch(context.Background(), "toggle-0", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "Ready on "+to+" after the conf change", readyAt(to))
	if svc, err := cs.CoreV1().Services(ns).Get(context.Background(), "toggle-0", metav1.GetOptions{}); err != nil || svc.Annotations[alibabacloud.AnnotationLBID] != to {
		t.Errorf("the Service's SLB after the conf change: %v (%v), want %s", svc.Annotations[alibabacloud.AnnotationLBID], err, to)
	}
}

// TestManagerRestartWhileServicesWait: an NLB whose cloud allows one listener, so that the
// other Services wait for it; three game servers are given ports, both replicas are stopped and
// started again (each counts the Services and the ledger at start), and three more game
// servers are given ports: no listener port is on two Services.
func TestManagerRestartWhileServicesWait(t *testing.T) {
	c := startCloud(t)
	const id = "restart-nlb"
	c.SetQuota(id, 1)
	ns := newNamespace(t, "cloud-restart", nil)
	createStatefulSet(t, ns, "before", 3, lbServer("before", alibabacloud.NLBName, alibabacloud.ParamNLBIDs, id))
	services := func(n int) func(ctx context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			ports, err := lbPorts(ctx, ns, alibabacloud.AnnotationLBID, id)
			return len(ports) == n, err
		}
	}
	eventually(t, time.Minute, "three Services waiting on the cloud", services(3))
	mgr.Stop()
	if err := mgr.Start(context.Background()); err != nil {
		t.Fatalf("start the manager again: %v", err)
	}
	createStatefulSet(t, ns, "after", 3, lbServer("after", alibabacloud.NLBName, alibabacloud.ParamNLBIDs, id))
	eventually(t, time.Minute, "six Services", services(6))
	noPortTwice(t, ns, alibabacloud.AnnotationLBID, id)
}

// TestOKGMadeServiceAdoptedWithItsPort: an SLB game server whose Service OKG made, on
// listener port 500, while OKG served [alibabacloud]. Once the manager serves the type, the
// network turns Ready on OKG's Service as it is: the Service is never written (a write would
// have the cloud controller reconcile the load balancer), its port stays 500, and a new game
// server on the same SLB gets 501: the adopted port is counted.
func TestOKGMadeServiceAdoptedWithItsPort(t *testing.T) {
	ctx := context.Background()
	c := startCloud(t)
	ns := newNamespace(t, "cloud-adopt", nil)
	const id = "adopt-slb"
	setOKG := installOKG(t, "[kubernetes]\nenable = false\n[alibabacloud]\nenable = true\n")
	eventually(t, 40*time.Second, "AlibabaCloud left to OKG", func(ctx context.Context) (bool, error) {
		n, err := mgr.Metric(ctx, "npp_okg_coexistence", `provider="alibabacloud"`, `state="conflict"`)
		return n == float64(len(mgr.Replicas)), err
	})

	// What OKG's SLB plugin made for the pod (OKG's annotations with its defaults, its hash).
	tmpl := lbServer("okg", alibabacloud.SLBName, alibabacloud.ParamSLBIDs, id)
	tmpl.Labels[kubernetes.SelectorPodNameLabel] = "okg-0"
	pod, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "okg-0", Namespace: ns, Labels: tmpl.Labels, Annotations: tmpl.Annotations}, Spec: tmpl.Spec}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Annotations[lb.AnnotationAllocation] != "" {
		t.Fatalf("the pod was served while OKG serves [alibabacloud]: %v", pod.Annotations)
	}
	prefix := "service.beta.kubernetes.io/alibaba-cloud-loadbalancer-"
	okgService := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "okg-0", Namespace: ns,
			Labels: map[string]string{alibabacloud.LabelServiceProxyName: "dummy"},
			Annotations: map[string]string{alibabacloud.AnnotationLBID: id, lb.AnnotationConfigHash: "2401732158",
				prefix + "force-override-listeners": "true", prefix + "health-check-flag": "off", prefix + "health-check-switch": "on",
				prefix + "health-check-type": "tcp", prefix + "health-check-connect-timeout": "5", prefix + "health-check-interval": "10",
				prefix + "healthy-threshold": "2", prefix + "unhealthy-threshold": "2"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyCluster,
			Selector: map[string]string{kubernetes.SelectorPodNameLabel: "okg-0"},
			Ports:    []corev1.ServicePort{{Name: "7777-udp", Port: 500, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(7777)}}},
	}
	if _, err := cs.CoreV1().Services(ns).Create(ctx, okgService, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var rv string
	eventually(t, 30*time.Second, "OKG's Service given its address and the cloud controller's label", func(ctx context.Context) (bool, error) {
		svc, err := cs.CoreV1().Services(ns).Get(ctx, "okg-0", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		rv = svc.ResourceVersion
		return len(svc.Status.LoadBalancer.Ingress) > 0 && svc.Labels[alibabacloud.LabelLBID] == id, nil
	})

	setOKG("[kubernetes]\nenable = false\n[alibabacloud]\nenable = false\n")
	eventually(t, 40*time.Second, "AlibabaCloud served", func(ctx context.Context) (bool, error) {
		n, err := mgr.Metric(ctx, "npp_okg_coexistence", `provider="alibabacloud"`, `state="conflict"`)
		return n == 0, err
	})
	// An update of the pod (OKG's GameServer controller stamps one every 5 s in its window;
	// here a label) runs the plugin; the network controller retries from there.
	if _, err := cs.CoreV1().Pods(ns).Patch(ctx, "okg-0", types.MergePatchType, []byte(`{"metadata":{"labels":{"game.kruise.io/opsState":"None"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "Ready on OKG's Service", func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "okg-0", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ip, ok := externalAddress(p)
		return ok && ip == c.Address(id), nil
	})
	svc, err := cs.CoreV1().Services(ns).Get(ctx, "okg-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if svc.ResourceVersion != rv || svc.Spec.Ports[0].Port != 500 || svc.Annotations[lb.AnnotationConfigHash] != "2401732158" {
		t.Errorf("OKG's Service was written (resourceVersion %s, was %s; port %d; hash %s)", svc.ResourceVersion, rv, svc.Spec.Ports[0].Port, svc.Annotations[lb.AnnotationConfigHash])
	}
	createStatefulSet(t, ns, "next", 1, lbServer("next", alibabacloud.SLBName, alibabacloud.ParamSLBIDs, id))
	eventually(t, time.Minute, "the next game server on port 501", func(ctx context.Context) (bool, error) {
		ports, err := lbPorts(ctx, ns, alibabacloud.AnnotationLBID, id)
		if err != nil || len(ports["next-0"]) == 0 {
			return false, err
		}
		if ports["next-0"][0] != 501 {
			return false, fmt.Errorf("next-0 got port %d, want 501 (OKG's Service holds 500)", ports["next-0"][0])
		}
		return true, nil
	})
}

// installOKG installs what shows OKG to the guard: its MutatingWebhookConfiguration and its
// provider ConfigMap with toml, both removed when the test ends; it returns a function that
// rewrites the ConfigMap.
func installOKG(t *testing.T, toml string) func(toml string) {
	t.Helper()
	ctx := context.Background()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: okgguard.DefaultConfigMapNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	cm, err := cs.CoreV1().ConfigMaps(okgguard.DefaultConfigMapNamespace).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: okgguard.DefaultConfigMapNamespace, Name: okgguard.DefaultConfigMapName},
		Data:       map[string]string{okgguard.ConfigKey: toml},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	okg := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: okgguard.DefaultWebhookConfiguration}}
	if _, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, okg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), okg.Name, metav1.DeleteOptions{})
		_ = cs.CoreV1().ConfigMaps(cm.Namespace).Delete(context.Background(), cm.Name, metav1.DeleteOptions{})
		// The next test starts with every provider served again (each replica looks every 10 s).
		eventually(t, 40*time.Second, "no provider left to OKG after the test", func(ctx context.Context) (bool, error) {
			n, err := mgr.Metric(ctx, "npp_okg_coexistence", `state="conflict"`)
			return n == 0, err
		})
	})
	return func(toml string) {
		t.Helper()
		cm.Data[okgguard.ConfigKey] = toml
		var err error
		if cm, err = cs.CoreV1().ConfigMaps(cm.Namespace).Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFixedPortsFreedWithTheGameServerSet: two SLB game servers with Fixed=true, whose
// Services the GameServerSet owns. Scaled to 0, the Services and their listener ports stay
// (the set's next pods get them); the GameServerSet deleted, the garbage collector deletes the
// Services and their ports are free, in the ledger too: a new game server gets the lowest
// port again. OKG frees a Fixed set's ports at the DELETE of its pods, by a name match.
func TestFixedPortsFreedWithTheGameServerSet(t *testing.T) {
	ctx := context.Background()
	startCloud(t)
	ns := newNamespace(t, "cloud-fixed", nil)
	const id, set = "fixed-slb", "fixedset"
	conf := fmt.Sprintf(`[{"name":%q,"value":%q},{"name":"PortProtocols","value":"7777/UDP"},{"name":"Fixed","value":"true"}]`, alibabacloud.ParamSLBIDs, id)
	gss := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "game.kruise.io/v1alpha1", "kind": "GameServerSet",
		"metadata": map[string]any{"name": set, "namespace": ns},
		"spec": map[string]any{"replicas": int64(2), "network": map[string]any{"networkType": alibabacloud.SLBName,
			"networkConf": []any{map[string]any{"name": alibabacloud.ParamSLBIDs, "value": id},
				map[string]any{"name": "PortProtocols", "value": "7777/UDP"}, map[string]any{"name": "Fixed", "value": "true"}}}},
	}}
	gssClient := dynamic.NewForConfigOrDie(cp.Config).Resource(schema.GroupVersionResource{Group: "game.kruise.io", Version: "v1alpha1", Resource: "gameserversets"}).Namespace(ns)
	if _, err := gssClient.Create(ctx, gss, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the GameServerSet: %v", err)
	}
	tmpl := gamePodTemplate(set, alibabacloud.SLBName, conf)
	tmpl.Labels["game.kruise.io/owner-gss"] = set
	createStatefulSet(t, ns, set, 2, tmpl)
	eventually(t, time.Minute, "two Services owned by the GameServerSet", func(ctx context.Context) (bool, error) {
		svcs, err := cs.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		n := 0
		for _, s := range svcs.Items {
			if ref := metav1.GetControllerOf(&s); ref != nil && ref.Kind == "GameServerSet" && ref.Name == set {
				n++
			}
		}
		return n == 2, nil
	})
	scaleStatefulSet(t, ns, set, 0)
	eventually(t, time.Minute, "the pods gone", func(ctx context.Context) (bool, error) {
		pods, err := listPods(ctx, ns, set)
		return len(pods) == 0, err
	})
	if ports, err := lbPorts(ctx, ns, alibabacloud.AnnotationLBID, id); err != nil || len(ports) != 2 {
		t.Fatalf("after the scale to 0: Services %v (%v), want both kept", ports, err)
	}
	if err := gssClient.Delete(ctx, set, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the Services gone with the GameServerSet, their ports out of the ledger", func(ctx context.Context) (bool, error) {
		if ports, err := lbPorts(ctx, ns, alibabacloud.AnnotationLBID, id); err != nil || len(ports) != 0 {
			return false, err
		}
		for _, name := range lb.LedgerConfigMapNames(lb.DefaultLedgerName) {
			cm, err := cs.CoreV1().ConfigMaps(rootNS).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for group, lbs := range lb.ParseLedger(cm.Data) {
				if ports, ok := lbs[id]; ok {
					return false, fmt.Errorf("ledger %s still holds %v of %s on %s", name, ports, group, id)
				}
			}
		}
		return true, nil
	})
	createStatefulSet(t, ns, "next", 1, lbServer("next", alibabacloud.SLBName, alibabacloud.ParamSLBIDs, id))
	eventually(t, time.Minute, "a new game server on the lowest port", func(ctx context.Context) (bool, error) {
		ports, err := lbPorts(ctx, ns, alibabacloud.AnnotationLBID, id)
		if err != nil || len(ports["next-0"]) == 0 {
			return false, err
		}
		if ports["next-0"][0] != 500 {
			return false, fmt.Errorf("next-0 got port %d, want 500", ports["next-0"][0])
		}
		return true, nil
	})
}

var (
	// eips is the box's stand-in for Volcengine's EIP controller (e2e/cloudbox); startEIPs
	// starts it once.
	eips     *cloudbox.EIPs
	eipsOnce sync.Once
)

// startEIPs starts the box's EIP controller against the suite's cluster, once.
func startEIPs(t *testing.T) *cloudbox.EIPs {
	t.Helper()
	eipsOnce.Do(func() {
		e := &cloudbox.EIPs{}
		e.SetDelay(time.Second)
		if err := cloudbox.StartEIPs(context.Background(), cp.Config, e); err != nil {
			t.Fatalf("start the box's EIP controller: %v", err)
		}
		eips = e
	})
	if eips == nil {
		t.Fatal("the box's EIP controller did not start")
	}
	return eips
}

// TestVolcengineHandedOverWhole: this manager serves both of OKG's Volcengine types
// (Volcengine-CLB and Volcengine-EIP), so the provider can be handed over whole. While OKG
// serves [volcengine] both are left to it; once OKG's is off, an EIP game server gets VKE's
// annotations at CREATE and turns Ready with its EIP once the box's controller answers, the
// ENI's address inside, and a CLB game server is Ready at its CLB; rollback, OKG's
// [volcengine] on again, gives both types back to OKG.
func TestVolcengineHandedOverWhole(t *testing.T) {
	c := startCloud(t)
	e := startEIPs(t)
	ns := newNamespace(t, "cloud-volc", nil)
	setOKG := installOKG(t, "[kubernetes]\nenable = false\n[volcengine]\nenable = true\n")
	conflicts := func(ctx context.Context) (float64, error) {
		return mgr.Metric(ctx, "npp_okg_coexistence", `provider="volcengine"`, `state="conflict"`)
	}
	eipServer := func(app string) corev1.PodTemplateSpec {
		return gamePodTemplate(app, volcengine.EIPName, `[{"name":"bandwidth","value":"5"}]`)
	}
	decided := func(ctx context.Context, tmpl corev1.PodTemplateSpec) (bool, error) {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-", Namespace: ns, Annotations: tmpl.Annotations}, Spec: tmpl.Spec}
		got, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false, err
		}
		return got.Annotations["policy.game.kruise.io/network-decision"] != "", nil
	}
	clb := lbServer("clb", volcengine.CLBName, volcengine.ParamCLBIDs, "volc-clb")
	eventually(t, 40*time.Second, "both Volcengine types left to OKG", func(ctx context.Context) (bool, error) {
		n, err := conflicts(ctx)
		if err != nil || n != float64(len(mgr.Replicas)) {
			return false, err
		}
		for _, tmpl := range []corev1.PodTemplateSpec{eipServer("probe"), clb} {
			if d, err := decided(ctx, tmpl); err != nil || d {
				return false, err
			}
		}
		return true, nil
	})

	setOKG("[kubernetes]\nenable = false\n[volcengine]\nenable = false\n")
	eventually(t, 40*time.Second, "Volcengine served whole", func(ctx context.Context) (bool, error) {
		n, err := conflicts(ctx)
		return n == 0 && err == nil, err
	})
	createStatefulSet(t, ns, "eip", 1, eipServer("eip"))
	createStatefulSet(t, ns, "clb", 1, clb)
	eventually(t, time.Minute, "the EIP game server Ready with its EIP, the CLB one at its CLB", func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "eip-0", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if p.Annotations[volcengine.AnnotationEIPAttributes] != `{"bandwidth":5}` {
			return false, fmt.Errorf("eip-0's attributes %q", p.Annotations[volcengine.AnnotationEIPAttributes])
		}
		st, err := networkstatus.StatusFromPod(p)
		if err != nil || st == nil || st.CurrentNetworkState != networkstatus.NetworkReady {
			return false, err
		}
		if len(st.InternalAddresses) != 1 || st.InternalAddresses[0].IP != p.Status.PodIP || st.ExternalAddresses[0].IP != e.Address(cloudbox.EIPID(p)) {
			return false, fmt.Errorf("eip-0's status %+v", st)
		}
		q, err := cs.CoreV1().Pods(ns).Get(ctx, "clb-0", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ip, ok := externalAddress(q)
		return ok && ip == c.Address("volc-clb"), nil
	})

	setOKG("[kubernetes]\nenable = false\n[volcengine]\nenable = true\n")
	eventually(t, 40*time.Second, "Volcengine OKG's again after the rollback", func(ctx context.Context) (bool, error) {
		n, err := conflicts(ctx)
		if err != nil || n != float64(len(mgr.Replicas)) {
			return false, err
		}
		d, err := decided(ctx, eipServer("probe"))
		return !d, err
	})
}

// TestEIPPluginsReady: each of the three EIP plugins, served as deployed, asks for an EIP at
// CREATE with its controller's annotations; the box's controller binds one after a second,
// and the network is Ready with the EIP outside and the pod's IP inside.
func TestEIPPluginsReady(t *testing.T) {
	e := startEIPs(t)
	ns := newNamespace(t, "cloud-eip", nil)
	types := []struct{ app, networkType, conf string }{
		{"volc", volcengine.EIPName, `[{"name":"bandwidth","value":"5"}]`},
		{"cce", hwcloud.CCEEIPName, `[{"name":"yangtse.io/pod-with-eip","value":"true"},{"name":"yangtse.io/eip-bandwidth-size","value":"5"}]`},
		{"jd", jdcloud.EIPName, `[{"name":"Bandwidth","value":"5"}]`},
	}
	for _, tc := range types {
		createStatefulSet(t, ns, tc.app, 1, gamePodTemplate(tc.app, tc.networkType, tc.conf))
	}
	for _, tc := range types {
		eventually(t, time.Minute, tc.networkType+" Ready with its EIP", func(ctx context.Context) (bool, error) {
			p, err := cs.CoreV1().Pods(ns).Get(ctx, tc.app+"-0", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			st, err := networkstatus.StatusFromPod(p)
			if err != nil || st == nil || st.CurrentNetworkState != networkstatus.NetworkReady {
				return false, err
			}
			if len(st.ExternalAddresses) != 1 || st.ExternalAddresses[0].IP != e.Address(cloudbox.EIPID(p)) ||
				len(st.InternalAddresses) != 1 || st.InternalAddresses[0].IP != p.Status.PodIP {
				return false, fmt.Errorf("%s's status %+v", p.Name, st)
			}
			return true, nil
		})
	}
}

// TestForgedEIPResultPutBack: an EIP plugin's result annotation counts only from its
// network controller's identity (the box's controller runs as a kube-system ServiceAccount,
// the default result writers), as deployed. A HwCloud-CCE-EIP pod created with another
// server's address in yangtse.io/allocated-ipv4-eip has it dropped and turns Ready with the
// address the controller binds; a later edit of the address through the pod or through
// pods/status by anyone else is put back in the same request, and the network stays Ready at
// the controller's address.
func TestForgedEIPResultPutBack(t *testing.T) {
	e := startEIPs(t)
	ns := newNamespace(t, "cloud-forge", nil)
	const forged = "198.51.100.9" // TEST-NET-2: no address the box hands out
	tmpl := gamePodTemplate("forge", hwcloud.CCEEIPName, `[{"name":"yangtse.io/pod-with-eip","value":"true"}]`)
	tmpl.Annotations[hwcloud.AnnotationAllocatedEIP] = forged
	ctx := context.Background()
	created, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "forge-0", Namespace: ns,
		Labels: tmpl.Labels, Annotations: tmpl.Annotations}, Spec: tmpl.Spec}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := created.Annotations[hwcloud.AnnotationAllocatedEIP]; ok {
		t.Fatalf("created with %s = %q, want it dropped", hwcloud.AnnotationAllocatedEIP, v)
	}
	want := e.Address(cloudbox.EIPID(created))
	readyAt := func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "forge-0", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		st, err := networkstatus.StatusFromPod(p)
		if err != nil || st == nil || st.CurrentNetworkState != networkstatus.NetworkReady {
			return false, err
		}
		if len(st.ExternalAddresses) != 1 || st.ExternalAddresses[0].IP != want {
			return false, fmt.Errorf("Ready at %+v, want %s", st.ExternalAddresses, want)
		}
		return true, nil
	}
	eventually(t, time.Minute, "Ready at the controller's EIP", readyAt)
	for _, sub := range []string{"", "status"} {
		// The other annotation in the patch is stored: the write reached the store with its
		// annotations, and only the result was put back.
		patch := []byte(`{"metadata":{"annotations":{"` + hwcloud.AnnotationAllocatedEIP + `":"` + forged + `","touched-through":"` + sub + `"}}}`)
		var subresources []string
		if sub != "" {
			subresources = []string{sub}
		}
		got, err := cs.CoreV1().Pods(ns).Patch(ctx, "forge-0", types.MergePatchType, patch, metav1.PatchOptions{}, subresources...)
		if err != nil {
			t.Fatalf("patch (subresource %q): %v", sub, err)
		}
		if v, ok := got.Annotations["touched-through"]; !ok || v != sub {
			t.Errorf("after a patch (subresource %q): touched-through = %q, want it stored", sub, v)
		}
		if v := got.Annotations[hwcloud.AnnotationAllocatedEIP]; v != want {
			t.Errorf("after a forged patch (subresource %q): %s = %q, want the controller's %s", sub, hwcloud.AnnotationAllocatedEIP, v, want)
		}
		if ok, err := readyAt(ctx); !ok {
			t.Errorf("after a forged patch (subresource %q): %v", sub, err)
		}
	}
}

// TestDeletedNamespaceReleasesItsPorts: as deployed, the listener ports a namespace holds in
// the port ledger go with the namespace: two Ready SLB game servers, then the namespace is
// deleted; the ledger (read as `kubectl npp status` reads it) soon holds nothing of that
// namespace, and its Services are gone.
func TestDeletedNamespaceReleasesItsPorts(t *testing.T) {
	c := startCloud(t)
	ns := newNamespace(t, "cloud-gone", nil)
	const id = "gone-slb"
	createStatefulSet(t, ns, "gone", 2, lbServer("gone", alibabacloud.SLBName, alibabacloud.ParamSLBIDs, id))
	held := func(ctx context.Context) (int, error) {
		n := 0
		for _, name := range lb.LedgerConfigMapNames(lb.DefaultLedgerName) {
			cm, err := cs.CoreV1().ConfigMaps(rootNS).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return 0, err
			}
			for _, claim := range lb.ParseLedger(cm.Data)[alibabacloud.SLBName][id] {
				if strings.HasPrefix(claim.Owner, ns+"/") {
					n++
				}
			}
		}
		return n, nil
	}
	eventually(t, time.Minute, "both game servers Ready at the SLB, their ports in the ledger", func(ctx context.Context) (bool, error) {
		for _, name := range []string{"gone-0", "gone-1"} {
			p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if ip, ok := externalAddress(p); !ok || ip != c.Address(id) {
				return false, nil
			}
		}
		n, err := held(ctx)
		return n == 2, err
	})
	if err := cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "the namespace's ports out of the ledger", func(ctx context.Context) (bool, error) {
		n, err := held(ctx)
		if err != nil || n != 0 {
			return false, err
		}
		svcs, err := cs.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(svcs.Items) == 0, err
	})
}
