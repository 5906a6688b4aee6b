package kubernetes

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/okg-extensions/network-plugin-policy/pkg/networkstatus"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
)

func initHostPort(t testing.TB, cfg plugin.Config, objs ...client.Object) (*HostPort, client.Client) {
	t.Helper()
	c := newClient(objs...)
	h := NewHostPort()
	if err := h.Init(context.Background(), c, cfg); err != nil {
		t.Fatalf("Init: %v", err)
	}
	return h, c
}

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
			wantPorts: map[string][]corev1.ContainerPort{"game": {cp(7777, 8000, "TCP"), cp(7777, 8000, "UDP"), cp(9000, 8001, "UDP")}},
		},
		"SameAsHost": {
			pod:       newPod("gs-0", HostPortName, param("ContainerPorts", "game:SameAsHost/UDP")).obj(),
			wantPorts: map[string][]corev1.ContainerPort{"game": {cp(8000, 8000, "UDP")}},
		},
		"one entry per container": {
			pod: newPod("gs-0", HostPortName, param("ContainerPorts", "game:7777/UDP"), param("ContainerPorts", "sidecar:9090")).
				containers("game", "sidecar").obj(),
			wantPorts: map[string][]corev1.ContainerPort{"game": {cp(7777, 8000, "UDP")}, "sidecar": {cp(9090, 8001, "TCP")}},
		},
		"existing container port gets the host port, no duplicate": {
			pod: newPod("gs-0", HostPortName, param("ContainerPorts", "game:7777/UDP")).
				port("game", corev1.ContainerPort{Name: "game", ContainerPort: 7777, Protocol: "UDP"}).obj(),
			wantPorts: map[string][]corev1.ContainerPort{"game": {{Name: "game", ContainerPort: 7777, HostPort: 8000, Protocol: "UDP"}}},
		},
		"least used port first": {
			existing: []client.Object{
				newPod("old-0", HostPortName).uid("u0").port("game", cp(7777, 8000, "UDP")).obj(),
				newPod("old-1", HostPortName).uid("u1").port("game", cp(7777, 8001, "UDP")).obj(),
				newPod("other", "Kubernetes-NodePort").uid("u2").port("game", cp(7777, 8002, "UDP")).obj(),
			},
			pod:       newPod("gs-0", HostPortName, param("ContainerPorts", "game:7777/UDP")).obj(),
			wantPorts: map[string][]corev1.ContainerPort{"game": {cp(7777, 8002, "UDP")}},
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
			if st := status(t, got); st == nil || st.CurrentNetworkState != networkstatus.NetworkNotReady {
				t.Errorf("status = %+v, want NotReady", st)
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
	if inUse, allocs := h.allocator().stats(); inUse != 2 || allocs != 1 {
		t.Errorf("stats = %d ports in use, %d allocations; want 2, 1", inUse, allocs)
	}
	other, err := h.OnPodAdded(context.Background(), c, newPod("gs-1", HostPortName, param("ContainerPorts", "game:7777/UDP")).obj())
	wantError(t, err, "", "", false)
	if hp := other.Spec.Containers[0].Ports[0].HostPort; hp != 8002 {
		t.Errorf("next pod got host port %d, want 8002", hp)
	}
}

func TestHostPortGenerateNamePods(t *testing.T) {
	h, c := initHostPort(t, plugin.DefaultConfig())
	var pods []*corev1.Pod
	for i := range 3 {
		p := newPod("", HostPortName, param("ContainerPorts", "game:7777/UDP")).obj()
		p.GenerateName = "gs-"
		out, err := h.OnPodAdded(context.Background(), c, p)
		wantError(t, err, "", "", false)
		if hp := out.Spec.Containers[0].Ports[0].HostPort; hp != 8000+int32(i) {
			t.Errorf("pod %d got %d, want %d (pods without a name must not share an allocation)", i, hp, 8000+i)
		}
		out.Name, out.UID = fmt.Sprintf("gs-%c", 'a'+i), types.UID(fmt.Sprintf("uid-%d", i))
		pods = append(pods, out)
	}
	// UPDATE binds the allocation to the UID, DELETE frees it.
	if _, err := h.OnPodUpdated(context.Background(), c, pods[0].DeepCopy()); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		wantError(t, h.OnPodDeleted(context.Background(), c, p), "", "", false)
	}
	if inUse, allocs := h.allocator().stats(); inUse != 0 || allocs != 0 {
		t.Errorf("after deletes: %d ports in use, %d allocations; want 0, 0", inUse, allocs)
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
	if inUse, _ := h.allocator().stats(); inUse != pods {
		t.Errorf("%d ports in use, want %d", inUse, pods)
	}
}

func TestHostPortRestartRebuildsState(t *testing.T) {
	ctx := context.Background()
	cfg := hostPortCfg(8000, 8009, 0)
	h, c := initHostPort(t, cfg)
	var created []*corev1.Pod
	for i := range 4 {
		out, err := h.OnPodAdded(ctx, c, newPod(fmt.Sprintf("gs-%d", i), HostPortName, param("ContainerPorts", "game:7777/UDP")).obj())
		wantError(t, err, "", "", false)
		out.UID = types.UID("uid-" + out.Name)
		if err := c.Create(ctx, out); err != nil {
			t.Fatal(err)
		}
		created = append(created, out)
	}
	// A new manager process: fresh plugin, same cluster.
	restarted := NewHostPort()
	if err := restarted.Init(ctx, c, cfg); err != nil {
		t.Fatal(err)
	}
	if inUse, allocs := restarted.allocator().stats(); inUse != 4 || allocs != 4 {
		t.Fatalf("rebuilt %d ports in use, %d allocations; want 4, 4", inUse, allocs)
	}
	out, err := restarted.OnPodAdded(ctx, c, newPod("gs-4", HostPortName, param("ContainerPorts", "game:7777/UDP")).obj())
	wantError(t, err, "", "", false)
	if hp := out.Spec.Containers[0].Ports[0].HostPort; hp != 8004 {
		t.Errorf("after restart new pod got %d, want 8004", hp)
	}
	// Deleting a pod known only from the rebuild frees its port.
	wantError(t, restarted.OnPodDeleted(ctx, c, created[1]), "", "", false)
	out, err = restarted.OnPodAdded(ctx, c, newPod("gs-5", HostPortName, param("ContainerPorts", "game:7777/UDP")).obj())
	wantError(t, err, "", "", false)
	if hp := out.Spec.Containers[0].Ports[0].HostPort; hp != 8001 {
		t.Errorf("freed port not reused: got %d, want 8001", hp)
	}
	// Init failing to list is an error (the webhook must not become ready).
	if err := NewHostPort().Init(ctx, failingClient("list", ""), cfg); err == nil {
		t.Errorf("Init with a failing List succeeded")
	}
}

// TestHostPortSameNameWhileTerminating: upstream denies the CREATE of a pod whose
// same-named predecessor still terminates, and the predecessor's final DELETE then
// frees the new pod's ports. Here the CREATE succeeds and the ports stay allocated.
func TestHostPortSameNameWhileTerminating(t *testing.T) {
	ctx := context.Background()
	h, c := initHostPort(t, hostPortCfg(8000, 8009, 0))
	conf := param("ContainerPorts", "game:7777/UDP")

	old, err := h.OnPodAdded(ctx, c, newPod("gs-0", HostPortName, conf).obj())
	wantError(t, err, "", "", false)
	old.UID = "old"
	if err := c.Create(ctx, old); err != nil {
		t.Fatal(err)
	}
	// Graceful deletion starts: first DELETE admission (pod not yet terminating).
	wantError(t, h.OnPodDeleted(ctx, c, old.DeepCopy()), "", "", false)
	// The owner recreates gs-0 while the old one still terminates (the API server
	// rejects the name until it is gone, so the CREATE is retried).
	newer, err := h.OnPodAdded(ctx, c, newPod("gs-0", HostPortName, conf).obj())
	wantError(t, err, "", "", false)
	retried, err := h.OnPodAdded(ctx, c, newPod("gs-0", HostPortName, conf).obj())
	wantError(t, err, "", "", false)
	if diff := cmp.Diff(containerPorts(newer), containerPorts(retried)); diff != "" {
		t.Errorf("retried CREATE changed ports (-want,+got):\n%s", diff)
	}
	// Final DELETE of the old pod (kubelet, pod terminating, same host port 8000).
	terminating := old.DeepCopy()
	terminating.DeletionTimestamp = newPod("x", "").terminating().obj().DeletionTimestamp
	wantError(t, h.OnPodDeleted(ctx, c, terminating), "", "", false)
	if inUse, allocs := h.allocator().stats(); inUse != 1 || allocs != 1 {
		t.Fatalf("old pod's final DELETE freed the new pod's ports: %d in use, %d allocations", inUse, allocs)
	}
	third, err := h.OnPodAdded(ctx, c, newPod("gs-1", HostPortName, conf).obj())
	wantError(t, err, "", "", false)
	if a, b := third.Spec.Containers[0].Ports[0].HostPort, newer.Spec.Containers[0].Ports[0].HostPort; a == b {
		t.Errorf("gs-1 got gs-0's host port %d while free ports remained", a)
	}
}

func TestHostPortOnPodUpdated(t *testing.T) {
	allocated := newPod("gs-0", HostPortName, param("ContainerPorts", "game:7777/UDP")).uid("u0").
		port("game", corev1.ContainerPort{ContainerPort: 7777, HostPort: 8003, Protocol: "UDP"}).
		port("game", corev1.ContainerPort{ContainerPort: 9090, Protocol: "TCP"}) // not a host port: not published
	readyStatus := `{"internalAddresses":[{"ip":"10.244.1.7","ports":[{"name":"game-7777","protocol":"UDP","port":7777}]}],` +
		`"externalAddresses":[{"ip":"203.0.113.10","ports":[{"name":"game-7777","protocol":"UDP","port":8003}]}],` +
		`"currentNetworkState":"Ready","createTime":"2025-03-01T12:00:00Z","lastTransitionTime":"2025-03-01T12:00:00Z"}`
	notReady := `{"currentNetworkState":"NotReady","createTime":"2025-03-01T12:00:00Z","lastTransitionTime":"2025-03-01T12:00:00Z"}`
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
				`"currentNetworkState":"Ready","createTime":"2025-03-01T12:00:00Z","lastTransitionTime":"2025-03-01T12:00:00Z"}`,
		},
		"update before scheduling is NotReady, not an error": {
			client:     newClient(),
			pod:        allocated.node("").ip("").obj(),
			wantStatus: notReady,
		},
		"missing node is NotReady, not an error": {
			client:     newClient(),
			pod:        allocated.node("gone").ip("10.244.1.7").obj(),
			wantStatus: notReady,
		},
		"no pod IP yet": {
			client:     newClient(newNode("n1", extIP("203.0.113.10"))),
			pod:        allocated.node("n1").ip("").obj(),
			wantStatus: notReady,
		},
		"node lookup failing is an API error": {
			client:     failingClient("get", "node"),
			pod:        allocated.node("n1").ip("10.244.1.7").obj(),
			wantStatus: notReady,
			wantType:   plugin.APICallError,
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

func TestHostPortOnPodDeleted(t *testing.T) {
	ctx := context.Background()
	h, c := initHostPort(t, hostPortCfg(8000, 8001, 1))
	pod, err := h.OnPodAdded(ctx, c, newPod("gs-0", HostPortName, param("ContainerPorts", "game:7777/UDP")).obj())
	wantError(t, err, "", "", false)
	pod.UID = "u0"
	_, err = h.OnPodAdded(ctx, c, newPod("gs-1", HostPortName, param("ContainerPorts", "game:7777/UDP")).obj())
	wantError(t, err, "", "", false)
	_, err = h.OnPodAdded(ctx, c, newPod("gs-2", HostPortName, param("ContainerPorts", "game:7777/UDP")).obj())
	wantError(t, err, plugin.RetryError, "", false)
	wantError(t, h.OnPodDeleted(ctx, c, pod), "", "", false)
	got, err := h.OnPodAdded(ctx, c, newPod("gs-2", HostPortName, param("ContainerPorts", "game:7777/UDP")).obj())
	wantError(t, err, "", "", false)
	if hp := got.Spec.Containers[0].Ports[0].HostPort; hp != 8000 {
		t.Errorf("after DELETE got %d, want the freed 8000", hp)
	}
	// Deleting a pod the plugin never saw is not an error.
	wantError(t, h.OnPodDeleted(ctx, c, newPod("stranger", HostPortName).uid("x").obj()), "", "", false)
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
