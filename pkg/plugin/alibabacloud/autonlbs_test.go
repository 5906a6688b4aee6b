package alibabacloud_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/alibabacloud"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/lb"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// anlbEnv is a fake API server with GameServerSet gs (replicas 2), and AlibabaCloud-AutoNLBs.
type anlbEnv struct {
	t *testing.T
	c client.Client
	p *alibabacloud.AutoNLBs
}

// newANLBEnv makes the fake API server, GameServerSet gs of conf (its spec.network) among
// objs.
func newANLBEnv(t *testing.T, conf string, objs ...client.Object) *anlbEnv {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	gv := schema.GroupVersion{Group: "game.kruise.io", Version: "v1alpha1"}
	scheme.AddKnownTypeWithName(gv.WithKind("GameServerSet"), &unstructured.Unstructured{})
	scheme.AddKnownTypeWithName(gv.WithKind("GameServerSetList"), &unstructured.UnstructuredList{})
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
	return &anlbEnv{t: t, c: c, p: alibabacloud.NewAutoNLBs()}
}

const anlbConf = `[{"name":"PortProtocols","value":"7777/UDP"},{"name":"ZoneMaps","value":"cn-hangzhou-h:vsw-a,cn-hangzhou-i:vsw-b"},{"name":"EipIspTypes","value":"bgp"},{"name":"MinPort","value":"1000"},{"name":"MaxPort","value":"1003"}]`

// anlbPod is game server i of GameServerSet gs with conf.
func anlbPod(i int, conf string) *corev1.Pod {
	pod := mnlbPod("gs", i, conf)
	pod.Annotations[networkstatus.AnnotationNetworkType] = alibabacloud.AutoNLBsName
	return pod
}

func (e *anlbEnv) services() []string {
	e.t.Helper()
	var list corev1.ServiceList
	if err := e.c.List(context.Background(), &list); err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, s := range list.Items {
		out = append(out, s.Name)
	}
	return out
}

// TestAutoNLBsDefaultISP: without EipIspTypes the ISP type is BGP, lower-cased into the pool
// Services' names and the readiness gate (OKG names them gs-BGP-0, which the API server
// refuses, so its CREATEs all fail).
func TestAutoNLBsDefaultISP(t *testing.T) {
	conf := strings.Replace(anlbConf, `{"name":"EipIspTypes","value":"bgp"},`, "", 1)
	e := newANLBEnv(t, conf)
	pod, err := e.p.OnPodAdded(context.Background(), e.c, anlbPod(0, conf))
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(e.services()); got != "[gs-bgp-0 gs-bgp-1]" {
		t.Errorf("pool Services %s, want gs-bgp-0 and its spare", got)
	}
	if len(pod.Spec.ReadinessGates) != 1 || pod.Spec.ReadinessGates[0].ConditionType != "service.readiness.alibabacloud.com/gs-bgp-0" {
		t.Errorf("readiness gates %v", pod.Spec.ReadinessGates)
	}
}

// TestAutoNLBsTCPUDP: a TCPUDP entry's two ports (one listener port, TCP and UDP) each have
// their internal and external address in the status (OKG looks them up by a name without
// the dash and reports neither).
func TestAutoNLBsTCPUDP(t *testing.T) {
	ctx := context.Background()
	conf := `[{"name":"PortProtocols","value":"7777/TCPUDP"},{"name":"ZoneMaps","value":"z:v"},{"name":"EipIspTypes","value":"bgp"},{"name":"MinPort","value":"1000"},{"name":"MaxPort","value":"1003"}]`
	e := newANLBEnv(t, conf)
	pod, err := e.p.OnPodAdded(ctx, e.c, anlbPod(1, conf))
	if err != nil {
		t.Fatal(err)
	}
	pod.Status = corev1.PodStatus{PodIP: "10.0.0.1", Conditions: []corev1.PodCondition{{Type: "service.readiness.alibabacloud.com/gs-bgp-0", Status: corev1.ConditionTrue}}}
	pod.Annotations[networkstatus.AnnotationNetworkStatus] = `{"currentNetworkState":"NotReady"}`
	svc := &corev1.Service{}
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "gs-bgp-0"}, svc); err != nil {
		t.Fatal(err)
	}
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{Hostname: "nlb.example.com"}}
	if err := e.c.Status().Update(ctx, svc); err != nil {
		t.Fatal(err)
	}
	if pod, err = e.p.OnPodUpdated(ctx, e.c, pod); err != nil {
		t.Fatal(err)
	}
	want := `{"internalAddresses":[{"ip":"10.0.0.1","ports":[{"name":"tcp-1-7777","protocol":"TCP","port":7777},{"name":"udp-1-7777","protocol":"UDP","port":7777}]}],` +
		`"externalAddresses":[{"ip":"","ports":[{"name":"tcp-1-7777","protocol":"TCP","port":1001},{"name":"udp-1-7777","protocol":"UDP","port":1001}],"endPoint":"nlb.example.com/bgp"}],` +
		`"currentNetworkState":"Ready","createTime":null,"lastTransitionTime":null}`
	if got := pod.Annotations[networkstatus.AnnotationNetworkStatus]; got != want {
		t.Errorf("network-status\n got  %s\n want %s", got, want)
	}
}

// TestAutoNLBsPoolsAtCreate: a game server's CREATE makes the pool Services its
// GameServerSet's replicas, its ordinal and the spares need (a dry run makes none), an update
// makes one that went missing and writes none that exists, a Service of a pool's name that
// the GameServerSet does not control is refused by name, and an ordinal that would need more
// than AutoNLBsMaxServices NLBs is refused (reason NotAllowed) before anything is made.
func TestAutoNLBsPoolsAtCreate(t *testing.T) {
	ctx := context.Background()
	e := newANLBEnv(t, anlbConf)
	if _, err := e.p.OnPodAdded(plugin.ReadOnly(ctx), e.c, anlbPod(0, anlbConf)); err != nil {
		t.Fatal(err)
	}
	if got := e.services(); len(got) != 0 {
		t.Fatalf("a dry run made %v", got)
	}
	if _, err := e.p.OnPodAdded(ctx, e.c, anlbPod(9, anlbConf)); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(e.services()); got != "[gs-bgp-0 gs-bgp-1 gs-bgp-2 gs-bgp-3]" {
		t.Fatalf("pool Services %s, want four (ordinal 9, 4 a Service, one spare)", got)
	}
	if err := e.c.Delete(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "gs-bgp-2"}}); err != nil {
		t.Fatal(err)
	}
	pod, err := e.p.OnPodAdded(plugin.ReadOnly(ctx), e.c, anlbPod(9, anlbConf)) // the admitted pod, nothing written
	if err != nil {
		t.Fatal(err)
	}
	pod.Annotations[networkstatus.AnnotationNetworkStatus] = `{"currentNetworkState":"NotReady"}`
	kept := map[string]string{}
	for _, name := range []string{"gs-bgp-0", "gs-bgp-1", "gs-bgp-3"} {
		svc := &corev1.Service{}
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, svc); err != nil {
			t.Fatal(err)
		}
		kept[name] = svc.ResourceVersion
	}
	if _, err := e.p.OnPodUpdated(ctx, e.c, pod); err != nil {
		t.Fatal(err)
	}
	for name, rv := range kept {
		svc := &corev1.Service{}
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, svc); err != nil || svc.ResourceVersion != rv {
			t.Errorf("pool %s written by the update (resourceVersion %s, was %s; %v): want existing pools kept", name, svc.ResourceVersion, rv, err)
		}
	}
	if got := fmt.Sprint(e.services()); got != "[gs-bgp-0 gs-bgp-1 gs-bgp-2 gs-bgp-3]" {
		t.Fatalf("after an update: pool Services %s, want gs-bgp-2 made again", got)
	}

	foreign := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "gs-bgp-0"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	e = newANLBEnv(t, anlbConf, foreign)
	if _, err := e.p.OnPodAdded(ctx, e.c, anlbPod(0, anlbConf)); plugin.TypeOf(err) != plugin.ParameterError || !strings.Contains(err.Error(), "gs-bgp-0") {
		t.Fatalf("a foreign Service of the pool's name: %v, want a parameterError naming it", err)
	}

	e = newANLBEnv(t, anlbConf)
	var perr *plugin.Error
	if _, err := e.p.OnPodAdded(ctx, e.c, anlbPod(4*alibabacloud.AutoNLBsMaxServices, anlbConf)); !errors.As(err, &perr) || perr.ReasonOf() != plugin.ReasonNotAllowed {
		t.Fatalf("ordinal %d: %v, want reason NotAllowed", 4*alibabacloud.AutoNLBsMaxServices, err)
	}
	if got := e.services(); len(got) != 0 {
		t.Fatalf("a refused ordinal made %v", got)
	}
}

// TestAutoNLBsBadInput: each bad network-conf or game server is an error naming what is
// wrong at CREATE, where OKG reads a bad ReserveNlbNum as 0, divides by zero on a range too
// small for one game server, panics on a network-conf that is not JSON, or makes names the
// API server refuses.
func TestAutoNLBsBadInput(t *testing.T) {
	for name, tc := range map[string]struct {
		pod   func() *corev1.Pod
		param string
	}{
		"not JSON": {func() *corev1.Pod { return anlbPod(0, `[{`) }, networkstatus.AnnotationNetworkConf},
		"ReserveNlbNum": {func() *corev1.Pod {
			return anlbPod(0, strings.Replace(anlbConf, `]`, `,{"name":"ReserveNlbNum","value":"x"}]`, 1))
		}, alibabacloud.ParamReserveNlbNum},
		"no ZoneMaps": {func() *corev1.Pod {
			return anlbPod(0, `[{"name":"PortProtocols","value":"7777/UDP"},{"name":"EipIspTypes","value":"bgp"}]`)
		}, alibabacloud.ParamZoneMaps},
		"range smaller than a game server": {func() *corev1.Pod {
			return anlbPod(0, strings.Replace(anlbConf, `"7777/UDP"`, `"7001,7002,7003,7004,7005"`, 1))
		}, alibabacloud.ParamMinPort + "," + alibabacloud.ParamMaxPort},
		"ISP type with _": {func() *corev1.Pod {
			return anlbPod(0, strings.Replace(anlbConf, `"bgp"`, `"bgp_1"`, 1))
		}, alibabacloud.ParamEipIspTypes},
		"lower-case protocol": {func() *corev1.Pod {
			return anlbPod(0, strings.Replace(anlbConf, `7777/UDP`, `7777/udp`, 1))
		}, "PortProtocols"},
		"no GameServerSet label": {func() *corev1.Pod {
			p := anlbPod(0, anlbConf)
			delete(p.Labels, "game.kruise.io/owner-gss")
			return p
		}, "metadata.labels[game.kruise.io/owner-gss]"},
		"no ordinal": {func() *corev1.Pod {
			p := anlbPod(0, anlbConf)
			p.Name = "gs-x"
			return p
		}, "metadata.name"},
	} {
		t.Run(name, func(t *testing.T) {
			pod := tc.pod()
			e := newANLBEnv(t, pod.Annotations[networkstatus.AnnotationNetworkConf])
			_, err := e.p.OnPodAdded(context.Background(), e.c, pod)
			var perr *plugin.Error
			if !errors.As(err, &perr) || perr.Type != plugin.ParameterError || perr.Param != tc.param {
				t.Fatalf("CREATE: %v, want a parameterError naming %q", err, tc.param)
			}
			if got := e.services(); len(got) != 0 {
				t.Errorf("refused input made %v", got)
			}
		})
	}
	t.Run("no GameServerSet", func(t *testing.T) {
		e := newANLBEnv(t, anlbConf)
		pod := anlbPod(0, anlbConf)
		pod.Name, pod.Labels["game.kruise.io/owner-gss"] = "other-0", "other"
		if _, err := e.p.OnPodAdded(context.Background(), e.c, pod); plugin.TypeOf(err) != plugin.APICallError {
			t.Fatalf("CREATE of a pod whose GameServerSet does not exist: %v, want an apiCallError (OKG's)", err)
		}
	})
}

// TestAutoNLBsReadyWaitsForGates: Ready needs the pool Service's address and the cloud
// controller's readiness gate, or the pod Ready (which needs the gate); the gate alone, or the
// address alone, is NotReady.
func TestAutoNLBsReadyWaitsForGates(t *testing.T) {
	ctx := context.Background()
	e := newANLBEnv(t, anlbConf)
	pod, err := e.p.OnPodAdded(ctx, e.c, anlbPod(0, anlbConf))
	if err != nil {
		t.Fatal(err)
	}
	pod.UID = types.UID("uid-gs-0")
	pod.Annotations[networkstatus.AnnotationNetworkStatus] = `{"currentNetworkState":"NotReady"}`
	state := func() networkstatus.NetworkState {
		t.Helper()
		out, err := e.p.OnPodUpdated(ctx, e.c, pod.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		st, _ := networkstatus.StatusFromPod(out)
		return st.CurrentNetworkState
	}
	pod.Status.Conditions = []corev1.PodCondition{{Type: "service.readiness.alibabacloud.com/gs-bgp-0", Status: corev1.ConditionTrue}}
	if got := state(); got != networkstatus.NetworkNotReady {
		t.Fatalf("gate True, no address: %s", got)
	}
	svc := &corev1.Service{}
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "gs-bgp-0"}, svc); err != nil {
		t.Fatal(err)
	}
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{Hostname: "nlb.example.com"}}
	if err := e.c.Status().Update(ctx, svc); err != nil {
		t.Fatal(err)
	}
	pod.Status.Conditions = []corev1.PodCondition{{Type: "service.readiness.alibabacloud.com/gs-bgp-0", Status: corev1.ConditionFalse}}
	if got := state(); got != networkstatus.NetworkNotReady {
		t.Fatalf("address, gate False: %s", got)
	}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	if got := state(); got != networkstatus.NetworkReady {
		t.Fatalf("address and the pod Ready (which needs the gates): %s, want Ready", got)
	}
	pod.Status.Conditions = []corev1.PodCondition{{Type: "service.readiness.alibabacloud.com/gs-bgp-0", Status: corev1.ConditionTrue}}
	if got := state(); got != networkstatus.NetworkReady {
		t.Fatalf("address and gate: %s, want Ready", got)
	}
}

// TestAutoNLBsTenantBounds: what a pod author controls cannot grow another GameServerSet's
// NLBs or take another game server's traffic: at most AutoNLBsMaxISPTypes ISP types, which
// multiply the pools counted against AutoNLBsMaxServices; no NLB for a GameServerSet being
// deleted; a pod must be "<GameServerSet>-<ordinal>" of the GameServerSet its label
// names, with that GameServerSet's network-conf; no container but the first may name a port
// as the pools' ports are named.
func TestAutoNLBsTenantBounds(t *testing.T) {
	ctx := context.Background()
	var perr *plugin.Error
	nine := strings.Replace(anlbConf, `"bgp"`, `"a,b,c,d,e,f,g,h,i"`, 1)
	e := newANLBEnv(t, nine)
	if _, err := e.p.OnPodAdded(ctx, e.c, anlbPod(0, nine)); !errors.As(err, &perr) || perr.Param != alibabacloud.ParamEipIspTypes {
		t.Fatalf("9 ISP types: %v, want a parameterError naming EipIspTypes", err)
	}
	isps := strings.Replace(anlbConf, `"bgp"`, `"a,b,c,d,e,f,g,h"`, 1) // 8 types
	e = newANLBEnv(t, isps)
	// 4 game servers a pool; ordinal 30 needs 8 pools and a spare per type: 72 > 64.
	if _, err := e.p.OnPodAdded(ctx, e.c, anlbPod(30, isps)); !errors.As(err, &perr) || perr.ReasonOf() != plugin.ReasonNotAllowed {
		t.Fatalf("8 ISP types, ordinal 30: %v, want reason NotAllowed", err)
	}
	if got := e.services(); len(got) != 0 {
		t.Fatalf("refused: made %v", got)
	}

	e = newANLBEnv(t, anlbConf)
	pod := anlbPod(3, anlbConf)
	pod.Name = "impostor-3" // labelled gs, named otherwise
	if _, err := e.p.OnPodAdded(ctx, e.c, pod); !errors.As(err, &perr) || perr.Param != "metadata.name" {
		t.Fatalf("a pod not named after the GameServerSet its label names: %v, want a parameterError naming metadata.name", err)
	}
	other := strings.Replace(anlbConf, `"1003"`, `"1099"`, 1)
	if _, err := e.p.OnPodAdded(ctx, e.c, anlbPod(3, other)); !errors.As(err, &perr) || perr.Param != networkstatus.AnnotationNetworkConf {
		t.Fatalf("a network-conf other than the GameServerSet's: %v, want a parameterError naming it", err)
	}
	pod = anlbPod(3, anlbConf)
	pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "sidecar", Ports: []corev1.ContainerPort{{Name: "udp-4-7777", ContainerPort: 7777, Protocol: corev1.ProtocolUDP}}})
	if _, err := e.p.OnPodAdded(ctx, e.c, pod); !errors.As(err, &perr) || perr.Param != "spec.containers[1].ports[0].name" {
		t.Fatalf("another container's port named as ordinal 4's: %v, want a parameterError naming it", err)
	}
	if got := e.services(); len(got) != 0 {
		t.Fatalf("refused pods made %v", got)
	}

	// A GameServerSet being deleted gets no NLB.
	e = newANLBEnv(t, anlbConf)
	set := gss("gs")
	if err := e.c.Get(ctx, client.ObjectKeyFromObject(set), set); err != nil {
		t.Fatal(err)
	}
	set.SetFinalizers([]string{"test/keep"})
	if err := e.c.Update(ctx, set); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Delete(ctx, set); err != nil {
		t.Fatal(err)
	}
	if _, err := e.p.OnPodAdded(ctx, e.c, anlbPod(0, anlbConf)); !errors.As(err, &perr) || perr.ReasonOf() != plugin.ReasonNotAllowed {
		t.Fatalf("a GameServerSet being deleted: %v, want reason NotAllowed", err)
	}
	if got := e.services(); len(got) != 0 {
		t.Fatalf("a GameServerSet being deleted: made %v", got)
	}
}

// TestAutoNLBsNotAdmittedPod: a game server that did not get its ports and gates at CREATE
// (created while the webhook was unreachable) is never reported Ready: the pools do not
// reach it; a parameterError says what is missing.
func TestAutoNLBsNotAdmittedPod(t *testing.T) {
	e := newANLBEnv(t, anlbConf)
	pod := anlbPod(0, anlbConf)
	pod.Status = corev1.PodStatus{PodIP: "10.0.0.1", Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	pod.Annotations[networkstatus.AnnotationNetworkStatus] = `{"currentNetworkState":"NotReady"}`
	out, err := e.p.OnPodUpdated(context.Background(), e.c, pod)
	var perr *plugin.Error
	if !errors.As(err, &perr) || perr.Param != "spec.containers[0].ports" {
		t.Fatalf("update: %v, want a parameterError naming the missing ports", err)
	}
	if st, _ := networkstatus.StatusFromPod(out); st.CurrentNetworkState != networkstatus.NetworkNotReady {
		t.Fatalf("status %s, want NotReady", st.CurrentNetworkState)
	}
}

// TestReadFailuresKeepReady: on a Ready game server's update, a line Service (Multi-NLBs), the
// GameServerSet or a pool Service (AutoNLBs) that cannot be read is an error that keeps the
// Ready network (plugin.Error.KeepsReady, which the webhook honours): unknown is not broken.
func TestReadFailuresKeepReady(t *testing.T) {
	ctx := context.Background()
	failing := func(c client.Client, kind string) client.Client {
		return interceptor.NewClient(c.(client.WithWatch), interceptor.Funcs{
			Get: func(ctx context.Context, w client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				_, svc := obj.(*corev1.Service)
				if (kind == "Service") == svc {
					return apierrors.NewServiceUnavailable("etcd leader changed")
				}
				return w.Get(ctx, key, obj, opts...)
			},
		})
	}
	keepsReady := func(what string, err error) {
		t.Helper()
		var perr *plugin.Error
		if !errors.As(err, &perr) || !perr.KeepsReady() {
			t.Errorf("%s: %v, want an error that keeps a Ready network", what, err)
		}
	}
	m := newMNLBEnv(t, lb.Range{Min: 1000, Max: 1010})
	pod := mnlbPod("gs", 0, twoLines)
	pod.UID = "uid-gs-0"
	pod.Annotations[networkstatus.AnnotationNetworkStatus] = `{"currentNetworkState":"Ready"}`
	_, err := m.p.OnPodUpdated(ctx, failing(m.c, "Service"), pod)
	keepsReady("Multi-NLBs, a line Service unreadable", err)

	a := newANLBEnv(t, anlbConf)
	for _, kind := range []string{"Service", "GameServerSet"} {
		p, err := a.p.OnPodAdded(ctx, a.c, anlbPod(0, anlbConf))
		if err != nil {
			t.Fatal(err)
		}
		p.Annotations[networkstatus.AnnotationNetworkStatus] = `{"currentNetworkState":"Ready"}`
		_, err = a.p.OnPodUpdated(ctx, failing(a.c, kind), p)
		keepsReady("AutoNLBs, "+kind+" unreadable", err)
	}
}
