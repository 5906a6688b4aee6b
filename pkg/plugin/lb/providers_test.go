package lb_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/alibabacloud"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/hwcloud"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/jdcloud"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/lb"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/volcengine"
)

func runningPod(networkType, conf string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "gs-0", UID: "uid-gs-0",
			Annotations: map[string]string{networkstatus.AnnotationNetworkType: networkType, networkstatus.AnnotationNetworkConf: conf,
				networkstatus.AnnotationNetworkStatus: `{"currentNetworkState":"NotReady","createTime":null,"lastTransitionTime":null}`}},
		Spec:   corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "game"}}},
		Status: corev1.PodStatus{PodIP: "10.244.1.7"},
	}
}

// testScheme is client-go's scheme, built once: a fuzz run builds a client per input.
var testScheme = func() *runtime.Scheme {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		panic(err)
	}
	return scheme
}()

func fakeClient(t *testing.T, objs ...client.Object) client.Client {
	t.Helper()
	return newFakeClient(objs...)
}

func newFakeClient(objs ...client.Object) client.Client {
	return fake.NewClientBuilder().WithScheme(testScheme).WithObjects(objs...).Build()
}

// TestAnnotationsKeysChecked: an Annotations entry whose key is not an annotation key is a
// parameterError naming Annotations, and no Service is written (OKG sends it to the API
// server, which refuses the whole Service); an entry without ':' is skipped, as in OKG.
func TestAnnotationsKeysChecked(t *testing.T) {
	for name, p := range map[string]*lb.Plugin{"Volcengine-CLB": volcengine.NewCLB(lb.Range{Min: 550, Max: 600}), "JdCloud-NLB": jdcloud.NewNLB(lb.Range{Min: 500, Max: 700})} {
		t.Run(name, func(t *testing.T) {
			idParam := "ClbIds"
			if name == "JdCloud-NLB" {
				idParam = "NlbIds"
			}
			c := fakeClient(t)
			bad := `[{"name":"` + idParam + `","value":"lb-a"},{"name":"PortProtocols","value":"7777/UDP"},{"name":"Annotations","value":"Bad Key!:v"}]`
			_, err := p.OnPodUpdated(context.Background(), c, runningPod(name, bad))
			if perr := plugin.AsError(err); perr == nil || perr.Type != plugin.ParameterError || perr.Param != lb.ParamAnnotations {
				t.Fatalf("error %v, want a parameterError naming Annotations", err)
			}
			var list corev1.ServiceList
			if err := c.List(context.Background(), &list); err != nil || len(list.Items) != 0 {
				t.Errorf("Services %v written", list.Items)
			}
			good := `[{"name":"` + idParam + `","value":"lb-a"},{"name":"PortProtocols","value":"7777/UDP"},{"name":"Annotations","value":"x.example.com/k:v,badentry"}]`
			if _, err := p.OnPodUpdated(context.Background(), c, runningPod(name, good)); err != nil {
				t.Fatal(err)
			}
			svc := &corev1.Service{}
			if err := c.Get(context.Background(), types.NamespacedName{Namespace: "default", Name: "gs-0"}, svc); err != nil || svc.Annotations["x.example.com/k"] != "v" {
				t.Errorf("Service %v (%v), want annotation x.example.com/k: v", svc.Annotations, err)
			}
		})
	}
}

// TestJdCloudExhaustionIsAnError: with no NLB that has room, JdCloud-NLB returns a
// parameterError naming NlbIds; OKG creates the Service with an empty NLB id (and then ports
// 0, which the API server refuses at every retry).
func TestJdCloudExhaustionIsAnError(t *testing.T) {
	c := fakeClient(t)
	p := jdcloud.NewNLB(lb.Range{Min: 500, Max: 501}) // one port: max_port excluded
	conf := `[{"name":"NlbIds","value":"lb-a"},{"name":"PortProtocols","value":"7777/UDP,7778/UDP"}]`
	_, err := p.OnPodUpdated(context.Background(), c, runningPod(jdcloud.NLBName, conf))
	if perr := plugin.AsError(err); perr == nil || perr.Type != plugin.ParameterError || perr.Param != jdcloud.ParamNLBIDs || !strings.Contains(perr.Message, "free ports") {
		t.Fatalf("error %v, want a parameterError naming NlbIds", err)
	}
}

// TestEarlierPodsServiceIsWaitedFor: a Service of the pod's name owned by an earlier pod of
// that name (a StatefulSet pod recreated while its Service is still there) is left alone
// until it goes; OKG's JdCloud-NLB rebuilds it for the new pod.
func TestEarlierPodsServiceIsWaitedFor(t *testing.T) {
	old := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "gs-0",
		Annotations:     map[string]string{jdcloud.AnnotationNLBID: "lb-a"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "gs-0", UID: "uid-previous", Controller: ptr.To(true)}}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Name: "7777", Port: 600, Protocol: corev1.ProtocolUDP}}}}
	c := fakeClient(t, old)
	p := jdcloud.NewNLB(lb.Range{Min: 500, Max: 700})
	conf := `[{"name":"NlbIds","value":"lb-a"},{"name":"PortProtocols","value":"7777/UDP"}]`
	if _, err := p.OnPodUpdated(context.Background(), c, runningPod(jdcloud.NLBName, conf)); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{}
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: "default", Name: "gs-0"}, svc); err != nil {
		t.Fatal(err)
	}
	if svc.OwnerReferences[0].UID != "uid-previous" || svc.Annotations[jdcloud.AnnotationLBSpec] != "" {
		t.Errorf("the earlier pod's Service was rewritten: %+v", svc.ObjectMeta)
	}
}

// TestExhaustedAtCreate: the listener ports are chosen at the pod's CREATE, claimed in the
// ledger and recorded on the pod (AnnotationAllocation); a pod no configured load balancer
// has room for fails its CREATE with the exhaustion error, where a Synchronous policy denies
// it (OKG admits it and fails its updates). The Service, made at an update, takes the
// recorded ports when the ledger still holds them for it, and new ones when another Service
// took them meanwhile (the claim went with an earlier Service of the same name).
func TestExhaustedAtCreate(t *testing.T) {
	ctx := context.Background()
	c := fakeClient(t)
	ledger := &lb.ConfigMapLedger{Client: c, Namespace: "npp", Plugin: alibabacloud.SLBName}
	p := alibabacloud.NewSLB(lb.Range{Min: 500, Max: 501})
	p.UseLedger(ledger)
	conf := `[{"name":"SlbIds","value":"lb-a"},{"name":"PortProtocols","value":"7777/UDP"}]`
	newPod := func(name string) *corev1.Pod {
		pod := runningPod(alibabacloud.SLBName, conf)
		pod.Name, pod.UID = name, types.UID("uid-"+name)
		delete(pod.Annotations, networkstatus.AnnotationNetworkStatus)
		return pod
	}
	created := map[string]*corev1.Pod{}
	for _, name := range []string{"gs-0", "gs-1"} {
		pod, err := p.OnPodAdded(ctx, c, newPod(name))
		if err != nil {
			t.Fatalf("CREATE %s: %v", name, err)
		}
		if !strings.Contains(pod.Annotations[lb.AnnotationAllocation], `"loadBalancer":"lb-a"`) {
			t.Fatalf("CREATE %s: annotations %v, want the allocation recorded", name, pod.Annotations)
		}
		created[name] = pod
	}
	if _, err := p.OnPodAdded(ctx, c, newPod("gs-2")); plugin.TypeOf(err) != plugin.ParameterError {
		t.Fatalf("CREATE gs-2 with both ports taken: %v, want the exhaustion parameterError", err)
	}
	// gs-1's claim goes (its CREATE was refused later, say) and a replica without its record
	// hands port 501 to gs-3: gs-1's Service must not take 501 too.
	if err := ledger.Release(ctx, "lb-a", "default/gs-1", time.Time{}); err != nil {
		t.Fatal(err)
	}
	if taken, err := ledger.Claim(ctx, "lb-a", []int32{501}, "default/gs-3", nil); err != nil || taken != nil {
		t.Fatal(taken, err)
	}
	for name, pod := range created {
		pod.Annotations[networkstatus.AnnotationNetworkStatus] = `{"currentNetworkState":"NotReady","createTime":null,"lastTransitionTime":null}`
		_, err := p.OnPodUpdated(ctx, c, pod)
		svc := &corev1.Service{}
		getErr := c.Get(ctx, types.NamespacedName{Namespace: "default", Name: name}, svc)
		switch name {
		case "gs-0":
			if err != nil || getErr != nil || svc.Spec.Ports[0].Port != 500 {
				t.Errorf("gs-0: %v %v %v, want its Service on the recorded port 500", err, getErr, svc.Spec.Ports)
			}
		case "gs-1":
			if plugin.TypeOf(err) != plugin.ParameterError || getErr == nil {
				t.Errorf("gs-1 whose recorded port another Service took: %v, Service %v; want the exhaustion error and no Service", err, svc.Spec.Ports)
			}
		}
	}
}

// TestLateServiceGoneKeepsALiveClaim: a replica whose delete event for an earlier Service
// of a name comes late does not release the claim when a Service (or a pod) of that name
// exists again: the new one's port is not handed out twice.
func TestLateServiceGoneKeepsALiveClaim(t *testing.T) {
	ctx := context.Background()
	newSvc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "gs-0", Annotations: map[string]string{alibabacloud.AnnotationLBID: "lb-a"}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Name: "7777-udp", Port: 500, Protocol: corev1.ProtocolUDP}}}}
	c := fakeClient(t, newSvc)
	ledger := &lb.ConfigMapLedger{Client: c, Namespace: "npp", Plugin: alibabacloud.SLBName}
	if _, err := ledger.Claim(ctx, "lb-a", []int32{500}, "default/gs-0", nil); err != nil {
		t.Fatal(err)
	}
	late := alibabacloud.NewSLB(lb.Range{Min: 500, Max: 501})
	late.UseLedger(ledger)
	if err := late.Init(ctx, c, plugin.Config{}); err != nil {
		t.Fatal(err)
	}
	if err := late.ServiceGone(ctx, c, "default/gs-0", time.Time{}); err != nil {
		t.Fatal(err)
	}
	claims, err := ledger.Load(ctx)
	if err != nil || claims["lb-a"][500].Owner != "default/gs-0" {
		t.Fatalf("claims %v (%v): a late delete event released the live Service's claim", claims, err)
	}
	pod := runningPod(alibabacloud.SLBName, `[{"name":"SlbIds","value":"lb-a"},{"name":"PortProtocols","value":"7777/UDP"}]`)
	pod.Name = "gs-1"
	got, err := late.OnPodAdded(ctx, c, pod)
	if err != nil || !strings.Contains(got.Annotations[lb.AnnotationAllocation], "[501]") {
		t.Errorf("gs-1 at CREATE: %v %v, want port 501", err, got.Annotations[lb.AnnotationAllocation])
	}
}

// TestRestartCountsPortsChosenAtCreate: without a ledger (one replica), a restarted
// replica counts the ports recorded at the CREATE of pods whose Service is not made yet, and
// a recorded port another pod holds is never taken again: each of two such pods gets its own.
func TestRestartCountsPortsChosenAtCreate(t *testing.T) {
	ctx := context.Background()
	c := fakeClient(t)
	conf := `[{"name":"SlbIds","value":"lb-a"},{"name":"PortProtocols","value":"7777/UDP"}]`
	first := alibabacloud.NewSLB(lb.Range{Min: 500, Max: 501})
	gs0 := runningPod(alibabacloud.SLBName, conf)
	delete(gs0.Annotations, networkstatus.AnnotationNetworkStatus)
	gs0, err := first.OnPodAdded(ctx, c, gs0)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, gs0.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	restarted := alibabacloud.NewSLB(lb.Range{Min: 500, Max: 501})
	if err := restarted.Init(ctx, c, plugin.Config{}); err != nil {
		t.Fatal(err)
	}
	gs1 := runningPod(alibabacloud.SLBName, conf)
	gs1.Name, gs1.UID = "gs-1", "uid-gs-1"
	delete(gs1.Annotations, networkstatus.AnnotationNetworkStatus)
	if gs1, err = restarted.OnPodAdded(ctx, c, gs1); err != nil {
		t.Fatal(err)
	}
	ports := map[int32]string{}
	for _, pod := range []*corev1.Pod{gs0, gs1} {
		pod.Annotations[networkstatus.AnnotationNetworkStatus] = `{"currentNetworkState":"NotReady","createTime":null,"lastTransitionTime":null}`
		if _, err := restarted.OnPodUpdated(ctx, c, pod); err != nil {
			t.Fatal(err)
		}
		svc := &corev1.Service{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: "default", Name: pod.Name}, svc); err != nil {
			t.Fatal(err)
		}
		if other, dup := ports[svc.Spec.Ports[0].Port]; dup {
			t.Errorf("port %d handed to %s and %s", svc.Spec.Ports[0].Port, other, pod.Name)
		}
		ports[svc.Spec.Ports[0].Port] = pod.Name
	}
}

// cceService runs HwCloud-CCE-ELB's update on pod and returns the pod's Service.
func cceService(t *testing.T, p *lb.Plugin, c client.Client, pod *corev1.Pod) (*corev1.Pod, *corev1.Service) {
	t.Helper()
	out, err := p.OnPodUpdated(context.Background(), c, pod)
	if err != nil {
		t.Fatalf("OnPodUpdated: %v", err)
	}
	svc := &corev1.Service{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(pod), svc); err != nil {
		t.Fatal(err)
	}
	return out, svc
}

// cceServiceOf returns pod's Service.
func cceServiceOf(t *testing.T, c client.Client, pod *corev1.Pod) *corev1.Service {
	t.Helper()
	svc := &corev1.Service{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(pod), svc); err != nil {
		t.Fatal(err)
	}
	return svc
}

// TestCCEELBNamedAndAutoCreated: HwCloud-CCE-ELB as OKG writes it. Named (kubernetes.io/elb.id):
// the Service carries the id, every other network-conf entry as an annotation, Cluster
// traffic policy, ports "<port>-<proto>" (TCPUDP two on one listener). Auto-created
// (kubernetes.io/elb.autocreate): no id, the first ports of the range past the block ports;
// once CCE writes the new ELB's id the Service is not written again, the network is Ready at
// its address, a later change of the ports keeps that id (never a second ELB), a move to a
// named ELB is refused, and the id's ports are counted for a pod that names that ELB.
func TestCCEELBNamedAndAutoCreated(t *testing.T) {
	p := hwcloud.NewCCEELB(lb.Range{Min: 32768, Max: 32800, Block: []int32{32769}}, true)
	c := fakeClient(t)
	if err := p.Init(context.Background(), c, plugin.Config{}); err != nil {
		t.Fatal(err)
	}
	named := runningPod(hwcloud.CCEELBName, `[{"name":"kubernetes.io/elb.id","value":"elb-a"},{"name":"PortProtocols","value":"7777/TCPUDP,7778/UDP"},`+
		`{"name":"kubernetes.io/elb.class","value":"performance"},{"name":"ExternalTrafficPolicyType","value":"local"}]`)
	_, svc := cceService(t, p, c, named)
	if svc.Annotations[hwcloud.AnnotationELBID] != "elb-a" || svc.Annotations["kubernetes.io/elb.class"] != "performance" ||
		svc.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal || svc.Labels != nil {
		t.Errorf("named Service %v %v %s", svc.Labels, svc.Annotations, svc.Spec.ExternalTrafficPolicy)
	}
	var ports []string
	for _, sp := range svc.Spec.Ports {
		ports = append(ports, fmt.Sprintf("%s:%d/%s->%s", sp.Name, sp.Port, sp.Protocol, sp.TargetPort.String()))
	}
	if got, want := strings.Join(ports, " "), "7777-tcp:32768/TCP->7777 7777-udp:32768/UDP->7777 7778-udp:32770/UDP->7778"; got != want {
		t.Errorf("ports %s, want %s", got, want)
	}

	auto := runningPod(hwcloud.CCEELBName, `[{"name":"kubernetes.io/elb.autocreate","value":"{\"type\":\"public\"}"},{"name":"PortProtocols","value":"7777/UDP,7778/TCP"}]`)
	auto.Name, auto.UID = "gs-1", "uid-gs-1"
	_, svc = cceService(t, p, c, auto)
	if _, has := svc.Annotations[hwcloud.AnnotationELBID]; has || svc.Annotations[hwcloud.AnnotationELBAutoCreate] != `{"type":"public"}` ||
		svc.Spec.Ports[0].Port != 32768 || svc.Spec.Ports[1].Port != 32770 || svc.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyCluster {
		t.Errorf("auto-created Service %v %+v", svc.Annotations, svc.Spec)
	}
	// CCE creates the ELB, writes its id and then the address.
	svc.Annotations[hwcloud.AnnotationELBID] = "elb-new"
	if err := c.Update(context.Background(), svc); err != nil {
		t.Fatal(err)
	}
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "203.0.113.9"}}
	if err := c.Status().Update(context.Background(), svc); err != nil {
		t.Fatal(err)
	}
	rv := svc.ResourceVersion
	out, svc := cceService(t, p, c, auto)
	if svc.ResourceVersion != rv || svc.Annotations[hwcloud.AnnotationELBID] != "elb-new" {
		t.Errorf("the Service was written again (%s, was %s): %v", svc.ResourceVersion, rv, svc.Annotations)
	}
	st, _ := networkstatus.StatusFromPod(out)
	if st == nil || st.CurrentNetworkState != networkstatus.NetworkReady || st.ExternalAddresses[0].IP != "203.0.113.9" ||
		st.ExternalAddresses[0].Ports[0].Port.IntVal != 32768 {
		t.Errorf("status %+v, want Ready at 203.0.113.9:32768", st)
	}
	// One more port: the Service keeps the ELB CCE made (no second ELB), on the range's
	// first ports.
	more := auto.DeepCopy()
	more.Annotations[networkstatus.AnnotationNetworkConf] = `[{"name":"kubernetes.io/elb.autocreate","value":"{\"type\":\"public\"}"},{"name":"PortProtocols","value":"7777/UDP,7778/TCP,7779/UDP"}]`
	if _, svc = cceService(t, p, c, more); svc.Annotations[hwcloud.AnnotationELBID] != "elb-new" || len(svc.Spec.Ports) != 3 {
		t.Errorf("after a port was added: id %q, ports %v; want elb-new kept", svc.Annotations[hwcloud.AnnotationELBID], svc.Spec.Ports)
	}
	// A named ELB for that Service: refused, it cannot move in place.
	named2 := auto.DeepCopy()
	named2.Annotations[networkstatus.AnnotationNetworkConf] = `[{"name":"kubernetes.io/elb.id","value":"elb-a"},{"name":"PortProtocols","value":"7777/UDP"}]`
	if _, err := p.OnPodUpdated(context.Background(), c, named2); plugin.AsError(err) == nil || plugin.AsError(err).Param != hwcloud.AnnotationELBID {
		t.Errorf("moving an auto-created Service to a named ELB: %v, want a parameterError naming kubernetes.io/elb.id", err)
	}
	// Annotation keys are checked as the API server checks them (in lower case).
	upper := runningPod(hwcloud.CCEELBName, `[{"name":"kubernetes.io/elb.id","value":"elb-a"},{"name":"PortProtocols","value":"7777/UDP"},{"name":"Example.com/Team","value":"red"},{"name":"AllowNotReadyContainers","value":"game"}]`)
	upper.Name, upper.UID = "gs-3", "uid-gs-3"
	if _, err := p.OnPodUpdated(context.Background(), c, upper); plugin.AsError(err) == nil || !plugin.AsError(err).Warning || plugin.AsError(err).Param != "AllowNotReadyContainers" {
		t.Errorf("AllowNotReadyContainers: %v, want a warning naming it", err)
	}
	if svc = cceServiceOf(t, c, upper); svc.Annotations["Example.com/Team"] != "red" {
		t.Errorf("annotations %v, want Example.com/Team", svc.Annotations)
	}
	other := runningPod(hwcloud.CCEELBName, `[{"name":"kubernetes.io/elb.id","value":"elb-new"},{"name":"PortProtocols","value":"7777/UDP"}]`)
	other.Name, other.UID = "gs-2", "uid-gs-2"
	if _, svc = cceService(t, p, c, other); svc.Spec.Ports[0].Port != 32772 {
		t.Errorf("a pod naming the auto-created ELB got port %d, want 32772 (32768, 32770 and 32771 are gs-1's)", svc.Spec.Ports[0].Port)
	}
}

// TestCCEELBBadInput: where OKG's HwCloud-CCE-ELB panics, writes a Service the API server
// refuses or says little, each bad network-conf is a parameterError naming the entry, and no
// Service is written.
func TestCCEELBBadInput(t *testing.T) {
	for name, tc := range map[string]struct{ conf, param, msg string }{
		"both modes": {`[{"name":"kubernetes.io/elb.id","value":"elb-a"},{"name":"kubernetes.io/elb.autocreate","value":"{}"},{"name":"PortProtocols","value":"7777"}]`,
			"kubernetes.io/elb.id,kubernetes.io/elb.autocreate", "cannot be filled in simultaneously"},
		"two ids": {`[{"name":"kubernetes.io/elb.id","value":"elb-a,elb-b"},{"name":"PortProtocols","value":"7777"}]`, "kubernetes.io/elb.id", "exactly one"},
		"neither": {`[{"name":"PortProtocols","value":"7777"}]`, "kubernetes.io/elb.id", "is required (or kubernetes.io/elb.autocreate)"},
		"auto-create not JSON": {`[{"name":"kubernetes.io/elb.autocreate","value":"type=public"},{"name":"PortProtocols","value":"7777"}]`,
			"kubernetes.io/elb.autocreate", "is not a JSON object"},
		"auto-create a JSON list": {`[{"name":"kubernetes.io/elb.autocreate","value":"[]"},{"name":"PortProtocols","value":"7777"}]`,
			"kubernetes.io/elb.autocreate", "is not a JSON object"},
		"entry not an annotation key": {`[{"name":"kubernetes.io/elb.id","value":"elb-a"},{"name":"PortProtocols","value":"7777"},{"name":"Bad Key","value":"v"}]`,
			"Bad Key", "not an annotation key"},
		"more ports than the auto-created range": {`[{"name":"kubernetes.io/elb.autocreate","value":"{}"},{"name":"PortProtocols","value":"1,2,3"}]`,
			"PortProtocols", "the provider's range has 2"},
		"exhausted, OKG's message": {`[{"name":"kubernetes.io/elb.id","value":"elb-a"},{"name":"PortProtocols","value":"1,2,3"}]`,
			"kubernetes.io/elb.id", "there are no avaliable ports for [elb-a]"},
	} {
		t.Run(name, func(t *testing.T) {
			c := fakeClient(t)
			p := hwcloud.NewCCEELB(lb.Range{Min: 500, Max: 501}, true)
			if err := p.Init(context.Background(), c, plugin.Config{}); err != nil {
				t.Fatal(err)
			}
			_, err := p.OnPodUpdated(context.Background(), c, runningPod(hwcloud.CCEELBName, tc.conf))
			if perr := plugin.AsError(err); perr == nil || perr.Type != plugin.ParameterError || perr.Param != tc.param || !strings.Contains(perr.Message, tc.msg) {
				t.Fatalf("error %v, want a parameterError naming %s with %q", err, tc.param, tc.msg)
			}
			var list corev1.ServiceList
			if err := c.List(context.Background(), &list); err != nil || len(list.Items) != 0 {
				t.Errorf("Services %v written", list.Items)
			}
		})
	}
}

// TestMultiIngressOrder: Volcengine-CLB with EnableMultiIngress and a Service of two ports
// with two ingresses reports one external address per ingress and port, per ingress first,
// as OKG's loop does (ingresses outside, ports inside); with one ingress, or without the
// parameter, one address per port on the first ingress.
func TestMultiIngressOrder(t *testing.T) {
	ctx := context.Background()
	for name, tc := range map[string]struct {
		multi   bool
		ingress []string
		want    []string
	}{
		"two ingresses": {multi: true, ingress: []string{"198.51.100.1", "198.51.100.2"},
			want: []string{"198.51.100.1:550", "198.51.100.1:551", "198.51.100.2:550", "198.51.100.2:551"}},
		"one ingress":      {multi: true, ingress: []string{"198.51.100.1"}, want: []string{"198.51.100.1:550", "198.51.100.1:551"}},
		"without the flag": {ingress: []string{"198.51.100.1", "198.51.100.2"}, want: []string{"198.51.100.1:550", "198.51.100.1:551"}},
	} {
		t.Run(name, func(t *testing.T) {
			c := fakeClient(t)
			p := volcengine.NewCLB(lb.Range{Min: 550, Max: 600})
			if err := p.Init(ctx, c, plugin.Config{}); err != nil {
				t.Fatal(err)
			}
			conf := `[{"name":"ClbIds","value":"clb-a"},{"name":"PortProtocols","value":"7777/UDP,7778/TCP"}`
			if tc.multi {
				conf += `,{"name":"EnableMultiIngress","value":"true"}`
			}
			pod := runningPod(volcengine.CLBName, conf+`]`)
			if _, err := p.OnPodUpdated(ctx, c, pod.DeepCopy()); err != nil && !plugin.IsWarning(err) {
				t.Fatal(err)
			}
			svc := &corev1.Service{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(pod), svc); err != nil {
				t.Fatal(err)
			}
			for _, ip := range tc.ingress {
				svc.Status.LoadBalancer.Ingress = append(svc.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
			}
			if err := c.Status().Update(ctx, svc); err != nil {
				t.Fatal(err)
			}
			out, err := p.OnPodUpdated(ctx, c, pod.DeepCopy())
			if err != nil && !plugin.IsWarning(err) {
				t.Fatal(err)
			}
			st, err := networkstatus.StatusFromPod(out)
			if err != nil || st == nil || st.CurrentNetworkState != networkstatus.NetworkReady {
				t.Fatalf("status %+v (%v), want Ready", st, err)
			}
			var got []string
			for _, a := range st.ExternalAddresses {
				got = append(got, fmt.Sprintf("%s:%s", a.IP, a.Ports[0].Port.String()))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("external addresses %v, want %v", got, tc.want)
			}
		})
	}
}

// TestClbScatter: Volcengine-CLB with EnableClbScatter takes its CLBs round-robin, each
// allocation starting after the last one's CLB (OKG's lastScatterIdx), where without it every
// pod goes on the first CLB with room; a value that is not a boolean is a parameterError
// naming the parameter (OKG ignores it).
func TestClbScatter(t *testing.T) {
	ctx := context.Background()
	for name, tc := range map[string]struct {
		scatter string
		want    []string
	}{
		"scatter":         {scatter: `,{"name":"EnableClbScatter","value":"true"}`, want: []string{"clb-a", "clb-b", "clb-c", "clb-a"}},
		"first with room": {want: []string{"clb-a", "clb-a", "clb-a", "clb-a"}},
	} {
		t.Run(name, func(t *testing.T) {
			c := fakeClient(t)
			p := volcengine.NewCLB(lb.Range{Min: 550, Max: 600})
			if err := p.Init(ctx, c, plugin.Config{}); err != nil {
				t.Fatal(err)
			}
			var got []string
			for i := range tc.want {
				pod := runningPod(volcengine.CLBName, `[{"name":"ClbIds","value":"clb-a,clb-b,clb-c"},{"name":"PortProtocols","value":"7777/UDP"}`+tc.scatter+`]`)
				pod.Name, pod.UID = fmt.Sprintf("gs-%d", i), types.UID(fmt.Sprintf("uid-%d", i))
				if _, err := p.OnPodUpdated(ctx, c, pod); err != nil && !plugin.IsWarning(err) {
					t.Fatal(err)
				}
				svc := &corev1.Service{}
				if err := c.Get(ctx, client.ObjectKeyFromObject(pod), svc); err != nil {
					t.Fatal(err)
				}
				got = append(got, svc.Annotations[volcengine.AnnotationCLBID])
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("CLBs %v, want %v", got, tc.want)
			}
		})
	}
	c := fakeClient(t)
	p := volcengine.NewCLB(lb.Range{Min: 550, Max: 600})
	if err := p.Init(ctx, c, plugin.Config{}); err != nil {
		t.Fatal(err)
	}
	pod := runningPod(volcengine.CLBName, `[{"name":"ClbIds","value":"clb-a"},{"name":"PortProtocols","value":"7777/UDP"},{"name":"EnableClbScatter","value":"yes"}]`)
	if _, err := p.OnPodUpdated(ctx, c, pod); plugin.TypeOf(err) != plugin.ParameterError || !strings.Contains(err.Error(), "EnableClbScatter") {
		t.Errorf("EnableClbScatter yes: %v, want a parameterError naming it", err)
	}
}

// TestELBSessionAffinityOptionHasItsOwnKey: HwCloud-ELB writes ElbSessionAffinityOption to
// kubernetes.io/elb.session-affinity-option and keeps LBHealthCheckOption in
// kubernetes.io/elb.health-check-option; OKG writes the session-affinity option over the
// health-check option's key, so the ELB gets the affinity settings as its health check.
func TestELBSessionAffinityOptionHasItsOwnKey(t *testing.T) {
	ctx := context.Background()
	c := fakeClient(t)
	p := hwcloud.NewELB(lb.Range{Min: 500, Max: 600})
	if err := p.Init(ctx, c, plugin.Config{}); err != nil {
		t.Fatal(err)
	}
	pod := runningPod(hwcloud.ELBName, `[{"name":"ElbIds","value":"elb-a"},{"name":"PortProtocols","value":"7777/UDP"},`+
		`{"name":"ElbSessionAffinityFlag","value":"on"},{"name":"ElbSessionAffinityOption","value":"{\"persistence_timeout\":3}"},`+
		`{"name":"LBHealthCheckFlag","value":"on"},{"name":"LBHealthCheckOption","value":"{\"delay\":5}"}]`)
	for range 2 { // the first run writes the status, the second the Service
		if _, err := p.OnPodUpdated(ctx, c, pod); err != nil && !plugin.IsWarning(err) {
			t.Fatal(err)
		}
	}
	svc := &corev1.Service{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(pod), svc); err != nil {
		t.Fatal(err)
	}
	if got := svc.Annotations["kubernetes.io/elb.session-affinity-option"]; got != `{"persistence_timeout":3}` {
		t.Errorf("session-affinity-option %q, want the ElbSessionAffinityOption", got)
	}
	if got := svc.Annotations["kubernetes.io/elb.health-check-option"]; got != `{"delay":5}` {
		t.Errorf("health-check-option %q, want the LBHealthCheckOption", got)
	}
}
