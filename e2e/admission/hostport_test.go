package admission

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	pluginkubernetes "github.com/okg-extensions/network-plugin-policy/pkg/plugin/kubernetes"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

const hostPortConf = `[{"name":"ContainerPorts","value":"game:7777/UDP"}]`

// Scenario 1: HostPort without any policy. A StatefulSet's pods get host ports from the
// configured range and become network-Ready with their node's address and port; the scheduler
// never puts two pods with the same host port on one node.
func TestHostPortWithoutPolicy(t *testing.T) {
	ns := newNamespace(t, "hostport", nil)
	// 6 pods on 4 ports: two ports are shared, by pods the scheduler must put on different nodes.
	const replicas = (maxPort-minPort+1)*podsPerPort - 2
	createStatefulSet(t, ns, "gs", replicas, gamePodTemplate("gs", "Kubernetes-HostPort", hostPortConf))

	var pods []corev1.Pod
	took := eventually(t, 2*time.Minute, "all pods Running with a Ready network and the retry state cleared", func(ctx context.Context) (bool, error) {
		var err error
		if pods, err = listPods(ctx, ns, "gs"); err != nil || len(pods) != replicas {
			return false, err
		}
		for i := range pods {
			_, retrying := pods[i].Annotations["policy.game.kruise.io/network-retry"]
			if pods[i].Status.Phase != corev1.PodRunning || networkState(&pods[i]) != networkstatus.NetworkReady || retrying {
				return false, nil
			}
		}
		return true, nil
	})
	t.Logf("%d HostPort pods network-Ready %s after the StatefulSet was created", replicas, took.Round(100*time.Millisecond))

	perNode := map[string]map[int32]string{}
	for i := range pods {
		p := &pods[i]
		port := hostPortOf(p)
		if port < minPort || port > maxPort {
			t.Errorf("pod %s has host port %d, want one in [%d, %d]", p.Name, port, minPort, maxPort)
		}
		if other, dup := perNode[p.Spec.NodeName][port]; dup {
			t.Errorf("pods %s and %s both use host port %d on node %s", other, p.Name, port, p.Spec.NodeName)
		}
		if perNode[p.Spec.NodeName] == nil {
			perNode[p.Spec.NodeName] = map[int32]string{}
		}
		perNode[p.Spec.NodeName][port] = p.Name

		st, err := networkstatus.StatusFromPod(p)
		if err != nil {
			t.Fatalf("pod %s: %v", p.Name, err)
		}
		node, err := cs.CoreV1().Nodes().Get(context.Background(), p.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		wantIP := node.Status.Addresses[0].Address
		if len(st.ExternalAddresses) != 1 || st.ExternalAddresses[0].IP != wantIP || len(st.ExternalAddresses[0].Ports) != 1 ||
			st.ExternalAddresses[0].Ports[0].Port.IntValue() != int(port) || st.ExternalAddresses[0].Ports[0].Protocol != corev1.ProtocolUDP {
			t.Errorf("pod %s external addresses %+v, want %s:%d/UDP", p.Name, st.ExternalAddresses, wantIP, port)
		}
		if len(st.InternalAddresses) != 1 || st.InternalAddresses[0].IP != p.Status.PodIP {
			t.Errorf("pod %s internal addresses %+v, want the pod IP %s", p.Name, st.InternalAddresses, p.Status.PodIP)
		}
	}
	if len(perNode) != fakeNodes {
		t.Errorf("pods on %d nodes, want %d (shared host ports force a spread)", len(perNode), fakeNodes)
	}
}

// Scenario 2: the HostPort range is exhausted: the next pod is denied, and the StatefulSet's
// events carry the message naming the plugin, the error and "built-in default".
// Scenario 3: a namespace policy makes HostPort Asynchronous with exhaustedAction Recreate
// and a 10s window: the failing pod is admitted NotReady, recreated once the window closes,
// and gets its ports once ports free up.
func TestHostPortExhaustedThenRecreatedByPolicy(t *testing.T) {
	full := newNamespace(t, "filler", nil)
	const capacity = (maxPort - minPort + 1) * podsPerPort
	// Fill the range exactly, then ask for one more. Two replicas admitting concurrent
	// CREATEs may overshoot max_pods_per_port by what one has not seen of the other's
	// (docs/replicas.md), which would leave a place free elsewhere; so the filler pods come
	// one at a time, each after both replicas' informers have shown the one before.
	createStatefulSet(t, full, "filler", 0, gamePodTemplate("filler", "Kubernetes-HostPort", hostPortConf))
	for n := 1; n <= capacity; n++ {
		scaleStatefulSet(t, full, "filler", int32(n))
		eventually(t, time.Minute, fmt.Sprintf("filler pod %d of %d admitted with a host port and seen by both replicas", n, capacity),
			func(ctx context.Context) (bool, error) {
				pods, err := listPods(ctx, full, "filler")
				if err != nil {
					return false, err
				}
				if len(pods) != n {
					return false, fmt.Errorf("%d filler pods, want %d", len(pods), n)
				}
				for i := range pods {
					if hostPortOf(&pods[i]) == 0 {
						return false, fmt.Errorf("pod %s admitted without a host port", pods[i].Name)
					}
				}
				for _, r := range mgr.Replicas {
					observed, err := r.Metric(ctx, pluginkubernetes.MetricHostPortAllocations, `source="observed"`)
					if err != nil {
						return false, err
					}
					if int(observed) != n {
						return false, fmt.Errorf("%s observes %v (pod, port) pairs, want %d", r.Name, observed, n)
					}
				}
				return true, nil
			})
	}
	scaleStatefulSet(t, full, "filler", capacity+1)

	eventually(t, 2*time.Minute, "the pod beyond the range denied, with the StatefulSet's event naming plugin, error and built-in default",
		func(ctx context.Context) (bool, error) {
			pods, err := listPods(ctx, full, "filler")
			if err != nil {
				return false, err
			}
			if len(pods) != capacity {
				return false, fmt.Errorf("%d filler pods, want %d: %s", len(pods), capacity, podsSummary(pods))
			}
			ok, err := hasEvent(ctx, full, "filler", "FailedCreate",
				"Kubernetes-HostPort", "retryError", "exhausted", "denied by built-in default")
			if err == nil && !ok {
				err = fmt.Errorf("no such event yet; events: %s", eventNotes(ctx, full))
			}
			return ok, err
		})

	recreate := newNamespace(t, "recreate", nil)
	applyPolicy(t, fmt.Sprintf(`
apiVersion: policy.game.kruise.io/v1alpha1
kind: NetworkPluginPolicy
metadata: {name: hostport-recreate, namespace: %s}
spec:
  plugins: ["Kubernetes-HostPort"]
  failureMode: Asynchronous
  retry: {window: 10s, interval: 2s, maxInterval: 4s, exhaustedAction: Recreate}
`, recreate))
	waitForPolicy(t, recreate, "hostport-recreate", "Kubernetes-HostPort")
	createStatefulSet(t, recreate, "late", 1, gamePodTemplate("late", "Kubernetes-HostPort", hostPortConf))

	var first corev1.Pod
	eventually(t, time.Minute, "the pod admitted with its network NotReady, a retry state and a retryError event", func(ctx context.Context) (bool, error) {
		pods, err := listPods(ctx, recreate, "late")
		if err != nil {
			return false, err
		}
		if len(pods) != 1 {
			return false, fmt.Errorf("%d late pods: %s; events: %s", len(pods), podsSummary(pods), eventNotes(ctx, recreate))
		}
		first = pods[0]
		rs := retryState(t, &first)
		// The retryError is the CREATE's: the retry UPDATEs that follow at once (the pod gets
		// its node and IP) find no host port to allocate and leave lastError empty, so the
		// error is looked for in the pod's Warning event rather than in the retry state.
		if networkState(&first) == networkstatus.NetworkNotReady && hostPortOf(&first) == 0 && rs != nil {
			ok, err := hasEvent(ctx, recreate, first.Name, "retryError", "Kubernetes-HostPort", "exhausted")
			if err != nil || ok {
				return ok, err
			}
		}
		return false, fmt.Errorf("pod %s: %s, retry state %+v; events: %s", first.Name, podsSummary(pods), rs, eventNotes(ctx, recreate))
	})
	eventually(t, time.Minute, "NetworkRetryExhausted and the pod recreated after the 10s window", func(ctx context.Context) (bool, error) {
		pods, err := listPods(ctx, recreate, "late")
		if err != nil || len(pods) != 1 || pods[0].UID == first.UID {
			return false, err
		}
		return hasEvent(ctx, recreate, first.Name, "NetworkRetryExhausted")
	})

	// Free the range: the next recreated pod gets its host port and a Ready network.
	if _, err := cs.AppsV1().StatefulSets(full).Patch(context.Background(), "filler", types.MergePatchType,
		[]byte(`{"spec":{"replicas":0}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	took := eventually(t, 2*time.Minute, "a recreated pod with its host port and a Ready network", func(ctx context.Context) (bool, error) {
		pods, err := listPods(ctx, recreate, "late")
		if err != nil || len(pods) != 1 {
			return false, err
		}
		return hostPortOf(&pods[0]) != 0 && networkState(&pods[0]) == networkstatus.NetworkReady, nil
	})
	t.Logf("ports freed -> recreated pod network-Ready in %s", took.Round(100*time.Millisecond))
}

// TestHostPortsOfOtherPodsCount: a host port in the range that a pod of no network type holds
// (a DaemonSet's agent, here one bare pod per node) counts on its node: a HostPort game server
// is not handed that port, where it could never be scheduled.
func TestHostPortsOfOtherPodsCount(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "hostport-others", nil)
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		agent := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "agent-" + n.Name, Namespace: ns},
			Spec: corev1.PodSpec{NodeName: n.Name, TerminationGracePeriodSeconds: ptr.To[int64](0),
				Containers: []corev1.Container{{Name: "agent", Image: "agent:1",
					Ports: []corev1.ContainerPort{{ContainerPort: 9100, HostPort: minPort, Protocol: corev1.ProtocolTCP}}}}},
		}
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, agent, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The manager's pod informer sees the agents within a moment.
	time.Sleep(2 * time.Second)
	createStatefulSet(t, ns, "gs", 1, gamePodTemplate("gs", "Kubernetes-HostPort", hostPortConf))
	var port int32
	eventually(t, time.Minute, "the game server admitted with a host port", func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "gs-0", metav1.GetOptions{})
		if err != nil {
			return false, ignoreNotFound(err)
		}
		port = hostPortOf(p)
		return port != 0, nil
	})
	if port == minPort {
		t.Errorf("the game server got host port %d, which the agent holds on every node", port)
	}
}
