package tencentcloud_test

import (
	"context"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/tencentcloud"
)

// clbPod is game server gs-0 of GameServerSet gs in namespace ns with PortProtocols ports,
// running, with a Waiting network-status (past its first run).
func clbPod(ns, ports string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "gs-0", Namespace: ns,
			Labels: map[string]string{networkstatus.LabelOwnerGSS: "gs"},
			Annotations: map[string]string{
				networkstatus.AnnotationNetworkType:   tencentcloud.CLBName,
				networkstatus.AnnotationNetworkConf:   `[{"name":"PortProtocols","value":"` + ports + `"}]`,
				networkstatus.AnnotationNetworkStatus: `{"currentNetworkState":"Waiting","createTime":null,"lastTransitionTime":null}`,
			}},
		Status: corev1.PodStatus{PodIP: "10.244.1.7"},
	}
}

// gss is an (unstructured) GameServerSet ns/name.
func gss(ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gssGV.WithKind("GameServerSet"))
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// binding is the CLBPodBinding of ns/name in state, with message.
func binding(ns, name, state, message string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(tencentcloud.GroupVersion.WithKind(tencentcloud.CLBPodBindingKind))
	u.SetNamespace(ns)
	u.SetName(name)
	_ = unstructured.SetNestedField(u.Object, state, "status", "state")
	_ = unstructured.SetNestedField(u.Object, message, "status", "message")
	return u
}

func clbClient(t *testing.T, objs ...client.Object) client.Client {
	return fake.NewClientBuilder().WithScheme(clbScheme(t)).WithObjects(objs...).Build()
}

// TestCLBBadInput: the entries OKG skips or writes verbatim (tclb-04: "abc/TCP" skipped,
// "7779/udp" written for the controller to refuse), a port out of range, a protocol the
// controller's OKG-form mapping cannot carry, a network-conf that is not JSON (OKG panics)
// and a network-disabled label that is not a boolean are ParameterErrors naming what is
// wrong; the mapping is not written.
func TestCLBBadInput(t *testing.T) {
	c := clbClient(t, gss("default", "gs"))
	p := tencentcloud.NewCLB(plugin.ResultWriters{})
	for _, tc := range []struct {
		name, ports, want string
		mutate            func(*corev1.Pod)
	}{
		{name: "not a port", ports: "7777/TCPUDP,abc/TCP", want: `"abc/TCP" is not a port`},
		{name: "lower-case protocol", ports: "7779/udp", want: `protocol "udp"`},
		{name: "out of range", ports: "70000/UDP", want: `"70000/UDP" is not a port`},
		{name: "protocol with a certificate", ports: "443/TCP_SSL", want: `protocol "TCP_SSL"`},
		{name: "three parts", ports: "7777/UDP/x", want: `"7777/UDP/x" is not a port`},
		{name: "none", ports: ",", want: "parameter PortProtocols: is required"},
		{name: "listed twice", ports: "7777/UDP, 7777/UDP", want: "listed already"},
		{name: "TCPUDP and UDP", ports: "7777/TCPUDP,7777/UDP", want: "listed already"},
		{name: "conf not JSON", ports: "7777/UDP", want: networkstatus.AnnotationNetworkConf,
			mutate: func(p *corev1.Pod) { p.Annotations[networkstatus.AnnotationNetworkConf] = "{" }},
		{name: "disabled not a boolean", ports: "7777/UDP", want: networkstatus.LabelNetworkDisabled,
			mutate: func(p *corev1.Pod) { p.Labels[networkstatus.LabelNetworkDisabled] = "maybe" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := clbPod("default", tc.ports)
			if tc.mutate != nil {
				tc.mutate(pod)
			}
			out, err := p.OnPodUpdated(context.Background(), c, pod)
			if plugin.TypeOf(err) != plugin.ParameterError || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want a parameterError containing %q", err, tc.want)
			}
			if v, ok := out.Annotations[tencentcloud.AnnotationPortMapping]; ok {
				t.Errorf("mapping written: %q", v)
			}
		})
	}
}

// TestCLBPartialResultNotReady: a Ready result that maps only some of the pod's ports leaves
// the network as it is (OKG: Ready with the ports it could read, tclb-08); once every port
// is mapped it is Ready with all of them.
func TestCLBPartialResultNotReady(t *testing.T) {
	c := clbClient(t, gss("default", "gs"))
	p := tencentcloud.NewCLB(plugin.ResultWriters{})
	pod := clbPod("default", "7777/UDP,7779/TCP")
	pod.Annotations[tencentcloud.AnnotationPortMappingStatus] = "Ready"
	pod.Annotations[tencentcloud.AnnotationPortMappingResult] = `[{"port":7777,"protocol":"UDP","address":"203.0.113.30"},{"port":7779,"protocol":"TCP","address":"203.0.113.30:702"}]`
	out, err := p.OnPodUpdated(context.Background(), c, pod)
	if err != nil || networkstatus.IsReady(out) {
		t.Fatalf("partial result: error %v, ready %t; want no error, not Ready", err, networkstatus.IsReady(out))
	}
	out.Annotations[tencentcloud.AnnotationPortMappingResult] = `[{"port":7777,"protocol":"UDP","address":"203.0.113.30:700"},{"port":7779,"protocol":"TCP","address":"203.0.113.30:702"}]`
	out, err = p.OnPodUpdated(context.Background(), c, out)
	if err != nil || !networkstatus.IsReady(out) {
		t.Fatalf("whole result: error %v, ready %t; want Ready", err, networkstatus.IsReady(out))
	}
	st, _ := networkstatus.StatusFromPod(out)
	if len(st.ExternalAddresses) != 2 || st.ExternalAddresses[1].Ports[0].Port.IntVal != 702 {
		t.Errorf("external addresses %+v, want both ports", st.ExternalAddresses)
	}
}

// TestCLBTCPUDPMappedAsTwo: a TCPUDP port that the controller maps as a TCP and a UDP entry
// (tke-extend-network-controller's result lists one entry per listener) is whole, and Ready
// with both; the TCP one alone is not.
func TestCLBTCPUDPMappedAsTwo(t *testing.T) {
	c := clbClient(t, gss("default", "gs"))
	p := tencentcloud.NewCLB(plugin.ResultWriters{})
	pod := clbPod("default", "7777/TCPUDP")
	pod.Annotations[tencentcloud.AnnotationPortMappingStatus] = "Ready"
	pod.Annotations[tencentcloud.AnnotationPortMappingResult] = `[{"port":7777,"protocol":"TCP","address":"203.0.113.30:700"}]`
	out, err := p.OnPodUpdated(context.Background(), c, pod)
	if err != nil || networkstatus.IsReady(out) {
		t.Fatalf("TCP only: error %v, ready %t; want not Ready", err, networkstatus.IsReady(out))
	}
	out.Annotations[tencentcloud.AnnotationPortMappingResult] = `[{"port":7777,"protocol":"TCP","address":"203.0.113.30:700"},{"port":7777,"protocol":"UDP","address":"203.0.113.30:700"}]`
	out, err = p.OnPodUpdated(context.Background(), c, out)
	if err != nil || !networkstatus.IsReady(out) {
		t.Fatalf("TCP and UDP: error %v, ready %t; want Ready", err, networkstatus.IsReady(out))
	}
	if st, _ := networkstatus.StatusFromPod(out); len(st.ExternalAddresses) != 2 {
		t.Errorf("external addresses %+v, want the TCP and the UDP one", st.ExternalAddresses)
	}
}

// TestCLBBindingStates: while the network is not Ready, a CLBPodBinding in a failed state is
// the run's CloudError naming the state and the controller's message, with the state's
// reason (NoPortAvailable: PortsExhausted; the others CloudRefused); WaitBackend and the
// other states are waiting, not failing; a Ready network stays Ready whatever the binding
// says; a binding that cannot be read is an Unknown error, and a cluster without the kind is
// no answer.
func TestCLBBindingStates(t *testing.T) {
	p := tencentcloud.NewCLB(plugin.ResultWriters{})
	for _, tc := range []struct {
		state  string
		reason plugin.Reason
	}{
		{"NoPortAvailable", plugin.ReasonPortsExhausted},
		{"Failed", plugin.ReasonCloudRefused},
		{"PortPoolNotFound", plugin.ReasonCloudRefused},
		{"PortPoolNotAllocatable", plugin.ReasonCloudRefused},
		{"NodeTypeNotSupported", plugin.ReasonCloudRefused},
		{"WaitBackend", ""},
		{"Pending", ""},
		{"Bound", ""},
	} {
		t.Run(tc.state, func(t *testing.T) {
			c := clbClient(t, gss("default", "gs"), binding("default", "gs-0", tc.state, "the pool has no free port"))
			out, err := p.OnPodUpdated(context.Background(), c, clbPod("default", "7777/UDP"))
			if out.Annotations[tencentcloud.AnnotationPortMapping] != "7777 UDP default-gs\n" {
				t.Errorf("mapping %q not written", out.Annotations[tencentcloud.AnnotationPortMapping])
			}
			if tc.reason == "" {
				if err != nil {
					t.Fatalf("state %s: error %v, want none (waiting)", tc.state, err)
				}
				return
			}
			e := plugin.AsError(err)
			if e == nil || e.Type != plugin.CloudError || e.ReasonOf() != tc.reason ||
				!strings.Contains(e.Message, tc.state) || !strings.Contains(e.Message, "the pool has no free port") {
				t.Fatalf("state %s: error %v, want a CloudError of reason %s naming the state and the message", tc.state, err, tc.reason)
			}
			ready := clbPod("default", "7777/UDP")
			ready.Annotations[networkstatus.AnnotationNetworkStatus] = `{"currentNetworkState":"Ready","createTime":null,"lastTransitionTime":null}`
			if out, err := p.OnPodUpdated(context.Background(), c, ready); err != nil || !networkstatus.IsReady(out) {
				t.Errorf("a Ready network with a %s binding: error %v, ready %t; want it kept Ready", tc.state, err, networkstatus.IsReady(out))
			}
		})
	}
	t.Run("unreadable", func(t *testing.T) {
		c := fake.NewClientBuilder().WithScheme(clbScheme(t)).WithObjects(gss("default", "gs")).WithInterceptorFuncs(interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if u, ok := obj.(*unstructured.Unstructured); ok && u.GetKind() == tencentcloud.CLBPodBindingKind {
					return apierrors.NewServiceUnavailable("etcd is down")
				}
				return c.Get(ctx, key, obj, opts...)
			}}).Build()
		_, err := p.OnPodUpdated(context.Background(), c, clbPod("default", "7777/UDP"))
		if e := plugin.AsError(err); e == nil || !e.IsUnknown() {
			t.Fatalf("error %v, want an Unknown error", err)
		}
	})
	t.Run("kind not served", func(t *testing.T) {
		c := fake.NewClientBuilder().WithScheme(clbScheme(t)).WithObjects(gss("default", "gs")).WithInterceptorFuncs(interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if u, ok := obj.(*unstructured.Unstructured); ok && u.GetKind() == tencentcloud.CLBPodBindingKind {
					return &meta.NoKindMatchError{GroupKind: tencentcloud.GroupVersion.WithKind(tencentcloud.CLBPodBindingKind).GroupKind(), SearchedVersions: []string{"v1alpha1"}}
				}
				return c.Get(ctx, key, obj, opts...)
			}}).Build()
		if _, err := p.OnPodUpdated(context.Background(), c, clbPod("default", "7777/UDP")); err != nil {
			t.Fatalf("error %v, want none", err)
		}
	})
}

// TestCLBAmbiguousPool: GameServerSet "b-c" of namespace "a" and GameServerSet "c" of
// namespace "a-b" both make pool "a-b-c": the older one keeps it, the newer one's game
// servers are refused with reason NotAllowed naming both, and a Ready game server of the
// newer is left as it is; a GameServerSet whose pool no other namespace makes is mapped.
func TestCLBAmbiguousPool(t *testing.T) {
	p := tencentcloud.NewCLB(plugin.ResultWriters{})
	older, newer := gss("a", "b-c"), gss("a-b", "c")
	older.SetCreationTimestamp(metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
	newer.SetCreationTimestamp(metav1.NewTime(time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)))
	c := clbClient(t, older, newer, gss("x", "y-z"))
	run := func(ns, set string, mutate func(*corev1.Pod)) (*corev1.Pod, error) {
		pod := clbPod(ns, "7777/UDP")
		pod.Labels[networkstatus.LabelOwnerGSS] = set
		if mutate != nil {
			mutate(pod)
		}
		return p.OnPodUpdated(context.Background(), c, pod)
	}
	if out, err := run("a", "b-c", nil); err != nil || out.Annotations[tencentcloud.AnnotationPortMapping] != "7777 UDP a-b-c\n" {
		t.Errorf("a/b-c, the older: error %v, mapping %q; want it mapped", err, out.Annotations[tencentcloud.AnnotationPortMapping])
	}
	_, err := run("a-b", "c", nil)
	if e := plugin.AsError(err); e == nil || e.ReasonOf() != plugin.ReasonNotAllowed || !strings.Contains(e.Message, `"a-b-c"`) || !strings.Contains(e.Message, "a/b-c") {
		t.Errorf("a-b/c, the newer: error %v, want NotAllowed naming pool a-b-c and a/b-c", err)
	}
	if _, err := run("a-b", "c", func(p *corev1.Pod) {
		p.Annotations[networkstatus.AnnotationNetworkStatus] = `{"currentNetworkState":"Ready","createTime":null,"lastTransitionTime":null}`
	}); err != nil {
		t.Errorf("a-b/c Ready: error %v, want its network left as it is", err)
	}
	if out, err := run("x", "y-z", nil); err != nil || out.Annotations[tencentcloud.AnnotationPortMapping] != "7777 UDP x-y-z\n" {
		t.Fatalf("x/y-z: error %v, mapping %q", err, out.Annotations[tencentcloud.AnnotationPortMapping])
	}
}

// TestCLBAuthorsMappingDropped: a mapping the pod's author wrote at CREATE (another
// namespace's pool) is dropped at the first run, before the controller could act on it; a
// result entry of another pool than the pod's does not make the network Ready.
func TestCLBAuthorsMappingDropped(t *testing.T) {
	c := clbClient(t, gss("default", "gs"))
	p := tencentcloud.NewCLB(plugin.ResultWriters{})
	pod := clbPod("default", "7777/UDP")
	delete(pod.Annotations, networkstatus.AnnotationNetworkStatus)
	pod.Annotations[tencentcloud.AnnotationPortMapping] = "7777 UDP victim-gs\n"
	pod.Annotations[tencentcloud.AnnotationEnablePortMapping] = "true"
	out, err := p.OnPodAdded(context.Background(), c, pod)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{tencentcloud.AnnotationPortMapping, tencentcloud.AnnotationEnablePortMapping} {
		if v, ok := out.Annotations[k]; ok {
			t.Errorf("%s = %q kept at CREATE, want it dropped", k, v)
		}
	}
	ready := clbPod("default", "7777/UDP")
	ready.Annotations[tencentcloud.AnnotationPortMappingStatus] = "Ready"
	ready.Annotations[tencentcloud.AnnotationPortMappingResult] = `[{"port":7777,"protocol":"UDP","pool":"victim-gs","address":"203.0.113.99:700"}]`
	if out, err := p.OnPodUpdated(context.Background(), c, ready); err != nil || networkstatus.IsReady(out) {
		t.Errorf("a result of another pool: error %v, ready %t; want not Ready", err, networkstatus.IsReady(out))
	}
}

// TestCLBUnknownIsNotBroken: a GameServerSet that cannot be read is an Unknown error; a
// result that turns unreadable leaves a Ready network as it is; a CLBPodBinding of an earlier
// pod of the name (another UID), or one being deleted, is no answer.
func TestCLBUnknownIsNotBroken(t *testing.T) {
	p := tencentcloud.NewCLB(plugin.ResultWriters{})
	c := fake.NewClientBuilder().WithScheme(clbScheme(t)).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			return apierrors.NewTimeoutError("slow etcd", 1)
		}}).Build()
	if _, err := p.OnPodUpdated(context.Background(), c, clbPod("default", "7777/UDP")); plugin.AsError(err) == nil || !plugin.AsError(err).IsUnknown() {
		t.Errorf("GameServerSet unreadable: error %v, want Unknown", err)
	}
	ready := clbPod("default", "7777/UDP")
	ready.Annotations[networkstatus.AnnotationNetworkStatus] = `{"currentNetworkState":"Ready","createTime":null,"lastTransitionTime":null}`
	ready.Annotations[tencentcloud.AnnotationPortMappingStatus] = "Ready"
	ready.Annotations[tencentcloud.AnnotationPortMappingResult] = "[{"
	if out, err := p.OnPodUpdated(context.Background(), clbClient(t, gss("default", "gs")), ready); err != nil || !networkstatus.IsReady(out) {
		t.Errorf("unreadable result on a Ready network: error %v, ready %t; want it kept Ready", err, networkstatus.IsReady(out))
	}
	stale := binding("default", "gs-0", "NoPortAvailable", "")
	stale.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "gs-0", UID: "uid-earlier"}})
	pod := clbPod("default", "7777/UDP")
	pod.UID = "uid-now"
	if _, err := p.OnPodUpdated(context.Background(), clbClient(t, gss("default", "gs"), stale), pod); err != nil {
		t.Errorf("an earlier pod's binding: error %v, want none", err)
	}
	own := binding("default", "gs-0", "NoPortAvailable", "")
	own.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "gs-0", UID: "uid-now"}})
	_, err := p.OnPodUpdated(context.Background(), clbClient(t, gss("default", "gs"), own), pod)
	if e := plugin.AsError(err); e == nil || !strings.HasSuffix(e.Message, "is NoPortAvailable") {
		t.Errorf("its own binding without a message: error %v, want one ending in the state", err)
	}
}

// TestCLBResultWriters: the result annotations are the controller's, taken only from the
// [tencentcloud] result writers.
func TestCLBResultWriters(t *testing.T) {
	p := tencentcloud.NewCLB(plugin.ResultWriters{Users: []string{"system:serviceaccount:tke-extend-network-controller:tke-extend-network-controller"}})
	if got := p.ResultAnnotations(); len(got) != 2 {
		t.Fatalf("result annotations %v", got)
	}
	if !p.TrustsResultWriter(authUser("system:serviceaccount:tke-extend-network-controller:tke-extend-network-controller")) {
		t.Error("the controller is not trusted")
	}
	if p.TrustsResultWriter(authUser("alice")) {
		t.Error("a pod author is trusted")
	}
}

func authUser(name string) authenticationv1.UserInfo {
	return authenticationv1.UserInfo{Username: name}
}
