package cluster

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// TestFakeNodesRunPods checks that a cluster with fake nodes runs a StatefulSet the way the
// HostPort scenarios need: pods are scheduled, Running, with pod IPs from PodCIDR and the
// node's address as host IP, and the scheduler never puts two pods with the same host port on
// one node (the third of three pods on two nodes stays Pending).
func TestFakeNodesRunPods(t *testing.T) {
	c := StartForTest(t, Options{FakeNodes: 2})
	cs := kubernetes.NewForConfigOrDie(c.Config)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	labels := map[string]string{"app": "gs"}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "gs", Namespace: "default"},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To[int32](3),
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector:            &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "game", Image: "registry.invalid/game:1",
					Ports: []corev1.ContainerPort{{ContainerPort: 7777, HostPort: 8000, Protocol: corev1.ProtocolUDP}},
				}}},
			},
		},
	}
	if _, err := cs.AppsV1().StatefulSets("default").Create(ctx, sts, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create StatefulSet: %v", err)
	}

	var pods *corev1.PodList
	err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		var err error
		pods, err = cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=gs"})
		if err != nil || len(pods.Items) != 3 {
			return false, nil
		}
		running, unschedulable := 0, 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
				running++
			}
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodScheduled && cond.Reason == corev1.PodReasonUnschedulable {
					unschedulable++
				}
			}
		}
		return running == 2 && unschedulable == 1, nil
	})
	if err != nil {
		for _, p := range pods.Items {
			t.Logf("pod %s: node %q phase %s ip %q conditions %+v", p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.PodIP, p.Status.Conditions)
		}
		t.Fatalf("want 2 Running pods with IPs and 1 unschedulable: %v", err)
	}
	nodes := map[string]bool{}
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodRunning {
			continue
		}
		if nodes[p.Spec.NodeName] {
			t.Errorf("two pods with host port 8000 on node %s", p.Spec.NodeName)
		}
		nodes[p.Spec.NodeName] = true
		want := NodeAddress(0)
		if p.Spec.NodeName == NodeName(1) {
			want = NodeAddress(1)
		}
		if p.Status.HostIP != want {
			t.Errorf("pod %s on %s has hostIP %q, want the node's InternalIP %q", p.Name, p.Spec.NodeName, p.Status.HostIP, want)
		}
	}
}
