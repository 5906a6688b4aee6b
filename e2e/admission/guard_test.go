package admission

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// TestPodNamedAfterForeignService: a NodePort pod named like a ClusterIP Service that
// someone else made (no owner, no hash annotation) does not take it over. Under the
// built-in default (Asynchronous) the pod is admitted with its network NotReady, the
// recorded error names the Service, and the Service keeps its type, selector, ports,
// owners and resourceVersion across the retries. Deleting the pod leaves it.
func TestPodNamedAfterForeignService(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "foreign-svc", nil)
	svc, err := cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "lobby-0", Namespace: ns},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: map[string]string{"app": "lobby-0"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create the foreign Service: %v", err)
	}

	p := probePod(ns, "Kubernetes-NodePort")
	p.GenerateName, p.Name = "", "lobby-0"
	p.Annotations[networkstatus.AnnotationNetworkConf] = nodePortConf
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create NodePort pod lobby-0: %v (the built-in default admits it)", err)
	}
	want := fmt.Sprintf("Service %s/lobby-0 exists and is not managed by network-plugin-policy", ns)
	eventually(t, time.Minute, "pod NotReady, retried, with the error naming the Service", func(ctx context.Context) (bool, error) {
		got, err := cs.CoreV1().Pods(ns).Get(ctx, "lobby-0", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		rs := retryState(t, got)
		return got.Spec.NodeName != "" && networkState(got) == networkstatus.NetworkNotReady && rs != nil && rs.LastError != nil &&
			rs.LastError.Type == "parameterError" && strings.Contains(rs.LastError.Message, want) && rs.Attempts >= 2, nil
	})
	if ok, err := hasEvent(ctx, ns, "lobby-0", "parameterError", want); err != nil || !ok {
		t.Errorf("no parameterError event on the pod naming the Service (%v)", err)
	}

	assertUntouched := func(when string) {
		t.Helper()
		after, err := cs.CoreV1().Services(ns).Get(ctx, "lobby-0", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s: get the foreign Service: %v", when, err)
		}
		if after.ResourceVersion != svc.ResourceVersion {
			t.Errorf("%s: Service resourceVersion %s -> %s: it was written", when, svc.ResourceVersion, after.ResourceVersion)
		}
		if diff := cmp.Diff(svc.Spec, after.Spec); diff != "" {
			t.Errorf("%s: Service spec changed (-before,+after):\n%s", when, diff)
		}
		if after.Spec.Type != corev1.ServiceTypeClusterIP || !cmp.Equal(after.Spec.Selector, map[string]string{"app": "lobby-0"}) ||
			len(after.OwnerReferences) != 0 || len(after.Annotations) != 0 {
			t.Errorf("%s: Service type %s, selector %v, owners %v, annotations %v; want ClusterIP, app=lobby-0, none, none",
				when, after.Spec.Type, after.Spec.Selector, after.OwnerReferences, after.Annotations)
		}
	}
	assertUntouched("while the pod retries")

	if err := cs.CoreV1().Pods(ns).Delete(ctx, "lobby-0", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "pod gone", func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Pods(ns).Get(ctx, "lobby-0", metav1.GetOptions{})
		return ignoreNotFound(err) == nil && err != nil, ignoreNotFound(err)
	})
	assertUntouched("after the pod's deletion")
}

// TestSnippetAnnotationRefused: an Ingress pod whose network-conf asks for an
// ingress-nginx snippet annotation gets no Ingress (nor Service). Under the built-in
// default it is admitted NotReady with a warning naming the annotation, and retrying does
// not change that; under a Synchronous policy its CREATE is denied naming the annotation.
func TestSnippetAnnotationRefused(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "snippet", nil)
	conf := `[{"name":"Path","value":"/game<id>"},{"name":"PathType","value":"Prefix"},{"name":"Port","value":"8080"},` +
		`{"name":"Host","value":"play<id>.example.com"},` +
		`{"name":"Annotation","value":"nginx.ingress.kubernetes.io/server-snippet: location /x { return 200; }"}]`
	const named = `Annotation "nginx.ingress.kubernetes.io/server-snippet" is not allowed by the Ingress provider config (keys ending in -snippet are refused by default)`

	warnings := &warningCollector{}
	p := probePod(ns, "Kubernetes-Ingress")
	p.GenerateName, p.Name = "", "gs-0"
	p.Annotations[networkstatus.AnnotationNetworkConf] = conf
	if _, err := clientWithWarnings(warnings).CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Ingress pod: %v (the built-in default admits it)", err)
	}
	if w := strings.Join(warnings.All(), "\n"); !strings.Contains(w, named) {
		t.Errorf("admission warnings %q, want one naming the annotation: %s", w, named)
	}
	eventually(t, time.Minute, "pod scheduled, retried and NotReady with the error naming the annotation", func(ctx context.Context) (bool, error) {
		got, err := cs.CoreV1().Pods(ns).Get(ctx, "gs-0", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		rs := retryState(t, got)
		return got.Spec.NodeName != "" && networkState(got) == networkstatus.NetworkNotReady && rs != nil && rs.LastError != nil &&
			rs.LastError.Type == "parameterError" && strings.Contains(rs.LastError.Message, named) && rs.Attempts >= 2, nil
	})
	ings, err := cs.NetworkingV1().Ingresses(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(ings.Items) != 0 {
		t.Errorf("Ingresses of %s: %v (%v), want none", ns, ings, err)
	}
	svcs, err := cs.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(svcs.Items) != 0 {
		t.Errorf("Services of %s: %v (%v), want none", ns, svcs, err)
	}

	applyPolicy(t, fmt.Sprintf(`
apiVersion: policy.game.kruise.io/v1alpha1
kind: NetworkPluginPolicy
metadata: {name: ingress-sync, namespace: %s}
spec:
  plugins: ["Kubernetes-Ingress"]
  failureMode: Synchronous
`, ns))
	denied := probePod(ns, "Kubernetes-Ingress")
	denied.GenerateName, denied.Name = "", "gs-1"
	denied.Annotations[networkstatus.AnnotationNetworkConf] = conf
	waitForPolicy(t, ns, "ingress-sync", "Kubernetes-Ingress")
	_, err = cs.CoreV1().Pods(ns).Create(ctx, denied, metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), named) || !strings.Contains(err.Error(), "parameterError") {
		t.Errorf("CREATE under a Synchronous policy: %v, want a denial naming the annotation", err)
	}
	if ings, err := cs.NetworkingV1().Ingresses(ns).List(ctx, metav1.ListOptions{}); err != nil || len(ings.Items) != 0 {
		t.Errorf("Ingresses of %s after the denial: %v (%v), want none", ns, ings, err)
	}
}

// TestIngressHostOfAnotherNamespaceRefused: with an Ingress for a host in namespace A, an
// Ingress pod in namespace B that asks for the same host gets no Ingress: its network stays
// NotReady with a parameterError naming the host and namespace A, and A's Ingress is
// untouched.
func TestIngressHostOfAnotherNamespaceRefused(t *testing.T) {
	ctx := context.Background()
	victimNS := newNamespace(t, "victim", nil)
	ns := newNamespace(t, "hostgrab", nil)
	host := victimNS + ".example.com"
	victim, err := cs.NetworkingV1().Ingresses(victimNS).Create(ctx, &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{
			HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
				Path: "/", PathType: ptr.To(networkingv1.PathTypePrefix),
				Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}},
			}}},
		}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	named := fmt.Sprintf(`host %q is already served by an Ingress of namespace %q`, host, victimNS)
	p := probePod(ns, "Kubernetes-Ingress")
	p.GenerateName, p.Name = "", "gs-0"
	p.Annotations[networkstatus.AnnotationNetworkConf] = `[{"name":"Path","value":"/game<id>"},{"name":"PathType","value":"Prefix"},{"name":"Port","value":"8080"},` +
		`{"name":"Host","value":"` + host + `"}]`
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Ingress pod: %v (the built-in default admits it)", err)
	}
	eventually(t, time.Minute, "pod NotReady with the error naming the host and the other namespace", func(ctx context.Context) (bool, error) {
		got, err := cs.CoreV1().Pods(ns).Get(ctx, "gs-0", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		rs := retryState(t, got)
		return got.Spec.NodeName != "" && networkState(got) == networkstatus.NetworkNotReady && rs != nil && rs.LastError != nil &&
			rs.LastError.Type == "parameterError" && strings.Contains(rs.LastError.Message, named), nil
	})
	if ings, err := cs.NetworkingV1().Ingresses(ns).List(ctx, metav1.ListOptions{}); err != nil || len(ings.Items) != 0 {
		t.Errorf("Ingresses of %s: %v (%v), want none", ns, ings, err)
	}
	after, err := cs.NetworkingV1().Ingresses(victimNS).Get(ctx, "web", metav1.GetOptions{})
	if err != nil || after.ResourceVersion != victim.ResourceVersion {
		t.Errorf("the other namespace's Ingress was changed: %v (resourceVersion %s, was %s)", err, after.ResourceVersion, victim.ResourceVersion)
	}
}

// TestIngressClassNotAllowedRefused: with the platform's restriction (the suite's provider
// config sets allowed_ingress_classes = []), a Kubernetes-Ingress pod that names an
// IngressClass which is neither the cluster's default class nor listed (an internal
// controller's class, say) is admitted NotReady with a parameterError naming
// IngressClassName, and no Service or Ingress is written. The class is read from the
// manager's IngressClass informer, under the manager's own RBAC.
func TestIngressClassNotAllowedRefused(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "classgrab", nil)
	class := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: ns + "-internal"},
		Spec: networkingv1.IngressClassSpec{Controller: "example.com/internal-ingress"}}
	if _, err := cs.NetworkingV1().IngressClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.NetworkingV1().IngressClasses().Delete(context.Background(), class.Name, metav1.DeleteOptions{})
	})
	p := probePod(ns, "Kubernetes-Ingress")
	p.GenerateName, p.Name = "", "gs-0"
	p.Annotations[networkstatus.AnnotationNetworkConf] = `[{"name":"Path","value":"/game<id>"},{"name":"PathType","value":"Prefix"},{"name":"Port","value":"8080"},` +
		`{"name":"Host","value":"` + ns + `.example.com"},{"name":"IngressClassName","value":"` + class.Name + `"}]`
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Ingress pod: %v (the built-in default admits it)", err)
	}
	named := fmt.Sprintf(`class %q is not allowed`, class.Name)
	eventually(t, time.Minute, "pod NotReady with the error naming the class", func(ctx context.Context) (bool, error) {
		got, err := cs.CoreV1().Pods(ns).Get(ctx, "gs-0", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		rs := retryState(t, got)
		return got.Spec.NodeName != "" && networkState(got) == networkstatus.NetworkNotReady && rs != nil && rs.LastError != nil &&
			rs.LastError.Type == "parameterError" && strings.Contains(rs.LastError.Message, named), nil
	})
	if ings, err := cs.NetworkingV1().Ingresses(ns).List(ctx, metav1.ListOptions{}); err != nil || len(ings.Items) != 0 {
		t.Errorf("Ingresses of %s: %v (%v), want none", ns, ings, err)
	}
	if svcs, err := cs.CoreV1().Services(ns).List(ctx, metav1.ListOptions{}); err != nil || len(svcs.Items) != 0 {
		t.Errorf("Services of %s: %v (%v), want none", ns, svcs, err)
	}
}

// TestIngressHostFirstClaimKeepsIt: a host belongs to the namespace that served it first. Game
// servers whose Ingress serves a host keep it, without a warning, when a tenant of another
// namespace creates an Ingress for the same host later; and a game server of the tenant's
// namespace that asks for the host is the one refused, naming the game servers' namespace.
func TestIngressHostFirstClaimKeepsIt(t *testing.T) {
	ctx := context.Background()
	gameNS := newNamespace(t, "zz-first", nil)
	tenantNS := newNamespace(t, "aa-later", nil) // sorts first: only the time decides
	host := gameNS + ".example.com"
	conf := `[{"name":"Path","value":"/game<id>"},{"name":"PathType","value":"Prefix"},{"name":"Port","value":"8080"},` +
		`{"name":"Host","value":"` + host + `"}]`
	createStatefulSet(t, gameNS, "gs", 1, gamePodTemplate("gs", "Kubernetes-Ingress", conf))
	eventually(t, time.Minute, "the game server's network Ready", func(ctx context.Context) (bool, error) {
		got, err := cs.CoreV1().Pods(gameNS).Get(ctx, "gs-0", metav1.GetOptions{})
		if err != nil {
			return false, ignoreNotFound(err)
		}
		return networkState(got) == networkstatus.NetworkReady, nil
	})
	time.Sleep(1100 * time.Millisecond) // creationTimestamp has second precision
	if _, err := cs.NetworkingV1().Ingresses(tenantNS).Create(ctx, &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: "grab"},
		Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{
			HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
				Path: "/", PathType: ptr.To(networkingv1.PathTypePrefix),
				Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}},
			}}},
		}}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The manager's cache sees the tenant's Ingress within a moment; then an unrelated update
	// of the game server runs the plugin.
	time.Sleep(2 * time.Second)
	author := newWarningsClient(t)
	got, err := author.CoreV1().Pods(gameNS).Patch(ctx, "gs-0", types.MergePatchType, []byte(`{"metadata":{"labels":{"game.kruise.io/opsState":"Maintaining"}}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if networkState(got) != networkstatus.NetworkReady || author.saw("already served") {
		t.Errorf("game server after a later claim of its host: state %s, warnings %q; want Ready and no host warning", networkState(got), author.warnings)
	}
	// The tenant's game server asking for the host is refused, naming the first namespace.
	p := probePod(tenantNS, "Kubernetes-Ingress")
	p.GenerateName, p.Name = "", "gs-0"
	p.Annotations[networkstatus.AnnotationNetworkConf] = conf
	if _, err := cs.CoreV1().Pods(tenantNS).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	named := fmt.Sprintf(`host %q is already served by an Ingress of namespace %q`, host, gameNS)
	eventually(t, time.Minute, "the tenant's pod NotReady with the error naming the game servers' namespace", func(ctx context.Context) (bool, error) {
		got, err := cs.CoreV1().Pods(tenantNS).Get(ctx, "gs-0", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		rs := retryState(t, got)
		return got.Spec.NodeName != "" && networkState(got) == networkstatus.NetworkNotReady && rs != nil && rs.LastError != nil &&
			strings.Contains(rs.LastError.Message, named), nil
	})
}
