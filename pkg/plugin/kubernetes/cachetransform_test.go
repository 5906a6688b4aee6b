package kubernetes

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// transformed returns TransformPod of a copy of pod.
func transformed(t *testing.T, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	out, err := TransformPod(pod.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	return out.(*corev1.Pod)
}

// TestTransformPod: a game server keeps everything but managedFields; any other pod keeps
// only its identity, deletion state, own annotations, node, its host ports (with their
// containers' names) and its phase.
func TestTransformPod(t *testing.T) {
	managed := []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "v1"}}
	game := hostPortPod(HostPortName, "gs-0", "u0", 8000).node("n1").ip("10.0.0.1").label("app", "gs").obj()
	game.ManagedFields = managed
	game.Annotations["kubectl.kubernetes.io/last-applied-configuration"] = "{}"
	want := game.DeepCopy()
	want.ManagedFields = nil
	if diff := cmp.Diff(want, transformed(t, game)); diff != "" {
		t.Errorf("game server (-want,+got):\n%s", diff)
	}

	other := hostPortPod("", "web-0", "u1", 8001).node("n1").ip("10.0.0.2").label("app", "web").terminating().obj()
	delete(other.Annotations, networkstatus.AnnotationNetworkType)
	other.GenerateName = "web-"
	other.ManagedFields = managed
	other.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "web", UID: "s1"}}
	other.Annotations["kubectl.kubernetes.io/last-applied-configuration"] = "{...}"
	other.Annotations["policy.game.kruise.io/network-retry"] = "{}"
	other.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "init:1", Command: []string{"sh"}}}
	other.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "X", Value: "y"}}
	other.Spec.Volumes = []corev1.Volume{{Name: "data"}}
	other.Status.Phase = corev1.PodRunning
	other.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	other.Spec.Containers[0].Ports = append(other.Spec.Containers[0].Ports, corev1.ContainerPort{Name: "http", ContainerPort: 8080})
	other.Spec.Containers = append(other.Spec.Containers, corev1.Container{Name: "sidecar", Ports: []corev1.ContainerPort{{ContainerPort: 9090}}})
	wantOther := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", GenerateName: "web-", Namespace: "game", UID: "u1",
		DeletionTimestamp: other.DeletionTimestamp, Finalizers: []string{"test/keep"}, Annotations: map[string]string{"policy.game.kruise.io/network-retry": "{}"}},
		Spec:   corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "game", Ports: other.Spec.Containers[0].Ports[:1]}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	if diff := cmp.Diff(wantOther, transformed(t, other)); diff != "" {
		t.Errorf("other pod (-want,+got):\n%s", diff)
	}

	node := &corev1.Node{}
	if got, err := TransformPod(node); err != nil || got != node {
		t.Errorf("TransformPod(node) = %v, %v; want the node unchanged", got, err)
	}
}

// cachedEvents delivers a pod's events to a HostPort allocator as the manager's pod cache
// does: only pods CachesPod accepts, transformed by TransformPod, with an update that makes
// a held pod refused delivered as its delete and one that makes a refused pod accepted as
// its add (the event translation of cachefilter.ListerWatcher, tested there).
type cachedEvents struct {
	t     *testing.T
	alloc *hostPortAllocator
	held  map[string]bool // namespace/name
}

func (c cachedEvents) set(pod *corev1.Pod) {
	key := pod.Namespace + "/" + pod.Name
	switch keep := CachesPod(pod); {
	case keep && c.held[key]:
		hostPortEvents{alloc: c.alloc}.OnUpdate(nil, transformed(c.t, pod))
	case keep:
		hostPortEvents{alloc: c.alloc}.OnAdd(transformed(c.t, pod), false)
	case c.held[key]:
		hostPortEvents{alloc: c.alloc}.OnDelete(transformed(c.t, pod))
	}
	c.held[key] = CachesPod(pod)
}

func (c cachedEvents) delete(pod *corev1.Pod) {
	key := pod.Namespace + "/" + pod.Name
	if c.held[key] {
		hostPortEvents{alloc: c.alloc}.OnDelete(transformed(c.t, pod))
	}
	delete(c.held, key)
}

// TestPodCacheKeepsWhatIsRead: the HostPort allocator, the reader of pods that are not
// game servers, decides the same from the pods the manager's cache holds (CachesPod, then
// TransformPod) as from every whole pod, for random sequences of adds, updates (network
// type added, changed or removed, phase changes, host ports) and deletes, and then
// allocates the same ports. A new reader of a field the transform drops, or of a pod the
// cache refuses, makes this fail.
func TestPodCacheKeepsWhatIsRead(t *testing.T) {
	cfg := plugin.HostPortConfig{MinPort: 8000, MaxPort: 8009, MaxPodsPerPort: 2}
	netTypes := []string{"", HostPortName, NodePortName, "Other-Type"}
	phases := []corev1.PodPhase{"", corev1.PodPending, corev1.PodRunning, corev1.PodSucceeded, corev1.PodFailed}
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 1))
		clk := clocktesting.NewFakePassiveClock(testNow)
		whole, slim := newHostPortAllocator(cfg, clk, ReservationTTL), newHostPortAllocator(cfg, clk, ReservationTTL)
		cached := cachedEvents{t: t, alloc: newHostPortAllocator(cfg, clk, ReservationTTL), held: map[string]bool{}}
		pods := map[int]*corev1.Pod{}
		for range 40 {
			i := rng.IntN(8)
			prev, exists := pods[i]
			switch {
			case exists && rng.IntN(5) == 0:
				hostPortEvents{alloc: whole}.OnDelete(prev)
				hostPortEvents{alloc: slim}.OnDelete(transformed(t, prev))
				cached.delete(prev)
				delete(pods, i)
				continue
			case exists && rng.IntN(2) == 0:
				// An update: the network type or the phase changes; the spec (ports) does not.
				p := prev.DeepCopy()
				if typ := netTypes[rng.IntN(len(netTypes))]; typ == "" {
					delete(p.Annotations, networkstatus.AnnotationNetworkType)
				} else {
					p.Annotations[networkstatus.AnnotationNetworkType] = typ
				}
				p.Status.Phase = phases[rng.IntN(len(phases))]
				hostPortEvents{alloc: whole}.OnUpdate(prev, p)
				hostPortEvents{alloc: slim}.OnUpdate(transformed(t, prev), transformed(t, p))
				cached.set(p)
				pods[i] = p
			default:
				if exists {
					hostPortEvents{alloc: whole}.OnDelete(prev)
					hostPortEvents{alloc: slim}.OnDelete(transformed(t, prev))
					cached.delete(prev)
				}
				var ports []int32
				for range rng.IntN(3) {
					ports = append(ports, 7998+rng.Int32N(14))
				}
				p := hostPortPod(netTypes[rng.IntN(len(netTypes))], fmt.Sprintf("p-%d", i), fmt.Sprintf("u-%d-%d", i, rng.Int()), ports...).obj()
				if p.Annotations[networkstatus.AnnotationNetworkType] == "" {
					delete(p.Annotations, networkstatus.AnnotationNetworkType)
				}
				p.Spec.InitContainers = []corev1.Container{{Name: "init", Ports: []corev1.ContainerPort{{ContainerPort: 1, HostPort: 8000 + rng.Int32N(10)}}}}
				p.Status.Phase = phases[rng.IntN(len(phases))]
				p.Spec.NodeName = fmt.Sprintf("n%d", rng.IntN(3))
				hostPortEvents{alloc: whole}.OnAdd(p, false)
				hostPortEvents{alloc: slim}.OnAdd(transformed(t, p), false)
				cached.set(p)
				pods[i] = p
			}
			if diff := cmp.Diff(whole.usageNow(), slim.usageNow()); diff != "" {
				t.Fatalf("seed %d: usage from transformed pods differs (-whole,+transformed):\n%s", seed, diff)
			}
			if diff := cmp.Diff(whole.usageNow(), cached.alloc.usageNow()); diff != "" {
				t.Fatalf("seed %d: usage from the cached pods differs (-whole,+cached):\n%s", seed, diff)
			}
		}
		key := reservationKey{namespace: "game", name: "new"}
		a, _, errA := whole.allocate(key, "", 3)
		b, _, errB := slim.allocate(key, "", 3)
		if !cmp.Equal(a, b) || fmt.Sprint(errA) != fmt.Sprint(errB) {
			t.Fatalf("seed %d: allocation %v (%v) from whole pods, %v (%v) from transformed ones", seed, a, errA, b, errB)
		}
		c, _, errC := cached.alloc.allocate(key, "", 3)
		if !cmp.Equal(a, c) || fmt.Sprint(errA) != fmt.Sprint(errC) {
			t.Fatalf("seed %d: allocation %v (%v) from whole pods, %v (%v) from the cached ones", seed, a, errA, c, errC)
		}
	}
}

// TestTransformNodeKeepsWhatIsRead: HostPort and NodePort publish the same network-status
// for a pod on a transformed node as on the whole node, which carries every field the
// transform drops (images, volumes) and the ones it keeps.
func TestTransformNodeKeepsWhatIsRead(t *testing.T) {
	whole := newNode("n1", corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.7"}, extIP("203.0.113.7"),
		corev1.NodeAddress{Type: corev1.NodeHostName, Address: "n1"})
	whole.Labels = map[string]string{"topology.kubernetes.io/zone": "z1"}
	whole.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1"}}
	whole.Spec.Taints = []corev1.Taint{{Key: "game", Effect: corev1.TaintEffectNoSchedule}}
	whole.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	whole.Status.Images = []corev1.ContainerImage{{Names: []string{"registry.example/game:1", "registry.example/game@sha256:00"}, SizeBytes: 1 << 30}}
	whole.Status.VolumesInUse = []corev1.UniqueVolumeName{"kubernetes.io/csi/x"}
	whole.Status.VolumesAttached = []corev1.AttachedVolume{{Name: "kubernetes.io/csi/x", DevicePath: "/dev/x"}}
	out, err := TransformNode(whole.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	slim := out.(*corev1.Node)
	if slim.Status.Images != nil || slim.ManagedFields != nil || slim.Status.VolumesInUse != nil || slim.Status.VolumesAttached != nil {
		t.Errorf("TransformNode kept %+v", slim)
	}
	if !cmp.Equal(slim.Status.Addresses, whole.Status.Addresses) || !cmp.Equal(slim.Labels, whole.Labels) || !cmp.Equal(slim.Spec, whole.Spec) {
		t.Errorf("TransformNode dropped a kept field: %+v", slim)
	}

	ctx := context.Background()
	run := func(node *corev1.Node) (hostPortResult, nodePortResult *corev1.Pod, errs string) {
		node = node.DeepCopy()
		node.ManagedFields = nil // the fake client keeps its own
		hp := newHostPortWithClock(clocktesting.NewFakePassiveClock(testNow))
		pod := newPod("gs-0", HostPortName, param("ContainerPorts", "game:7777/UDP")).uid("u0").
			port("game", corev1.ContainerPort{ContainerPort: 7777, HostPort: 8003, Protocol: "UDP"}).node("n1").ip("10.244.0.2").obj()
		h, errH := hp.OnPodUpdated(ctx, newClient(node.DeepCopy()), pod)
		np := NewNodePort()
		pod = newPod("gs-1", NodePortName, param("PortProtocols", "7777/UDP")).uid("u1").node("n1").ip("10.244.0.3").obj()
		c := newClient(node.DeepCopy())
		n, errN := np.OnPodUpdated(ctx, c, pod)
		if errN != nil && plugin.AsError(errN).Type == plugin.APICallError {
			n, errN = np.OnPodUpdated(ctx, c, n) // the Service's node port is assigned by then
		}
		return h, n, fmt.Sprint(errH, errN)
	}
	h1, n1, e1 := run(whole)
	h2, n2, e2 := run(slim)
	if e1 != e2 || !cmp.Equal(h1, h2) || !cmp.Equal(n1, n2) {
		t.Errorf("plugins decide differently on the transformed node: errors %q vs %q\nHostPort (-whole,+slim):\n%s\nNodePort (-whole,+slim):\n%s",
			e1, e2, cmp.Diff(h1, h2), cmp.Diff(n1, n2))
	}
	if st, _ := networkstatus.StatusFromPod(h2); st == nil || len(st.ExternalAddresses) == 0 || st.ExternalAddresses[0].IP != "203.0.113.7" {
		t.Errorf("HostPort status on the transformed node: %+v, want external address 203.0.113.7", st)
	}
}

// TestCachesPod: a game server is held whatever its network type (even empty), any other
// pod only with a host port on one of its containers (an init container's does not count,
// as the HostPort allocator does not count it), and nothing that is not a pod.
func TestCachesPod(t *testing.T) {
	plain := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Annotations: map[string]string{"game.kruise.io/network-conf": "[]"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Ports: []corev1.ContainerPort{{ContainerPort: 80}}}},
			InitContainers: []corev1.Container{{Name: "init", Ports: []corev1.ContainerPort{{ContainerPort: 1, HostPort: 8000}}}}}}
	emptyType := plain.DeepCopy()
	emptyType.Annotations[networkstatus.AnnotationNetworkType] = ""
	okgFinalizer := plain.DeepCopy()
	okgFinalizer.Finalizers = []string{"game.kruise.io/delete-nlb-on-gss-deleted"}
	otherFinalizer := plain.DeepCopy()
	otherFinalizer.Finalizers = []string{"example.com/keep"}
	withHostPort := plain.DeepCopy()
	withHostPort.Spec.Containers = append(withHostPort.Spec.Containers, corev1.Container{Name: "agent", Ports: []corev1.ContainerPort{{ContainerPort: 9100, HostPort: 9100}}})
	for _, c := range []struct {
		name string
		obj  runtime.Object
		want bool
	}{
		{"no network type, no host port", plain, false},
		{"empty network type", emptyType, true},
		{"game server", hostPortPod(NodePortName, "gs-0", "u0").obj(), true},
		{"host port on the second container", withHostPort, true},
		{"no network type, a finalizer of OKG's", okgFinalizer, true},
		{"no network type, another finalizer", otherFinalizer, false},
		{"a node", &corev1.Node{}, false},
	} {
		if got := CachesPod(c.obj); got != c.want {
			t.Errorf("%s: CachesPod = %v, want %v", c.name, got, c.want)
		}
	}
}
