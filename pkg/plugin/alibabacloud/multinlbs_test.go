package alibabacloud_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/alibabacloud"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/lb"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// mnlbEnv is a fake API server with GameServerSets, and AlibabaCloud-Multi-NLBs on it.
type mnlbEnv struct {
	t *testing.T
	c client.Client
	p *lb.Multi
}

func newMNLBEnv(t *testing.T, rng lb.Range, objs ...client.Object) *mnlbEnv {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	gv := schema.GroupVersion{Group: "game.kruise.io", Version: "v1alpha1"}
	scheme.AddKnownTypeWithName(gv.WithKind("GameServerSet"), &unstructured.Unstructured{})
	scheme.AddKnownTypeWithName(gv.WithKind("GameServerSetList"), &unstructured.UnstructuredList{})
	c := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&corev1.Pod{}, &corev1.Service{}).WithObjects(objs...).Build()
	e := &mnlbEnv{t: t, c: c, p: alibabacloud.NewMultiNLBs(rng)}
	if err := e.p.Init(context.Background(), c, plugin.Config{}); err != nil {
		t.Fatal(err)
	}
	return e
}

// gss is a GameServerSet of that name with uid "uid-gss-<name>".
func gss(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: "game.kruise.io", Version: "v1alpha1", Kind: "GameServerSet"})
	u.SetNamespace("default")
	u.SetName(name)
	u.SetUID(types.UID("uid-gss-" + name))
	return u
}

// mnlbPod is a game server of GameServerSet set, ordinal i, with conf.
func mnlbPod(set string, i int, conf string) *corev1.Pod {
	name := fmt.Sprintf("%s-%d", set, i)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default",
			Labels: map[string]string{"game.kruise.io/owner-gss": set, "statefulset.kubernetes.io/pod-name": name},
			Annotations: map[string]string{networkstatus.AnnotationNetworkType: alibabacloud.MultiNLBsName,
				networkstatus.AnnotationNetworkConf: conf}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "game", Image: "game:1"}}},
	}
}

// create admits pod's CREATE and stores it with uid "uid-<name>".
func (e *mnlbEnv) create(pod *corev1.Pod) (*corev1.Pod, error) {
	e.t.Helper()
	out, err := e.p.OnPodAdded(context.Background(), e.c, pod)
	if err != nil {
		return out, err
	}
	out.UID = types.UID("uid-" + out.Name)
	out.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.244.1.7"}
	if err := e.c.Create(context.Background(), out.DeepCopy()); err != nil {
		e.t.Fatal(err)
	}
	return out, nil
}

// update runs the plugin on pod and returns the result; the pod is updated in place.
func (e *mnlbEnv) update(pod *corev1.Pod) error {
	e.t.Helper()
	out, err := e.p.OnPodUpdated(context.Background(), e.c, pod)
	*pod = *out
	if err != nil && plugin.IsWarning(err) {
		return nil
	}
	return err
}

// useLedger gives the plugin a port ledger in the fake API server and initialises it again.
func (e *mnlbEnv) useLedger() *lb.ConfigMapLedger {
	e.t.Helper()
	l := &lb.ConfigMapLedger{Client: e.c, Namespace: "network-plugin-policy-system", Plugin: alibabacloud.NLBName}
	e.p.UseLedger(l)
	if err := e.p.Init(context.Background(), e.c, plugin.Config{}); err != nil {
		e.t.Fatal(err)
	}
	return l
}

// claims returns the ledger's claims on load balancer id: "<port>=<owner>", sorted by port.
func claims(t *testing.T, l lb.Ledger, id string) string {
	t.Helper()
	all, err := l.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for port := int32(0); port < 65536 && len(out) < len(all[id]); port++ {
		if c, ok := all[id][port]; ok {
			out = append(out, fmt.Sprintf("%d=%s", port, c.Owner))
		}
	}
	return strings.Join(out, " ")
}

func (e *mnlbEnv) service(name string) *corev1.Service {
	e.t.Helper()
	svc := &corev1.Service{}
	if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: name}, svc); err != nil {
		e.t.Fatalf("Service %s: %v", name, err)
	}
	return svc
}

func (e *mnlbEnv) ingress(name, ip, host string) {
	e.t.Helper()
	svc := e.service(name)
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ip, Hostname: host}}
	if err := e.c.Status().Update(context.Background(), svc); err != nil {
		e.t.Fatal(err)
	}
	e.p.ServiceSeen(svc)
}

// gone deletes the Service, as the garbage collector does, and tells the plugin.
func (e *mnlbEnv) gone(name string) {
	e.t.Helper()
	svc := e.service(name)
	if err := e.c.Delete(context.Background(), svc); err != nil {
		e.t.Fatal(err)
	}
	// The fake client sets no creation time; the API server's is after every claim here.
	svc.CreationTimestamp = metav1.Now()
	if err := e.p.ServiceGone(context.Background(), e.c, svc); err != nil {
		e.t.Fatal(err)
	}
}

func state(t *testing.T, pod *corev1.Pod) *networkstatus.NetworkStatus {
	t.Helper()
	st, err := networkstatus.StatusFromPod(pod)
	if err != nil || st == nil {
		t.Fatalf("network-status: %v %v", st, err)
	}
	return st
}

func listenerPorts(svc *corev1.Service) []int32 {
	var out []int32
	for _, sp := range svc.Spec.Ports {
		out = append(out, sp.Port)
	}
	return out
}

const twoLines = `[{"name":"NlbIdNames","value":"nlb-a/dx,nlb-b/lt"},{"name":"PortProtocols","value":"7777/UDP"}]`

// TestMultiNLBsLinesInOneRun: a two-line game server gets both lines' Services in one run
// (OKG makes one per UPDATE), on the same listener port, each on its line's NLB; it is Ready
// only once both have an address and the cloud controller has set both lines' readiness
// gates, and its status lists each line's address with its own endPoint (OKG keeps only the
// last line's). Disabling and enabling the network switch every line's type and keep the
// class, so a later network-conf change is a plain patch (OKG's re-enabled Service lost its
// class and the next change is refused: "may not change once set").
func TestMultiNLBsLinesInOneRun(t *testing.T) {
	e := newMNLBEnv(t, lb.Range{Min: 1000, Max: 1010})
	pod, err := e.create(mnlbPod("gs", 0, twoLines))
	if err != nil {
		t.Fatal(err)
	}
	if len(pod.Spec.ReadinessGates) != 2 || pod.Spec.ReadinessGates[0].ConditionType != "service.readiness.alibabacloud.com/gs-0-dx" ||
		pod.Spec.ReadinessGates[1].ConditionType != "service.readiness.alibabacloud.com/gs-0-lt" {
		t.Fatalf("readiness gates %v, want one per line", pod.Spec.ReadinessGates)
	}
	for range 2 { // the first run writes NotReady, the second makes the Services
		if err := e.update(pod); err != nil {
			t.Fatal(err)
		}
	}
	dx, lt := e.service("gs-0-dx"), e.service("gs-0-lt")
	if dx.Annotations[alibabacloud.AnnotationLBID] != "nlb-a" || lt.Annotations[alibabacloud.AnnotationLBID] != "nlb-b" ||
		fmt.Sprint(listenerPorts(dx)) != "[1000]" || fmt.Sprint(listenerPorts(lt)) != "[1000]" ||
		dx.Annotations[alibabacloud.AnnotationLBBelongIndex] != "0" || *dx.Spec.LoadBalancerClass != alibabacloud.NLBLoadBalancerClass {
		t.Fatalf("Services %v %v / %v %v", dx.Annotations, dx.Spec.Ports, lt.Annotations, lt.Spec.Ports)
	}
	e.ingress("gs-0-dx", "198.51.100.10", "dx.example.com")
	if err := e.update(pod); err != nil || state(t, pod).CurrentNetworkState != networkstatus.NetworkNotReady {
		t.Fatalf("one line with an address: %v %v, want NotReady", state(t, pod).CurrentNetworkState, err)
	}
	e.ingress("gs-0-lt", "198.51.100.11", "lt.example.com")
	if err := e.update(pod); err != nil || state(t, pod).CurrentNetworkState != networkstatus.NetworkNotReady {
		t.Fatalf("both addresses, gates not set: %v %v, want NotReady", state(t, pod).CurrentNetworkState, err)
	}
	pod.Status.Conditions = []corev1.PodCondition{
		{Type: "service.readiness.alibabacloud.com/gs-0-dx", Status: corev1.ConditionTrue},
		{Type: "service.readiness.alibabacloud.com/gs-0-lt", Status: corev1.ConditionTrue},
	}
	if err := e.update(pod); err != nil {
		t.Fatal(err)
	}
	st := state(t, pod)
	got, _ := json.Marshal(st.ExternalAddresses)
	want := `[{"ip":"198.51.100.10","ports":[{"name":"7777-udp","protocol":"UDP","port":1000}],"endPoint":"dx.example.com/dx"},` +
		`{"ip":"198.51.100.11","ports":[{"name":"7777-udp","protocol":"UDP","port":1000}],"endPoint":"lt.example.com/lt"}]`
	if st.CurrentNetworkState != networkstatus.NetworkReady || string(got) != want {
		t.Fatalf("status %s %s, want Ready with %s", st.CurrentNetworkState, got, want)
	}
	pod.Labels["game.kruise.io/network-disabled"] = "true"
	if err := e.update(pod); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"gs-0-dx", "gs-0-lt"} {
		if svc := e.service(n); svc.Spec.Type != corev1.ServiceTypeClusterIP {
			t.Fatalf("disabled: %s is %s, want ClusterIP on every line", n, svc.Spec.Type)
		}
	}
	if st := state(t, pod); st.CurrentNetworkState != networkstatus.NetworkNotReady {
		t.Fatalf("disabled: network %s, want NotReady at once", st.CurrentNetworkState)
	}
	pod.Labels["game.kruise.io/network-disabled"] = "false"
	if err := e.update(pod); err != nil {
		t.Fatal(err)
	}
	if st := state(t, pod); st.CurrentNetworkState != networkstatus.NetworkNotReady {
		t.Fatalf("enabled again: network %s, want NotReady until the lines have their addresses", st.CurrentNetworkState)
	}
	for _, n := range []string{"gs-0-dx", "gs-0-lt"} {
		if svc := e.service(n); svc.Spec.Type != corev1.ServiceTypeLoadBalancer || svc.Spec.LoadBalancerClass == nil || *svc.Spec.LoadBalancerClass != alibabacloud.NLBLoadBalancerClass {
			t.Fatalf("enabled: %s is %s class %v, want the whole Service back", n, svc.Spec.Type, svc.Spec.LoadBalancerClass)
		}
	}
	pod.Annotations[networkstatus.AnnotationNetworkConf] = strings.TrimSuffix(twoLines, "]") + `,{"name":"ExternalTrafficPolicyType","value":"Cluster"}]`
	if err := e.update(pod); err != nil {
		t.Fatal(err)
	}
	if svc := e.service("gs-0-lt"); svc.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyCluster {
		t.Fatalf("conf change: lt's policy %s, want Cluster", svc.Spec.ExternalTrafficPolicy)
	}
}

// TestMultiNLBsExhaustedAtCreate: the ports are chosen at CREATE, free on every NLB of a
// level (a port another plugin's Service holds on one of them is skipped on all); a pod no
// level has room for is refused there with the exhaustion parameterError (reason
// PortsExhausted), where OKG admits it and refuses its updates.
func TestMultiNLBsExhaustedAtCreate(t *testing.T) {
	other := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "nlb-pod",
		Annotations: map[string]string{alibabacloud.AnnotationLBID: "nlb-b"}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 1000, Protocol: corev1.ProtocolUDP}}}}
	e := newMNLBEnv(t, lb.Range{Min: 1000, Max: 1002}, other)
	var got []string
	for i := range 2 {
		pod, err := e.create(mnlbPod("gs", i, twoLines))
		if err != nil {
			t.Fatalf("pod %d: %v", i, err)
		}
		got = append(got, pod.Annotations[lb.AnnotationAllocation])
	}
	want := []string{`{"level":0,"loadBalancers":["nlb-a","nlb-b"],"ports":[1001]}`, `{"level":0,"loadBalancers":["nlb-a","nlb-b"],"ports":[1002]}`}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("allocations %v, want %v (1000 is taken on nlb-b)", got, want)
	}
	_, err := e.create(mnlbPod("gs", 2, twoLines))
	var perr *plugin.Error
	if !errors.As(err, &perr) || perr.Type != plugin.ParameterError || perr.ReasonOf() != plugin.ReasonPortsExhausted || !strings.Contains(perr.Message, "no available ports found") {
		t.Fatalf("third pod: %v, want the exhaustion parameterError", err)
	}
}

// TestMultiNLBsFixedReleaseIsExact: a Fixed game server's Services are its GameServerSet's
// and keep their port across the pod's re-creation, whose CREATE records the port its
// Service holds and claims no other (a lower port is free by then); when that
// GameServerSet's Services are gone, their ports are free again, in the ledger too, and only
// theirs: another GameServerSet whose name has the first one's as a prefix (gs and gsx) keeps
// its port (OKG frees every key containing "default/gs").
func TestMultiNLBsFixedReleaseIsExact(t *testing.T) {
	const fixed = `[{"name":"NlbIdNames","value":"nlb-a/dx"},{"name":"PortProtocols","value":"7777/UDP"},{"name":"Fixed","value":"true"}]`
	e := newMNLBEnv(t, lb.Range{Min: 1000, Max: 1010}, gss("gs"), gss("gsx"), gss("tmp"))
	ledger := e.useLedger()
	run := func(set string, i int) *corev1.Pod {
		t.Helper()
		pod, err := e.create(mnlbPod(set, i, fixed))
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if err := e.update(pod); err != nil {
				t.Fatal(err)
			}
		}
		return pod
	}
	run("tmp", 0)
	run("gs", 0)
	run("gsx", 0)
	gs0 := e.service("gs-0-dx")
	if len(gs0.OwnerReferences) != 1 || gs0.OwnerReferences[0].Kind != "GameServerSet" {
		t.Fatalf("Fixed Service owners %v, want the GameServerSet", gs0.OwnerReferences)
	}
	if got := claims(t, ledger, "nlb-a"); got != "1000=default/tmp-0-dx 1001=default/gs-0-dx 1002=default/gsx-0-dx" {
		t.Fatalf("ledger %s", got)
	}
	e.gone("tmp-0-dx") // 1000 is free
	// The pod is re-created: its Fixed Service keeps the port, and its CREATE claims no other.
	if err := e.c.Delete(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "gs-0"}}); err != nil {
		t.Fatal(err)
	}
	pod := run("gs", 0)
	if rec := pod.Annotations[lb.AnnotationAllocation]; rec != `{"level":0,"loadBalancers":["nlb-a"],"ports":[1001]}` {
		t.Fatalf("re-created pod's record %s, want its Service's 1001", rec)
	}
	if got := listenerPorts(e.service("gs-0-dx")); fmt.Sprint(got) != "[1001]" {
		t.Fatalf("re-created pod's Service on %v, want [1001]", got)
	}
	if got := claims(t, ledger, "nlb-a"); got != "1001=default/gs-0-dx 1002=default/gsx-0-dx" {
		t.Fatalf("ledger after the re-creation %s, want no claim but the Services'", got)
	}
	// GameServerSet gs is deleted; the garbage collector deletes its Service.
	if err := e.c.Delete(context.Background(), gss("gs")); err != nil {
		t.Fatal(err)
	}
	e.gone("gs-0-dx")
	if got := claims(t, ledger, "nlb-a"); got != "1002=default/gsx-0-dx" {
		t.Fatalf("ledger after gs's Service went %s, want gsx-0's only", got)
	}
	if err := e.c.Create(context.Background(), gss("gs")); err != nil {
		t.Fatal(err)
	}
	run("gs", 1)
	run("gs", 2)
	if a, b, x := listenerPorts(e.service("gs-1-dx")), listenerPorts(e.service("gs-2-dx")), listenerPorts(e.service("gsx-0-dx")); fmt.Sprint(a, b, x) != "[1000] [1001] [1002]" {
		t.Fatalf("gs-1 %v, gs-2 %v, gsx-0 %v: want 1000, 1001 and gsx-0 keeping 1002", a, b, x)
	}
}

// TestMultiNLBsBadInput: each bad network-conf is a parameterError naming its parameter at
// CREATE (OKG panics on some, sends Services the API server refuses on others, or gives two
// lines one Service), and a Service of a line's name that this manager did not make is
// refused by name, never taken over (OKG panics on one without owners).
func TestMultiNLBsBadInput(t *testing.T) {
	// max_ports_per_pod is 16 here: three lines of six ports are 18 listeners.
	for name, tc := range map[string]struct{ conf, param string }{
		"not JSON":                                 {`[{`, networkstatus.AnnotationNetworkConf},
		"no NlbIdNames":                            {`[{"name":"PortProtocols","value":"7777/UDP"}]`, "NlbIdNames"},
		"entry without a line":                     {`[{"name":"NlbIdNames","value":"nlb-a"},{"name":"PortProtocols","value":"7777/UDP"}]`, "NlbIdNames"},
		"lines equal but case":                     {`[{"name":"NlbIdNames","value":"nlb-a/DX,nlb-b/dx"},{"name":"PortProtocols","value":"7777/UDP"}]`, "NlbIdNames"},
		"unequal levels":                           {`[{"name":"NlbIdNames","value":"nlb-a/dx,nlb-b/dx,nlb-c/lt"},{"name":"PortProtocols","value":"7777/UDP"}]`, "NlbIdNames"},
		"one NLB for two lines":                    {`[{"name":"NlbIdNames","value":"nlb-a/dx,nlb-a/lt"},{"name":"PortProtocols","value":"7777/UDP"}]`, "NlbIdNames"},
		"line not letters and digits":              {`[{"name":"NlbIdNames","value":"nlb-a/1-dx"},{"name":"PortProtocols","value":"7777/UDP"}]`, "NlbIdNames"},
		"more than 64 NLBs":                        {`[{"name":"NlbIdNames","value":"n0/l0,n1/l1,n2/l2,n3/l3,n4/l4,n5/l5,n6/l6,n7/l7,n8/l0,n9/l1,n10/l2,n11/l3,n12/l4,n13/l5,n14/l6,n15/l7,n16/l0,n17/l1,n18/l2,n19/l3,n20/l4,n21/l5,n22/l6,n23/l7,n24/l0,n25/l1,n26/l2,n27/l3,n28/l4,n29/l5,n30/l6,n31/l7,n32/l0,n33/l1,n34/l2,n35/l3,n36/l4,n37/l5,n38/l6,n39/l7,n40/l0,n41/l1,n42/l2,n43/l3,n44/l4,n45/l5,n46/l6,n47/l7,n48/l0,n49/l1,n50/l2,n51/l3,n52/l4,n53/l5,n54/l6,n55/l7,n56/l0,n57/l1,n58/l2,n59/l3,n60/l4,n61/l5,n62/l6,n63/l7,n64/l0"},{"name":"PortProtocols","value":"7777/UDP"}]`, "NlbIdNames"},
		"more than 8 lines":                        {`[{"name":"NlbIdNames","value":"a/l1,b/l2,c/l3,d/l4,e/l5,f/l6,g/l7,h/l8,i/l9"},{"name":"PortProtocols","value":"7777/UDP"}]`, "NlbIdNames"},
		"lines times ports past max_ports_per_pod": {`[{"name":"NlbIdNames","value":"a/l1,b/l2,c/l3"},{"name":"PortProtocols","value":"1,2,3,4,5,6"}]`, "PortProtocols"},
		"lower-case protocol":                      {`[{"name":"NlbIdNames","value":"nlb-a/dx"},{"name":"PortProtocols","value":"7777/udp"}]`, "PortProtocols"},
		"no PortProtocols":                         {`[{"name":"NlbIdNames","value":"nlb-a/dx"}]`, "PortProtocols"},
		"AllocatePolicy":                           {`[{"name":"NlbIdNames","value":"nlb-a/dx"},{"name":"PortProtocols","value":"7777"},{"name":"AllocatePolicy","value":"random"}]`, "AllocatePolicy"},
		"Fixed":                                    {`[{"name":"NlbIdNames","value":"nlb-a/dx"},{"name":"PortProtocols","value":"7777"},{"name":"Fixed","value":"yes"}]`, "Fixed"},
		"health check":                             {`[{"name":"NlbIdNames","value":"nlb-a/dx"},{"name":"PortProtocols","value":"7777"},{"name":"LBHealthCheckInterval","value":"500"}]`, "LBHealthCheckInterval"},
	} {
		t.Run(name, func(t *testing.T) {
			e := newMNLBEnv(t, lb.Range{Min: 1000, Max: 1100, MaxPerPod: 16})
			_, err := e.create(mnlbPod("gs", 0, tc.conf))
			var perr *plugin.Error
			if !errors.As(err, &perr) || perr.Type != plugin.ParameterError || perr.Param != tc.param {
				t.Fatalf("CREATE: %v, want a parameterError naming %q", err, tc.param)
			}
		})
	}
	t.Run("generateName", func(t *testing.T) {
		e := newMNLBEnv(t, lb.Range{Min: 1000, Max: 1010})
		pod := mnlbPod("gs", 0, twoLines)
		pod.Name, pod.GenerateName = "", "gs-"
		_, err := e.p.OnPodAdded(context.Background(), e.c, pod)
		if plugin.TypeOf(err) != plugin.ParameterError || !strings.Contains(err.Error(), "metadata.name") {
			t.Fatalf("CREATE without a name: %v, want a parameterError naming metadata.name (the gates are named after the pod)", err)
		}
	})
	t.Run("foreign Service", func(t *testing.T) {
		foreign := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "gs-0-dx"},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}, Selector: map[string]string{"app": "web"}}}
		e := newMNLBEnv(t, lb.Range{Min: 1000, Max: 1010}, foreign)
		pod, err := e.create(mnlbPod("gs", 0, `[{"name":"NlbIdNames","value":"nlb-a/dx"},{"name":"PortProtocols","value":"7777/UDP"}]`))
		if err != nil {
			t.Fatal(err)
		}
		_ = e.update(pod)
		if err := e.update(pod); plugin.TypeOf(err) != plugin.ParameterError || !strings.Contains(err.Error(), "not managed by network-plugin-policy") {
			t.Fatalf("update: %v, want a parameterError naming the Service", err)
		}
		if svc := e.service("gs-0-dx"); svc.Spec.Selector["app"] != "web" || len(svc.Annotations) != 0 {
			t.Fatalf("the foreign Service was written: %v %v", svc.Spec.Selector, svc.Annotations)
		}
	})
}

// TestMultiNLBsConfChangeReallocates: a network-conf that adds a port to a game server with
// Services gets a new allocation, one listener port per entry on every line (OKG keeps its
// one-port allocation and sends the same port for both).
func TestMultiNLBsConfChangeReallocates(t *testing.T) {
	e := newMNLBEnv(t, lb.Range{Min: 1000, Max: 1010})
	pod, err := e.create(mnlbPod("gs", 0, twoLines))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := e.update(pod); err != nil {
			t.Fatal(err)
		}
	}
	pod.Annotations[networkstatus.AnnotationNetworkConf] = `[{"name":"NlbIdNames","value":"nlb-a/dx,nlb-b/lt"},{"name":"PortProtocols","value":"7777/UDP,7778/TCP"}]`
	if err := e.update(pod); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"gs-0-dx", "gs-0-lt"} {
		svc := e.service(n)
		if got := fmt.Sprint(listenerPorts(svc)); got != "[1000 1001]" || svc.Spec.Ports[1].Name != "7778-tcp" {
			t.Fatalf("%s ports %v, want [1000 1001] named per entry", n, svc.Spec.Ports)
		}
	}
	if st := state(t, pod); st.CurrentNetworkState != networkstatus.NetworkNotReady {
		t.Fatalf("after a conf change %s, want NotReady until the cloud has the new listeners", st.CurrentNetworkState)
	}
}

// TestMultiNLBsEarlierPodsServiceIsWaitedFor: a Service of a line's name that an earlier pod
// of the same name owns is waited for, untouched; once it is gone the new pod's Service is
// made on the NLB its network-conf names (OKG reuses the allocation it rebuilt from the old
// Service at Init, whose NLB id is empty).
func TestMultiNLBsEarlierPodsServiceIsWaitedFor(t *testing.T) {
	old := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "gs-0-dx",
		Labels:          map[string]string{networkstatus.AnnotationNetworkType: alibabacloud.MultiNLBsName},
		Annotations:     map[string]string{alibabacloud.AnnotationLBBelongIndex: "0"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "gs-0", UID: "uid-old"}}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Name: "7777-udp", Port: 1000, Protocol: corev1.ProtocolUDP}}}}
	e := newMNLBEnv(t, lb.Range{Min: 1000, Max: 1010}, old)
	pod, err := e.create(mnlbPod("gs", 0, `[{"name":"NlbIdNames","value":"nlb-a/dx"},{"name":"PortProtocols","value":"7777/UDP"}]`))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := e.update(pod); err != nil {
			t.Fatal(err)
		}
	}
	if svc := e.service("gs-0-dx"); svc.OwnerReferences[0].UID != "uid-old" || svc.Annotations[alibabacloud.AnnotationLBID] != "" {
		t.Fatalf("the earlier pod's Service was written: %v", svc.Annotations)
	}
	e.gone("gs-0-dx")
	if err := e.update(pod); err != nil {
		t.Fatal(err)
	}
	if svc := e.service("gs-0-dx"); svc.OwnerReferences[0].UID != "uid-gs-0" || svc.Annotations[alibabacloud.AnnotationLBID] != "nlb-a" {
		t.Fatalf("new Service %v %v, want the pod's on nlb-a", svc.OwnerReferences, svc.Annotations)
	}
}

// TestMultiNLBsTwoReplicasOneLevel: two replicas, each with its own allocator and no view of
// the other's Services, and a replica of the per-pod AlibabaCloud-NLB on one of the same
// NLBs, share the port ledger: a burst of game servers (each CREATE answered by one replica,
// its updates by the other) and per-pod Services never gets one listener port twice on any
// NLB, nlb-b's ports are all used, and the game servers that find no room get the exhaustion
// error.
func TestMultiNLBsTwoReplicasOneLevel(t *testing.T) {
	ctx := context.Background()
	e := newMNLBEnv(t, lb.Range{Min: 1000, Max: 1009})
	ledger := func() lb.Ledger {
		return &lb.ConfigMapLedger{Client: e.c, Namespace: "network-plugin-policy-system", Plugin: alibabacloud.NLBName}
	}
	replicas := []*lb.Multi{alibabacloud.NewMultiNLBs(lb.Range{Min: 1000, Max: 1009}), alibabacloud.NewMultiNLBs(lb.Range{Min: 1000, Max: 1009})}
	for _, r := range replicas {
		r.UseLedger(ledger())
		if err := r.Init(ctx, e.c, plugin.Config{}); err != nil {
			t.Fatal(err)
		}
	}
	perPod := alibabacloud.NewNLB(lb.Range{Min: 1000, Max: 1009})
	perPod.UseLedger(ledger())
	if err := perPod.Init(ctx, e.c, plugin.Config{}); err != nil {
		t.Fatal(err)
	}
	const servers, singles = 8, 4
	var wg sync.WaitGroup
	errs := make([]error, servers+singles)
	for i := range servers + singles {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i >= servers {
				pod := mnlbPod("solo", i, `[{"name":"NlbIds","value":"nlb-b"},{"name":"PortProtocols","value":"7777/UDP"}]`)
				pod.Annotations[networkstatus.AnnotationNetworkType] = alibabacloud.NLBName
				pod.UID = types.UID(pod.Name)
				pod.Annotations[networkstatus.AnnotationNetworkStatus] = `{"currentNetworkState":"NotReady"}`
				_, errs[i] = perPod.OnPodUpdated(ctx, e.c, pod)
				return
			}
			pod, err := replicas[i%2].OnPodAdded(ctx, e.c, mnlbPod("gs", i, twoLines))
			if err != nil {
				errs[i] = err
				return
			}
			pod.UID = types.UID(pod.Name)
			if err := e.c.Create(ctx, pod.DeepCopy()); err != nil {
				errs[i] = err
				return
			}
			pod.Annotations[networkstatus.AnnotationNetworkStatus] = `{"currentNetworkState":"NotReady"}`
			_, errs[i] = replicas[(i+1)%2].OnPodUpdated(ctx, e.c, pod)
		}()
	}
	wg.Wait()
	var list corev1.ServiceList
	if err := e.c.List(ctx, &list); err != nil {
		t.Fatal(err)
	}
	holders := map[string][]string{}
	onB := 0
	for _, svc := range list.Items {
		for _, p := range listenerPorts(&svc) {
			id := svc.Annotations[alibabacloud.AnnotationLBID]
			k := fmt.Sprintf("%s:%d", id, p)
			holders[k] = append(holders[k], svc.Name)
			if id == "nlb-b" && len(holders[k]) == 1 {
				onB++
			}
		}
	}
	for k, names := range holders {
		if len(names) > 1 {
			t.Errorf("port %s handed out to %v", k, names)
		}
	}
	for i, err := range errs {
		var perr *plugin.Error
		if err != nil && (!errors.As(err, &perr) || perr.ReasonOf() != plugin.ReasonPortsExhausted) {
			t.Errorf("pod %d: %v, want only the exhaustion error", i, err)
		}
	}
	if onB != 10 {
		t.Errorf("%d of nlb-b's 10 ports in use, want all: 12 game servers asked for one; errors %v", onB, errs)
	}
}

// TestMultiNLBsPartlyTakenLevel: a level whose second NLB (in id order) has the chosen port
// claimed by another replica is given up whole: the claim made on the first NLB is released,
// and the next choice is made. A game server whose lines' Services hold a port keeps that
// port's claims when every new choice (a network-conf adding a port) meets a taken one and
// the run ends exhausted: its Services and their claims stay as they are.
func TestMultiNLBsPartlyTakenLevel(t *testing.T) {
	ctx := context.Background()
	e := newMNLBEnv(t, lb.Range{Min: 1000, Max: 1003})
	ledger := e.useLedger()
	// Another replica's claims on nlb-b, which this one has not seen: a live owner (its pod
	// exists).
	if err := e.c.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-x", Name: "other"}}); err != nil {
		t.Fatal(err)
	}
	if taken, err := ledger.Claim(ctx, "nlb-b", []int32{1000}, "team-x/other", nil); err != nil || len(taken) > 0 {
		t.Fatal(taken, err)
	}
	pod, err := e.create(mnlbPod("gs", 0, twoLines))
	if err != nil {
		t.Fatal(err)
	}
	if rec := pod.Annotations[lb.AnnotationAllocation]; rec != `{"level":0,"loadBalancers":["nlb-a","nlb-b"],"ports":[1001]}` {
		t.Fatalf("record %s, want 1001 on both (1000 is taken on nlb-b)", rec)
	}
	if a, b := claims(t, ledger, "nlb-a"), claims(t, ledger, "nlb-b"); a != "1001=default/gs-0-dx" || b != "1000=team-x/other 1001=default/gs-0-lt" {
		t.Fatalf("ledger nlb-a %q nlb-b %q: want the abandoned claim on nlb-a's 1000 released", a, b)
	}
	for range 2 {
		if err := e.update(pod); err != nil {
			t.Fatal(err)
		}
	}
	// nlb-b's 1002 and 1003 are taken too; a second port is asked for: each choice meets a
	// taken port on nlb-b, then none is left.
	if taken, err := ledger.Claim(ctx, "nlb-b", []int32{1002, 1003}, "team-x/other", nil); err != nil || len(taken) > 0 {
		t.Fatal(taken, err)
	}
	pod.Annotations[networkstatus.AnnotationNetworkConf] = `[{"name":"NlbIdNames","value":"nlb-a/dx,nlb-b/lt"},{"name":"PortProtocols","value":"7777/UDP,7778/UDP"}]`
	var perr *plugin.Error
	if err := e.update(pod); !errors.As(err, &perr) || perr.ReasonOf() != plugin.ReasonPortsExhausted {
		t.Fatalf("update: %v, want the exhaustion error", err)
	}
	if got := fmt.Sprint(listenerPorts(e.service("gs-0-dx")), listenerPorts(e.service("gs-0-lt"))); got != "[1001] [1001]" {
		t.Fatalf("ports %s, want the Services as they were", got)
	}
	if a, b := claims(t, ledger, "nlb-a"), claims(t, ledger, "nlb-b"); a != "1001=default/gs-0-dx" || b != "1000=team-x/other 1001=default/gs-0-lt 1002=team-x/other 1003=team-x/other" {
		t.Fatalf("ledger nlb-a %q nlb-b %q: want gs-0's claims on the ports its Services hold kept", a, b)
	}
}

// TestMultiNLBsOKGServicesAdopted: after the handover, a Ready game server whose two line
// Services OKG made (OKG's config hash, its ports) keeps them as they are: nothing is written
// (one write would have the cloud controller reconcile the NLB), their ports go in the ledger
// under the lines' owners, and the network is Ready on them; a later pod can not take their
// port.
func TestMultiNLBsOKGServicesAdopted(t *testing.T) {
	ctx := context.Background()
	okgService := func(line, id, ip string) *corev1.Service {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "gs-0-" + line,
				Labels: map[string]string{networkstatus.AnnotationNetworkType: alibabacloud.MultiNLBsName, "service.kubernetes.io/service-proxy-name": "dummy"},
				Annotations: map[string]string{
					"game.kruise.io/network-config-hash":                                                 "375732681", // OKG's
					alibabacloud.AnnotationLBBelongIndex:                                                 "0",
					alibabacloud.AnnotationLBID:                                                          id,
					"service.beta.kubernetes.io/alibaba-cloud-loadbalancer-force-override-listeners":     "true",
					"service.beta.kubernetes.io/alibaba-cloud-loadbalancer-health-check-connect-port":    "0",
					"service.beta.kubernetes.io/alibaba-cloud-loadbalancer-health-check-connect-timeout": "5",
					"service.beta.kubernetes.io/alibaba-cloud-loadbalancer-health-check-flag":            "on",
					"service.beta.kubernetes.io/alibaba-cloud-loadbalancer-health-check-interval":        "10",
					"service.beta.kubernetes.io/alibaba-cloud-loadbalancer-health-check-type":            "tcp",
					"service.beta.kubernetes.io/alibaba-cloud-loadbalancer-healthy-threshold":            "2",
					"service.beta.kubernetes.io/alibaba-cloud-loadbalancer-unhealthy-threshold":          "2",
				},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "gs-0", UID: "uid-gs-0", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, AllocateLoadBalancerNodePorts: ptr.To(false),
				ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal, LoadBalancerClass: ptr.To(alibabacloud.NLBLoadBalancerClass),
				Selector: map[string]string{"statefulset.kubernetes.io/pod-name": "gs-0"},
				Ports:    []corev1.ServicePort{{Name: "7777-udp", Port: 1005, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(7777)}}},
			Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: ip, Hostname: line + ".example.com"}}}},
		}
		return svc
	}
	pod := mnlbPod("gs", 0, twoLines)
	pod.UID = "uid-gs-0"
	pod.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "service.readiness.alibabacloud.com/gs-0-dx"}, {ConditionType: "service.readiness.alibabacloud.com/gs-0-lt"}}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.244.1.7", Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	pod.Annotations[networkstatus.AnnotationNetworkStatus] = `{"currentNetworkState":"Ready","createTime":null,"lastTransitionTime":null}`
	e := newMNLBEnv(t, lb.Range{Min: 1000, Max: 1010}, okgService("dx", "nlb-a", "198.51.100.10"), okgService("lt", "nlb-b", "198.51.100.11"), pod.DeepCopy())
	ledger := e.useLedger()
	before := map[string]string{"dx": e.service("gs-0-dx").ResourceVersion, "lt": e.service("gs-0-lt").ResourceVersion}
	if err := e.update(pod); err != nil {
		t.Fatal(err)
	}
	if st := state(t, pod); st.CurrentNetworkState != networkstatus.NetworkReady || len(st.ExternalAddresses) != 2 || st.ExternalAddresses[1].Ports[0].Port.IntValue() != 1005 {
		t.Fatalf("status %+v, want Ready on OKG's port 1005 on both lines", st)
	}
	for line, rv := range before {
		if got := e.service("gs-0-" + line).ResourceVersion; got != rv {
			t.Errorf("OKG's Service gs-0-%s written (resourceVersion %s, was %s)", line, got, rv)
		}
	}
	if a, b := claims(t, ledger, "nlb-a"), claims(t, ledger, "nlb-b"); a != "1005=default/gs-0-dx" || b != "1005=default/gs-0-lt" {
		t.Fatalf("ledger nlb-a %q nlb-b %q, want OKG's ports recorded under the lines", a, b)
	}
	// Another replica's view: a new game server on the same NLBs never gets 1005.
	other := alibabacloud.NewMultiNLBs(lb.Range{Min: 1005, Max: 1006})
	other.UseLedger(ledger)
	if err := other.Init(ctx, e.c, plugin.Config{}); err != nil {
		t.Fatal(err)
	}
	next, err := other.OnPodAdded(ctx, e.c, mnlbPod("gs", 1, twoLines))
	if err != nil {
		t.Fatal(err)
	}
	if rec := next.Annotations[lb.AnnotationAllocation]; !strings.Contains(rec, `"ports":[1006]`) {
		t.Fatalf("the next game server's record %s, want 1006", rec)
	}
}
