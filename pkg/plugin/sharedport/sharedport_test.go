package sharedport_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllertest"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/alibabacloud"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/lb"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/sharedport"
)

// spPod is a game server of networkType in ns with conf.
func spPod(ns, name, networkType, conf string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{"game.kruise.io/owner-gss": "gs"},
			Annotations: map[string]string{networkstatus.AnnotationNetworkType: networkType, networkstatus.AnnotationNetworkConf: conf}},
		Spec:   corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "game"}}},
		Status: corev1.PodStatus{PodIP: "10.244.1.7"},
	}
}

const slbConf = `[{"name":"SlbIds","value":"lb-a,lb-b"},{"name":"PortProtocols","value":"7777/UDP"}]`

// spSetup returns a fake client holding objs and a plugin fed an informer of the pods among
// them.
func spSetup(t *testing.T, p *sharedport.Plugin, objs ...client.Object) (client.Client, *controllertest.FakeInformer) {
	t.Helper()
	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithStatusSubresource(&corev1.Service{}).WithObjects(objs...).Build()
	informer := controllertest.NewFakeInformer(controllertest.Synced)
	if _, err := p.UsePodInformer(context.Background(), informer); err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if pod, ok := o.(*corev1.Pod); ok {
			informer.Add(pod)
		}
	}
	return c, informer
}

// TestSharedServiceHasNoOwner: the shared Service is created without ownerReferences, so a
// pod without a GameServerSet is admitted (OKG makes the pod, whose uid is empty at CREATE,
// its owner: the API server refuses it, slbsp-02, nlbsp-02), and deleting the GameServerSet
// of the pod that made it does not garbage-collect the Service the other game servers use
// (slbsp-19).
func TestSharedServiceHasNoOwner(t *testing.T) {
	for _, p := range []*sharedport.Plugin{alibabacloud.NewSLBSharedPort(), alibabacloud.NewNLBSharedPort()} {
		t.Run(p.Name(), func(t *testing.T) {
			conf := slbConf
			if p.Name() == alibabacloud.NLBSharedPortName {
				conf = `[{"name":"NlbIds","value":"lb-a"},{"name":"PortProtocols","value":"7777/UDP"}]`
			}
			c, _ := spSetup(t, p)
			pod := spPod("default", "gs-0", p.Name(), conf)
			pod.UID = "" // as at CREATE admission
			if _, err := p.OnPodAdded(context.Background(), c, pod); err != nil {
				t.Fatal(err)
			}
			svc := &corev1.Service{}
			if err := c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: "lb-a"}, svc); err != nil {
				t.Fatal(err)
			}
			if len(svc.OwnerReferences) != 0 {
				t.Errorf("owners %v, want none", svc.OwnerReferences)
			}
		})
	}
}

// TestBackendsCountedFromGameServers: an SLB's backends are the SLB-SharedPort game servers
// the pod informer shows recorded on it (the manager's own annotation; OKG's pods, without a
// record, by their label), not pods a namespace relabelled to it; the 200th is admitted, the 201st is a parameterError
// naming SlbIds with reason PortsExhausted (slbsp-04); a pod gone frees its place. A restart
// (a new plugin, the same pods) keeps each pod on its load balancer, where OKG, counting from
// a label the cloud controller writes on the Service later, moves them (slbsp-05).
func TestBackendsCountedFromGameServers(t *testing.T) {
	ctx := context.Background()
	var objs []client.Object
	for i := range 199 {
		pod := spPod("default", fmt.Sprintf("bk-%03d", i), alibabacloud.SLBSharedPortName, `[{"name":"SlbIds","value":"lb-a"},{"name":"PortProtocols","value":"7777/UDP"}]`)
		pod.Labels[alibabacloud.LabelLBID] = "lb-a"
		if i%2 == 0 {
			pod.Annotations[sharedport.AnnotationAllocation] = `{"loadBalancer":"lb-a"}` // ours; the others are OKG's
		}
		objs = append(objs, pod)
	}
	// Pods of another namespace relabelled to lb-a: their record says lb-z, so they do not
	// fill lb-a.
	for i := range 5 {
		pod := spPod("team-b", fmt.Sprintf("forged-%d", i), alibabacloud.SLBSharedPortName, `[{"name":"SlbIds","value":"lb-z"},{"name":"PortProtocols","value":"7777/UDP"}]`)
		pod.Labels[alibabacloud.LabelLBID] = "lb-a"
		pod.Annotations[sharedport.AnnotationAllocation] = `{"loadBalancer":"lb-z"}`
		objs = append(objs, pod)
	}
	p := alibabacloud.NewSLBSharedPort()
	c, informer := spSetup(t, p, objs...)
	conf := `[{"name":"SlbIds","value":"lb-a"},{"name":"PortProtocols","value":"7777/UDP"}]`
	last, err := p.OnPodAdded(ctx, c, spPod("default", "gs-0", alibabacloud.SLBSharedPortName, conf))
	if err != nil || last.Labels[alibabacloud.LabelLBID] != "lb-a" {
		t.Fatalf("the 200th backend: %v, labels %v", err, last.Labels)
	}
	_, err = p.OnPodAdded(ctx, c, spPod("default", "gs-1", alibabacloud.SLBSharedPortName, conf))
	var perr *plugin.Error
	if !asError(err, &perr) || perr.Type != plugin.ParameterError || perr.ReasonOf() != plugin.ReasonPortsExhausted || perr.Param != alibabacloud.ParamSLBIDs {
		t.Fatalf("the 201st backend: %v, want a parameterError naming SlbIds, reason PortsExhausted", err)
	}
	informer.Delete(objs[0])
	if _, err := p.OnPodAdded(ctx, c, spPod("default", "gs-1", alibabacloud.SLBSharedPortName, conf)); err != nil {
		t.Errorf("after a backend is gone: %v", err)
	}

	// Restart: two pods on lb-a and lb-b; a new plugin keeps them there.
	p = alibabacloud.NewSLBSharedPort()
	c, informer = spSetup(t, p)
	var pods []*corev1.Pod
	for i := range 2 {
		pod, err := p.OnPodAdded(ctx, c, spPod("default", fmt.Sprintf("gs-%d", i), alibabacloud.SLBSharedPortName, slbConf))
		if err != nil {
			t.Fatal(err)
		}
		informer.Add(pod)
		pods = append(pods, pod)
	}
	if pods[0].Labels[alibabacloud.LabelLBID] != "lb-a" || pods[1].Labels[alibabacloud.LabelLBID] != "lb-b" {
		t.Fatalf("least backends first: %s, %s; want lb-a, lb-b", pods[0].Labels[alibabacloud.LabelLBID], pods[1].Labels[alibabacloud.LabelLBID])
	}
	restarted := alibabacloud.NewSLBSharedPort()
	_, _ = spSetup(t, restarted, pods[0], pods[1])
	pod := pods[1].DeepCopy()
	pod.Annotations[networkstatus.AnnotationNetworkStatus] = `{"currentNetworkState":"NotReady","createTime":null,"lastTransitionTime":null}`
	out, err := restarted.OnPodUpdated(ctx, c, pod)
	if err != nil || out.Labels[alibabacloud.LabelLBID] != "lb-b" {
		t.Errorf("after a restart: %v, load balancer %q, want lb-b kept", err, out.Labels[alibabacloud.LabelLBID])
	}
}

func asError(err error, target **plugin.Error) bool {
	e, ok := err.(*plugin.Error)
	if ok {
		*target = e
	}
	return ok
}

// TestSharedPortBadInput: bad input is a parameterError naming the parameter, never a Service
// the API server refuses or a panic: an unparsable PortProtocols entry (OKG skips it,
// slbsp-08), TCPUDP (slbsp-07) or a lower-case protocol (slbsp-16), a port twice
// (nlbsp-05), NlbIds with a list (nlbsp-07) or not a Service name (nlbsp-08), a
// ManagedServiceSelector without '=' (OKG panics, slbsp-11), no ids (slbsp-13), and a
// network-conf that is not JSON (OKG panics, nlbsp-10).
func TestSharedPortBadInput(t *testing.T) {
	for name, tc := range map[string]struct {
		networkType, conf, param string
	}{
		"unparsable entry":   {alibabacloud.SLBSharedPortName, `[{"name":"SlbIds","value":"lb-a"},{"name":"PortProtocols","value":"7777/UDP,abc/UDP"}]`, "PortProtocols"},
		"TCPUDP":             {alibabacloud.SLBSharedPortName, `[{"name":"SlbIds","value":"lb-a"},{"name":"PortProtocols","value":"7777/TCPUDP"}]`, "PortProtocols"},
		"lower-case":         {alibabacloud.NLBSharedPortName, `[{"name":"NlbIds","value":"nlb-a"},{"name":"PortProtocols","value":"7777/udp"}]`, "PortProtocols"},
		"a port twice":       {alibabacloud.NLBSharedPortName, `[{"name":"NlbIds","value":"nlb-a"},{"name":"PortProtocols","value":"7777/TCP,7777/UDP"}]`, "PortProtocols"},
		"NlbIds a list":      {alibabacloud.NLBSharedPortName, `[{"name":"NlbIds","value":"nlb-a,nlb-b"},{"name":"PortProtocols","value":"7777/UDP"}]`, "NlbIds"},
		"NlbIds upper case":  {alibabacloud.NLBSharedPortName, `[{"name":"NlbIds","value":"NLB-A"},{"name":"PortProtocols","value":"7777/UDP"}]`, "NlbIds"},
		"selector without =": {alibabacloud.SLBSharedPortName, `[{"name":"SlbIds","value":"lb-a"},{"name":"PortProtocols","value":"7777/UDP"},{"name":"ManagedServiceSelector","value":"app"}]`, "ManagedServiceSelector"},
		"no ids":             {alibabacloud.SLBSharedPortName, `[{"name":"PortProtocols","value":"7777/UDP"}]`, "SlbIds"},
		"not JSON":           {alibabacloud.NLBSharedPortName, `nope`, networkstatus.AnnotationNetworkConf},
	} {
		t.Run(name, func(t *testing.T) {
			p := alibabacloud.NewSLBSharedPort()
			if tc.networkType == alibabacloud.NLBSharedPortName {
				p = alibabacloud.NewNLBSharedPort()
			}
			c, _ := spSetup(t, p)
			_, err := p.OnPodAdded(context.Background(), c, spPod("default", "gs-0", tc.networkType, tc.conf))
			if plugin.TypeOf(err) != plugin.ParameterError || !strings.Contains(err.Error(), tc.param) {
				t.Errorf("error %v, want a parameterError naming %s", err, tc.param)
			}
			var list corev1.ServiceList
			if err := c.List(context.Background(), &list); err != nil || len(list.Items) != 0 {
				t.Errorf("Services %d (%v), want none written", len(list.Items), err)
			}
		})
	}
}

// TestForeignServiceNotTakenOver: a Service of the load balancer's name that is not a shared
// Service (no marker, no hash) is refused by name, and left as it is; OKG takes it over
// (slbsp-14). A shared Service of another namespace on the same load balancer is refused
// with reason NotAllowed: the two would take each other's listeners.
func TestForeignServiceNotTakenOver(t *testing.T) {
	ctx := context.Background()
	foreign := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "lb-a"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP}}
	p := alibabacloud.NewSLBSharedPort()
	c, _ := spSetup(t, p, foreign)
	_, err := p.OnPodAdded(ctx, c, spPod("default", "gs-0", alibabacloud.SLBSharedPortName, `[{"name":"SlbIds","value":"lb-a"},{"name":"PortProtocols","value":"7777/UDP"}]`))
	if plugin.TypeOf(err) != plugin.ParameterError || !strings.Contains(err.Error(), "not a shared Service") {
		t.Errorf("a foreign Service of the name: %v, want a parameterError naming it", err)
	}

	other := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "lb-c",
		Annotations: map[string]string{alibabacloud.AnnotationLBID: "lb-c"}, Labels: map[string]string{alibabacloud.LabelSLBSharedPort: "true"}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer}}
	p = alibabacloud.NewSLBSharedPort()
	c, _ = spSetup(t, p, other)
	_, err = p.OnPodAdded(ctx, c, spPod("team-a", "gs-0", alibabacloud.SLBSharedPortName, `[{"name":"SlbIds","value":"lb-c"},{"name":"PortProtocols","value":"7777/UDP"}]`))
	var perr *plugin.Error
	if !asError(err, &perr) || perr.ReasonOf() != plugin.ReasonNotAllowed || perr.Param != alibabacloud.ParamSLBIDs {
		t.Errorf("another namespace's load balancer: %v, want a parameterError naming SlbIds, reason NotAllowed", err)
	}
}

// TestDisabledStaysNotReady: network-disabled removes the pod label and keeps the network
// NotReady at every UPDATE while set (OKG reports Ready at the second one, slbsp-01,
// nlbsp-01); removed, the label comes back without OKG's empty-key label, which the API
// server refuses, and the network is Ready again at the Service's address.
func TestDisabledStaysNotReady(t *testing.T) {
	ctx := context.Background()
	p := alibabacloud.NewSLBSharedPort()
	c, _ := spSetup(t, p)
	pod, err := p.OnPodAdded(ctx, c, spPod("default", "gs-0", alibabacloud.SLBSharedPortName, `[{"name":"SlbIds","value":"lb-a"},{"name":"PortProtocols","value":"7777/UDP"}]`))
	if err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "lb-a"}, svc); err != nil {
		t.Fatal(err)
	}
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "198.51.100.10"}}
	if err := c.Status().Update(ctx, svc); err != nil {
		t.Fatal(err)
	}
	state := func(pod *corev1.Pod) networkstatus.NetworkState {
		st, _ := networkstatus.StatusFromPod(pod)
		if st == nil {
			return ""
		}
		return st.CurrentNetworkState
	}
	run := func(pod *corev1.Pod) *corev1.Pod {
		out, err := p.OnPodUpdated(ctx, c, pod)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	pod = run(run(pod))
	if state(pod) != networkstatus.NetworkReady {
		t.Fatalf("before disabling: %s, want Ready", state(pod))
	}
	pod.Labels[networkstatus.LabelNetworkDisabled] = "true"
	for i := range 2 {
		if pod = run(pod); state(pod) != networkstatus.NetworkNotReady || pod.Labels[alibabacloud.LabelLBID] != "" {
			t.Errorf("UPDATE %d while disabled: %s, label %q; want NotReady without the label", i+1, state(pod), pod.Labels[alibabacloud.LabelLBID])
		}
	}
	pod.Labels[networkstatus.LabelNetworkDisabled] = "false"
	pod = run(pod)
	if _, empty := pod.Labels[""]; empty || pod.Labels[alibabacloud.LabelLBID] != "lb-a" || state(pod) != networkstatus.NetworkReady {
		t.Errorf("enabled again: labels %v, state %s; want the load balancer's label, no empty key, Ready", pod.Labels, state(pod))
	}
}

// TestAllowNotReadyContainersNotActedOn: AllowNotReadyContainers on a shared-port type is a
// warning naming it, and the shared Service is left as it is (OKG sets
// publishNotReadyAddresses on the Service, which every game server behind the load balancer
// shares, slbsp-10, nlbsp-13).
func TestAllowNotReadyContainersNotActedOn(t *testing.T) {
	p := alibabacloud.NewNLBSharedPort()
	c, _ := spSetup(t, p)
	_, err := p.OnPodAdded(context.Background(), c, spPod("default", "gs-0", alibabacloud.NLBSharedPortName,
		`[{"name":"NlbIds","value":"nlb-a"},{"name":"PortProtocols","value":"7777/UDP"},{"name":"AllowNotReadyContainers","value":"game"}]`))
	if !plugin.IsWarning(err) || !strings.Contains(err.Error(), "AllowNotReadyContainers") {
		t.Errorf("error %v, want a warning naming AllowNotReadyContainers", err)
	}
	svc := &corev1.Service{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: "nlb-a"}, svc); err != nil || svc.Spec.PublishNotReadyAddresses {
		t.Errorf("the shared Service (%v): publishNotReadyAddresses %t, want false", err, svc.Spec.PublishNotReadyAddresses)
	}
}

// readySLBPod returns an SLB-SharedPort game server of ns on lb-a, Ready, as the plugin left
// it, and a client holding its shared Service with an address.
func readySLBPod(t *testing.T, p *sharedport.Plugin, ns string, objs ...client.Object) (*corev1.Pod, client.Client) {
	t.Helper()
	ctx := context.Background()
	c, _ := spSetup(t, p, objs...)
	pod, err := p.OnPodAdded(ctx, c, spPod(ns, "gs-0", alibabacloud.SLBSharedPortName, `[{"name":"SlbIds","value":"lb-a"},{"name":"PortProtocols","value":"7777/UDP"}]`))
	if err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "lb-a"}, svc); err != nil {
		t.Fatal(err)
	}
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "198.51.100.10"}}
	if err := c.Status().Update(ctx, svc); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if pod, err = p.OnPodUpdated(ctx, c, pod); err != nil {
			t.Fatal(err)
		}
	}
	if st, _ := networkstatus.StatusFromPod(pod); st == nil || st.CurrentNetworkState != networkstatus.NetworkReady {
		t.Fatalf("setup: %+v, want Ready", st)
	}
	return pod, c
}

// TestOtherNamespaceCannotTakeAReadyNetwork: once a namespace holds its shared Service, what
// another namespace writes later on the same load balancer (a Service of any type carrying
// its id, another shared Service) takes nothing from its Ready game servers; and a label a
// pod author rewrites is put back to the load balancer recorded for the pod.
func TestOtherNamespaceCannotTakeAReadyNetwork(t *testing.T) {
	ctx := context.Background()
	p := alibabacloud.NewSLBSharedPort()
	pod, c := readySLBPod(t, p, "team-a")
	for _, svc := range []*corev1.Service{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "decoy", Annotations: map[string]string{alibabacloud.AnnotationLBID: "lb-a"}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "lb-a", Annotations: map[string]string{alibabacloud.AnnotationLBID: "lb-a"},
			Labels: map[string]string{alibabacloud.LabelSLBSharedPort: "true"}}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer}},
	} {
		if err := c.Create(ctx, svc); err != nil {
			t.Fatal(err)
		}
	}
	pod.Labels[alibabacloud.LabelLBID] = "lb-b"
	out, err := p.OnPodUpdated(ctx, c, pod)
	if err != nil {
		t.Fatalf("team-a's UPDATE: %v", err)
	}
	if st, _ := networkstatus.StatusFromPod(out); st == nil || st.CurrentNetworkState != networkstatus.NetworkReady || out.Labels[alibabacloud.LabelLBID] != "lb-a" {
		t.Errorf("team-a's game server: %+v, label %q; want Ready on lb-a", st, out.Labels[alibabacloud.LabelLBID])
	}
}

// TestReadFailureKeepsReady: a Service that cannot be read on a Ready game server's UPDATE is
// an Unknown error that keeps its network Ready (unknown is not broken).
func TestReadFailureKeepsReady(t *testing.T) {
	p := alibabacloud.NewSLBSharedPort()
	pod, c := readySLBPod(t, p, "default")
	failing := interceptor.NewClient(c.(client.WithWatch), interceptor.Funcs{
		Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
			return apierrors.NewServiceUnavailable("etcd leader changed")
		},
	})
	before := pod.Annotations[networkstatus.AnnotationNetworkStatus]
	out, err := p.OnPodUpdated(context.Background(), failing, pod)
	var perr *plugin.Error
	if !asError(err, &perr) || !perr.KeepsReady() {
		t.Fatalf("error %v, want an Unknown error that keeps a Ready network", err)
	}
	if out.Annotations[networkstatus.AnnotationNetworkStatus] != before {
		t.Errorf("network-status %s, want the Ready one kept", out.Annotations[networkstatus.AnnotationNetworkStatus])
	}
}

// TestOKGHashAloneKeepsReady: an NLB-SharedPort Service OKG made (its own hash of the same
// network-conf) gets this manager's hash and nothing else, and its Ready game server stays
// Ready; a different network-conf rewrites the Service and the network is NotReady until
// the next run sees it.
func TestOKGHashAloneKeepsReady(t *testing.T) {
	ctx := context.Background()
	okgService := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "nlb-a",
		Annotations: map[string]string{alibabacloud.AnnotationLBID: "nlb-a", lb.AnnotationConfigHash: "642564125"}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, LoadBalancerClass: ptr.To("alibabacloud.com/nlb"),
			Selector: map[string]string{alibabacloud.LabelLBID: "nlb-a"},
			Ports:    []corev1.ServicePort{{Name: "7777", Port: 7777, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(7777), NodePort: 30001}}},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{Hostname: "nlb-a.example"}}}}}
	p := alibabacloud.NewNLBSharedPort()
	c, _ := spSetup(t, p, okgService)
	pod := spPod("default", "gs-0", alibabacloud.NLBSharedPortName, `[{"name":"NlbIds","value":"nlb-a"},{"name":"PortProtocols","value":"7777/UDP"}]`)
	pod.Labels[alibabacloud.LabelLBID] = "nlb-a"
	pod.Annotations[networkstatus.AnnotationNetworkStatus] = `{"currentNetworkState":"Ready","createTime":null,"lastTransitionTime":null}`
	out, err := p.OnPodUpdated(ctx, c, pod)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := networkstatus.StatusFromPod(out); st == nil || st.CurrentNetworkState != networkstatus.NetworkReady {
		t.Errorf("after the hash alone changed: %+v, want Ready", st)
	}
	out.Annotations[networkstatus.AnnotationNetworkConf] = `[{"name":"NlbIds","value":"nlb-a"},{"name":"PortProtocols","value":"7777/UDP,7778/TCP"}]`
	out, err = p.OnPodUpdated(ctx, c, out)
	if err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(okgService), svc); err != nil || len(svc.Spec.Ports) != 2 {
		t.Errorf("after a new network-conf: Service ports %v (%v), want two", svc.Spec.Ports, err)
	}
	if st, _ := networkstatus.StatusFromPod(out); st == nil || st.CurrentNetworkState != networkstatus.NetworkNotReady {
		t.Errorf("after a new network-conf: %+v, want NotReady", st)
	}
}

// TestSharedListenersClaimedInTheLedger: a shared Service's listener ports are claimed in the
// per-pod plugin's port ledger before the Service is made, so neither kind takes the other's
// listener on one load balancer, whichever replica serves each and whatever its cache shows:
// an SLB-SharedPort game server asking for a port an AlibabaCloud-SLB CREATE has just claimed
// (its Service not made yet) is a parameterError naming PortProtocols with reason
// NotAllowed and no Service is made; one asking for a free port gets its Service and the
// claim; a per-pod CREATE of another replica, which has seen no shared Service, is then not
// given that port; a second namespace whose replica's cache does not show the first
// namespace's shared Service is refused by the ledger; a stale claim (older than
// lb.ClaimTTL, its owner gone) is taken over. Without the ledger the per-pod claim is not
// seen and the shared Service takes its listener.
func TestSharedListenersClaimedInTheLedger(t *testing.T) {
	ctx := context.Background()
	const ns = "network-plugin-policy-system"
	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithStatusSubresource(&corev1.Service{}).Build()
	ledger := &lb.ConfigMapLedger{Client: c, Namespace: ns, Plugin: alibabacloud.SLBName}
	perPod := alibabacloud.NewSLB(lb.Range{Min: 7770, Max: 7771})
	perPod.UseLedger(ledger)
	if err := perPod.Init(ctx, c, plugin.Config{}); err != nil {
		t.Fatal(err)
	}
	shared := alibabacloud.NewSLBSharedPort()
	if shared.LedgerKey() != perPod.LedgerKey() {
		t.Fatalf("ledger %q, want the per-pod plugin's %q", shared.LedgerKey(), perPod.LedgerKey())
	}
	shared.UseLedger(&lb.ConfigMapLedger{Client: c, Namespace: ns, Plugin: shared.LedgerKey()})
	if _, err := shared.UsePodInformer(ctx, controllertest.NewFakeInformer(controllertest.Synced)); err != nil {
		t.Fatal(err)
	}

	// A per-pod CREATE in team-a claims 7770 of lb-a; its Service comes at a later update.
	a := spPod("team-a", "gs-a", alibabacloud.SLBName, `[{"name":"SlbIds","value":"lb-a"},{"name":"PortProtocols","value":"7777/UDP"}]`)
	a, err := perPod.OnPodAdded(ctx, c, a)
	if err != nil || !strings.Contains(a.Annotations[lb.AnnotationAllocation], "7770") {
		t.Fatalf("per-pod CREATE: %v, allocation %s", err, a.Annotations[lb.AnnotationAllocation])
	}

	sharedConf := func(port string) string {
		return `[{"name":"SlbIds","value":"lb-a"},{"name":"PortProtocols","value":"` + port + `/UDP"}]`
	}
	_, err = shared.OnPodAdded(ctx, c, spPod("team-b", "gs-b0", alibabacloud.SLBSharedPortName, sharedConf("7770")))
	var perr *plugin.Error
	if !asError(err, &perr) || perr.Type != plugin.ParameterError || perr.ReasonOf() != plugin.ReasonNotAllowed || perr.Param != sharedport.ParamPortProtocols ||
		!strings.Contains(perr.Message, "team-a/gs-a") {
		t.Fatalf("a shared Service on a port a per-pod CREATE claimed: %v, want a parameterError naming PortProtocols, reason NotAllowed, naming team-a/gs-a", err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "team-b", Name: "lb-a"}, &corev1.Service{}); !apierrors.IsNotFound(err) {
		t.Fatalf("refused, yet a Service: %v", err)
	}

	// On a free port the shared Service is made, its port claimed.
	if _, err := shared.OnPodAdded(ctx, c, spPod("team-b", "gs-b1", alibabacloud.SLBSharedPortName, sharedConf("7771"))); err != nil {
		t.Fatal(err)
	}
	claims, err := ledger.Load(ctx)
	if err != nil || claims["lb-a"][7771].Owner != "team-b/lb-a" || claims["lb-a"][7770].Owner != "team-a/gs-a" {
		t.Fatalf("ledger %v (%v): want 7770 team-a/gs-a's and 7771 team-b/lb-a's", claims, err)
	}

	// Another replica's per-pod plugin, which has not seen the shared Service, does not
	// hand out 7771: the only ports of its range are held, so a CREATE is exhausted.
	other := alibabacloud.NewSLB(lb.Range{Min: 7771, Max: 7771})
	other.UseLedger(&lb.ConfigMapLedger{Client: c, Namespace: ns, Plugin: alibabacloud.SLBName})
	_, err = other.OnPodAdded(ctx, c, spPod("team-c", "gs-c", alibabacloud.SLBName, `[{"name":"SlbIds","value":"lb-a"},{"name":"PortProtocols","value":"7777/UDP"}]`))
	if !asError(err, &perr) || perr.ReasonOf() != plugin.ReasonPortsExhausted {
		t.Fatalf("a per-pod CREATE on the shared Service's port: %v, want reason PortsExhausted", err)
	}

	// A replica whose cache does not show team-b's shared Service yet: the ledger refuses
	// team-d's shared Service on the same port.
	blind := interceptor.NewClient(c, interceptor.Funcs{List: func(ctx context.Context, cl client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		return nil // an empty Service list: the other namespaces' Services not seen yet
	}})
	_, err = shared.OnPodAdded(ctx, blind, spPod("team-d", "gs-d", alibabacloud.SLBSharedPortName, sharedConf("7771")))
	if !asError(err, &perr) || perr.ReasonOf() != plugin.ReasonNotAllowed || !strings.Contains(perr.Message, "team-b/lb-a") {
		t.Fatalf("a second namespace's shared Service on the same listener: %v, want reason NotAllowed naming team-b/lb-a", err)
	}

	// A stale claim (older than ClaimTTL, its owner neither a pod nor a Service) is taken over.
	old := &lb.ConfigMapLedger{Client: c, Namespace: ns, Plugin: alibabacloud.SLBName, Now: func() time.Time { return time.Now().Add(-2 * lb.ClaimTTL) }}
	if taken, err := old.Claim(ctx, "lb-b", []int32{7777}, "team-x/refused", nil); err != nil || len(taken) > 0 {
		t.Fatal(taken, err)
	}
	conf := `[{"name":"SlbIds","value":"lb-b"},{"name":"PortProtocols","value":"7777/UDP"}]`
	if _, err := shared.OnPodAdded(ctx, c, spPod("team-e", "gs-e", alibabacloud.SLBSharedPortName, conf)); err != nil {
		t.Fatalf("a stale claim was not taken over: %v", err)
	}

	// Without the ledger, the per-pod CREATE's claim is not seen: the shared Service is made on
	// its port (what the ledger prevents).
	noLedger := alibabacloud.NewSLBSharedPort()
	if _, err := noLedger.UsePodInformer(ctx, controllertest.NewFakeInformer(controllertest.Synced)); err != nil {
		t.Fatal(err)
	}
	if taken, err := ledger.Claim(ctx, "lb-c", []int32{7770}, "team-a/gs-a2", nil); err != nil || len(taken) > 0 {
		t.Fatal(taken, err)
	}
	conf = `[{"name":"SlbIds","value":"lb-c"},{"name":"PortProtocols","value":"7770/UDP"}]`
	if _, err := noLedger.OnPodAdded(ctx, c, spPod("team-f", "gs-f", alibabacloud.SLBSharedPortName, conf)); err != nil {
		t.Fatalf("without a ledger: %v, want the Service made (the hole the ledger closes)", err)
	}

	// A per-pod Service the cache shows on the load balancer (one made before the ledger
	// existed) is checked too, with or without a ledger.
	perPodSvc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "gs-old", Annotations: map[string]string{alibabacloud.AnnotationLBID: "lb-d"}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Name: "7000", Port: 7000, Protocol: corev1.ProtocolUDP}}}}
	if err := c.Create(ctx, perPodSvc); err != nil {
		t.Fatal(err)
	}
	conf = `[{"name":"SlbIds","value":"lb-d"},{"name":"PortProtocols","value":"7000/UDP"}]`
	for _, p := range []*sharedport.Plugin{shared, noLedger} {
		_, err = p.OnPodAdded(ctx, c, spPod("team-g", "gs-g", alibabacloud.SLBSharedPortName, conf))
		if !asError(err, &perr) || perr.ReasonOf() != plugin.ReasonNotAllowed || perr.Param != sharedport.ParamPortProtocols || !strings.Contains(perr.Message, "team-a/gs-old") {
			t.Fatalf("a shared Service on a per-pod Service's listener: %v, want reason NotAllowed naming team-a/gs-old", err)
		}
	}
}

// ownClient is a client of its own (a distinct pointer) over a shared fake API server.
type ownClient struct{ client.Client }

// TestTwoReplicasNeverPassTheBackendCap: two replicas, each with its own pod informer that
// shows nothing of the other's game servers, answer a burst of 230 SLB-SharedPort CREATEs on
// one SLB at once: with the backend ledger exactly 200 are given the SLB and the other 30 get
// the exhaustion error (reason PortsExhausted); without it each replica fills the SLB on its
// own. Places held for pods the informer does not show, older than lb.ClaimTTL (CREATEs
// refused later, pods deleted), are taken over; game servers without the manager's record
// (OKG's) hold no place and lower the cap by their number.
func TestTwoReplicasNeverPassTheBackendCap(t *testing.T) {
	ctx := context.Background()
	const ns = "network-plugin-policy-system"
	conf := `[{"name":"SlbIds","value":"lb-a"},{"name":"PortProtocols","value":"7777/UDP"}]`
	burst := func(t *testing.T, withLedger bool) (given, exhausted int) {
		c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithStatusSubresource(&corev1.Service{}).Build()
		var replicas []*sharedport.Plugin
		for range 2 {
			p := alibabacloud.NewSLBSharedPort()
			if withLedger {
				// A client of its own per replica: each has its own writer of the ledger's
				// ConfigMaps, so their writes race on the resourceVersion as two processes'.
				p.UseBackendLedger(&lb.ConfigMapLedger{Client: &ownClient{c}, Namespace: ns, Plugin: p.BackendLedgerKey()})
			}
			if _, err := p.UsePodInformer(ctx, controllertest.NewFakeInformer(controllertest.Synced)); err != nil {
				t.Fatal(err)
			}
			replicas = append(replicas, p)
		}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := range 230 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := replicas[i%2].OnPodAdded(ctx, c, spPod("default", fmt.Sprintf("gs-%d", i), alibabacloud.SLBSharedPortName, conf))
				mu.Lock()
				defer mu.Unlock()
				var perr *plugin.Error
				switch {
				case err == nil:
					given++
				case asError(err, &perr) && perr.ReasonOf() == plugin.ReasonPortsExhausted:
					exhausted++
				default:
					t.Errorf("gs-%d: %v", i, err)
				}
			}()
		}
		wg.Wait()
		return given, exhausted
	}
	if given, exhausted := burst(t, true); given != 200 || exhausted != 30 {
		t.Errorf("with the backend ledger: %d given the SLB, %d exhausted; want 200 and 30", given, exhausted)
	}
	if given, _ := burst(t, false); given <= 200 {
		t.Errorf("without the backend ledger: %d given the SLB; want more than 200 (each replica fills it on its own)", given)
	}

	// Stale places are taken over; OKG's game servers lower the cap; a deleted game server's
	// place is free at once. Two replicas, p and q, whose informers show OKG's 150.
	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithStatusSubresource(&corev1.Service{}).Build()
	var okg []client.Object
	for i := range 150 {
		pod := spPod("default", fmt.Sprintf("okg-%d", i), alibabacloud.SLBSharedPortName, conf)
		pod.Labels[alibabacloud.LabelLBID] = "lb-a"
		okg = append(okg, pod)
	}
	p, q := alibabacloud.NewSLBSharedPort(), alibabacloud.NewSLBSharedPort()
	p.UseBackendLedger(&lb.ConfigMapLedger{Client: c, Namespace: ns, Plugin: p.BackendLedgerKey()})
	q.UseBackendLedger(&lb.ConfigMapLedger{Client: c, Namespace: ns, Plugin: q.BackendLedgerKey()})
	spSetup(t, p, okg...)
	_, qInformer := spSetup(t, q, okg...)
	old := &lb.ConfigMapLedger{Client: c, Namespace: ns, Plugin: p.BackendLedgerKey(), Now: func() time.Time { return time.Now().Add(-2 * lb.ClaimTTL) }}
	for i := range 50 {
		if place, err := old.Hold(ctx, "lb-a", fmt.Sprintf("default/gone-%d", i), 50, nil, nil); err != nil || place == 0 {
			t.Fatal(place, err)
		}
	}
	for i := range 50 {
		if _, err := p.OnPodAdded(ctx, c, spPod("default", fmt.Sprintf("new-%d", i), alibabacloud.SLBSharedPortName, conf)); err != nil {
			t.Fatalf("new-%d over a stale place: %v", i, err)
		}
	}
	// 150 of OKG's and 50 new: q, which has seen none of the 50 and reserved nothing, is
	// refused the 201st by the ledger.
	_, err := q.OnPodAdded(ctx, c, spPod("default", "new-50", alibabacloud.SLBSharedPortName, conf))
	var perr *plugin.Error
	if !asError(err, &perr) || perr.ReasonOf() != plugin.ReasonPortsExhausted {
		t.Errorf("the 201st through the other replica: %v, want reason PortsExhausted", err)
	}
	// new-0, seen and then deleted a second later, frees its place at once.
	gone := spPod("default", "new-0", alibabacloud.SLBSharedPortName, conf)
	gone.Annotations[sharedport.AnnotationAllocation] = `{"loadBalancer":"lb-a"}`
	qInformer.Add(gone)
	time.Sleep(1100 * time.Millisecond)
	qInformer.Delete(gone)
	if _, err := q.OnPodAdded(ctx, c, spPod("default", "new-50", alibabacloud.SLBSharedPortName, conf)); err != nil {
		t.Errorf("once new-0 is deleted: %v, want its place", err)
	}

	// A CREATE naming a load balancer another namespace's shared Service is on is refused
	// before a place is held.
	if _, err := p.OnPodAdded(ctx, c, spPod("team-x", "x-0", alibabacloud.SLBSharedPortName, `[{"name":"SlbIds","value":"lb-z"},{"name":"PortProtocols","value":"7777/UDP"}]`)); err != nil {
		t.Fatal(err)
	}
	_, err = p.OnPodAdded(ctx, c, spPod("team-y", "y-0", alibabacloud.SLBSharedPortName, `[{"name":"SlbIds","value":"lb-z"},{"name":"PortProtocols","value":"7777/UDP"}]`))
	if !asError(err, &perr) || perr.ReasonOf() != plugin.ReasonNotAllowed {
		t.Fatalf("team-y on team-x's SLB: %v, want reason NotAllowed", err)
	}
	places, err := (&lb.ConfigMapLedger{Client: c, Namespace: ns, Plugin: p.BackendLedgerKey()}).Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for place, claim := range places["lb-z"] {
		if claim.Owner != "team-x/x-0" {
			t.Errorf("place %d of lb-z held by %s, want only team-x/x-0's", place, claim.Owner)
		}
	}
}

// TestSharedPortClaimsReleased: what the ledgers hold for a shared Service or a game server
// goes when nothing uses it. A shared Service create the API server refuses releases its
// listener claims, one that timed out keeps them (the Service may exist); a CREATE refused
// after its backend place was held releases the place; a shared Service that is gone has its
// claims released by ServiceGone, unless a Service of its name is there again.
func TestSharedPortClaimsReleased(t *testing.T) {
	ctx := context.Background()
	const ns = "network-plugin-policy-system"
	conf := `[{"name":"SlbIds","value":"lb-a"},{"name":"PortProtocols","value":"7777/UDP"}]`
	for name, tc := range map[string]struct {
		createErr  error
		wantClaims bool
	}{
		"refused":   {createErr: apierrors.NewForbidden(corev1.Resource("services"), "lb-a", fmt.Errorf("quota")), wantClaims: false},
		"timed out": {createErr: apierrors.NewTimeoutError("the server was too slow", 1), wantClaims: true},
	} {
		t.Run(name, func(t *testing.T) {
			base := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithStatusSubresource(&corev1.Service{}).Build()
			listeners := &lb.ConfigMapLedger{Client: base, Namespace: ns, Plugin: alibabacloud.SLBName}
			places := &lb.ConfigMapLedger{Client: base, Namespace: ns, Plugin: alibabacloud.NewSLBSharedPort().BackendLedgerKey()}
			p := alibabacloud.NewSLBSharedPort()
			p.UseLedger(listeners)
			p.UseBackendLedger(places)
			if _, err := p.UsePodInformer(ctx, controllertest.NewFakeInformer(controllertest.Synced)); err != nil {
				t.Fatal(err)
			}
			c := interceptor.NewClient(base, interceptor.Funcs{Create: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				if _, ok := obj.(*corev1.Service); ok {
					return tc.createErr
				}
				return cl.Create(ctx, obj, opts...)
			}})
			if _, err := p.OnPodAdded(ctx, c, spPod("default", "gs-0", alibabacloud.SLBSharedPortName, conf)); err == nil {
				t.Fatal("a CREATE whose shared Service was not made: admitted")
			}
			claims, err := listeners.Load(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got := claims["lb-a"][7777].Owner == "default/lb-a"; got != tc.wantClaims {
				t.Errorf("listener 7777 claimed by the shared Service: %v, want %v (%v)", got, tc.wantClaims, claims)
			}
			held, err := places.Load(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(held["lb-a"]) != 0 {
				t.Errorf("backend places %v after the refused CREATE, want none", held["lb-a"])
			}
		})
	}

	t.Run("the Service gone", func(t *testing.T) {
		c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithStatusSubresource(&corev1.Service{}).Build()
		listeners := &lb.ConfigMapLedger{Client: c, Namespace: ns, Plugin: alibabacloud.SLBName}
		p := alibabacloud.NewSLBSharedPort()
		p.UseLedger(listeners)
		if _, err := p.UsePodInformer(ctx, controllertest.NewFakeInformer(controllertest.Synced)); err != nil {
			t.Fatal(err)
		}
		if _, err := p.OnPodAdded(ctx, c, spPod("default", "gs-0", alibabacloud.SLBSharedPortName, conf)); err != nil {
			t.Fatal(err)
		}
		svc := &corev1.Service{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "lb-a"}, svc); err != nil {
			t.Fatal(err)
		}
		svc.CreationTimestamp = metav1.Now() // the API server's; the fake client leaves it unset
		// Still there (a late delete event): kept.
		if err := p.ServiceGone(ctx, c, svc); err != nil {
			t.Fatal(err)
		}
		if claims, _ := listeners.Load(ctx); claims["lb-a"][7777].Owner != "default/lb-a" {
			t.Fatalf("claims %v released while the Service exists", claims)
		}
		if err := c.Delete(ctx, svc.DeepCopy()); err != nil {
			t.Fatal(err)
		}
		if err := p.ServiceGone(ctx, c, svc); err != nil {
			t.Fatal(err)
		}
		if claims, _ := listeners.Load(ctx); len(claims["lb-a"]) != 0 {
			t.Errorf("claims %v after the shared Service is gone, want none", claims["lb-a"])
		}
	})
}

// failingLedger is a port ledger whose API server does not answer: every call fails.
type failingLedger struct{ lb.Ledger }

func (failingLedger) Claim(context.Context, string, []int32, string, func(lb.Claim) bool) (map[int32]lb.Claim, error) {
	return nil, apierrors.NewServiceUnavailable("etcd leader changed")
}

func (failingLedger) Adopt(context.Context, string, []int32, string, time.Time) (map[int32]lb.Claim, error) {
	return nil, apierrors.NewServiceUnavailable("etcd leader changed")
}

// TestLedgerOutageKeepsReady: while the port ledger cannot be written, a Ready NLB-SharedPort
// game server whose network-conf asks for new ports keeps its Ready network and its Service
// as they are (an APICallError, nothing written): the new ports are not given without their
// claim, and an outage takes nothing away. Once the ledger answers, the change goes through.
func TestLedgerOutageKeepsReady(t *testing.T) {
	ctx := context.Background()
	svcObj := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "nlb-a",
		Annotations: map[string]string{alibabacloud.AnnotationLBID: "nlb-a", lb.AnnotationConfigHash: "642564125"}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, LoadBalancerClass: ptr.To("alibabacloud.com/nlb"),
			Selector: map[string]string{alibabacloud.LabelLBID: "nlb-a"},
			Ports:    []corev1.ServicePort{{Name: "7777", Port: 7777, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(7777)}}},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{Hostname: "nlb-a.example"}}}}}
	p := alibabacloud.NewNLBSharedPort()
	p.UseLedger(failingLedger{})
	c, _ := spSetup(t, p, svcObj)
	pod := spPod("default", "gs-0", alibabacloud.NLBSharedPortName, `[{"name":"NlbIds","value":"nlb-a"},{"name":"PortProtocols","value":"7777/UDP,7778/TCP"}]`)
	pod.Labels[alibabacloud.LabelLBID] = "nlb-a"
	pod.Annotations[networkstatus.AnnotationNetworkStatus] = `{"currentNetworkState":"Ready","createTime":null,"lastTransitionTime":null}`
	out, err := p.OnPodUpdated(ctx, c, pod)
	var perr *plugin.Error
	if !asError(err, &perr) || perr.Type != plugin.APICallError {
		t.Fatalf("a new network-conf while the ledger is down: %v, want an APICallError", err)
	}
	if st, _ := networkstatus.StatusFromPod(out); st == nil || st.CurrentNetworkState != networkstatus.NetworkReady {
		t.Errorf("while the ledger is down: %+v, want the Ready network kept", st)
	}
	svc := &corev1.Service{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(svcObj), svc); err != nil || len(svc.Spec.Ports) != 1 {
		t.Errorf("while the ledger is down: Service ports %v (%v), want the one it had", svc.Spec.Ports, err)
	}
	p.UseLedger(&lb.ConfigMapLedger{Client: c, Namespace: "network-plugin-policy-system", Plugin: alibabacloud.NLBName})
	if _, err := p.OnPodUpdated(ctx, c, out); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(svcObj), svc); err != nil || len(svc.Spec.Ports) != 2 {
		t.Errorf("once the ledger answers: Service ports %v (%v), want two", svc.Spec.Ports, err)
	}
}

// TestAPlaceLeftByAnAbandonedRunIsFree: a CREATE run that held a place on one load balancer
// and was then abandoned at the plugin's timeout (the webhook admits the pod without the
// run's record) leaves that place held, and the pod's next run chooses again, maybe another
// load balancer. Once the informer shows the pod on the other one, its earlier place on the
// first is free at once, not after lb.ClaimTTL: a fleet that fills its load balancers exactly
// is not held 44 s short of one place. A place a run has just held for a pod moving to a
// load balancer, which the informer still shows on its old one, is kept.
func TestAPlaceLeftByAnAbandonedRunIsFree(t *testing.T) {
	ctx := context.Background()
	const ns = "network-plugin-policy-system"
	onA := `[{"name":"SlbIds","value":"lb-a"},{"name":"PortProtocols","value":"7777/UDP"}]`
	onB := `[{"name":"SlbIds","value":"lb-b"},{"name":"PortProtocols","value":"7777/UDP"}]`
	p := alibabacloud.NewSLBSharedPort()
	c, informer := spSetup(t, p)
	ledger := &lb.ConfigMapLedger{Client: c, Namespace: ns, Plugin: p.BackendLedgerKey()}
	earlier := &lb.ConfigMapLedger{Client: c, Namespace: ns, Plugin: p.BackendLedgerKey(), Now: func() time.Time { return time.Now().Add(-5 * time.Second) }}
	p.UseBackendLedger(ledger)
	// lb-a and lb-b are full: 199 places each of game servers whose pods the informer does
	// not show yet (fresh CREATEs), and one more each.
	for _, id := range []string{"lb-a", "lb-b"} {
		for i := range 199 {
			if place, err := ledger.Hold(ctx, id, fmt.Sprintf("default/%s-%d", id, i), 200, nil, nil); err != nil || place == 0 {
				t.Fatal(place, err)
			}
		}
	}
	// lb-a's 200th: gs-0's CREATE run, abandoned, 5 s ago; the informer now shows gs-0 on lb-c.
	onC := `[{"name":"SlbIds","value":"lb-c"},{"name":"PortProtocols","value":"7777/UDP"}]`
	if place, err := earlier.Hold(ctx, "lb-a", "default/gs-0", 200, nil, nil); err != nil || place == 0 {
		t.Fatal(place, err)
	}
	moved := spPod("default", "gs-0", alibabacloud.SLBSharedPortName, onC)
	moved.Annotations[sharedport.AnnotationAllocation] = `{"loadBalancer":"lb-c"}`
	informer.Add(moved)
	// lb-b's 200th: mv-0, shown on lb-c, whose run moving it to lb-b holds it now.
	mv := spPod("default", "mv-0", alibabacloud.SLBSharedPortName, onC)
	mv.Annotations[sharedport.AnnotationAllocation] = `{"loadBalancer":"lb-c"}`
	informer.Add(mv)
	if place, err := ledger.Hold(ctx, "lb-b", "default/mv-0", 200, nil, nil); err != nil || place == 0 {
		t.Fatal(place, err)
	}

	if _, err := p.OnPodAdded(ctx, c, spPod("default", "new-0", alibabacloud.SLBSharedPortName, onA)); err != nil {
		t.Errorf("new-0 on lb-a, where gs-0, shown on lb-c since, held a place: %v, want that place", err)
	}
	_, err := p.OnPodAdded(ctx, c, spPod("default", "new-1", alibabacloud.SLBSharedPortName, onB))
	var perr *plugin.Error
	if !asError(err, &perr) || perr.ReasonOf() != plugin.ReasonPortsExhausted {
		t.Errorf("new-1 on lb-b, where mv-0's move holds the last place: %v, want reason PortsExhausted", err)
	}
}
