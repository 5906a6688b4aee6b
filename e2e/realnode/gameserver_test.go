package realnode

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/okg-extensions/network-plugin-policy/e2e/cluster"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// echoGameServer is EchoGameServer with the suite's echo image.
func echoGameServer(ns, name, networkType, conf string) *corev1.Pod {
	return EchoGameServer(images.Echo, ns, name, networkType, conf)
}

// startNode starts the test's i-th real node with the suite's images (Harness.StartNode)
// and removes its interface at the test's end, after the test's pods, before its control
// plane stops; an error fails the test.
func startNode(ctx context.Context, t *testing.T, cp *cluster.ControlPlane, i int) *Node {
	t.Helper()
	n, err := harness.StartNode(ctx, cp, i, NodeOptions{Images: images.Archives, SandboxImage: images.Pause})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.RemoveInterface)
	return n
}

// gameNamespace creates the namespace ns and, at the test's end, deletes its pods and waits
// until they are gone: before the kubelets stop, so that CNI DEL removes their portmap rules.
func gameNamespace(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns string) {
	t.Helper()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.CoreV1().Pods(ns).DeleteCollection(context.Background(), metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](1)}, metav1.ListOptions{})
		_ = wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			return err == nil && len(l.Items) == 0, nil
		})
	})
}

// readyNetwork waits up to 2 minutes until the pod ns/name runs with a Ready network-status
// that announces an external address with ports, and returns the pod and that address.
func readyNetwork(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, name string) (*corev1.Pod, networkstatus.NetworkAddress) {
	t.Helper()
	var pod *corev1.Pod
	var addr networkstatus.NetworkAddress
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil || p.Status.Phase != corev1.PodRunning {
			return false, nil
		}
		st, err := networkstatus.DecodeStatus(p.Annotations[networkstatus.AnnotationNetworkStatus])
		if err != nil || st == nil || st.CurrentNetworkState != networkstatus.NetworkReady || len(st.ExternalAddresses) == 0 || len(st.ExternalAddresses[0].Ports) == 0 {
			return false, nil
		}
		pod, addr = p, st.ExternalAddresses[0]
		return true, nil
	})
	if err != nil {
		t.Fatalf("%s: not Running with a Ready network-status within 2m", name)
	}
	return pod, addr
}
