package alibabacloud

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/lb"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// slbPod is a running pod of AlibabaCloud-SLB with the network-conf conf (JSON) and a
// NotReady status, as after its first update.
func slbPod(name, conf string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name),
			Labels: map[string]string{"game.kruise.io/owner-gss": "gs"},
			Annotations: map[string]string{networkstatus.AnnotationNetworkType: SLBName, networkstatus.AnnotationNetworkConf: conf,
				networkstatus.AnnotationNetworkStatus: `{"currentNetworkState":"NotReady","createTime":null,"lastTransitionTime":null}`}},
		Spec:   corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "game"}}},
		Status: corev1.PodStatus{PodIP: "10.244.1.7"},
	}
}

func newClient(t *testing.T, objs ...client.Object) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&corev1.Service{}).WithObjects(objs...).Build()
}

func getService(t *testing.T, c client.Client, name string) *corev1.Service {
	t.Helper()
	svc := &corev1.Service{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: name}, svc); err != nil {
		t.Fatalf("get Service %s: %v", name, err)
	}
	return svc
}

const oneUDP = `[{"name":"SlbIds","value":"lb-a"},{"name":"PortProtocols","value":"7777/UDP"}]`

// TestBadInputIsNamed: where OKG's SLB panics (a network-conf that is not JSON, a Service of
// the pod's name without owners, an http health check's protocol-port entry without ':') or
// sends a Service the API server refuses (no PortProtocols, a protocol in lower case), or
// reports "no available ports for []" (no SlbIds), this plugin returns a ParameterError
// naming the parameter, and writes nothing.
func TestBadInputIsNamed(t *testing.T) {
	foreign := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "gs-0"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	for name, tc := range map[string]struct {
		conf      string
		objs      []client.Object
		wantParam string
		wantMsg   string
	}{
		"network-conf not JSON": {conf: `[{"name":`, wantParam: networkstatus.AnnotationNetworkConf},
		"no SlbIds":             {conf: `[{"name":"PortProtocols","value":"7777/UDP"}]`, wantParam: ParamSLBIDs, wantMsg: "is required"},
		"no PortProtocols":      {conf: `[{"name":"SlbIds","value":"lb-a"}]`, wantParam: lb.ParamPortProtocols, wantMsg: "is required"},
		"lower-case protocol":   {conf: `[{"name":"SlbIds","value":"lb-a"},{"name":"PortProtocols","value":"7777/udp"}]`, wantParam: lb.ParamPortProtocols, wantMsg: `protocol "udp"`},
		"protocol-port without ':'": {conf: `[{"name":"SlbIds","value":"lb-a"},{"name":"PortProtocols","value":"7777"},{"name":"LBHealthCheckType","value":"http"},{"name":"LBHealthCheckProtocolPort","value":"http80"}]`,
			wantParam: ParamHealthCheckProtocolPort},
		"a Service of the pod's name without owners": {conf: oneUDP, objs: []client.Object{foreign}, wantMsg: "exists and is not managed by network-plugin-policy"},
	} {
		t.Run(name, func(t *testing.T) {
			c := newClient(t, tc.objs...)
			p := NewSLB(lb.Range{Min: 500, Max: 502})
			_, err := plugin.Run(context.Background(), 0, p, plugin.OperationUpdate, c, slbPod("gs-0", tc.conf))
			perr := plugin.AsError(err)
			if perr == nil || perr.Type != plugin.ParameterError || perr.Param != tc.wantParam || !strings.Contains(perr.Message, tc.wantMsg) {
				t.Fatalf("error = %#v, want a parameterError naming %q containing %q", perr, tc.wantParam, tc.wantMsg)
			}
			var list corev1.ServiceList
			_ = c.List(context.Background(), &list)
			if len(list.Items) != len(tc.objs) {
				t.Errorf("Services %v written on bad input", list.Items)
			}
		})
	}
}

// TestPortsFreedWhenTheServiceIsGone: a pod's ports stay taken until its Service is gone
// (the garbage collector, after the pod), not at its DELETE admission, which another
// admission controller may still refuse while the Service holds the listeners.
func TestPortsFreedWhenTheServiceIsGone(t *testing.T) {
	ctx := context.Background()
	c := newClient(t)
	p := NewSLB(lb.Range{Min: 500, Max: 500})
	if _, err := p.OnPodUpdated(ctx, c, slbPod("gs-0", oneUDP)); err != nil {
		t.Fatal(err)
	}
	_ = p.OnPodDeleted(ctx, c, slbPod("gs-0", oneUDP)) // a DELETE admission: nothing is freed
	if _, err := p.OnPodUpdated(ctx, c, slbPod("gs-1", oneUDP)); plugin.TypeOf(err) != plugin.ParameterError {
		t.Fatalf("second pod while the first one's Service stands: %v, want the exhaustion parameterError", err)
	}
	svc := getService(t, c, "gs-0")
	if err := c.Delete(ctx, svc); err != nil {
		t.Fatal(err)
	}
	_ = p.ServiceGone(ctx, c, client.ObjectKeyFromObject(svc).String(), svc.CreationTimestamp.Time)
	if _, err := p.OnPodUpdated(ctx, c, slbPod("gs-1", oneUDP)); err != nil {
		t.Fatalf("second pod once the first one's Service is gone: %v", err)
	}
	if got := getService(t, c, "gs-1").Spec.Ports[0].Port; got != 500 {
		t.Errorf("port %d, want 500", got)
	}
}

// TestWarmUpCountsEveryService: at Init the allocator counts the ports of every Service on a
// configured load balancer, whoever made it: by the id annotation (OKG reads only the cloud
// controller's label, so a Service it made but the cloud controller has not labelled yet is
// handed out again after a restart) or the label, whatever its type (a ClusterIP Service of
// a disabled network keeps its ports for when it is enabled again). Ports outside the range
// are not the allocator's.
func TestWarmUpCountsEveryService(t *testing.T) {
	ctx := context.Background()
	svc := func(name string, labels, annotations map[string]string, typ corev1.ServiceType, ports ...int32) *corev1.Service {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: labels, Annotations: annotations},
			Spec: corev1.ServiceSpec{Type: typ}}
		for i, p := range ports {
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "p" + string(rune('a'+i)), Port: p})
		}
		return s
	}
	c := newClient(t,
		svc("by-annotation", nil, map[string]string{AnnotationLBID: "lb-a"}, corev1.ServiceTypeLoadBalancer, 500),
		svc("by-label", map[string]string{LabelLBID: "lb-a"}, nil, corev1.ServiceTypeLoadBalancer, 501),
		svc("disabled", nil, map[string]string{AnnotationLBID: "lb-a"}, corev1.ServiceTypeClusterIP, 502),
		svc("out-of-range", nil, map[string]string{AnnotationLBID: "lb-a"}, corev1.ServiceTypeLoadBalancer, 80),
		svc("other-lb", nil, map[string]string{AnnotationLBID: "lb-b"}, corev1.ServiceTypeLoadBalancer, 503),
	)
	p := NewSLB(lb.Range{Min: 500, Max: 503})
	if err := p.Init(ctx, c, plugin.Config{}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.OnPodUpdated(ctx, c, slbPod("gs-0", oneUDP)); err != nil {
		t.Fatal(err)
	}
	if got := getService(t, c, "gs-0").Spec.Ports[0].Port; got != 503 {
		t.Errorf("port %d, want 503: 500-502 are held on lb-a", got)
	}
}

// TestDisableEnableKeepsTheService: network-disabled true makes the Service ClusterIP (its
// status as it was), false brings the whole Service back, the external traffic policy
// included (OKG flips only the type, and the API server's default Cluster replaces Local),
// on the same listener port.
func TestDisableEnableKeepsTheService(t *testing.T) {
	ctx := context.Background()
	c := newClient(t)
	p := NewSLB(lb.Range{Min: 500, Max: 502})
	conf := `[{"name":"SlbIds","value":"lb-a"},{"name":"PortProtocols","value":"7777/UDP"},{"name":"ExternalTrafficPolicyType","value":"Local"}]`
	pod := slbPod("gs-0", conf)
	if _, err := p.OnPodUpdated(ctx, c, pod); err != nil {
		t.Fatal(err)
	}
	pod.Labels[networkstatus.LabelNetworkDisabled] = "true"
	if _, err := p.OnPodUpdated(ctx, c, pod); err != nil {
		t.Fatal(err)
	}
	if svc := getService(t, c, "gs-0"); svc.Spec.Type != corev1.ServiceTypeClusterIP || svc.Spec.ExternalTrafficPolicy != "" {
		t.Fatalf("disabled: type %s, ETP %q; want ClusterIP without ETP", svc.Spec.Type, svc.Spec.ExternalTrafficPolicy)
	}
	pod.Labels[networkstatus.LabelNetworkDisabled] = "false"
	if _, err := p.OnPodUpdated(ctx, c, pod); err != nil {
		t.Fatal(err)
	}
	svc := getService(t, c, "gs-0")
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || svc.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal || svc.Spec.Ports[0].Port != 500 {
		t.Errorf("enabled again: type %s, ETP %q, port %d; want LoadBalancer, Local, 500", svc.Spec.Type, svc.Spec.ExternalTrafficPolicy, svc.Spec.Ports[0].Port)
	}
}

// TestConfChangeKeepsTheCloudControllersMarks: a network-conf change patches what the plugin
// writes and leaves the cloud controller's finalizer and id label, and a user's annotation
// under the cloud's prefix, on the Service (OKG
// replaces the whole object, stripping them until the cloud controller puts them back), and
// an adopted Service that already matches is not written at all, whatever its config hash.
func TestConfChangeKeepsTheCloudControllersMarks(t *testing.T) {
	ctx := context.Background()
	c := newClient(t)
	p := NewSLB(lb.Range{Min: 500, Max: 502})
	pod := slbPod("gs-0", oneUDP)
	if _, err := p.OnPodUpdated(ctx, c, pod); err != nil {
		t.Fatal(err)
	}
	svc := getService(t, c, "gs-0")
	svc.Finalizers = []string{"service.kubernetes.io/load-balancer-cleanup"}
	svc.Labels[LabelLBID] = "lb-a"
	svc.Annotations["game.kruise.io/network-config-hash"] = "178854304" // OKG's, not reproducible
	svc.Annotations[annotationPrefix+"bandwidth"] = "50"                // a user's, under the cloud's prefix
	if err := c.Update(ctx, svc); err != nil {
		t.Fatal(err)
	}
	before := getService(t, c, "gs-0").ResourceVersion
	if _, err := p.OnPodUpdated(ctx, c, pod); err != nil {
		t.Fatal(err)
	}
	if rv := getService(t, c, "gs-0").ResourceVersion; rv != before {
		t.Errorf("a Service that matches was written (resourceVersion %s -> %s)", before, rv)
	}
	pod.Annotations[networkstatus.AnnotationNetworkConf] = `[{"name":"SlbIds","value":"lb-a"},{"name":"PortProtocols","value":"7777/UDP"},{"name":"LBHealthCheckFlag","value":"on"}]`
	got, err := p.OnPodUpdated(ctx, c, pod)
	if err != nil {
		t.Fatal(err)
	}
	svc = getService(t, c, "gs-0")
	if svc.Annotations[annotationPrefix+"health-check-flag"] != "on" || svc.Labels[LabelLBID] != "lb-a" || svc.Annotations[annotationPrefix+"bandwidth"] != "50" ||
		len(svc.Finalizers) != 1 || svc.Spec.Ports[0].Port != 500 {
		t.Errorf("after a conf change: annotations %v, labels %v, finalizers %v, port %d", svc.Annotations, svc.Labels, svc.Finalizers, svc.Spec.Ports[0].Port)
	}
	if st, _ := networkstatus.StatusFromPod(got); st == nil || st.CurrentNetworkState != networkstatus.NetworkNotReady {
		t.Errorf("status after a conf change: %+v, want NotReady until the cloud controller has it", st)
	}
}
