package kubernetes

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

func ingressConf(extra ...networkstatus.ConfParam) []networkstatus.ConfParam {
	return append([]networkstatus.ConfParam{
		param("Path", "/game<id>(/|$)(.*)"), param("PathType", "ImplementationSpecific"), param("Port", "8080"),
		param("Host", "play.example.com"), param("IngressClassName", "nginx"),
		param("Annotation", "nginx.ingress.kubernetes.io/rewrite-target: /$2"),
		param("TlsHosts", "play.example.com,www.example.com"), param("TlsSecretName", "play-tls"),
	}, extra...)
}

func TestIngressParamErrors(t *testing.T) {
	cases := map[string]struct {
		conf      []networkstatus.ConfParam
		pod       string
		wantType  plugin.ErrorType
		wantParam string
		wantWarn  bool
		wantMsg   []string
	}{
		"valid":   {conf: ingressConf()},
		"no Path": {conf: []networkstatus.ConfParam{param("PathType", "Prefix"), param("Port", "80")}, wantType: plugin.ParameterError, wantParam: "Path", wantMsg: []string{"is required"}},
		"two <id>": {
			conf:     []networkstatus.ConfParam{param("Path", "/g<id>/<id>"), param("PathType", "Prefix"), param("Port", "80")},
			wantType: plugin.ParameterError, wantParam: "Path", wantMsg: []string{"2 <id> placeholders"},
		},
		"two <id> in Host": {
			conf:     []networkstatus.ConfParam{param("Path", "/g"), param("PathType", "Prefix"), param("Port", "80"), param("Host", "<id>.<id>.example")},
			wantType: plugin.ParameterError, wantParam: "Host",
		},
		"Annotation without colon-space": {
			conf:     ingressConf(param("Annotation", "a:b")),
			wantType: plugin.ParameterError, wantParam: "Annotation", wantMsg: []string{`"<key>: <value>"`},
		},
		"bad PathType": {
			conf:     []networkstatus.ConfParam{param("Path", "/g<id>"), param("PathType", "prefix"), param("Port", "80")},
			wantType: plugin.ParameterError, wantParam: "PathType",
		},
		"missing Port": {
			conf:     []networkstatus.ConfParam{param("Path", "/g<id>"), param("PathType", "Prefix")},
			wantType: plugin.ParameterError, wantParam: "Port",
		},
		"bad Port": {
			conf:     []networkstatus.ConfParam{param("Path", "/g<id>"), param("PathType", "Prefix"), param("Port", "http")},
			wantType: plugin.ParameterError, wantParam: "Port",
		},
		"Host twice": {
			conf:     ingressConf(param("Host", "other.example.com")),
			wantType: plugin.ParameterError, wantParam: "Host",
		},
		"relative path": {
			conf:     []networkstatus.ConfParam{param("Path", "g<id>"), param("PathType", "Prefix"), param("Port", "80")},
			wantType: plugin.ParameterError, wantParam: "Path",
		},
		"pod name without ordinal": {
			conf: ingressConf(), pod: "lobby",
			wantType: plugin.ParameterError, wantParam: "Path", wantMsg: []string{`pod name "lobby"`},
		},
		"no <id> anywhere warns": {
			conf:     []networkstatus.ConfParam{param("Path", "/game"), param("PathType", "Prefix"), param("Port", "80"), param("Host", "one.example.com")},
			wantType: plugin.ParameterError, wantParam: "Path", wantWarn: true, wantMsg: []string{"same route"},
		},
		"unknown parameter warns": {
			conf:     ingressConf(param("Hosts", "x")),
			wantType: plugin.ParameterError, wantParam: "Hosts", wantWarn: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			podName := tc.pod
			if podName == "" {
				podName = "gs-3"
			}
			got, err := NewIngress().OnPodAdded(context.Background(), newClient(), newPod(podName, IngressName, tc.conf...).obj())
			wantError(t, err, tc.wantType, tc.wantParam, tc.wantWarn, tc.wantMsg...)
			if tc.wantType == "" {
				if st := status(t, got); st != nil {
					t.Errorf("status = %+v, want none (OKG writes none at CREATE)", st)
				}
			}
		})
	}
}

func getIngress(t *testing.T, c client.Client, name string) *networkingv1.Ingress {
	t.Helper()
	ing := &networkingv1.Ingress{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "game", Name: name}, ing); err != nil {
		t.Fatalf("get ingress %s: %v", name, err)
	}
	return ing
}

func TestIngressLifecycle(t *testing.T) {
	ctx := context.Background()
	ig := NewIngress()
	c := newClient()
	base := newPod("gs-3", IngressName, ingressConf()...).uid("u3").node("n1").ip("10.244.0.9")

	pod, err := ig.OnPodUpdated(ctx, c, base.obj())
	wantError(t, err, "", "", false)
	// As OKG: Ready once the Service and Ingress exist, without a load-balancer address.
	ports := []networkstatus.NetworkPort{{Name: "/game3(/|$)(.*)", Port: networkstatus.IntPort(8080)}}
	want := &networkstatus.NetworkStatus{
		InternalAddresses:   []networkstatus.NetworkAddress{{IP: "10.244.0.9", Ports: ports}},
		ExternalAddresses:   []networkstatus.NetworkAddress{{IP: "", EndPoint: "play.example.com", Ports: ports}},
		CurrentNetworkState: networkstatus.NetworkReady,
	}
	if diff := cmp.Diff(want, status(t, pod)); diff != "" {
		t.Errorf("status without load balancer (-want,+got):\n%s", diff)
	}
	if pod.Labels[SelectorPodNameLabel] != "gs-3" {
		t.Errorf("pod-name label missing: %v", pod.Labels)
	}
	owner := []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "gs-3", UID: "u3", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
	svc := getService(t, c, "gs-3")
	if diff := cmp.Diff(owner, svc.OwnerReferences); diff != "" {
		t.Errorf("service owner (-want,+got):\n%s", diff)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 8080 || svc.Spec.Selector[SelectorPodNameLabel] != "gs-3" || svc.Spec.Type != corev1.ServiceTypeClusterIP {
		t.Errorf("service spec = %+v", svc.Spec)
	}
	ing := getIngress(t, c, "gs-3")
	pathType := networkingv1.PathTypeImplementationSpecific
	wantSpec := networkingv1.IngressSpec{
		IngressClassName: ptr.To("nginx"),
		TLS:              []networkingv1.IngressTLS{{Hosts: []string{"play.example.com", "www.example.com"}, SecretName: "play-tls"}},
		Rules: []networkingv1.IngressRule{{Host: "play.example.com", IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
			Paths: []networkingv1.HTTPIngressPath{{Path: "/game3(/|$)(.*)", PathType: &pathType, Backend: networkingv1.IngressBackend{
				Service: &networkingv1.IngressServiceBackend{Name: "gs-3", Port: networkingv1.ServiceBackendPort{Number: 8080}},
			}}},
		}}}},
	}
	if diff := cmp.Diff(wantSpec, ing.Spec); diff != "" {
		t.Errorf("ingress spec (-want,+got):\n%s", diff)
	}
	if ing.Annotations["nginx.ingress.kubernetes.io/rewrite-target"] != "/$2" || ing.Annotations[AnnotationIngressHash] == "" {
		t.Errorf("ingress annotations = %v", ing.Annotations)
	}

	// The ingress controller publishes an address: nothing changes, OKG does not read it
	// ("ip" stays "").
	ing.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "198.51.100.7"}}
	if err := c.Status().Update(ctx, ing); err != nil {
		t.Fatal(err)
	}
	pod, err = ig.OnPodUpdated(ctx, c, base.obj())
	wantError(t, err, "", "", false)
	if diff := cmp.Diff(want, status(t, pod)); diff != "" {
		t.Errorf("ready status (-want,+got):\n%s", diff)
	}

	// A parameter change updates the Ingress (and the Service when the ports change).
	changed := newPod("gs-3", IngressName, param("Path", "/v2/game<id>"), param("PathType", "Prefix"), param("Port", "9090"), param("Host", "play.example.com")).uid("u3").node("n1").ip("10.244.0.9")
	_, err = ig.OnPodUpdated(ctx, c, changed.obj())
	wantError(t, err, "", "", false)
	ing = getIngress(t, c, "gs-3")
	if p := ing.Spec.Rules[0].HTTP.Paths[0]; p.Path != "/v2/game3" || p.Backend.Service.Port.Number != 9090 || ing.Spec.TLS != nil {
		t.Errorf("ingress after change = %+v", ing.Spec)
	}
	if p := getService(t, c, "gs-3").Spec.Ports; len(p) != 1 || p[0].Port != 9090 {
		t.Errorf("service ports after change = %+v", p)
	}

	// DELETE leaves both, as OKG: they are owned by the pod, and garbage collection
	// removes them once the pod is gone (a refused DELETE, or a pod draining its players,
	// keeps the network).
	wantError(t, ig.OnPodDeleted(ctx, c, changed.obj()), "", "", false)
	if !ownedByPod(getIngress(t, c, "gs-3"), changed.obj()) || !ownedByPod(getService(t, c, "gs-3"), changed.obj()) {
		t.Errorf("ingress or service after DELETE admission is not owned by the pod (garbage collection would keep it)")
	}
}

func TestIngressUpdateErrors(t *testing.T) {
	cases := map[string]struct {
		c         client.Client
		pod       *corev1.Pod
		wantType  plugin.ErrorType
		wantParam string
	}{
		"bad conf": {
			c: newClient(), pod: newPod("gs-0", IngressName, param("PathType", "Prefix")).uid("u").obj(),
			wantType: plugin.ParameterError, wantParam: "Path",
		},
		"service create fails": {
			c: failingClient("create", "service"), pod: newPod("gs-0", IngressName, ingressConf()...).uid("u").obj(),
			wantType: plugin.APICallError,
		},
		"ingress create fails": {
			c: failingClient("create", "ingress"), pod: newPod("gs-0", IngressName, ingressConf()...).uid("u").obj(),
			wantType: plugin.APICallError,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pod, err := NewIngress().OnPodUpdated(context.Background(), tc.c, tc.pod)
			wantError(t, err, tc.wantType, tc.wantParam, false)
			if st := status(t, pod); st == nil || st.CurrentNetworkState != networkstatus.NetworkNotReady {
				t.Errorf("status on error = %+v, want NotReady", st)
			}
		})
	}
}

func TestIngressIdentity(t *testing.T) {
	ig, np := NewIngress(), NewNodePort()
	if ig.Name() != "Kubernetes-Ingress" || ig.IsSynchronous() || ig.Alias() != "" {
		t.Errorf("ingress identity")
	}
	if np.Name() != "Kubernetes-NodePort" || np.IsSynchronous() || np.Alias() != "" {
		t.Errorf("nodeport identity")
	}
	if ig.Init(context.Background(), nil, plugin.DefaultConfig()) != nil || np.Init(context.Background(), nil, plugin.DefaultConfig()) != nil {
		t.Errorf("init failed")
	}
}
