package realnode

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/okg-extensions/network-plugin-policy/e2e/cluster"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
	podwebhook "github.com/okg-extensions/network-plugin-policy/pkg/webhook/pod"
)

// kubernetesServiceIP is the kubernetes Service's cluster IP (the first of the API server's
// service-cluster-ip-range, 10.96.0.0/16): pods reach the API server there.
const kubernetesServiceIP = "10.96.0.1"

// TestChartInstallsTheManagerAsPods installs the chart's manifests (rendered with the Helm
// SDK) with the image make image builds: the manager runs as two pods on the real nodes,
// with its ServiceAccount, RBAC, Secret volume, probes, PDB and leader election; the API
// server calls its webhooks through the Service (aggregator routing: the endpoints' pod IPs,
// no kube-proxy). A HostPort game server is then admitted by those pods and answers at the
// address its network-status announces.
func TestChartInstallsTheManagerAsPods(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cp := cluster.StartForTest(t, cluster.Options{
		FakeNodes:      1,
		APIServerHosts: []string{kubernetesServiceIP, NodeIP(0)},
		APIServerFlags: map[string]string{"bind-address": "0.0.0.0", "enable-aggregator-routing": "true"},
	})
	// Pods reach the API server at the kubernetes Service: without kube-proxy, one DNAT rule
	// in the suite's namespace sends it to the API server's port on the first node's address.
	port := cp.URL[strings.LastIndex(cp.URL, ":")+1:]
	if out, err := exec.CommandContext(ctx, "iptables", "-t", "nat", "-A", "PREROUTING", "-d", kubernetesServiceIP, "-p", "tcp", "--dport", "443",
		"-j", "DNAT", "--to-destination", NodeIP(0)+":"+port).CombinedOutput(); err != nil {
		t.Fatalf("iptables: %v: %s", err, out)
	}
	for i := range 2 {
		if _, err := StartNode(ctx, cp, i, images.Archives, images.Pause); err != nil {
			t.Fatal(err)
		}
	}
	cs := kubernetes.NewForConfigOrDie(cp.Config)
	root := "network-plugin-policy-system"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: root}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.CommandContext(ctx, "kubectl", "--kubeconfig", cp.KubeconfigPath, "apply", "--server-side", "-f", images.Chart).CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply the chart: %v: %s", err, out)
	}
	ns := "game"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Game servers first, then the manager, before the kubelets stop (CNI DEL).
		bg := context.Background()
		_ = cs.CoreV1().Pods(ns).DeleteCollection(bg, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{})
		_ = cs.AppsV1().Deployments(root).Delete(bg, "network-plugin-policy-manager", metav1.DeleteOptions{})
		_ = wait.PollUntilContextTimeout(bg, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			a, err1 := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			b, err2 := cs.CoreV1().Pods(root).List(ctx, metav1.ListOptions{})
			return err1 == nil && err2 == nil && len(a.Items)+len(b.Items) == 0, nil
		})
	})
	start := time.Now()
	var last string
	err := wait.PollUntilContextTimeout(ctx, time.Second, 4*time.Minute, true, func(ctx context.Context) (bool, error) {
		d, err := cs.AppsV1().Deployments(root).Get(ctx, "network-plugin-policy-manager", metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		last = fmt.Sprintf("%d of %d replicas available", d.Status.AvailableReplicas, *d.Spec.Replicas)
		return d.Status.AvailableReplicas == 2 && available(d), nil
	})
	if err != nil {
		pods, _ := exec.Command("kubectl", "--kubeconfig", cp.KubeconfigPath, "-n", root, "get", "pods", "-o", "wide").CombinedOutput()
		logs, _ := exec.Command("kubectl", "--kubeconfig", cp.KubeconfigPath, "-n", root, "logs", "deployment/network-plugin-policy-manager", "--tail=30").CombinedOutput()
		t.Fatalf("the manager Deployment is not available within 4m (%s):\n%s\n%s", last, pods, logs)
	}
	t.Logf("manager available as 2 pods %s after the apply", time.Since(start).Round(time.Second))
	pods, err := cs.CoreV1().Pods(root).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=network-plugin-policy"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if !strings.HasPrefix(p.Spec.NodeName, "real-") {
			t.Errorf("manager pod %s on %s, want a real node", p.Name, p.Spec.NodeName)
		}
	}

	// A HostPort game server, admitted by the manager's pods through the Service.
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "gs", Namespace: ns, Annotations: map[string]string{
			networkstatus.AnnotationNetworkType: "Kubernetes-HostPort",
			networkstatus.AnnotationNetworkConf: fmt.Sprintf(`[{"name":"ContainerPorts","value":"echo:%d/UDP"}]`, echoPort),
		}},
		Spec: corev1.PodSpec{
			NodeSelector:                  map[string]string{RealNodeLabel: "true"},
			AutomountServiceAccountToken:  ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []corev1.Container{{
				Name: "echo", Image: images.Echo, ImagePullPolicy: corev1.PullNever,
				Args: []string{"-port", fmt.Sprint(echoPort)},
				Env:  []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
			}},
		},
	}
	created, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create the game server: %v", err)
	}
	if created.Annotations[podwebhook.AnnotationDecision] == "" {
		t.Fatal("the game server was admitted without the manager's decision")
	}
	var target string
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "gs", metav1.GetOptions{})
		if err != nil || p.Status.Phase != corev1.PodRunning {
			return false, nil
		}
		st, err := networkstatus.DecodeStatus(p.Annotations[networkstatus.AnnotationNetworkStatus])
		if err != nil || st == nil || st.CurrentNetworkState != networkstatus.NetworkReady || len(st.ExternalAddresses) == 0 || len(st.ExternalAddresses[0].Ports) == 0 {
			return false, nil
		}
		a := st.ExternalAddresses[0]
		target = fmt.Sprintf("%s:%s", a.IP, a.Ports[0].Port.String())
		return true, nil
	})
	if err != nil {
		t.Fatal("the game server is not Running with a Ready network-status within 2m")
	}
	got, err := echoOnce(ctx, "udp", target, "ping")
	if err != nil || got != "gs: ping" {
		t.Errorf("the game server at %s (its network-status): %q (%v), want %q", target, got, err, "gs: ping")
	}
}

// available reports whether the Deployment's Available condition is True.
func available(d *appsv1.Deployment) bool {
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
