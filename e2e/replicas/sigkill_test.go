package replicas

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// nodePortConf is the network-conf of the NodePort game servers of these tests.
const nodePortConf = `[{"name":"PortProtocols","value":"7777/UDP"}]`

// TestReplicaKilledDuringBurst is a fault of the fault campaign (docs/reliability.md): 200
// game servers are created at once, 100 HostPort and 100 NodePort (four Parallel
// StatefulSets), and one of the two replicas is killed with SIGKILL 1.5 s into the burst,
// without releasing its Lease and while it is still an endpoint. Counted and required:
//   - HostPort pods running without their host port: 0 (the sync entry is failurePolicy
//     Fail: a create the dead replica could not answer is refused, and the StatefulSet
//     controller creates the pod again);
//   - a host port given twice on one node: 0;
//   - pods that never get their network: 0 (NodePort pods admitted while their request failed
//     go through the async entry, failurePolicy Ignore, and are caught up);
//
// and reported: the creates refused (FailedCreate events) and how long until every network
// was Ready. The killed replica is started again at the end. It runs after the package's other
// tests (this file sorts after replicas_test.go): the API server keeps its kept-alive webhook
// connections to the surviving replica, so a restarted one may answer nothing for a while,
// and TestHostPortStateSharedByReplicas requires both to answer.
func TestReplicaKilledDuringBurst(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	victim := mgr.Replicas[0]
	t.Cleanup(func() {
		if err := victim.Start(context.Background()); err != nil {
			t.Errorf("restart %s: %v", victim.Name, err)
		}
	})
	start := time.Now()
	for i := range 2 {
		createStatefulSet(t, ns, fmt.Sprintf("hp%d", i), 50)
		createGameServers(t, ns, fmt.Sprintf("np%d", i), 50, "Kubernetes-NodePort", nodePortConf)
	}
	time.Sleep(1500 * time.Millisecond)
	victim.Kill()
	t.Logf("killed %s (SIGKILL) %s after the first create", victim.Name, time.Since(start).Round(time.Millisecond))

	waitPods(t, ns, 200, 4*time.Minute)
	var notReady, hostPortless, doubled int
	err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		notReady, hostPortless, doubled = 0, 0, 0
		onNode := map[string]bool{}
		for _, p := range pods.Items {
			if p.Annotations[networkstatus.AnnotationNetworkType] == "Kubernetes-HostPort" {
				ports := hostPorts(&p)
				if len(ports) != 1 {
					hostPortless++
				}
				for _, port := range ports {
					key := fmt.Sprintf("%s:%d", p.Spec.NodeName, port)
					if onNode[key] {
						doubled++
					}
					onNode[key] = true
				}
			}
			st, err := networkstatus.StatusFromPod(&p)
			if err != nil || st == nil || st.CurrentNetworkState != networkstatus.NetworkReady {
				notReady++
			}
		}
		return notReady == 0, nil
	})
	took := time.Since(start).Round(100 * time.Millisecond)
	refused, err2 := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=FailedCreate"})
	if err2 != nil {
		t.Fatal(err2)
	}
	refusedCreates := 0
	for _, e := range refused.Items {
		refusedCreates += int(max(e.Count, 1))
	}
	t.Logf("fault: replica killed during a burst of 200 creates: %d creates refused (FailedCreate), %d HostPort pods without a host port, %d host ports given twice on one node, %d pods without a Ready network; every network Ready %s after the first create",
		refusedCreates, hostPortless, doubled, notReady, took)
	if err != nil {
		t.Errorf("%d of 200 game servers never got a Ready network within 3m after the pods were scheduled", notReady)
	}
	if hostPortless != 0 {
		t.Errorf("%d HostPort pods run without their host port, want 0", hostPortless)
	}
	if doubled != 0 {
		t.Errorf("%d host ports given twice on one node, want 0", doubled)
	}
}

// createGameServers creates a Parallel StatefulSet of replicas game servers of networkType
// with network-conf conf, label app=name.
func createGameServers(t *testing.T, ns, name string, replicas int32, networkType, conf string) {
	t.Helper()
	labels := map[string]string{"app": name}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To(replicas),
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector:            &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{
					networkstatus.AnnotationNetworkType: networkType,
					networkstatus.AnnotationNetworkConf: conf,
				}},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To[int64](0),
					Containers: []corev1.Container{{Name: "game", Image: "game-server:1.0",
						Ports: []corev1.ContainerPort{{Name: "game", ContainerPort: 7777, Protocol: corev1.ProtocolUDP}}}},
				},
			},
		},
	}
	if _, err := cs.AppsV1().StatefulSets(ns).Create(context.Background(), sts, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create StatefulSet %s/%s: %v", ns, name, err)
	}
}
