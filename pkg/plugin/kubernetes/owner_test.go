package kubernetes

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// foreignService is a ClusterIP Service "name" in namespace game that someone else made:
// no owner, no hash annotation, its own selector.
func foreignService(name string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "game", Labels: map[string]string{"team": "lobby"}},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: map[string]string{"app": name},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}},
		},
	}
}

// foreignIngress is an Ingress "name" in namespace game that someone else made.
func foreignIngress(name string) *networkingv1.Ingress {
	pt := networkingv1.PathTypePrefix
	return &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "game", Annotations: map[string]string{"owner": "web-team"}},
		Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: "www.example.com", IngressRuleValue: networkingv1.IngressRuleValue{
			HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: &pt, Backend: networkingv1.IngressBackend{
				Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}},
			}}}},
		}}}},
	}
}

func withOwner(obj client.Object, ref metav1.OwnerReference) client.Object {
	obj.SetOwnerReferences(append(obj.GetOwnerReferences(), ref))
	return obj
}

func withAnnotation(obj client.Object, k, v string) client.Object {
	a := obj.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[k] = v
	obj.SetAnnotations(a)
	return obj
}

func podOwnerRef(name, uid string) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: name, UID: types.UID("uid-" + uid), Controller: ptr.To(true)}
}

func gssRef(name string) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "game.kruise.io/v1alpha1", Kind: "GameServerSet", Name: name, UID: "gss-uid", Controller: ptr.To(true)}
}

// TestAdoptOnlyWhatIsYours: the NodePort and Ingress plugins update an existing Service
// or Ingress of the pod's name only when it is owned by the pod or its GameServerSet, or
// carries the hash annotation that OKG and this project write; anything else is a
// ParameterError naming the object, and the object is not written. DELETE never removes
// an object the pod does not own.
func TestAdoptOnlyWhatIsYours(t *testing.T) {
	npPod := func() *podBuilder {
		return newPod("lobby-0", NodePortName, param("PortProtocols", "7777/UDP")).uid("uid-pod").node("n1").ip("10.0.0.9").label(networkstatus.LabelOwnerGSS, "lobby")
	}
	igPod := func() *podBuilder {
		return newPod("lobby-0", IngressName, ingressConf()...).uid("uid-pod").node("n1").ip("10.0.0.9").label(networkstatus.LabelOwnerGSS, "lobby")
	}
	cases := map[string]struct {
		plugin   plugin.Plugin
		pod      *podBuilder
		existing client.Object
		wantErr  string // "" = adopted
	}{
		"NodePort: foreign Service untouched": {
			plugin: NewNodePort(), pod: npPod(), existing: foreignService("lobby-0"),
			wantErr: "Service game/lobby-0 exists and is not managed by network-plugin-policy",
		},
		"NodePort: Service owned by another pod": {
			plugin: NewNodePort(), pod: npPod(), existing: withOwner(foreignService("lobby-0"), podOwnerRef("lobby-0", "other")),
			wantErr: "Service game/lobby-0 exists and is not managed by network-plugin-policy",
		},
		"NodePort: Service owned by another GameServerSet": {
			plugin: NewNodePort(), pod: npPod(), existing: withOwner(foreignService("lobby-0"), gssRef("other")),
			wantErr: "Service game/lobby-0 exists and is not managed by network-plugin-policy",
		},
		"NodePort: Service with OKG's hash adopted": {
			plugin: NewNodePort(), pod: npPod(), existing: withAnnotation(foreignService("lobby-0"), AnnotationServiceHash, "12345"),
		},
		"NodePort: Service of a previous pod of the name, with the hash, adopted": {
			plugin: NewNodePort(), pod: npPod(),
			existing: withAnnotation(withOwner(foreignService("lobby-0"), podOwnerRef("lobby-0", "previous")), AnnotationServiceHash, "1"),
		},
		"NodePort: Service owned by the pod adopted": {
			plugin: NewNodePort(), pod: npPod(), existing: withOwner(foreignService("lobby-0"), podOwnerRef("lobby-0", "pod")),
		},
		"NodePort: Service owned by the pod's GameServerSet adopted": {
			plugin: NewNodePort(), pod: npPod(), existing: withOwner(foreignService("lobby-0"), gssRef("lobby")),
		},
		"Ingress: foreign Service untouched": {
			plugin: NewIngress(), pod: igPod(), existing: foreignService("lobby-0"),
			wantErr: "Service game/lobby-0 exists and is not managed by network-plugin-policy",
		},
		"Ingress: foreign Ingress untouched": {
			plugin: NewIngress(), pod: igPod(), existing: foreignIngress("lobby-0"),
			wantErr: "Ingress game/lobby-0 exists and is not managed by network-plugin-policy",
		},
		"Ingress: Ingress owned by another pod": {
			plugin: NewIngress(), pod: igPod(), existing: withOwner(foreignIngress("lobby-0"), podOwnerRef("lobby-0", "other")),
			wantErr: "Ingress game/lobby-0 exists and is not managed by network-plugin-policy",
		},
		"Ingress: Ingress with OKG's hash adopted": {
			plugin: NewIngress(), pod: igPod(), existing: withAnnotation(foreignIngress("lobby-0"), AnnotationIngressHash, "1217248329"),
		},
		"Ingress: Ingress owned by the pod's GameServerSet adopted": {
			plugin: NewIngress(), pod: igPod(), existing: withOwner(foreignIngress("lobby-0"), gssRef("lobby")),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			c := newClient(newNode("n1", extIP("203.0.113.1")), tc.existing)
			before := tc.existing.DeepCopyObject().(client.Object)
			if err := c.Get(ctx, client.ObjectKeyFromObject(before), before); err != nil {
				t.Fatal(err)
			}
			pod, err := tc.plugin.OnPodUpdated(ctx, c, tc.pod.obj())
			after := tc.existing.DeepCopyObject().(client.Object)
			if gerr := c.Get(ctx, client.ObjectKeyFromObject(after), after); gerr != nil {
				t.Fatal(gerr)
			}
			if tc.wantErr == "" {
				wantError(t, err, "", "", false)
				if !ownedByPod(after, pod) && !ownedByGameServerSet(after, pod) {
					t.Errorf("adopted object has owners %+v, want the pod or its GameServerSet", after.GetOwnerReferences())
				}
				return
			}
			perr := plugin.AsError(err)
			if perr == nil || perr.Type != plugin.ParameterError || perr.Warning || perr.Message != tc.wantErr {
				t.Fatalf("error = %#v, want ParameterError %q", perr, tc.wantErr)
			}
			if diff := cmp.Diff(before, after); diff != "" {
				t.Errorf("foreign object was modified (-before,+after):\n%s", diff)
			}
			if st := status(t, pod); st == nil || st.CurrentNetworkState != networkstatus.NetworkNotReady {
				t.Errorf("status = %+v, want NotReady", st)
			}
			// The pod's DELETE leaves it alone.
			if err := tc.plugin.OnPodDeleted(ctx, c, tc.pod.obj()); err != nil {
				t.Fatalf("OnPodDeleted: %v", err)
			}
			if err := c.Get(ctx, client.ObjectKeyFromObject(after), after); err != nil {
				t.Errorf("foreign object after the pod's DELETE: %v", err)
			}
		})
	}
}

// TestAdoptedServiceKeepsNodePorts: adopting a Service through the merge
// patch keeps what the API server filled in (clusterIP, node ports of unchanged ports).
func TestAdoptedServiceKeepsNodePorts(t *testing.T) {
	ctx := context.Background()
	svc := withAnnotation(&corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "gs-0", Namespace: "game"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, ClusterIP: "10.96.0.9", Selector: map[string]string{SelectorPodNameLabel: "gs-0"},
			Ports: []corev1.ServicePort{{Name: "7777", Port: 7777, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(7777), NodePort: 31777}}},
	}, AnnotationServiceHash, "okg").(*corev1.Service)
	c := newClient(newNode("n1", extIP("203.0.113.1")), svc)
	pod := newPod("gs-0", NodePortName, param("PortProtocols", "7777/UDP,7778/UDP")).uid("u0").node("n1").ip("10.0.0.9")
	if _, err := NewNodePort().OnPodUpdated(ctx, c, pod.obj()); err != nil {
		t.Fatal(err)
	}
	got := getService(t, c, "gs-0")
	if got.Spec.ClusterIP != "10.96.0.9" || len(got.Spec.Ports) != 2 || got.Spec.Ports[0].NodePort != 31777 || !ownedByPod(got, pod.obj()) {
		t.Errorf("adopted service = %+v (owners %+v)", got.Spec, got.OwnerReferences)
	}
}
