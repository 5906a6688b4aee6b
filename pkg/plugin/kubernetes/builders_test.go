package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

var testNow = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// podBuilder builds test pods.
type podBuilder struct{ pod *corev1.Pod }

func newPod(name, networkType string, conf ...networkstatus.ConfParam) *podBuilder {
	b := &podBuilder{pod: &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "game", Annotations: map[string]string{networkstatus.AnnotationNetworkType: networkType}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "game", Image: "game:1"}}},
	}}
	if conf != nil {
		s, _ := networkstatus.EncodeConf(conf)
		b.pod.Annotations[networkstatus.AnnotationNetworkConf] = s
	}
	return b
}

func param(name, value string) networkstatus.ConfParam {
	return networkstatus.ConfParam{Name: name, Value: value}
}

func (b *podBuilder) rawConf(s string) *podBuilder {
	b.pod.Annotations[networkstatus.AnnotationNetworkConf] = s
	return b
}

func (b *podBuilder) containers(names ...string) *podBuilder {
	b.pod.Spec.Containers = nil
	for _, n := range names {
		b.pod.Spec.Containers = append(b.pod.Spec.Containers, corev1.Container{Name: n, Image: n + ":1"})
	}
	return b
}

func (b *podBuilder) port(container string, p corev1.ContainerPort) *podBuilder {
	for i := range b.pod.Spec.Containers {
		if b.pod.Spec.Containers[i].Name == container {
			b.pod.Spec.Containers[i].Ports = append(b.pod.Spec.Containers[i].Ports, p)
		}
	}
	return b
}

func (b *podBuilder) uid(u string) *podBuilder { b.pod.UID = types.UID(u); return b }

func (b *podBuilder) node(n string) *podBuilder { b.pod.Spec.NodeName = n; return b }

func (b *podBuilder) ip(ip string) *podBuilder { b.pod.Status.PodIP = ip; return b }

func (b *podBuilder) label(k, v string) *podBuilder {
	if b.pod.Labels == nil {
		b.pod.Labels = map[string]string{}
	}
	b.pod.Labels[k] = v
	return b
}

func (b *podBuilder) terminating() *podBuilder {
	t := metav1.NewTime(testNow)
	b.pod.DeletionTimestamp = &t
	b.pod.Finalizers = []string{"test/keep"} // the fake client refuses deletionTimestamp without finalizers
	return b
}

func (b *podBuilder) obj() *corev1.Pod { return b.pod.DeepCopy() }

func newNode(name string, addrs ...corev1.NodeAddress) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Addresses: addrs}}
}

func extIP(ip string) corev1.NodeAddress {
	return corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: ip}
}

func intIP(ip string) corev1.NodeAddress {
	return corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip}
}

// nginxDefaultClass returns the IngressClass "nginx" marked as the cluster's default, as an
// ingress-nginx install makes it; newClient and failingClient hold it.
func nginxDefaultClass() *networkingv1.IngressClass {
	return &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "nginx",
		Annotations: map[string]string{AnnotationDefaultIngressClass: "true"}}}
}

// newClient returns a fake client holding objs and nginxDefaultClass, with IngressHostIndex.
func newClient(objs ...client.Object) client.Client {
	return fake.NewClientBuilder().WithObjects(append(objs, nginxDefaultClass())...).WithIndex(&networkingv1.Ingress{}, IngressHostIndex, IngressHosts).Build()
}

// failingClient fails every call of the given verb ("get", "create", "update", "patch",
// "list", "delete") on objects of the given kind ("" = all kinds).
func failingClient(verb string, kind string, objs ...client.Object) client.Client {
	boom := errors.New("apiserver unavailable")
	match := func(obj client.Object) bool {
		return kind == "" || typeName(obj) == strings.ToLower(kind)
	}
	return fake.NewClientBuilder().WithObjects(append(objs, nginxDefaultClass())...).WithIndex(&networkingv1.Ingress{}, IngressHostIndex, IngressHosts).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if verb == "get" && match(obj) {
				return boom
			}
			return c.Get(ctx, key, obj, opts...)
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if verb == "create" && match(obj) {
				return boom
			}
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if verb == "update" && match(obj) {
				return boom
			}
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if verb == "patch" && match(obj) {
				return boom
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			if verb == "delete" && match(obj) {
				return boom
			}
			return c.Delete(ctx, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if verb == "list" {
				return boom
			}
			return c.List(ctx, list, opts...)
		},
	}).Build()
}

// typeName returns the Go type name of obj without package, e.g. "service".
func typeName(obj client.Object) string {
	t := fmt.Sprintf("%T", obj)
	return strings.ToLower(t[strings.LastIndex(t, ".")+1:])
}

// status decodes the pod's network-status; it fails the test when invalid.
func status(t *testing.T, pod *corev1.Pod) *networkstatus.NetworkStatus {
	t.Helper()
	st, err := networkstatus.StatusFromPod(pod)
	if err != nil {
		t.Fatalf("network-status: %v", err)
	}
	return st
}

// wantError checks err's type, param and warning flag ("" type = no error).
func wantError(t *testing.T, err error, typ plugin.ErrorType, paramName string, warning bool, msgParts ...string) {
	t.Helper()
	if typ == "" {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	var perr *plugin.Error
	if !errors.As(err, &perr) {
		t.Fatalf("error = %v (%T), want *plugin.Error %s", err, err, typ)
	}
	if perr.Type != typ || perr.Warning != warning || (paramName != "" && perr.Param != paramName) {
		t.Fatalf("error = %+v; want type %s, param %q, warning %t", perr, typ, paramName, warning)
	}
	for _, p := range msgParts {
		if !strings.Contains(perr.Error(), p) {
			t.Errorf("error %q does not contain %q", perr.Error(), p)
		}
	}
}

func hostPortCfg(minPort, maxPort, perPort int32) plugin.Config {
	cfg := plugin.DefaultConfig()
	cfg.Kubernetes.HostPort = plugin.HostPortConfig{MinPort: minPort, MaxPort: maxPort, MaxPodsPerPort: perPort}
	return cfg
}
