package realnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/okg-extensions/network-plugin-policy/e2e/cluster"
	k8splugin "github.com/okg-extensions/network-plugin-policy/pkg/plugin/kubernetes"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
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
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.CoreV1().Pods(ns).DeleteCollection(context.Background(), metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{})
		_ = wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			return err == nil && len(l.Items) == 0, nil
		})
	})
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "gs-np", Namespace: ns,
			// The Service selects the pod by the label a StatefulSet gives its pods.
			Labels: map[string]string{k8splugin.SelectorPodNameLabel: "gs-np"},
			Annotations: map[string]string{
				networkstatus.AnnotationNetworkType: "Kubernetes-NodePort",
				networkstatus.AnnotationNetworkConf: fmt.Sprintf(`[{"name":"PortProtocols","value":"%d/UDP"}]`, echoPort),
			}},
		Spec: corev1.PodSpec{
			NodeName:                      NodeName(1),
			AutomountServiceAccountToken:  ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []corev1.Container{{
				Name: "echo", Image: images.Echo, ImagePullPolicy: corev1.PullNever,
				Args: []string{"-port", fmt.Sprint(echoPort)},
				Env:  []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
			}},
		},
	}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var addr networkstatus.NetworkAddress
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "gs-np", metav1.GetOptions{})
		if err != nil || p.Status.Phase != corev1.PodRunning {
			return false, nil
		}
		st, err := networkstatus.DecodeStatus(p.Annotations[networkstatus.AnnotationNetworkStatus])
		if err != nil || st == nil || st.CurrentNetworkState != networkstatus.NetworkReady || len(st.ExternalAddresses) == 0 || len(st.ExternalAddresses[0].Ports) == 0 {
			return false, nil
		}
		addr = st.ExternalAddresses[0]
		return true, nil
	})
	if err != nil {
		t.Fatal("the NodePort game server is not Running with a Ready network-status within 2m")
	}
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
