package realnode

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/okg-extensions/network-plugin-policy/e2e/cluster"
	k8splugin "github.com/okg-extensions/network-plugin-policy/pkg/plugin/kubernetes"
)

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
		startNode(ctx, t, cp, i)
	}
	if err := harness.StartKubeProxy(cp); err != nil {
		t.Fatal(err)
	}
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
