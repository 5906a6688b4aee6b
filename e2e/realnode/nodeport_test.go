package realnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/okg-extensions/network-plugin-policy/e2e/cluster"
	k8splugin "github.com/okg-extensions/network-plugin-policy/pkg/plugin/kubernetes"
)

// startKubeProxy starts one kube-proxy (iptables mode) for the suite's namespace, which is
// the real nodes' one network: node ports on every node address (198.18.0.0/24). It changes
// no host-wide setting: the conntrack limits are left alone (0), and the rest of what it
// writes (iptables rules, route_localnet) belongs to the namespace.
func startKubeProxy(t *testing.T, cp *cluster.ControlPlane) {
	t.Helper()
	cfg := fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: %q}
hostnameOverride: %s
mode: iptables
nodePortAddresses: ["198.18.0.0/24"]
healthzBindAddress: 127.0.0.1:%d
metricsBindAddress: 127.0.0.1:%d
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
`, cp.KubeconfigPath, NodeName(0), cluster.FreePort(), cluster.FreePort())
	path := filepath.Join(workDir, "kube-proxy.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.AddProcess("kube-proxy", nil, filepath.Join(cp.BinDir, "kube-proxy"), "--config="+path, "--v=2"); err != nil {
		t.Fatalf("start kube-proxy: %v", err)
	}
}

// TestNodePortGameServerAnswers: a NodePort game server on a real node, admitted by the
// manager (two replicas, as deployed), gets a Service from it; kube-proxy (iptables mode)
// forwards the node port, and a UDP datagram sent from the nodes' namespace to the address
// and port its network-status announces gets the pod's own answer, on either node's address.
func TestNodePortGameServerAnswers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cp := cluster.StartForTest(t, cluster.Options{FakeNodes: 1})
	if _, err := cluster.InstallCRDs(cp.Config, "../../crds"); err != nil {
		t.Fatal(err)
	}
	mgr, err := cp.StartManager(ctx, cluster.ManagerOptions{})
	if err != nil {
		t.Fatalf("start manager: %v", err)
	}
	t.Cleanup(mgr.Stop)
	for i := range 2 {
		if _, err := StartNode(ctx, t, cp, i, images.Archives, images.Pause); err != nil {
			t.Fatal(err)
		}
	}
	startKubeProxy(t, cp)
	cs := kubernetes.NewForConfigOrDie(cp.Config)
	ns := "np"
	gameNamespace(ctx, t, cs, ns)
	pod := echoGameServer(ns, "gs-np", "Kubernetes-NodePort", fmt.Sprintf(`[{"name":"PortProtocols","value":"%d/UDP"}]`, echoPort))
	// The Service selects the pod by the label a StatefulSet gives its pods.
	pod.Labels = map[string]string{k8splugin.SelectorPodNameLabel: "gs-np"}
	pod.Spec.NodeName = NodeName(1)
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, addr := readyNetwork(ctx, t, cs, ns, "gs-np")
	port := addr.Ports[0].Port.String()
	for _, ip := range []string{addr.IP, NodeIP(0)} {
		target := ip + ":" + port
		got, err := echoOnce(ctx, "udp", target, "ping")
		if err != nil || got != "gs-np: ping" {
			t.Errorf("NodePort %s: %q (%v), want %q", target, got, err, "gs-np: ping")
		} else {
			t.Logf("NodePort %s (network-status announces %s:%s) answers", target, addr.IP, port)
		}
	}
}
