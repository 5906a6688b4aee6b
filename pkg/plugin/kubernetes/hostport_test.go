package kubernetes

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// initHostPort returns an initialised HostPort on a fake clock at testNow, fed objs
// (the pods among them) through a synced fake pod informer. The client holds objs too.
func initHostPort(t testing.TB, cfg plugin.Config, objs ...client.Object) (*HostPort, client.Client) {
	t.Helper()
	h, _, _ := initHostPortInformer(t, cfg, objs...)
	return h, newClient(objs...)
}

// initHostPortInformer is initHostPort returning the fake informer (to send further
// events) and the fake clock.
func initHostPortInformer(t testing.TB, cfg plugin.Config, objs ...client.Object) (*HostPort, *fakePodInformer, *clocktesting.FakePassiveClock) {
	t.Helper()
	clk := clocktesting.NewFakePassiveClock(testNow)
	h := newHostPortWithClock(clk)
	if err := h.Init(context.Background(), nil, cfg); err != nil {
		t.Fatalf("Init: %v", err)
	}
	inf := &fakePodInformer{synced: true}
	for _, o := range objs {
		if pod, ok := o.(*corev1.Pod); ok {
			inf.initial = append(inf.initial, pod)
		}
	}
	if _, err := h.UsePodInformer(context.Background(), inf); err != nil {
		t.Fatalf("UsePodInformer: %v", err)
	}
	return h, inf, clk
}

// fakePodInformer implements the handler-registration part of cache.Informer: the
// handler receives the initial pods at registration, then what the test sends.
type fakePodInformer struct {
	cache.Informer // nil: other methods are not used
	initial        []*corev1.Pod
	synced         bool
	handler        toolscache.ResourceEventHandler
}

func (f *fakePodInformer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	f.handler = h
	for _, p := range f.initial {
		h.OnAdd(p.DeepCopy(), true)
	}
	return fakeRegistration{f}, nil
}

func (f *fakePodInformer) add(p *corev1.Pod) { f.handler.OnAdd(p.DeepCopy(), false) }
func (f *fakePodInformer) update(old, p *corev1.Pod) {
	f.handler.OnUpdate(old.DeepCopy(), p.DeepCopy())
}
func (f *fakePodInformer) delete(obj any) { f.handler.OnDelete(obj) }

type fakeRegistration struct{ f *fakePodInformer }

func (r fakeRegistration) HasSynced() bool                          { return r.f.synced }
func (r fakeRegistration) HasSyncedChecker() toolscache.DoneChecker { return nil }

// containerPorts returns the pod's container ports by container.
func containerPorts(pod *corev1.Pod) map[string][]corev1.ContainerPort {
	out := map[string][]corev1.ContainerPort{}
	for _, c := range pod.Spec.Containers {
		if len(c.Ports) > 0 {
			out[c.Name] = c.Ports
		}
	}
	return out
}

func TestHostPortOnPodAdded(t *testing.T) {
	cp := func(containerPort, hostPort int32, proto corev1.Protocol) corev1.ContainerPort {
		return corev1.ContainerPort{ContainerPort: containerPort, HostPort: hostPort, Protocol: proto}
	}
	cases := map[string]struct {
		cfg       plugin.Config
		existing  []client.Object
		pod       *corev1.Pod
		wantPorts map[string][]corev1.ContainerPort
		wantType  plugin.ErrorType
		wantParam string
		wantWarn  bool
		wantMsg   []string
	}{
		"one UDP port": {
			pod:       newPod("gs-0", HostPortName, param("ContainerPorts", "game:7777/UDP")).obj(),
			wantPorts: map[string][]corev1.ContainerPort{"game": {cp(7777, 8000, "UDP")}},
		},
		"default protocol is TCP": {
			pod:       newPod("gs-0", HostPortName, param("ContainerPorts", "game:80")).obj(),
			wantPorts: map[string][]corev1.ContainerPort{"game": {cp(80, 8000, "TCP")}},
		},
		"TCPUDP shares one host port": {
			pod:       newPod("gs-0", HostPortName, param("ContainerPorts", "game:7777/TCPUDP,9000/UDP")).obj(),
			wantPorts: map[string][]corev1.ContainerPort{"game": {cp(7777, 8001, "TCP"), cp(7777, 8001, "UDP"), cp(9000, 8000, "UDP")}},
		},
		"SameAsHost": {
			pod:       newPod("gs-0", HostPortName, param("ContainerPorts", "game:SameAsHost/UDP")).obj(),
			wantPorts: map[string][]corev1.ContainerPort{"game": {cp(8000, 8000, "UDP")}},
		},
		"one entry per container": {
			pod: newPod("gs-0", HostPortName, param("ContainerPorts", "game:7777/UDP"), param("ContainerPorts", "sidecar:9090")).
				containers("game", "sidecar").obj(),
			// As OKG: containers in the pod's order, the first port the highest host port.
			wantPorts: map[string][]corev1.ContainerPort{"game": {cp(7777, 8001, "UDP")}, "sidecar": {cp(9090, 8000, "TCP")}},
		},
		"a declared container port is kept, the host port is a new entry (as OKG)": {
			pod: newPod("gs-0", HostPortName, param("ContainerPorts", "game:7777/UDP")).
				port("game", corev1.ContainerPort{Name: "game", ContainerPort: 7777, Protocol: "UDP"}).obj(),
			wantPorts: map[string][]corev1.ContainerPort{"game": {{Name: "game", ContainerPort: 7777, Protocol: "UDP"}, cp(7777, 8000, "UDP")}},
		},
		// Deliberate difference "A host port the pod declares for a requested port is
		// replaced" (docs/okg-compatibility.md): OKG appends a second entry.
		"a declared host port for a requested port is replaced (deliberate difference)": {
			pod: newPod("gs-0", HostPortName, param("ContainerPorts", "game:7777/UDP")).
				port("game", cp(7777, 8500, "UDP")).obj(),
			wantPorts: map[string][]corev1.ContainerPort{"game": {cp(7777, 8000, "UDP")}},
		},
		"least used port first": {
			existing: []client.Object{
				newPod("old-0", HostPortName).uid("u0").port("game", cp(7777, 8000, "UDP")).obj(),
				newPod("old-1", HostPortName).uid("u1").port("game", cp(7777, 8001, "UDP")).obj(),
				// Another network type's pod holds 8002 too: its spec's host port counts.
				newPod("other", "Kubernetes-NodePort").uid("u2").port("game", cp(7777, 8002, "UDP")).obj(),
			},
			pod:       newPod("gs-0", HostPortName, param("ContainerPorts", "game:7777/UDP")).obj(),
			wantPorts: map[string][]corev1.ContainerPort{"game": {cp(7777, 8003, "UDP")}},
		},
		"unknown parameter is a warning, pod still mutated": {
			pod:       newPod("gs-0", HostPortName, param("ContainerPorts", "game:7777/UDP"), param("Fixed", "true")).obj(),
			wantPorts: map[string][]corev1.ContainerPort{"game": {cp(7777, 8000, "UDP")}},
			wantType:  plugin.ParameterError, wantParam: "Fixed", wantWarn: true,
		},
		"container does not exist": {
			pod:      newPod("gs-0", HostPortName, param("ContainerPorts", "gamex:7777/UDP")).obj(),
			wantType: plugin.ParameterError, wantParam: "ContainerPorts", wantMsg: []string{`container "gamex" does not exist`, "game"},
		},
		"non-numeric port": {
			pod:      newPod("gs-0", HostPortName, param("ContainerPorts", "game:77x7/UDP")).obj(),
			wantType: plugin.ParameterError, wantParam: "ContainerPorts", wantMsg: []string{`port "77x7"`, "<container>:<port>"},
		},
		"lower-case protocol": {
			pod:      newPod("gs-0", HostPortName, param("ContainerPorts", "game:7777/udp")).obj(),
			wantType: plugin.ParameterError, wantParam: "ContainerPorts", wantMsg: []string{`protocol "udp" must be upper case (UDP)`},
		},
		"no colon": {
			pod:      newPod("gs-0", HostPortName, param("ContainerPorts", "7777/UDP")).obj(),
			wantType: plugin.ParameterError, wantParam: "ContainerPorts",
		},
		"same container twice": {
			pod:      newPod("gs-0", HostPortName, param("ContainerPorts", "game:1"), param("ContainerPorts", "game:2")).obj(),
			wantType: plugin.ParameterError, wantParam: "ContainerPorts", wantMsg: []string{"more than one entry"},
		},
		"ContainerPorts missing": {
			pod:      newPod("gs-0", HostPortName, param("PortProtocols", "80")).obj(),
			wantType: plugin.ParameterError, wantParam: "ContainerPorts", wantMsg: []string{"is required"},
		},
		"network-conf not JSON": {
			pod:      newPod("gs-0", HostPortName).rawConf("ContainerPorts=game:7777").obj(),
			wantType: plugin.ParameterError, wantParam: networkstatus.AnnotationNetworkConf,
		},
		"network-conf not a list of name/value": {
			pod:      newPod("gs-0", HostPortName).rawConf(`{"ContainerPorts":"game:7777"}`).obj(),
			wantType: plugin.ParameterError, wantParam: networkstatus.AnnotationNetworkConf,
		},
		"more ports than the range holds": {
			cfg:      hostPortCfg(8000, 8001, 0),
			pod:      newPod("gs-0", HostPortName, param("ContainerPorts", "game:1,2,3")).obj(),
			wantType: plugin.ParameterError, wantParam: "ContainerPorts", wantMsg: []string{"requests 3 host ports but the range 8000-8001 holds 2"},
		},
		"range exhausted": {
			cfg: hostPortCfg(8000, 8001, 1),
			existing: []client.Object{
				newPod("old-0", HostPortName).uid("u0").port("game", cp(7777, 8000, "UDP")).obj(),
				newPod("old-1", HostPortName).uid("u1").port("game", cp(7777, 8001, "UDP")).obj(),
			},
			pod:      newPod("gs-0", HostPortName, param("ContainerPorts", "game:7777/UDP")).obj(),
			wantType: plugin.RetryError, wantMsg: []string{"host port range 8000-8001 exhausted: 2 ports, 2 in use"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := tc.cfg
			if cfg.Kubernetes.HostPort.MinPort == 0 {
				cfg = plugin.DefaultConfig()
			}
			h, c := initHostPort(t, cfg, tc.existing...)
			in := tc.pod.DeepCopy()
			got, err := h.OnPodAdded(context.Background(), c, in)
			wantError(t, err, tc.wantType, tc.wantParam, tc.wantWarn, tc.wantMsg...)
			if tc.wantType != "" && !tc.wantWarn {
				if diff := cmp.Diff(containerPorts(tc.pod), containerPorts(got)); diff != "" {
					t.Errorf("pod changed on error (-want,+got):\n%s", diff)
				}
				return
			}
			if diff := cmp.Diff(tc.wantPorts, containerPorts(got)); diff != "" {
				t.Errorf("container ports (-want,+got):\n%s", diff)
			}
			if st := status(t, got); st != nil {
				t.Errorf("status = %+v, want none (OKG writes none at CREATE)", st)
			}
		})
	}
}

func TestHostPortCreateIsIdempotent(t *testing.T) {
	h, c := initHostPort(t, plugin.DefaultConfig())
	pod := newPod("gs-0", HostPortName, param("ContainerPorts", "game:7777/UDP,7778/TCP")).obj()
	first, err := h.OnPodAdded(context.Background(), c, pod.DeepCopy())
	wantError(t, err, "", "", false)
	// The webhook is called again for the same object (retry, reinvocation).
	again, err := h.OnPodAdded(context.Background(), c, first.DeepCopy())
	wantError(t, err, "", "", false)
	second, err := h.OnPodAdded(context.Background(), c, pod.DeepCopy())
	wantError(t, err, "", "", false)
	if diff := cmp.Diff(containerPorts(first), containerPorts(second)); diff != "" {
		t.Errorf("second CREATE got other ports (-first,+second):\n%s", diff)
	}
	if diff := cmp.Diff(containerPorts(first), containerPorts(again)); diff != "" {
		t.Errorf("reinvocation changed ports (-first,+again):\n%s", diff)
	}
	if u := h.allocator().usageNow(); u.Ports != 2 || u.Reservations != 1 || u.ReservedPairs != 2 {
		t.Errorf("usage = %+v; want 2 ports in use by 1 reservation", u)
	}
	other, err := h.OnPodAdded(context.Background(), c, newPod("gs-1", HostPortName, param("ContainerPorts", "game:7777/UDP")).obj())
	wantError(t, err, "", "", false)
	if hp := other.Spec.Containers[0].Ports[0].HostPort; hp != 8002 {
		t.Errorf("next pod got host port %d, want 8002", hp)
	}
}

func TestHostPortConcurrentCreates(t *testing.T) {
	const pods = 200
	h, c := initHostPort(t, hostPortCfg(10000, 10000+pods-1, 0))
	got := make([]int32, pods)
	var wg sync.WaitGroup
	for i := range pods {
		wg.Go(func() {
			out, err := h.OnPodAdded(context.Background(), c, newPod(fmt.Sprintf("gs-%d", i), HostPortName, param("ContainerPorts", "game:7777/UDP")).obj())
			if err != nil {
				t.Errorf("pod %d: %v", i, err)
				return
			}
			got[i] = out.Spec.Containers[0].Ports[0].HostPort
		})
	}
	wg.Wait()
	seen := map[int32]int{}
	for i, p := range got {
		if prev, dup := seen[p]; dup {
			t.Errorf("pods %d and %d both got host port %d while free ports remained", prev, i, p)
		}
		seen[p] = i
	}
	if u := h.allocator().usageNow(); u.Ports != pods {
		t.Errorf("%d ports in use, want %d", u.Ports, pods)
	}
}

func TestHostPortOnPodUpdated(t *testing.T) {
	allocated := newPod("gs-0", HostPortName, param("ContainerPorts", "game:7777/UDP")).uid("u0").
		port("game", corev1.ContainerPort{ContainerPort: 7777, HostPort: 8003, Protocol: "UDP"}).
		port("game", corev1.ContainerPort{ContainerPort: 9090, Protocol: "TCP"}) // not a host port: not published
	readyStatus := `{"internalAddresses":[{"ip":"10.244.1.7","ports":[{"name":"game-7777","protocol":"UDP","port":7777}]}],` +
		`"externalAddresses":[{"ip":"203.0.113.10","ports":[{"name":"game-7777","protocol":"UDP","port":8003}]}],` +
		`"currentNetworkState":"Ready","createTime":null,"lastTransitionTime":null}`
	notReady := `{"currentNetworkState":"NotReady","createTime":null,"lastTransitionTime":null}`
	cases := map[string]struct {
		client     client.Client
		pod        *corev1.Pod
		wantStatus string
		wantType   plugin.ErrorType
	}{
		"scheduled with IP is Ready": {
			client:     newClient(newNode("n1", intIP("10.0.0.1"), extIP("203.0.113.10"))),
			pod:        allocated.node("n1").ip("10.244.1.7").obj(),
			wantStatus: readyStatus,
		},
		"internal IP when the node has no external one": {
			client: newClient(newNode("n1", corev1.NodeAddress{Type: corev1.NodeHostName, Address: "n1"}, intIP("10.0.0.1"))),
			pod:    allocated.node("n1").ip("10.244.1.7").obj(),
			wantStatus: `{"internalAddresses":[{"ip":"10.244.1.7","ports":[{"name":"game-7777","protocol":"UDP","port":7777}]}],` +
				`"externalAddresses":[{"ip":"10.0.0.1","ports":[{"name":"game-7777","protocol":"UDP","port":8003}]}],` +
				`"currentNetworkState":"Ready","createTime":null,"lastTransitionTime":null}`,
		},
		"update before scheduling leaves the status as it is (as OKG)": {
			client: newClient(),
			pod:    allocated.node("").ip("").obj(),
		},
		"missing node leaves the status as it is (as OKG)": {
			client: newClient(),
			pod:    allocated.node("gone").ip("10.244.1.7").obj(),
		},
		"node reporting only a Hostname is Ready with ip \"\" (as OKG)": {
			client: newClient(newNode("n1", corev1.NodeAddress{Type: corev1.NodeHostName, Address: "n1"})),
			pod:    allocated.node("n1").ip("10.244.1.7").obj(),
			wantStatus: `{"internalAddresses":[{"ip":"10.244.1.7","ports":[{"name":"game-7777","protocol":"UDP","port":7777}]}],` +
				`"externalAddresses":[{"ip":"","ports":[{"name":"game-7777","protocol":"UDP","port":8003}]}],` +
				`"currentNetworkState":"Ready","createTime":null,"lastTransitionTime":null}`,
		},
		// Deliberate difference "A node without any address is not Ready"
		// (docs/okg-compatibility.md): OKG publishes "ip":"" and Ready.
		"node reporting no address at all is NotReady (deliberate difference)": {
			client:     newClient(newNode("n1")),
			pod:        allocated.node("n1").ip("10.244.1.7").obj(),
			wantStatus: notReady,
		},
		"no pod IP yet": {
			client:     newClient(newNode("n1", extIP("203.0.113.10"))),
			pod:        allocated.node("n1").ip("").obj(),
			wantStatus: notReady,
		},
		"node lookup failing is an API error": {
			client:   failingClient("get", "node"),
			pod:      allocated.node("n1").ip("10.244.1.7").obj(),
			wantType: plugin.APICallError,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := NewHostPort()
			if err := h.Init(context.Background(), newClient(), plugin.DefaultConfig()); err != nil {
				t.Fatal(err)
			}
			got, err := h.OnPodUpdated(context.Background(), tc.client, tc.pod)
			wantError(t, err, tc.wantType, "", false)
			if diff := cmp.Diff(tc.wantStatus, got.Annotations[networkstatus.AnnotationNetworkStatus]); diff != "" {
				t.Errorf("network-status (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestHostPortIdentity(t *testing.T) {
	h := NewHostPort()
	if h.Name() != "Kubernetes-HostPort" || h.Alias() != "" || !h.IsSynchronous() {
		t.Errorf("identity = %q %q %t", h.Name(), h.Alias(), h.IsSynchronous())
	}
	if got := len(Plugins(plugin.DefaultConfig())); got != 3 {
		t.Errorf("Plugins = %d plugins, want 3", got)
	}
	cfg := plugin.DefaultConfig()
	cfg.Kubernetes.Enable = false
	if got := Plugins(cfg); got != nil {
		t.Errorf("disabled provider still gives plugins: %v", got)
	}
	if _, err := plugin.NewRegistry(Plugins(plugin.DefaultConfig())...); err != nil {
		t.Errorf("registry of the Kubernetes plugins: %v", err)
	}
}
