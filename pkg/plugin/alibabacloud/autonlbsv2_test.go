package alibabacloud_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/alibabacloud"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// anlb2Deliberate are the cases in which AlibabaCloud-AutoNLBs-V2 does not do what OKG did, on
// purpose: the step from which the case is not compared, and the test that holds the
// difference (docs/okg-compatibility.md, "AlibabaCloud-AutoNLBs-V2").
var anlb2Deliberate = map[string]struct {
	from int
	why  string
}{
	"anlb2-01-lifecycle":                      {12, "network-disabled makes the Services ClusterIP and the network NotReady at once; OKG writes Ready without addresses, then NotReady, and again at enable (TestAutoNLBsV2Disabled)"},
	"anlb2-05-zonemaps-without-vpc":           {0, "a ZoneMaps without a VPC is a parameterError naming ZoneMaps at CREATE; OKG swallows it and the game server is NotReady for good (TestAutoNLBsV2BadInput)"},
	"anlb2-08-isp-with-underscore":            {0, "an ISP type that makes names the API server refuses is a parameterError naming EipIspTypes at CREATE; OKG's creates are refused on every update (TestAutoNLBsV2BadInput)"},
	"anlb2-10-range-too-small":                {0, "a range smaller than a game server's ports is a parameterError at CREATE; OKG admits the CREATE and refuses the updates (TestAutoNLBsV2BadInput)"},
	"anlb2-13-invalid-conf-json":              {2, "a network-conf that is not JSON is a parameterError (OKG panics); nothing is made at the manager's start (TestAutoNLBsV2NothingAtStart)"},
	"anlb2-14-init-prewarm-and-restart":       {0, "the objects are made at the game servers' updates, not at the manager's start for every GameServerSet of the type (TestAutoNLBsV2NothingAtStart)"},
	"anlb2-19-existing-finalizer-retain-true": {3, "a terminating game server whose finalizer RetainNLBOnDelete true does not need is let go (the network controller removes it); OKG leaves it terminating (TestAutoNLBsV2Finalize)"},
}

// TestAutoNLBsV2OKGConformance replays OKG's recorded AlibabaCloud-AutoNLBs-V2 cases, as
// TestMultiNLBsOKGConformance does, comparing the operators' objects from each case's first
// update (OKG makes EIP objects at its start: TestAutoNLBsV2NothingAtStart) and the game
// servers' own Services (OKG makes every slot's: TestAutoNLBsV2OwnServicesOnly).
func TestAutoNLBsV2OKGConformance(t *testing.T) {
	replayOKG(t, "testdata/autonlbsv2-conformance/", anlb2Deliberate, replayOptions{objectsFromFirstUpdate: true, ownServicesOnly: true})
}

// anlb2Env is a fake API server with GameServerSet gs (replicas 2, spec.network conf), the
// operators' kinds, and AlibabaCloud-AutoNLBs-V2.
type anlb2Env struct {
	t   *testing.T
	c   client.Client
	p   *alibabacloud.AutoNLBsV2
	gss *unstructured.Unstructured
}

const anlb2Conf = `[{"name":"PortProtocols","value":"7777/UDP"},{"name":"ZoneMaps","value":"vpc-1@cn-hangzhou-h:vsw-a,cn-hangzhou-i:vsw-b"},{"name":"MinPort","value":"1000"},{"name":"MaxPort","value":"1001"},{"name":"ReserveNlbNum","value":"0"}]`

func newANLB2Env(t *testing.T, conf string, objs ...client.Object) *anlb2Env {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	gv := schema.GroupVersion{Group: "game.kruise.io", Version: "v1alpha1"}
	scheme.AddKnownTypeWithName(gv.WithKind("GameServerSet"), &unstructured.Unstructured{})
	scheme.AddKnownTypeWithName(gv.WithKind("GameServerSetList"), &unstructured.UnstructuredList{})
	for _, gvk := range objectKinds {
		scheme.AddKnownTypeWithName(gvk, &unstructured.Unstructured{})
		scheme.AddKnownTypeWithName(gvk.GroupVersion().WithKind(gvk.Kind+"List"), &unstructured.UnstructuredList{})
	}
	set := gss("gs")
	if err := unstructured.SetNestedField(set.Object, int64(2), "spec", "replicas"); err != nil {
		t.Fatal(err)
	}
	var params []any
	if err := json.Unmarshal([]byte(conf), &params); err == nil {
		if err := unstructured.SetNestedSlice(set.Object, params, "spec", "network", "networkConf"); err != nil {
			t.Fatal(err)
		}
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&corev1.Pod{}, &corev1.Service{}).WithObjects(append(objs, set)...).Build()
	return &anlb2Env{t: t, c: c, p: alibabacloud.NewAutoNLBsV2(), gss: set}
}

// anlb2Pod is game server i of GameServerSet gs with conf.
func anlb2Pod(i int, conf string) *corev1.Pod {
	pod := mnlbPod("gs", i, conf)
	pod.Annotations[networkstatus.AnnotationNetworkType] = alibabacloud.AutoNLBsV2Name
	pod.Status.PodIP = "10.0.0.7"
	return pod
}

// update runs the pod's UPDATE and returns the pod and its network-status.
func (e *anlb2Env) update(pod *corev1.Pod) (*corev1.Pod, *networkstatus.NetworkStatus, error) {
	e.t.Helper()
	out, err := e.p.OnPodUpdated(context.Background(), e.c, pod)
	st, serr := networkstatus.StatusFromPod(out)
	if serr != nil {
		e.t.Fatal(serr)
	}
	return out, st, err
}

// objects are the names of the operators' objects of kind.
func (e *anlb2Env) objects(kind string) []string {
	e.t.Helper()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(objectKinds[kind].GroupVersion().WithKind(kind + "List"))
	if err := e.c.List(context.Background(), list); err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, u := range list.Items {
		out = append(out, u.GetName())
	}
	return out
}

// operate plays the EIP and NLB operators and the cloud: every EIP gets an allocation id,
// every NLB an id, every Service an address.
func (e *anlb2Env) operate() {
	e.t.Helper()
	ctx := context.Background()
	for kind, field := range map[string][]string{"EIP": {"status", "allocationID"}, "NLB": {"status", "loadBalancerId"}} {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(objectKinds[kind].GroupVersion().WithKind(kind + "List"))
		if err := e.c.List(ctx, list); err != nil {
			e.t.Fatal(err)
		}
		for i := range list.Items {
			u := &list.Items[i]
			if err := unstructured.SetNestedField(u.Object, "id-"+u.GetName(), field...); err != nil {
				e.t.Fatal(err)
			}
			if err := e.c.Update(ctx, u); err != nil {
				e.t.Fatal(err)
			}
		}
	}
	var svcs corev1.ServiceList
	if err := e.c.List(ctx, &svcs); err != nil {
		e.t.Fatal(err)
	}
	for i := range svcs.Items {
		s := &svcs.Items[i]
		s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "203.0.113.9", Hostname: s.Name + ".nlb.example.com"}}
		if err := e.c.Status().Update(ctx, s); err != nil {
			e.t.Fatal(err)
		}
	}
}

// ready drives game server pod to Ready: updates with the operators and the cloud between
// them; it returns the pod.
func (e *anlb2Env) ready(pod *corev1.Pod) *corev1.Pod {
	e.t.Helper()
	for range 4 {
		out, st, err := e.update(pod)
		if err != nil && !plugin.IsWarning(err) {
			e.t.Fatalf("update: %v", err)
		}
		pod = out
		if st.CurrentNetworkState == networkstatus.NetworkReady {
			return pod
		}
		e.operate()
	}
	e.t.Fatalf("not Ready after the operators answered: %s", pod.Annotations[networkstatus.AnnotationNetworkStatus])
	return nil
}

// TestAutoNLBsV2NothingAtStart: the plugin's start makes no object, even with a GameServerSet
// of the type in the cluster (OKG makes EIP objects for every one at its start); a game
// server's first update makes its GameServerSet's EIP objects (its 2 replicas, two a range:
// NLBs 0 and 1, OKG's count).
func TestAutoNLBsV2NothingAtStart(t *testing.T) {
	e := newANLB2Env(t, anlb2Conf)
	if err := e.p.Init(context.Background(), e.c, plugin.Config{}); err != nil {
		t.Fatal(err)
	}
	if got := e.objects("EIP"); len(got) != 0 {
		t.Fatalf("EIP objects after Init: %v, want none", got)
	}
	if _, _, err := e.update(anlb2Pod(0, anlb2Conf)); err != nil {
		t.Fatal(err)
	}
	if got := e.objects("EIP"); strings.Join(got, ",") != "gs-eip-bgp-0-z0,gs-eip-bgp-0-z1,gs-eip-bgp-1-z0,gs-eip-bgp-1-z1" {
		t.Fatalf("EIP objects after the first update: %v", got)
	}
}

// TestAutoNLBsV2OwnServicesOnly: a game server's run makes its own Service on its NLB, not the
// Services of the NLB's other slots (OKG makes them all in one run: with its default range,
// 500 an NLB, within one admission request); the other game server's run makes its own, on
// the next listener port of the same NLB.
func TestAutoNLBsV2OwnServicesOnly(t *testing.T) {
	e := newANLB2Env(t, anlb2Conf)
	e.ready(anlb2Pod(0, anlb2Conf))
	var svcs corev1.ServiceList
	if err := e.c.List(context.Background(), &svcs); err != nil {
		t.Fatal(err)
	}
	if len(svcs.Items) != 1 || svcs.Items[0].Name != "gs-0-bgp" {
		t.Fatalf("Services after gs-0 is Ready: %v, want gs-0-bgp only", svcs.Items)
	}
	pod := e.ready(anlb2Pod(1, anlb2Conf))
	st, _ := networkstatus.StatusFromPod(pod)
	if len(st.ExternalAddresses) != 1 || st.ExternalAddresses[0].Ports[0].Port.IntValue() != 1001 ||
		st.ExternalAddresses[0].EndPoint != "gs-1-bgp.nlb.example.com/BGP" {
		t.Fatalf("gs-1's external addresses: %+v", st.ExternalAddresses)
	}
}

// TestAutoNLBsV2Disabled: network-disabled makes the game server's Service ClusterIP and its
// network NotReady at once; enabled again, the Service is a LoadBalancer of the NLB class
// again and the network Ready once it has its address. OKG writes Ready without addresses at
// the disable, then NotReady.
func TestAutoNLBsV2Disabled(t *testing.T) {
	e := newANLB2Env(t, anlb2Conf)
	pod := e.ready(anlb2Pod(0, anlb2Conf))
	pod.Labels[networkstatus.LabelNetworkDisabled] = "true"
	pod, st, err := e.update(pod)
	if err != nil || st.CurrentNetworkState != networkstatus.NetworkNotReady {
		t.Fatalf("disabled: %v, %s", err, st.CurrentNetworkState)
	}
	svc := &corev1.Service{}
	if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: "gs-0-bgp"}, svc); err != nil {
		t.Fatal(err)
	}
	if svc.Spec.Type != corev1.ServiceTypeClusterIP || svc.Spec.LoadBalancerClass != nil {
		t.Fatalf("disabled Service: type %s, class %v", svc.Spec.Type, svc.Spec.LoadBalancerClass)
	}
	pod.Labels[networkstatus.LabelNetworkDisabled] = "false"
	e.ready(pod)
	if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: "gs-0-bgp"}, svc); err != nil {
		t.Fatal(err)
	}
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || svc.Spec.LoadBalancerClass == nil || *svc.Spec.LoadBalancerClass != alibabacloud.NLBLoadBalancerClass {
		t.Fatalf("enabled Service: type %s, class %v", svc.Spec.Type, svc.Spec.LoadBalancerClass)
	}
}

// TestAutoNLBsV2BadInput: what OKG swallows or panics on is a parameterError naming the
// parameter at CREATE (and so at the GameServerSet's validation).
func TestAutoNLBsV2BadInput(t *testing.T) {
	base := `{"name":"PortProtocols","value":"7777/UDP"},{"name":"MinPort","value":"1000"},{"name":"MaxPort","value":"1001"}`
	for _, tc := range []struct{ conf, param string }{
		{`[` + base + `,{"name":"ZoneMaps","value":"cn-hangzhou-h:vsw-a,cn-hangzhou-i:vsw-b"}]`, "ZoneMaps"},
		{`[` + base + `,{"name":"ZoneMaps","value":"vpc-1@cn-hangzhou-h:vsw-a"}]`, "ZoneMaps"},
		{`[` + base + `,{"name":"ZoneMaps","value":"vpc-1@cn-hangzhou-h,cn-hangzhou-i:vsw-b"}]`, "ZoneMaps"},
		{`[` + base + `,{"name":"ZoneMaps","value":"vpc-1@a:1,b:2"},{"name":"EipIspTypes","value":"BGP_PRO"}]`, "EipIspTypes"},
		{`[` + base + `,{"name":"ZoneMaps","value":"vpc-1@a:1,b:2"},{"name":"EipIspTypes","value":"intranet"}]`, "EipIspTypes"},
		{`[` + base + `,{"name":"ZoneMaps","value":"vpc-1@a:1,b:2"},{"name":"RetainNLBOnDelete","value":"maybe"}]`, "RetainNLBOnDelete"},
		{`[{"name":"PortProtocols","value":"7777/UDP,7778/UDP"},{"name":"MinPort","value":"1000"},{"name":"MaxPort","value":"1000"},{"name":"ZoneMaps","value":"vpc-1@a:1,b:2"}]`, "MinPort"},
		{`[{"name":"PortProtocols","value":"7777/TCPUDP"},{"name":"ZoneMaps","value":"vpc-1@a:1,b:2"}]`, "PortProtocols"},
		{`[{"name":"PortProtocols","value":"7777/TCP,7777/UDP"},{"name":"ZoneMaps","value":"vpc-1@a:1,b:2"}]`, "PortProtocols"},
		{`[{"name":"PortProtocols","value":"7777/UDP"}]`, "ZoneMaps"},
		{`[`, "network-conf"},
	} {
		e := newANLB2Env(t, tc.conf)
		_, err := e.p.OnPodAdded(context.Background(), e.c, anlb2Pod(0, tc.conf))
		var perr *plugin.Error
		if !errors.As(err, &perr) || perr.Type != plugin.ParameterError || !strings.Contains(err.Error(), tc.param) {
			t.Errorf("conf %s: %v, want a parameterError naming %s", tc.conf, err, tc.param)
		}
		if err := e.p.ValidateConf(anlb2Pod(0, tc.conf)); err == nil {
			t.Errorf("conf %s: ValidateConf passed", tc.conf)
		}
	}
}

// otherNLB is an NLB object named name of GameServerSet "other" (BGP) in namespace default.
func otherNLB(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(alibabacloud.NLBGVK)
	u.SetNamespace("default")
	u.SetName(name)
	u.SetLabels(map[string]string{alibabacloud.LabelNLBPool: "true", alibabacloud.LabelNLBPoolGSS: "other", alibabacloud.LabelNLBPoolISPType: "BGP"})
	return u
}

// TestAutoNLBsV2TenantBounds: an object of a pool's name that is not the GameServerSet's (no
// pool labels, another GameServerSet's) is not used, a Service of the game server's name
// that is not the GameServerSet's is not taken over, and a namespace never holds more than
// AutoNLBsV2MaxNLBsPerNamespace NLB objects.
func TestAutoNLBsV2TenantBounds(t *testing.T) {
	foreign := otherNLB("gs-bgp-0")
	e := newANLB2Env(t, anlb2Conf, foreign)
	pod := anlb2Pod(0, anlb2Conf)
	pod.Annotations[networkstatus.AnnotationNetworkStatus] = `{"currentNetworkState":"NotReady"}`
	if _, _, err := e.update(pod); err == nil || !strings.Contains(err.Error(), "not GameServerSet gs's") {
		t.Errorf("a foreign NLB object of the pool's name: %v", err)
	}

	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "gs-0-bgp"}}
	e = newANLB2Env(t, anlb2Conf, svc)
	if _, _, err := e.update(anlb2Pod(0, anlb2Conf)); err != nil {
		t.Fatal(err)
	}
	e.operate()
	if _, _, err := e.update(pod); err != nil && !strings.Contains(err.Error(), "is not GameServerSet gs's") {
		t.Fatal(err)
	}
	e.operate()
	if _, _, err := e.update(pod); err == nil || !strings.Contains(err.Error(), "is not GameServerSet gs's") {
		t.Errorf("a foreign Service of the game server's name: %v", err)
	}

	var many []client.Object
	for i := range alibabacloud.AutoNLBsV2MaxNLBsPerNamespace {
		many = append(many, otherNLB(fmt.Sprintf("other-bgp-%d", i)))
	}
	e = newANLB2Env(t, anlb2Conf, many...)
	if _, _, err := e.update(pod); err == nil || !strings.Contains(err.Error(), "at most 64 are made for one namespace") {
		t.Errorf("a namespace at its NLB cap: %v", err)
	}
	if got := e.objects("EIP"); len(got) != 0 {
		t.Errorf("EIP objects made past the cap: %v", got)
	}
}

// TestAutoNLBsV2OwnNLBDecides: what fails on another NLB of the GameServerSet (a foreign
// object of NLB 1's name, a namespace cap that leaves no room for NLB 1) does not fail game
// server 0 on NLB 0, Ready or not, and fails game server 2 on NLB 1; no EIP object is made
// for an NLB whose name is another's; EIP objects of an NLB not made yet count against the
// namespace's cap; with two ISP types, the game server's own NLB of each is made before any
// spare; an object of the own NLB's name without the pool labels is a parameterError; a read-only run (the network controller's precheck, a kept-live run)
// that would create an object says so (plugin.ErrWouldWrite) instead of a NotReady status.
func TestAutoNLBsV2OwnNLBDecides(t *testing.T) {
	foreign := otherNLB("gs-bgp-1")
	e := newANLB2Env(t, anlb2Conf, foreign)
	pod := e.ready(anlb2Pod(0, anlb2Conf))
	if _, st, err := e.update(pod); err != nil || st.CurrentNetworkState != networkstatus.NetworkReady {
		t.Fatalf("game server 0 beside a foreign object of NLB 1's name: %v, %s", err, st.CurrentNetworkState)
	}
	second := anlb2Pod(2, anlb2Conf) // NLB 1: two game servers an NLB
	second.Annotations[networkstatus.AnnotationNetworkStatus] = `{"currentNetworkState":"NotReady"}`
	if _, _, err := e.update(second); err == nil || !strings.Contains(err.Error(), "not GameServerSet gs's") {
		t.Errorf("game server 2, on NLB 1, whose name is taken: %v", err)
	}

	// 63 pools of another GameServerSet, one of them only EIP objects: room for NLB 0 only.
	eipOnly := &unstructured.Unstructured{}
	eipOnly.SetGroupVersionKind(alibabacloud.EIPGVK)
	eipOnly.SetNamespace("default")
	eipOnly.SetName("other-eip-bgp-0-z0")
	eipOnly.SetLabels(map[string]string{alibabacloud.LabelEIPPool: "true", alibabacloud.LabelEIPPoolGSS: "other", alibabacloud.LabelEIPPoolISPType: "BGP", alibabacloud.LabelEIPPoolIndex: "0-z0"})
	many := []client.Object{eipOnly}
	for i := 1; i < alibabacloud.AutoNLBsV2MaxNLBsPerNamespace-1; i++ {
		many = append(many, otherNLB(fmt.Sprintf("other-bgp-%d", i)))
	}
	e = newANLB2Env(t, anlb2Conf, many...)
	e.ready(anlb2Pod(0, anlb2Conf))
	if got := e.objects("EIP"); !slices.Contains(got, "gs-eip-bgp-0-z1") || slices.Contains(got, "gs-eip-bgp-1-z0") {
		t.Errorf("EIP objects with room for one NLB: %v, want NLB 0's only", got)
	}
	if _, _, err := e.update(second); err == nil || !strings.Contains(err.Error(), "at most 64 are made for one namespace") {
		t.Errorf("game server 2, whose NLB 1 finds no room: %v", err)
	}

	if got := e.objects("EIP"); slices.Contains(got, "gs-eip-bgp-1-z0") {
		t.Errorf("EIP objects made for NLB 1, whose name is another's: %v", got)
	}

	// Two ISP types, room for two NLBs: game server 0's own NLB of each, not BGP's spare.
	two := strings.Replace(anlb2Conf, `{"name":"ReserveNlbNum","value":"0"}`, `{"name":"ReserveNlbNum","value":"0"},{"name":"EipIspTypes","value":"BGP,ChinaMobile"}`, 1)
	e = newANLB2Env(t, two, many[1:]...)
	e.ready(anlb2Pod(0, two))
	if got := e.objects("NLB"); !slices.Contains(got, "gs-bgp-0") || !slices.Contains(got, "gs-chinamobile-0") || slices.Contains(got, "gs-bgp-1") {
		t.Errorf("NLB objects with room for two and two ISP types: %v, want game server 0's own of each", got)
	}
	secondTwo := anlb2Pod(2, two)
	secondTwo.Annotations[networkstatus.AnnotationNetworkStatus] = `{"currentNetworkState":"NotReady"}`
	if _, _, err := e.update(secondTwo); err == nil || !strings.Contains(err.Error(), "at most 64 are made for one namespace") {
		t.Errorf("game server 2, whose NLBs find no room: %v", err)
	}

	// An object of the own NLB's name that the pool lists leave out (no labels at all).
	bare := &unstructured.Unstructured{}
	bare.SetGroupVersionKind(alibabacloud.EIPGVK)
	bare.SetNamespace("default")
	bare.SetName("gs-eip-bgp-0-z0")
	e = newANLB2Env(t, anlb2Conf, bare)
	first := anlb2Pod(0, anlb2Conf)
	first.Annotations[networkstatus.AnnotationNetworkStatus] = `{"currentNetworkState":"NotReady"}`
	if _, _, err := e.update(first); err == nil || !strings.Contains(err.Error(), "not this GameServerSet's") {
		t.Errorf("an unlabelled EIP object of game server 0's NLB: %v", err)
	}

	e = newANLB2Env(t, anlb2Conf)
	pod = anlb2Pod(0, anlb2Conf)
	pod.Annotations[networkstatus.AnnotationNetworkStatus] = `{"currentNetworkState":"NotReady"}`
	ro := interceptor.NewClient(e.c.(client.WithWatch), interceptor.Funcs{Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error {
		return plugin.ErrWouldWrite
	}})
	if _, err := e.p.OnPodUpdated(plugin.ReadOnly(context.Background()), ro, pod); !errors.Is(err, plugin.ErrWouldWrite) {
		t.Errorf("a read-only run that would create EIP objects: %v, want ErrWouldWrite", err)
	}
}

// TestAutoNLBsV2Finalize: a terminating game server's FinalizerDeleteNLB is let go at once
// while its GameServerSet exists (a scale-down) or with RetainNLBOnDelete true; once the
// GameServerSet is gone, not before its Services are gone (a RetryError), then after its NLB
// and EIP objects are deleted, and another GameServerSet's objects stay. A GameServerSet read
// that fails deletes nothing, nor does a label naming another GameServerSet than the pod's
// name.
func TestAutoNLBsV2Finalize(t *testing.T) {
	conf := strings.Replace(anlb2Conf, `]`, `,{"name":"RetainNLBOnDelete","value":"false"}]`, 1)
	e := newANLB2Env(t, conf)
	pod, err := e.p.OnPodAdded(context.Background(), e.c, anlb2Pod(0, conf))
	if err != nil || !slices.Contains(pod.Finalizers, alibabacloud.FinalizerDeleteNLB) {
		t.Fatalf("CREATE with RetainNLBOnDelete false: %v, finalizers %v", err, pod.Finalizers)
	}
	pod = e.ready(pod)
	other := &unstructured.Unstructured{}
	other.SetGroupVersionKind(alibabacloud.NLBGVK)
	other.SetNamespace("default")
	other.SetName("other-bgp-0")
	other.SetLabels(map[string]string{alibabacloud.LabelNLBPool: "true", alibabacloud.LabelNLBPoolGSS: "other", alibabacloud.LabelNLBPoolISPType: "BGP"})
	if err := e.c.Create(context.Background(), other); err != nil {
		t.Fatal(err)
	}
	if err := e.p.Finalize(context.Background(), e.c, pod); err != nil || len(e.objects("NLB")) != 3 {
		t.Fatalf("GameServerSet there: %v, NLB objects %v", err, e.objects("NLB"))
	}
	if err := e.p.Finalize(context.Background(), e.c, anlb2Pod(0, anlb2Conf)); err != nil {
		t.Fatalf("RetainNLBOnDelete true: %v", err)
	}
	failing := interceptor.NewClient(e.c.(client.WithWatch), interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		return apierrors.NewServiceUnavailable("etcd is away")
	}})
	if err := e.c.Delete(context.Background(), e.gss); err != nil {
		t.Fatal(err)
	}
	if err := e.p.Finalize(context.Background(), failing, pod); err == nil || len(e.objects("NLB")) != 3 {
		t.Fatalf("GameServerSet unreadable: %v, NLB objects %v", err, e.objects("NLB"))
	}
	err = e.p.Finalize(context.Background(), e.c, pod)
	var perr *plugin.Error
	if !errors.As(err, &perr) || perr.Type != plugin.RetryError {
		t.Fatalf("GameServerSet gone, its Service there: %v, want a retryError", err)
	}
	if err := e.c.Delete(context.Background(), &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "gs-0-bgp"}}); err != nil {
		t.Fatal(err)
	}
	relabelled := pod.DeepCopy()
	relabelled.Labels[networkstatus.LabelOwnerGSS] = "other" // gs-0 is not other's game server
	if err := e.p.Finalize(context.Background(), e.c, relabelled); err != nil || len(e.objects("NLB")) != 3 {
		t.Fatalf("a label naming another GameServerSet than the pod's name: %v, NLB objects %v", err, e.objects("NLB"))
	}
	if err := e.p.Finalize(context.Background(), e.c, pod); err != nil {
		t.Fatal(err)
	}
	if got := e.objects("NLB"); strings.Join(got, ",") != "other-bgp-0" {
		t.Errorf("NLB objects after: %v, want other-bgp-0 only", got)
	}
	if got := e.objects("EIP"); len(got) != 0 {
		t.Errorf("EIP objects after: %v", got)
	}
}

// TestAutoNLBsV2GameServerSetGoneKeepsReady: a Ready game server whose GameServerSet is
// deleted (it may still serve players while its pods go) is labelled as OKG labels it and
// keeps its Ready network; nothing is made.
func TestAutoNLBsV2GameServerSetGoneKeepsReady(t *testing.T) {
	e := newANLB2Env(t, anlb2Conf)
	pod := e.ready(anlb2Pod(0, anlb2Conf))
	if err := e.c.Delete(context.Background(), e.gss); err != nil {
		t.Fatal(err)
	}
	out, st, err := e.update(pod)
	if err != nil || st.CurrentNetworkState != networkstatus.NetworkReady || len(st.ExternalAddresses) != 1 || out.Labels[alibabacloud.LabelGSSDeleting] != "true" {
		t.Fatalf("GameServerSet gone: %v, status %+v, labels %v; want Ready kept and the label", err, st, out.Labels)
	}
}

// TestAutoNLBsV2FinalizeNeverHoldsForever: once the GameServerSet is gone, a Service it does
// not control (an orphan, a user's with its label) does not hold the game server, and one it
// controls holds it at most FinalizeMaxWait from the pod's deletion: then the finalizer is let
// go and the NLB and EIP objects are kept.
func TestAutoNLBsV2FinalizeNeverHoldsForever(t *testing.T) {
	conf := strings.Replace(anlb2Conf, `]`, `,{"name":"RetainNLBOnDelete","value":"false"}]`, 1)
	orphan := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "users-svc", Labels: map[string]string{networkstatus.LabelOwnerGSS: "gs"}}}
	e := newANLB2Env(t, conf, orphan)
	pod := e.ready(anlb2Pod(0, conf))
	if err := e.c.Delete(context.Background(), e.gss); err != nil {
		t.Fatal(err)
	}
	// gs-0-bgp, controlled by the GameServerSet, is still there (no garbage collector here).
	recent := metav1.NewTime(time.Now().Add(-time.Minute))
	pod.DeletionTimestamp = &recent
	var perr *plugin.Error
	if err := e.p.Finalize(context.Background(), e.c, pod); !errors.As(err, &perr) || perr.Type != plugin.RetryError || !strings.Contains(err.Error(), "1 of its Services") {
		t.Fatalf("a minute in, its Service there: %v, want a retryError counting only the GameServerSet's Service", err)
	}
	old := metav1.NewTime(time.Now().Add(-alibabacloud.FinalizeMaxWait - time.Minute))
	pod.DeletionTimestamp = &old
	if err := e.p.Finalize(context.Background(), e.c, pod); err != nil {
		t.Fatalf("past FinalizeMaxWait: %v, want the finalizer let go", err)
	}
	if got := e.objects("NLB"); len(got) == 0 {
		t.Errorf("NLB objects deleted after giving up: want them kept")
	}
}
