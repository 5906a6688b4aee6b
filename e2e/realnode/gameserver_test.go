package realnode

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// echoGameServer returns a bare pod of the echo game server (images.Echo, never pulled) with
// the network type and network-conf; it carries no container ports (the plugins add what
// network-conf asks for) and no service-account token.
func echoGameServer(ns, name, networkType, conf string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: map[string]string{
			networkstatus.AnnotationNetworkType: networkType,
			networkstatus.AnnotationNetworkConf: conf,
		}},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken:  ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []corev1.Container{{
				Name: "echo", Image: images.Echo, ImagePullPolicy: corev1.PullNever,
				Args: []string{"-port", fmt.Sprint(echoPort)},
				Env:  []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
			}},
		},
	}
}

// gameNamespace creates the namespace ns and, at the test's end, deletes its pods and waits
// until they are gone: before the kubelets stop, so that CNI DEL removes their portmap rules.
func gameNamespace(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns string) {
	t.Helper()
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
