package cloudbox

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/tencentcloud"
)

// TKEPortMapping is the box's stand-in for tke-extend-network-controller's CLB port mapping,
// doing what TencentCloud-CLB relies on (tke-extend-network-controller's docs "使用 CLB 端口池为
// Pod 映射公网地址" and its API types, api/v1alpha1: CLBPodBinding, CLBBindingState):
//   - a pod with tencentcloud.AnnotationEnablePortMapping and AnnotationPortMapping and an IP
//     gets a CLBPodBinding of its name (owner: the pod), spec.ports one per mapping line
//     {port, protocol, pools: [pool]};
//   - each line gets the lowest free port of its pool's CLB (SetPool); the binding's state is
//     then Bound and the pod gets AnnotationPortMappingResult, a JSON list of {port, protocol,
//     pool, loadbalancerId, loadbalancerPort, address "<ip>:<port>"} (the address field as
//     OKG's plugin reads it; a TCPUDP line is a TCP and a UDP entry, one per listener), and
//     AnnotationPortMappingStatus "Ready";
//   - a pool the box does not have is state PortPoolNotFound, a pool without a free port
//     NoPortAvailable, each with a message, and the pod's ports are all released; the box
//     tries again at the pod's next change or within 5 s (a resync), after a port is freed;
//   - a pod whose mapping is disabled ("false") keeps its ports and gets state Disabled; a
//     deleted pod frees its ports.
//
// Told to fail, it leaves its bindings in state Failed with a message and writes no result.
// Safe for concurrent use; change its knobs and pools while it runs.
type TKEPortMapping struct {
	Knobs
	pools map[string]*tkePool
	held  map[string][]heldPort // pod key -> its ports
}

// TKEPool is a port pool of the box: the CLB LBID at Address, ports MinPort-MaxPort.
type TKEPool struct {
	LBID, Address    string
	MinPort, MaxPort int32
}

type tkePool struct {
	TKEPool
	used map[int32]string // port -> pod key
}

type heldPort struct {
	pool string
	port int32
}

// SetPool makes pool name the box's, with p's CLB and ports (a pool set again keeps what it
// handed out within its new range).
func (m *TKEPortMapping) SetPool(name string, p TKEPool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.pools == nil {
		m.pools = map[string]*tkePool{}
	}
	old := m.pools[name]
	m.pools[name] = &tkePool{TKEPool: p, used: map[int32]string{}}
	if old != nil {
		m.pools[name].used = old.used
	}
}

// TKEControllerNamespace and TKEControllerServiceAccount are the identity the stand-in
// writes with: the ServiceAccount tke-extend-network-controller of the namespace of that name,
// where its Helm chart installs it; the [tencentcloud] result writers name it
// (TKEControllerUser).
const (
	TKEControllerNamespace      = "tke-extend-network-controller"
	TKEControllerServiceAccount = "tke-extend-network-controller"
	TKEControllerUser           = "system:serviceaccount:" + TKEControllerNamespace + ":" + TKEControllerServiceAccount
)

// StartTKEPortMapping runs m until ctx ends, as TKEControllerUser with the rights to read and
// patch pods and to manage CLBPodBindings, which it creates through admin (a cluster admin's
// config), with the namespace. The CLBPodBinding CRD (testdata/crds) must be installed.
// Errors come from the API server and from building the clients.
func StartTKEPortMapping(ctx context.Context, admin *rest.Config, m *TKEPortMapping) error {
	acs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return err
	}
	if _, err := acs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: TKEControllerNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", TKEControllerNamespace, err)
	}
	cfg, err := asServiceAccount(ctx, admin, TKEControllerNamespace, TKEControllerServiceAccount,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch", "patch"}},
		rbacv1.PolicyRule{APIGroups: []string{tencentcloud.GroupVersion.Group}, Resources: []string{"clbpodbindings", "clbpodbindings/status"},
			Verbs: []string{"get", "list", "watch", "create", "update", "delete"}})
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	bindings := dyn.Resource(tencentcloud.GroupVersion.WithResource("clbpodbindings"))
	factory := informers.NewSharedInformerFactory(cs, 5*time.Second)
	pods := factory.Core().V1().Pods().Informer()
	var pending sync.Map // pod key -> true while it is worked on
	work := func(obj any) {
		pod, ok := obj.(*corev1.Pod)
		if !ok || pod.Status.PodIP == "" || pod.DeletionTimestamp != nil || pod.Annotations[tencentcloud.AnnotationPortMapping] == "" ||
			pod.Annotations[tencentcloud.AnnotationEnablePortMapping] == "" {
			return
		}
		key := pod.Namespace + "/" + pod.Name
		if _, busy := pending.LoadOrStore(key, true); busy {
			return
		}
		delay, _ := m.knobs()
		go func() {
			defer pending.Delete(key)
			select {
			case <-ctx.Done():
				return
			case <-time.After(delay):
			}
			m.bind(ctx, cs, bindings, pod)
		}()
	}
	if _, err := pods.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: work, UpdateFunc: func(_, obj any) { work(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				m.release(pod.Namespace + "/" + pod.Name)
			}
		},
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	return nil
}

// release frees the ports of pod key.
func (m *TKEPortMapping) release(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.releaseLocked(key, m.held[key])
}

// releaseLocked frees ports of pod key and forgets what it held, as the controller releases
// a pod's ports when it cannot bind all of them; m.mu is held.
func (m *TKEPortMapping) releaseLocked(key string, ports []heldPort) {
	for _, h := range ports {
		if p := m.pools[h.pool]; p != nil && p.used[h.port] == key {
			delete(p.used, h.port)
		}
	}
	delete(m.held, key)
}

// mappingLine is one line of the pod's clb-port-mapping.
type mappingLine struct {
	port     int32
	protocol string
	pool     string
}

func parseMapping(s string) ([]mappingLine, error) {
	var out []mappingLine
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			return nil, fmt.Errorf("mapping line %q: expected <port> <protocol> <pool>", line)
		}
		port, err := strconv.ParseInt(f[0], 10, 32)
		if err != nil {
			return nil, fmt.Errorf("mapping line %q: %w", line, err)
		}
		out = append(out, mappingLine{port: int32(port), protocol: f[1], pool: f[2]})
	}
	return out, nil
}

// allocate gives pod key a port of each line's pool (the ones it holds first), or says which
// state and message stop it.
func (m *TKEPortMapping) allocate(key string, lines []mappingLine) ([]heldPort, string, string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.held == nil {
		m.held = map[string][]heldPort{}
	}
	if len(m.held[key]) == len(lines) {
		return m.held[key], "", ""
	}
	var got []heldPort
	for i, l := range lines {
		if i < len(m.held[key]) {
			got = append(got, m.held[key][i])
			continue
		}
		p := m.pools[l.pool]
		if p == nil {
			m.releaseLocked(key, got)
			return nil, "PortPoolNotFound", fmt.Sprintf("port pool %q not found", l.pool)
		}
		free := int32(0)
		for port := p.MinPort; port <= p.MaxPort; port++ {
			if _, used := p.used[port]; !used {
				free = port
				break
			}
		}
		if free == 0 {
			m.releaseLocked(key, got)
			return nil, "NoPortAvailable", fmt.Sprintf("no available port in pool %q", l.pool)
		}
		p.used[free] = key
		got = append(got, heldPort{pool: l.pool, port: free})
	}
	m.held[key] = got
	return got, "", ""
}

// bind makes pod's binding and, when its ports are had, its result.
func (m *TKEPortMapping) bind(ctx context.Context, cs kubernetes.Interface, bindings dynamic.NamespaceableResourceInterface, pod *corev1.Pod) {
	key := pod.Namespace + "/" + pod.Name
	lines, err := parseMapping(pod.Annotations[tencentcloud.AnnotationPortMapping])
	state, message := "", ""
	var ports []heldPort
	_, fail := m.knobs()
	switch {
	case err != nil:
		state, message = "Failed", err.Error()
	case fail:
		state, message = "Failed", "the box's CLB API refuses every call"
	case pod.Annotations[tencentcloud.AnnotationEnablePortMapping] == "false":
		state = "Disabled"
	default:
		ports, state, message = m.allocate(key, lines)
		if state == "" {
			state = "Bound"
		}
	}
	var specPorts []any
	for _, l := range lines {
		specPorts = append(specPorts, map[string]any{"port": int64(l.port), "protocol": l.protocol, "pools": []any{l.pool}})
	}
	b := &unstructured.Unstructured{}
	b.SetGroupVersionKind(tencentcloud.GroupVersion.WithKind(tencentcloud.CLBPodBindingKind))
	b.SetNamespace(pod.Namespace)
	b.SetName(pod.Name)
	b.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: ptr.To(true)}})
	_ = unstructured.SetNestedSlice(b.Object, specPorts, "spec", "ports")
	cur, err := bindings.Namespace(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		cur, err = bindings.Namespace(pod.Namespace).Create(ctx, b, metav1.CreateOptions{})
	}
	if err != nil {
		return
	}
	if s, _, _ := unstructured.NestedString(cur.Object, "status", "state"); s != state {
		_ = unstructured.SetNestedField(cur.Object, state, "status", "state")
		_ = unstructured.SetNestedField(cur.Object, message, "status", "message")
		if _, err := bindings.Namespace(pod.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
			return
		}
	}
	if state != "Bound" || pod.Annotations[tencentcloud.AnnotationPortMappingStatus] == "Ready" {
		return
	}
	var result []map[string]any
	m.mu.Lock()
	for i, l := range lines {
		p := m.pools[ports[i].pool]
		protocols := []string{l.protocol}
		if l.protocol == "TCPUDP" {
			protocols = []string{"TCP", "UDP"} // one listener, and one entry, per protocol
		}
		for _, proto := range protocols {
			result = append(result, map[string]any{"port": l.port, "protocol": proto, "pool": l.pool, "loadbalancerId": p.LBID,
				"loadbalancerPort": ports[i].port, "address": fmt.Sprintf("%s:%d", p.Address, ports[i].port)})
		}
	}
	m.mu.Unlock()
	raw, _ := json.Marshal(result)
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		tencentcloud.AnnotationPortMappingResult: string(raw), tencentcloud.AnnotationPortMappingStatus: "Ready"}}})
	_, _ = cs.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{})
}
