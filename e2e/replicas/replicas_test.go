// Package replicas runs the manager as config/default deploys it, two replicas behind one
// webhook endpoint with leader election on, and checks that the replicas share the HostPort
// state: it comes from the pod informer every replica sees, plus each replica's in-flight
// reservations, so ports are neither leaked nor counted twice, whichever replica admits or
// sees a pod go.
package replicas

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/okg-extensions/network-plugin-policy/e2e/cluster"
)

const (
	// The HostPort range: 150 ports, each shared by at most 2 pods (on different nodes), room
	// for 300 pods; the scenarios run up to 250, so any "exhausted" is false.
	minPort, maxPort, podsPerPort = 20000, 20149, 2
	fakeNodes                     = 4
	hostPortConf                  = `[{"name":"ContainerPorts","value":"game:7777/UDP"}]`
)

var (
	cp  *cluster.ControlPlane
	mgr *cluster.Manager
	cs  kubernetes.Interface
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	return cluster.RunSuite(m, cluster.SuiteOptions{
		Cluster: cluster.Options{FakeNodes: fakeNodes},
		CRDDirs: []string{"../../crds"},
		ProviderConfig: fmt.Sprintf("[kubernetes]\nenable = true\n[kubernetes.hostPort]\nmin_port = %d\nmax_port = %d\nmax_pods_per_port = %d\n",
			minPort, maxPort, podsPerPort),
		Manager: &cluster.ManagerOptions{Replicas: 2},
	}, func(s *cluster.Suite) error {
		cp, mgr = s.ControlPlane, s.Manager
		cfg := rest.CopyConfig(cp.Config)
		cfg.QPS, cfg.Burst = 100, 200
		cs = kubernetes.NewForConfigOrDie(cfg)
		return nil
	})
}

// TestHostPortStateSharedByReplicas creates 200 HostPort pods at once (four Parallel
// StatefulSets) through both replicas, then deletes half of them, and checks after each step
// that every pod got its host port, no port holds more pods than max_pods_per_port (plus
// the documented overshoot of concurrent CREATEs on two replicas), and both
// replicas count exactly the ports the existing pods hold, with no reservation left over.
func TestHostPortStateSharedByReplicas(t *testing.T) {
	ns := newNamespace(t)
	requestsBefore := webhookRequests(t)
	for i := range 4 {
		createStatefulSet(t, ns, "gs"+strconv.Itoa(i), 50)
	}
	waitPods(t, ns, 200, 3*time.Minute)
	checkHostPorts(t, ns, 200)
	requestsAfter := webhookRequests(t)
	for i, r := range mgr.Replicas {
		if requestsAfter[i] <= requestsBefore[i] {
			t.Errorf("replica %s answered no pod webhook request; the scenario must go through both replicas", r.Name)
		}
	}
	checkReplicasAgree(t, ns)

	// Deleting pods frees their ports on both replicas, whichever replica the DELETE reached
	// (or none: the release follows the informer's delete event).
	for i := range 2 {
		scale(t, ns, "gs"+strconv.Itoa(i), 0)
	}
	pods, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=gs2"})
	if err != nil {
		t.Fatal(err)
	}
	deleted := map[types.UID]bool{}
	for _, p := range pods.Items[:10] {
		deleted[p.UID] = true
		if err := cs.CoreV1().Pods(ns).Delete(context.Background(), p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			t.Fatal(err)
		}
	}
	// Pods still on their way out can make the count right for a moment: wait until the
	// scaled-down and the deleted ones are all gone first.
	err = wait.PollUntilContextTimeout(context.Background(), time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		all, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, p := range all.Items {
			if deleted[p.UID] || p.Labels["app"] == "gs0" || p.Labels["app"] == "gs1" {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("scaled-down and deleted pods of %s not gone: %v", ns, err)
	}
	waitPods(t, ns, 100, 2*time.Minute) // gs2's pods come back (new UIDs, maybe other ports)
	checkHostPorts(t, ns, 100)
	checkReplicasAgree(t, ns)
}

// TestRollingRestartDuringScaleUp restarts the replicas one at a time while a StatefulSet
// scales up: every pod is admitted with its host port, no CREATE fails (the StatefulSet
// controller records no FailedCreate), and afterwards both replicas count each port once.
func TestRollingRestartDuringScaleUp(t *testing.T) {
	ns := newNamespace(t)
	createStatefulSet(t, ns, "rolling", 0)
	done := make(chan error, 1)
	go func() { done <- mgr.RollingRestart(context.Background()) }()
	for _, n := range []int32{10, 20, 30, 40, 50} {
		scale(t, ns, "rolling", n)
		time.Sleep(time.Second)
	}
	if err := <-done; err != nil {
		t.Fatalf("rolling restart: %v", err)
	}
	waitPods(t, ns, 50, 3*time.Minute)
	checkHostPorts(t, ns, 50)
	checkReplicasAgree(t, ns)
	events, err := cs.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "reason=FailedCreate"})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		t.Errorf("a pod CREATE failed during the rolling restart: %s %s", e.InvolvedObject.Name, e.Message)
	}
}

// newNamespace creates a namespace for one test and deletes its workloads at the end.
func newNamespace(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	ns, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "replicas-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_ = cs.AppsV1().StatefulSets(ns.Name).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		_ = cs.CoreV1().Pods(ns.Name).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{})
		_ = wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
			pods, err := cs.CoreV1().Pods(ns.Name).List(ctx, metav1.ListOptions{})
			return err == nil && len(pods.Items) == 0, nil
		})
		_ = cs.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{})
	})
	return ns.Name
}

// createStatefulSet creates a Parallel StatefulSet of HostPort game servers, label app=name.
func createStatefulSet(t *testing.T, ns, name string, replicas int32) {
	t.Helper()
	createGameServers(t, ns, name, replicas, "Kubernetes-HostPort", hostPortConf)
}

func scale(t *testing.T, ns, name string, replicas int32) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)
	if _, err := cs.AppsV1().StatefulSets(ns).Patch(context.Background(), name, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("scale StatefulSet %s/%s to %d: %v", ns, name, replicas, err)
	}
}

// waitPods waits until ns holds exactly n pods, none terminating, all scheduled.
func waitPods(t *testing.T, ns string, n int, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	last := ""
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		ready := 0
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && p.Spec.NodeName != "" {
				ready++
			}
		}
		last = fmt.Sprintf("%d pods, %d scheduled and not terminating", len(pods.Items), ready)
		return len(pods.Items) == n && ready == n, nil
	})
	if err != nil {
		t.Fatalf("want %d scheduled pods in %s within %s: %s", n, ns, timeout, last)
	}
}

// checkHostPorts checks that each of the n pods of ns holds one host port in the range and
// that no port holds more than podsPerPort pods of the whole cluster, plus the overshoot
// docs/replicas.md allows for concurrent CREATEs on different replicas.
func checkHostPorts(t *testing.T, ns string, n int) {
	t.Helper()
	pods, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != n {
		t.Fatalf("%d pods in %s, want %d", len(pods.Items), ns, n)
	}
	for _, p := range pods.Items {
		if ports := hostPorts(&p); len(ports) != 1 {
			t.Errorf("pod %s holds host ports %v, want one in %d-%d", p.Name, ports, minPort, maxPort)
		}
	}
	usage := map[int32]int{}
	all, err := cs.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range all.Items {
		for _, port := range hostPorts(&p) {
			usage[port]++
		}
	}
	// Two replicas admitting CREATEs in the same milliseconds may each put a pod on a port the
	// other has just filled (docs/replicas.md, "What max_pods_per_port guarantees", which
	// advises keeping the limit one below the hard limit per pair of replicas): that margin,
	// one pod per other replica, is the bound checked; every overshoot is logged.
	limit := podsPerPort + len(mgr.Replicas) - 1
	over := 0
	for port, n := range usage {
		if n > podsPerPort {
			over++
			t.Logf("host port %d holds %d pods, max_pods_per_port is %d (concurrent CREATEs on two replicas)", port, n, podsPerPort)
		}
		if n > limit {
			t.Errorf("host port %d holds %d pods, more than max_pods_per_port %d plus one per other replica", port, n, podsPerPort)
		}
	}
	t.Logf("%d of %d ports in use hold more than max_pods_per_port %d", over, len(usage), podsPerPort)
}

// checkReplicasAgree waits until each replica's HostPort metrics equal what the cluster's
// pods hold: npp_hostport_allocations{source="observed"} the (pod, port) pairs,
// npp_hostport_ports_in_use the distinct ports, and no reservation left.
func checkReplicasAgree(t *testing.T, ns string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	last := ""
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		all, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		pairs, ports := 0, map[int32]bool{}
		for _, p := range all.Items {
			for _, port := range hostPorts(&p) {
				pairs++
				ports[port] = true
			}
		}
		last = fmt.Sprintf("the pods hold %d (pod, port) pairs on %d ports", pairs, len(ports))
		agree := true
		for _, r := range mgr.Replicas {
			observed, err1 := r.Metric(ctx, "npp_hostport_allocations", `source="observed"`)
			reserved, err2 := r.Metric(ctx, "npp_hostport_allocations", `source="reserved"`)
			inUse, err3 := r.Metric(ctx, "npp_hostport_ports_in_use")
			if err := firstErr(err1, err2, err3); err != nil {
				last += "; " + err.Error()
				return false, nil
			}
			last += fmt.Sprintf("; %s counts %v observed, %v reserved on %v ports", r.Name, observed, reserved, inUse)
			if int(observed) != pairs || reserved != 0 || int(inUse) != len(ports) {
				agree = false
			}
		}
		return agree, nil
	})
	if err != nil {
		t.Errorf("the replicas' HostPort state does not match the pods in %s: %s", ns, last)
	}
}

// webhookRequests returns each replica's count of pod webhook requests.
func webhookRequests(t *testing.T) []float64 {
	t.Helper()
	var out []float64
	for _, r := range mgr.Replicas {
		v, err := r.Metric(context.Background(), "controller_runtime_webhook_requests_total", `webhook="/mutate-v1-pod"`)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

// hostPorts returns the host ports of the pod's containers inside the range.
func hostPorts(p *corev1.Pod) []int32 {
	var out []int32
	for _, c := range p.Spec.Containers {
		for _, port := range c.Ports {
			if port.HostPort >= minPort && port.HostPort <= maxPort {
				out = append(out, port.HostPort)
			}
		}
	}
	return out
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
