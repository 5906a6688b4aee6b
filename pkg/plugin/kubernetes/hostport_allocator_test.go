package kubernetes

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
)

// hostPortPod returns an existing pod of network type typ (UID uid) whose container
// "game" holds the given host ports (UDP, container port 7000+i).
func hostPortPod(typ, name, uid string, hostPorts ...int32) *podBuilder {
	b := newPod(name, typ).uid(uid)
	for i, hp := range hostPorts {
		b.port("game", corev1.ContainerPort{ContainerPort: 7000 + int32(i), HostPort: hp, Protocol: corev1.ProtocolUDP})
	}
	return b
}

func hp(name, uid string, hostPorts ...int32) *corev1.Pod {
	return hostPortPod(HostPortName, name, uid, hostPorts...).obj()
}

// phase returns p in the given phase.
func phase(p *corev1.Pod, ph corev1.PodPhase) *corev1.Pod {
	p.Status.Phase = ph
	return p
}

// TestHostPortCapPerPod: kubernetes.hostPort.max_ports_per_pod caps the host ports one pod
// may ask for: more is a parameterError naming ContainerPorts, and nothing is reserved.
func TestHostPortCapPerPod(t *testing.T) {
	cfg := hostPortCfg(8000, 8099, 1).Kubernetes.HostPort
	cfg.MaxPortsPerPod = 2
	a := newHostPortAllocator(cfg, clocktesting.NewFakePassiveClock(testNow), ReservationTTL)
	if _, _, err := a.allocate(a.keyFor("game", "gs-0"), "", 2); err != nil {
		t.Fatalf("2 ports: %v", err)
	}
	_, _, err := a.allocate(a.keyFor("game", "gs-1"), "", 3)
	wantError(t, err, plugin.ParameterError, ParamContainerPorts, false, "requests 3 host ports, more than the 2 a pod may have (kubernetes.hostPort.max_ports_per_pod)")
	if u := a.usageNow(); u.ReservedPairs != 2 {
		t.Errorf("reserved %d ports, want only gs-0's 2", u.ReservedPairs)
	}
}

// hostPortStep is one event of TestHostPortUsage: exactly one field is set.
type hostPortStep struct {
	add     *corev1.Pod   // informer add
	update  *corev1.Pod   // informer update (old = the previous add/update of that name)
	del     any           // informer delete (*corev1.Pod or a DeletedFinalStateUnknown)
	create  string        // CREATE admission of a one-port pod of that name ("gen:<prefix>" = generateName)
	persist string        // informer add of the pod the CREATE of this name returned, UID "<name>-uid"
	advance time.Duration // time passes
	wantErr string        // with create: the error the CREATE must fail with
}

func TestHostPortUsage(t *testing.T) {
	term := func(p *corev1.Pod) *corev1.Pod {
		q := p.DeepCopy()
		q.DeletionTimestamp = newPod("x", "").terminating().obj().DeletionTimestamp
		return q
	}
	cases := map[string]struct {
		cfg       plugin.Config
		steps     []hostPortStep
		want      hostPortUsage
		wantPorts map[string]int32 // host port each CREATE got (last CREATE of the name)
	}{
		"observed add counts the host ports inside the range": {
			steps: []hostPortStep{{add: hp("a", "ua", 8000, 8001)}, {add: hp("b", "ub", 8001, 7000)}},
			want:  hostPortUsage{ObservedPairs: 3, ObservedPorts: 2, Ports: 2, Pods: 2},
		},
		"observed update keeps the count, terminating included": {
			steps: []hostPortStep{{add: hp("a", "ua", 8000)}, {update: term(hp("a", "ua", 8000))}},
			want:  hostPortUsage{ObservedPairs: 1, ObservedPorts: 1, Ports: 1, Pods: 1},
		},
		"observed delete releases": {
			steps: []hostPortStep{{add: hp("a", "ua", 8000)}, {add: hp("b", "ub", 8000)}, {del: hp("a", "ua", 8000)}},
			want:  hostPortUsage{ObservedPairs: 1, ObservedPorts: 1, Ports: 1, Pods: 1},
		},
		"tombstone with the pod releases": {
			steps: []hostPortStep{{add: hp("a", "ua", 8000)}, {del: toolscache.DeletedFinalStateUnknown{Key: "game/a", Obj: hp("a", "ua", 8000)}}},
			want:  hostPortUsage{},
		},
		"tombstone with the key only releases": {
			steps: []hostPortStep{{add: hp("a", "ua", 8000)}, {del: toolscache.DeletedFinalStateUnknown{Key: "game/a"}}},
			want:  hostPortUsage{},
		},
		"delete of an unknown pod is ignored": {
			steps: []hostPortStep{{add: hp("a", "ua", 8000)}, {del: hp("b", "ub", 8000)}, {del: "not a pod"}},
			want:  hostPortUsage{ObservedPairs: 1, ObservedPorts: 1, Ports: 1, Pods: 1},
		},
		"pods of other network types, or none, count the host ports they hold": {
			// A DaemonSet's pod or a pod of another network type with hostPort 8000 holds
			// 8000 on its node, as the scheduler counts it: a game server handed 8000 could
			// never run there.
			steps: []hostPortStep{
				{add: hostPortPod("Kubernetes-NodePort", "np", "unp", 8000).obj()},
				{add: hostPortPod("", "plain", "upl", 8001).obj()},
				{add: hostPortPod("", "outside", "uout", 9999).obj()},
				{create: "gs-0"},
			},
			want:      hostPortUsage{ObservedPairs: 2, ObservedPorts: 2, ReservedPairs: 1, Ports: 3, Pods: 2, Reservations: 1},
			wantPorts: map[string]int32{"gs-0": 8002},
		},
		"a pod whose network type changes away keeps counting the ports its spec holds": {
			steps:     []hostPortStep{{add: hp("a", "ua", 8000)}, {update: hostPortPod("Kubernetes-NodePort", "a", "ua", 8000).obj()}, {create: "gs-0"}},
			want:      hostPortUsage{ObservedPairs: 1, ObservedPorts: 1, ReservedPairs: 1, Ports: 2, Pods: 1, Reservations: 1},
			wantPorts: map[string]int32{"gs-0": 8001},
		},
		"a Succeeded pod frees its ports": {
			steps:     []hostPortStep{{add: hp("a", "ua", 8000)}, {update: phase(hp("a", "ua", 8000), corev1.PodSucceeded)}, {create: "gs-0"}},
			want:      hostPortUsage{ReservedPairs: 1, Ports: 1, Pods: 1, Reservations: 1},
			wantPorts: map[string]int32{"gs-0": 8000},
		},
		"a Failed pod frees its ports, also after its type changed": {
			steps: []hostPortStep{{add: hp("a", "ua", 8000)}, {update: hostPortPod("Kubernetes-NodePort", "a", "ua", 8000).obj()},
				{update: phase(hostPortPod("Kubernetes-NodePort", "a", "ua", 8000).obj(), corev1.PodFailed)}},
			want: hostPortUsage{},
		},
		"reservations are capped per namespace": {
			cfg: func() plugin.Config {
				c := hostPortCfg(8000, 8009, 0)
				c.Kubernetes.HostPort.MaxReservedPortsPerNamespace = 2
				return c
			}(),
			steps: []hostPortStep{{create: "gs-0"}, {create: "gs-1"},
				{create: "gs-2", wantErr: "namespace game already holds 2 host ports reserved for pods not created yet, 1 more would pass the limit of 2 (kubernetes.hostPort.max_reserved_ports_per_namespace)"},
				{persist: "gs-0"}, {create: "gs-2"}},
			want:      hostPortUsage{ObservedPairs: 1, ObservedPorts: 1, ReservedPairs: 2, Ports: 3, Pods: 1, Reservations: 2},
			wantPorts: map[string]int32{"gs-0": 8000, "gs-1": 8001, "gs-2": 8002},
		},
		"a new UID under an observed name replaces the old pod (re-list)": {
			steps: []hostPortStep{{add: hp("a", "old", 8000)}, {update: hp("a", "new", 8001)}},
			want:  hostPortUsage{ObservedPairs: 1, ObservedPorts: 1, Ports: 1, Pods: 1},
		},
		"a reservation counts until the informer shows its pod": {
			steps:     []hostPortStep{{add: hp("a", "ua", 8000)}, {create: "gs-0"}, {create: "gs-1"}},
			want:      hostPortUsage{ObservedPairs: 1, ObservedPorts: 1, ReservedPairs: 2, Ports: 3, Pods: 1, Reservations: 2},
			wantPorts: map[string]int32{"gs-0": 8001, "gs-1": 8002},
		},
		"reservation then informer add: no double count": {
			steps:     []hostPortStep{{create: "gs-0"}, {persist: "gs-0"}, {create: "gs-1"}},
			want:      hostPortUsage{ObservedPairs: 1, ObservedPorts: 1, ReservedPairs: 1, Ports: 2, Pods: 1, Reservations: 1},
			wantPorts: map[string]int32{"gs-0": 8000, "gs-1": 8001},
		},
		"a reservation expires after ReservationTTL": {
			steps:     []hostPortStep{{create: "gs-0"}, {advance: ReservationTTL}, {create: "gs-1"}},
			want:      hostPortUsage{ReservedPairs: 1, Ports: 1, Reservations: 1},
			wantPorts: map[string]int32{"gs-0": 8000, "gs-1": 8000},
		},
		"a reservation counts until just before its TTL": {
			steps: []hostPortStep{{create: "gs-0"}, {advance: ReservationTTL - time.Second}},
			want:  hostPortUsage{ReservedPairs: 1, Ports: 1, Reservations: 1},
		},
		"a repeated CREATE gets the same ports and restarts the TTL": {
			steps: []hostPortStep{
				{create: "gs-0"}, {create: "gs-1"}, {advance: ReservationTTL - time.Second},
				{create: "gs-0"}, {advance: 2 * time.Second},
			},
			want:      hostPortUsage{ReservedPairs: 1, Ports: 1, Reservations: 1},
			wantPorts: map[string]int32{"gs-0": 8000, "gs-1": 8001},
		},
		"a new pod reusing the name of a terminating one is not confused with it": {
			steps: []hostPortStep{
				{add: hp("gs-0", "old", 8000)},
				{update: term(hp("gs-0", "old", 8000))},
				{create: "gs-0"},                        // the owner recreates gs-0; the apiserver refuses it (AlreadyExists)
				{update: term(hp("gs-0", "old", 8000))}, // the old pod's status changes: same UID
				{del: term(hp("gs-0", "old", 8000))},    // the old pod is gone
				{create: "gs-0"},                        // the owner retries: same reservation
				{persist: "gs-0"},                       // stored with a new UID
			},
			want:      hostPortUsage{ObservedPairs: 1, ObservedPorts: 1, Ports: 1, Pods: 1},
			wantPorts: map[string]int32{"gs-0": 8001},
		},
		"the terminating predecessor's updates keep the new pod's reservation": {
			steps: []hostPortStep{
				{add: term(hp("gs-0", "old", 8000))},
				{create: "gs-0"},
				{update: term(hp("gs-0", "old", 8000))},
			},
			want:      hostPortUsage{ObservedPairs: 1, ObservedPorts: 1, ReservedPairs: 1, Ports: 2, Pods: 1, Reservations: 1},
			wantPorts: map[string]int32{"gs-0": 8001},
		},
		"generateName pods: matched by namespace, generateName and ports": {
			steps: []hostPortStep{
				{create: "gen:gs-"}, {create: "gen:gs-"},
				{add: func() *corev1.Pod { p := hp("gs-x", "ux", 8001); p.GenerateName = "gs-"; return p }()},
				{add: func() *corev1.Pod { p := hp("other-x", "uo", 8000); p.GenerateName = "other-"; return p }()},
			},
			want: hostPortUsage{ObservedPairs: 2, ObservedPorts: 2, ReservedPairs: 1, Ports: 2, Pods: 2, Reservations: 1},
		},
		"exhaustion with max_pods_per_port counts observed and reserved pods": {
			cfg: hostPortCfg(8000, 8001, 1),
			steps: []hostPortStep{
				{add: hp("a", "ua", 8000)}, {create: "gs-0"},
				{create: "gs-1", wantErr: "host port range 8000-8001 exhausted: 2 ports, 2 in use, each shared by the limit of 1 pods; 1 more needed"},
			},
			want:      hostPortUsage{ObservedPairs: 1, ObservedPorts: 1, ReservedPairs: 1, Ports: 2, Pods: 1, Reservations: 1},
			wantPorts: map[string]int32{"gs-0": 8001},
		},
		"max_pods_per_port shares least-used ports up to the limit": {
			cfg: hostPortCfg(8000, 8001, 2),
			steps: []hostPortStep{
				{add: hp("a", "ua", 8000)}, {add: hp("b", "ub", 8000)}, {add: hp("c", "uc", 8001)},
				{create: "gs-0"},
				{create: "gs-1", wantErr: "exhausted"},
				{del: hp("b", "ub", 8000)},
				{create: "gs-1"},
			},
			want:      hostPortUsage{ObservedPairs: 2, ObservedPorts: 2, ReservedPairs: 2, Ports: 2, Pods: 2, Reservations: 2},
			wantPorts: map[string]int32{"gs-0": 8001, "gs-1": 8000},
		},
		"exhaustion frees itself when the reservation expires": {
			cfg: hostPortCfg(8000, 8000, 1),
			steps: []hostPortStep{
				{create: "gs-0"}, {create: "gs-1", wantErr: "exhausted"},
				{advance: ReservationTTL}, {create: "gs-1"},
			},
			want:      hostPortUsage{ReservedPairs: 1, Ports: 1, Reservations: 1},
			wantPorts: map[string]int32{"gs-0": 8000, "gs-1": 8000},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := tc.cfg
			if cfg.Kubernetes.HostPort.MinPort == 0 {
				cfg = hostPortCfg(8000, 8009, 0)
			}
			h, inf, clk := initHostPortInformer(t, cfg)
			gotPorts, created, last := map[string]int32{}, map[string]*corev1.Pod{}, map[string]*corev1.Pod{}
			for i, s := range tc.steps {
				switch {
				case s.add != nil:
					inf.add(s.add)
					last[s.add.Name] = s.add
				case s.update != nil:
					old := last[s.update.Name]
					if old == nil {
						old = s.update
					}
					inf.update(old, s.update)
					last[s.update.Name] = s.update
				case s.del != nil:
					inf.delete(s.del)
				case s.create != "":
					pod := newPod(s.create, HostPortName, param("ContainerPorts", "game:7777/UDP")).obj()
					if g, ok := strings.CutPrefix(s.create, "gen:"); ok {
						pod.Name, pod.GenerateName = "", g
					}
					out, err := h.OnPodAdded(context.Background(), nil, pod)
					if s.wantErr != "" {
						wantError(t, err, plugin.RetryError, "", false, s.wantErr)
						continue
					}
					if err != nil {
						t.Fatalf("step %d: CREATE %s: %v", i, s.create, err)
					}
					created[s.create] = out
					if pod.Name != "" {
						gotPorts[s.create] = out.Spec.Containers[0].Ports[0].HostPort
					}
				case s.persist != "":
					p := created[s.persist].DeepCopy()
					p.UID = types.UID("uid-new-" + s.persist)
					inf.add(p)
				case s.advance != 0:
					clk.SetTime(clk.Now().Add(s.advance))
				}
			}
			if diff := cmp.Diff(tc.want, h.allocator().usageNow()); diff != "" {
				t.Errorf("usage (-want,+got):\n%s", diff)
			}
			if tc.wantPorts != nil {
				if diff := cmp.Diff(tc.wantPorts, gotPorts); diff != "" {
					t.Errorf("host ports of the CREATEs (-want,+got):\n%s", diff)
				}
			}
		})
	}
}

// TestHostPortReplicasConverge: two replicas admit different CREATEs and see the same
// informer events (in their own order of arrival); once both informers have shown
// every pod, both count exactly what the pods hold, with no reservation left.
func TestHostPortReplicasConverge(t *testing.T) {
	cfg := hostPortCfg(8000, 8003, 0)
	r1, inf1, _ := initHostPortInformer(t, cfg, hp("existing", "ue", 8000))
	r2, inf2, _ := initHostPortInformer(t, cfg, hp("existing", "ue", 8000))
	var stored []*corev1.Pod
	for i := range 6 {
		replica := r1
		if i%2 == 1 {
			replica = r2
		}
		out, err := replica.OnPodAdded(context.Background(), nil, newPod(fmt.Sprintf("gs-%d", i), HostPortName, param("ContainerPorts", "game:7777/UDP")).obj())
		if err != nil {
			t.Fatalf("CREATE gs-%d: %v", i, err)
		}
		out.UID = types.UID("u-" + out.Name)
		stored = append(stored, out)
	}
	// Both replicas gave gs-0 and gs-1 the same least-used port before either informer
	// saw the other's pod: the divergence docs/replicas.md describes.
	if a, b := stored[0].Spec.Containers[0].Ports[0].HostPort, stored[1].Spec.Containers[0].Ports[0].HostPort; a != 8001 || b != 8001 {
		t.Errorf("gs-0 on %d, gs-1 on %d; want both on 8001 (each replica's least-used port)", a, b)
	}
	for i, p := range stored {
		inf1.add(p)
		inf2.add(stored[len(stored)-1-i]) // other order of arrival
	}
	inf1.delete(stored[2])
	inf2.delete(toolscache.DeletedFinalStateUnknown{Key: "game/" + stored[2].Name, Obj: stored[2]})

	u1, u2 := r1.allocator().usageNow(), r2.allocator().usageNow()
	if diff := cmp.Diff(u1, u2); diff != "" {
		t.Errorf("replicas disagree (-r1,+r2):\n%s", diff)
	}
	want := hostPortUsage{ObservedPairs: 6, ObservedPorts: 4, Ports: 4, Pods: 6}
	if diff := cmp.Diff(want, u1); diff != "" {
		t.Errorf("usage (-want,+got):\n%s", diff)
	}
	a1, a2 := r1.allocator(), r2.allocator()
	if diff := cmp.Diff(a1.usage, a2.usage); diff != "" {
		t.Errorf("per-port usage differs (-r1,+r2):\n%s", diff)
	}
}

func TestHostPortInformerWiring(t *testing.T) {
	ctx := context.Background()
	h := newHostPortWithClock(clocktesting.NewFakePassiveClock(testNow))
	if err := h.Init(ctx, nil, hostPortCfg(8000, 8009, 0)); err != nil {
		t.Fatal(err)
	}
	inf := &fakePodInformer{initial: []*corev1.Pod{hp("a", "ua", 8000), hostPortPod("Kubernetes-NodePort", "n", "un", 8001).obj()}}
	// Both initial pods hold a host port of the range: the HostPort pod 8000, the NodePort
	// pod 8001 (its spec holds it, whatever its network type).
	reg, err := h.UsePodInformer(ctx, inf)
	if err != nil {
		t.Fatal(err)
	}
	pod := newPod("gs-0", HostPortName, param("ContainerPorts", "game:7777/UDP")).obj()
	// Not synced yet: no allocation on a partial view.
	_, err = h.OnPodAdded(ctx, nil, pod.DeepCopy())
	wantError(t, err, plugin.RetryError, "", false, "pod informer has not delivered the existing pods")
	if reg.HasSynced() {
		t.Fatal("registration synced before the fake informer was")
	}
	inf.synced = true
	out, err := h.OnPodAdded(ctx, nil, pod.DeepCopy())
	wantError(t, err, "", "", false)
	if got := out.Spec.Containers[0].Ports[0].HostPort; got != 8002 {
		t.Errorf("got host port %d, want 8002 (8000 and 8001 held by the initial pods)", got)
	}
	if _, err := h.UsePodInformer(ctx, inf); err == nil {
		t.Error("second UsePodInformer succeeded")
	}
	if err := h.Init(ctx, nil, hostPortCfg(8000, 8009, 0)); err == nil {
		t.Error("Init after UsePodInformer succeeded")
	}
	// DELETE admission frees nothing: only the informer's delete event does.
	wantError(t, h.OnPodDeleted(ctx, nil, hp("a", "ua", 8000)), "", "", false)
	if u := h.allocator().usageNow(); u.ObservedPairs != 2 {
		t.Errorf("DELETE admission released ports: %+v", u)
	}
	inf.delete(hp("a", "ua", 8000))
	if u := h.allocator().usageNow(); u.ObservedPairs != 1 {
		t.Errorf("informer delete did not release: %+v", u)
	}
}

func TestHostPortMetrics(t *testing.T) {
	h, inf, clk := initHostPortInformer(t, hostPortCfg(8000, 8009, 0), hp("a", "ua", 8000, 8001), hp("b", "ub", 8001))
	out, err := h.OnPodAdded(context.Background(), nil, newPod("gs-0", HostPortName, param("ContainerPorts", "game:7777/UDP,7778/UDP")).obj())
	wantError(t, err, "", "", false)
	const head = `
# HELP npp_hostport_allocations Kubernetes-HostPort (pod, host port) pairs inside the range, by source: observed (pods in the pod informer) or reserved (CREATEs admitted by this replica, not yet in its informer).
# TYPE npp_hostport_allocations gauge
npp_hostport_allocations{source="observed"} %d
npp_hostport_allocations{source="reserved"} %d
# HELP npp_hostport_ports_in_use Distinct host ports of the Kubernetes-HostPort range held by at least one pod in the pod informer.
# TYPE npp_hostport_ports_in_use gauge
npp_hostport_ports_in_use %d
# HELP npp_hostport_range_ports Ports in the Kubernetes-HostPort range (max_port - min_port + 1 of the provider configuration).
# TYPE npp_hostport_range_ports gauge
npp_hostport_range_ports 10
`
	check := func(observed, reserved, inUse int) {
		t.Helper()
		if err := testutil.CollectAndCompare(h.Collector(), strings.NewReader(fmt.Sprintf(head, observed, reserved, inUse)),
			MetricHostPortAllocations, MetricHostPortPortsInUse, MetricHostPortRangePorts); err != nil {
			t.Error(err)
		}
	}
	check(3, 2, 2)
	out.UID = "u0"
	inf.add(out)
	check(5, 0, 4)
	if _, err := h.OnPodAdded(context.Background(), nil, newPod("gs-1", HostPortName, param("ContainerPorts", "game:7777/UDP")).obj()); err != nil {
		t.Fatal(err)
	}
	check(5, 1, 4)
	clk.SetTime(clk.Now().Add(ReservationTTL))
	check(5, 0, 4) // the scrape drops the expired reservation
}
