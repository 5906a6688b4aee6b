package realnode

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/okg-extensions/network-plugin-policy/e2e/cloudbox"
	"github.com/okg-extensions/network-plugin-policy/e2e/cluster"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/alibabacloud"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/hwcloud"
	k8splugin "github.com/okg-extensions/network-plugin-policy/pkg/plugin/kubernetes"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/volcengine"
)

// cloudProviders are the provider tables of the load-balancer test: SLB, HwCloud's ELB and
// Volcengine's CLB, each on ports 600-610.
const cloudProviders = `
[alibabacloud]
enable = true
[alibabacloud.slb]
min_port = 600
max_port = 610
[hwcloud]
enable = true
[hwcloud.elb]
min_port = 600
max_port = 610
[volcengine]
enable = true
[volcengine.clb]
min_port = 600
max_port = 610
`

// TestLoadBalancerGameServersAnswer: load-balancer game servers on the real nodes, admitted
// by the manager (two replicas, as deployed), with Kubernetes' own service controller and the
// box's cloud giving each Service its load balancer's address. Each answers a datagram (and
// for TCPUDP a TCP line) sent from the nodes' network namespace to the external address and
// port its network-status announces, with its own name:
//   - AlibabaCloud-SLB (TCPUDP, Fixed): OKG labels its Service
//     service.kubernetes.io/service-proxy-name: dummy, so kube-proxy programs nothing for it;
//     the box's cloud sends each listener to the Service's endpoints, as Alibaba's load
//     balancer does (cloudbox.Cloud.Forward). The pod is then re-created on the other node,
//     with a new IP: the Service, the GameServerSet's, is not touched and the cloud is not
//     called again, and the new pod answers at the same address and port. With the pod and
//     then the GameServerSet deleted, the Service goes and its listener's rule with it.
//   - HwCloud-ELB with ExternalTrafficPolicyType Local, and Volcengine-CLB: their Services are
//     served by kube-proxy, which routes the load balancer's IP (status.loadBalancer.ingress,
//     ipMode VIP) to the endpoints. The real nodes share one network and one kube-proxy
//     (hostname real-0); the ELB's pod runs on real-1. So the Local case proves that
//     kube-proxy's Local rules send a client on the node to the endpoint whichever node it is
//     on (traffic from the node itself is served cluster-wide), not that outside traffic is
//     kept to the node's own endpoints, which needs a kube-proxy per node.
func TestLoadBalancerGameServersAnswer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 7*time.Minute)
	defer cancel()
	cp := cluster.StartForTest(t, cluster.Options{FakeNodes: 1})
	for _, dir := range []string{"../../crds", "../takeover/testdata/crds"} {
		if _, err := cluster.InstallCRDs(cp.Config, dir); err != nil {
			t.Fatal(err)
		}
	}
	provider := filepath.Join(harness.WorkDir, "provider-lb.toml")
	if err := os.WriteFile(provider, []byte(cloudProviders), 0o644); err != nil {
		t.Fatal(err)
	}
	mgr, err := cp.StartManager(ctx, cluster.ManagerOptions{ProviderConfig: provider})
	if err != nil {
		t.Fatalf("start manager: %v", err)
	}
	t.Cleanup(mgr.Stop)
	for i := range 2 {
		startNode(ctx, t, cp, i)
	}
	if err := harness.StartKubeProxy(cp); err != nil {
		t.Fatal(err)
	}
	if err := RouteLoadBalancers(); err != nil {
		t.Fatal(err)
	}
	cloud := cloudbox.New(alibabacloud.AnnotationLBID, hwcloud.AnnotationELBID, volcengine.AnnotationCLBID)
	cloud.IDLabel = alibabacloud.LabelLBID
	cloudCtx, stopCloud := context.WithCancel(ctx)
	t.Cleanup(stopCloud)
	if err := cloudbox.Start(cloudCtx, cp.Config, cloud, 2); err != nil {
		t.Fatal(err)
	}
	if err := cloud.Forward(cloudCtx, cp.Config); err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(cp.Config)
	ns := "lb"
	gameNamespace(ctx, t, cs, ns)
	const set = "fixed-slb"
	gss := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "game.kruise.io/v1alpha1", "kind": "GameServerSet",
		"metadata": map[string]any{"name": set, "namespace": ns},
		// A valid network-conf: the manager validates GameServerSets of the types it serves.
		"spec": map[string]any{"replicas": int64(1), "network": map[string]any{"networkType": alibabacloud.SLBName, "networkConf": []any{
			map[string]any{"name": "SlbIds", "value": "slb-a"}, map[string]any{"name": "PortProtocols", "value": fmt.Sprintf("%d/TCPUDP", echoPort)},
			map[string]any{"name": "Fixed", "value": "true"}}}},
	}}
	gssClient := dynamic.NewForConfigOrDie(cp.Config).Resource(schema.GroupVersionResource{Group: "game.kruise.io", Version: "v1alpha1", Resource: "gameserversets"}).Namespace(ns)
	if _, err := gssClient.Create(ctx, gss, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the GameServerSet: %v", err)
	}
	servers := []struct{ name, networkType, conf, node string }{
		{"gs-slb", alibabacloud.SLBName, fmt.Sprintf(`[{"name":"SlbIds","value":"slb-a"},{"name":"PortProtocols","value":"%d/TCPUDP"},{"name":"Fixed","value":"true"}]`, echoPort), NodeName(1)},
		{"gs-elb", hwcloud.ELBName, fmt.Sprintf(`[{"name":"ElbIds","value":"elb-a"},{"name":"PortProtocols","value":"%d/UDP"},{"name":"ExternalTrafficPolicyType","value":"Local"}]`, echoPort), NodeName(1)},
		{"gs-clb", volcengine.CLBName, fmt.Sprintf(`[{"name":"ClbIds","value":"clb-a"},{"name":"PortProtocols","value":"%d/UDP"}]`, echoPort), NodeName(0)},
	}
	create := func(name, networkType, conf, node string) {
		pod := echoGameServer(ns, name, networkType, conf)
		// The Service selects the pod by the label a StatefulSet gives its pods.
		pod.Labels = map[string]string{k8splugin.SelectorPodNameLabel: name}
		if networkType == alibabacloud.SLBName {
			pod.Labels[networkstatus.LabelOwnerGSS] = set
		}
		pod.Spec.NodeName = node
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
	}
	for _, s := range servers {
		create(s.name, s.networkType, s.conf, s.node)
	}
	for _, s := range servers {
		answersAtItsLoadBalancer(ctx, t, cs, ns, s.name)
	}
	svc, err := cs.CoreV1().Services(ns).Get(ctx, "gs-elb", metav1.GetOptions{})
	if err != nil || svc.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal {
		t.Errorf("gs-elb's Service: traffic policy %v (%v), want Local", svc.Spec.ExternalTrafficPolicy, err)
	}

	// The SLB game server re-created on the other node: a new pod IP behind the same
	// Service, which nobody writes and the cloud does not see again.
	before, err := cs.CoreV1().Services(ns).Get(ctx, "gs-slb", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	old, _ := cs.CoreV1().Pods(ns).Get(ctx, "gs-slb", metav1.GetOptions{})
	deletePodAndWait(ctx, t, cs, ns, "gs-slb")
	create("gs-slb", servers[0].networkType, servers[0].conf, NodeName(0))
	renewed := answersAtItsLoadBalancer(ctx, t, cs, ns, "gs-slb")
	if renewed.Status.PodIP == old.Status.PodIP {
		t.Errorf("the re-created pod has the old pod's IP %s: the test proves nothing", old.Status.PodIP)
	}
	after, err := cs.CoreV1().Services(ns).Get(ctx, "gs-slb", metav1.GetOptions{})
	if err != nil || after.UID != before.UID || after.Generation != before.Generation {
		t.Errorf("the Fixed Service was replaced or rewritten: uid %s -> %s, generation %d -> %d (%v)", before.UID, after.UID, before.Generation, after.Generation, err)
	}

	// The game server and then its GameServerSet deleted: the Service goes with the set, and
	// the cloud's listener rule with it.
	deletePodAndWait(ctx, t, cs, ns, "gs-slb")
	if err := gssClient.Delete(ctx, set, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	addr := cloud.Address("slb-a")
	var rules string
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		out, err := exec.CommandContext(ctx, "iptables", "-t", "nat", "-S", cloudbox.ForwardChain).CombinedOutput()
		rules = string(out)
		return err == nil && !strings.Contains(rules, addr+"/32"), nil
	}); err != nil {
		t.Errorf("the deleted SLB Service's listener rules are still there:\n%s", rules)
	}
}

// deletePodAndWait deletes the pod ns/name (1 s grace) and waits up to a minute until it is
// gone; either failing fails the test.
func deletePodAndWait(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, name string) {
	t.Helper()
	if err := cs.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](1)}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		return err != nil, nil
	}); err != nil {
		t.Fatalf("%s not gone within 1m", name)
	}
}

// answersAtItsLoadBalancer waits for the pod name's network to be Ready and checks that
// every port of its external addresses answers with its name (a datagram or a TCP line
// from this namespace). It returns the pod.
func answersAtItsLoadBalancer(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, name string) *corev1.Pod {
	t.Helper()
	p, _ := readyNetwork(ctx, t, cs, ns, name)
	st, err := networkstatus.StatusFromPod(p)
	if err != nil || st == nil {
		t.Fatalf("%s: network-status %v", name, err)
	}
	probed := 0
	for _, a := range st.ExternalAddresses {
		for _, port := range a.Ports {
			if port.Port == nil {
				continue
			}
			target := net.JoinHostPort(a.IP, port.Port.String())
			proto := strings.ToLower(string(port.Protocol))
			got, err := echoOnce(ctx, proto, target, "ping")
			if err != nil || got != name+": ping" {
				t.Errorf("%s over %s to %s: %q (%v), want %q", name, proto, target, got, err, name+": ping")
			} else {
				t.Logf("%s (%s, on %s) answers at %s/%s", name, p.Annotations[networkstatus.AnnotationNetworkType], p.Spec.NodeName, target, proto)
			}
			probed++
		}
	}
	if probed == 0 {
		t.Errorf("%s: network-status announces no external port: %+v", name, st)
	}
	return p
}
