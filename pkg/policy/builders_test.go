package policy

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
)

const testRoot = "npp-system"

var (
	nodePort = Plugin{Name: "Kubernetes-NodePort", Alias: "NodePort-Network"}
	hostPort = Plugin{Name: "Kubernetes-HostPort", Synchronous: true}
)

type policyOption func(*v1alpha1.NetworkPluginPolicy)

func newPolicy(namespace, name string, opts ...policyOption) *v1alpha1.NetworkPluginPolicy {
	p := &v1alpha1.NetworkPluginPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID(namespace + "/" + name), Generation: 1},
		Spec:       v1alpha1.NetworkPluginPolicySpec{Plugins: []string{"*"}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func plugins(entries ...string) policyOption {
	return func(p *v1alpha1.NetworkPluginPolicy) { p.Spec.Plugins = entries }
}

func mode(m v1alpha1.FailureMode) policyOption {
	return func(p *v1alpha1.NetworkPluginPolicy) { p.Spec.FailureMode = &m }
}

func modeExpr(expr string) policyOption {
	return func(p *v1alpha1.NetworkPluginPolicy) { p.Spec.FailureModeExpression = &expr }
}

func timeout(d time.Duration) policyOption {
	return func(p *v1alpha1.NetworkPluginPolicy) { p.Spec.Timeout = &metav1.Duration{Duration: d} }
}

func readinessGate(v bool) policyOption {
	return func(p *v1alpha1.NetworkPluginPolicy) { p.Spec.ReadinessGate = &v }
}

func retry(r v1alpha1.RetryPolicy) policyOption {
	return func(p *v1alpha1.NetworkPluginPolicy) { p.Spec.Retry = &r }
}

func priority(v int32) policyOption {
	return func(p *v1alpha1.NetworkPluginPolicy) { p.Spec.Priority = ptr.To(v) }
}

func podSelector(kv ...string) policyOption {
	return func(p *v1alpha1.NetworkPluginPolicy) {
		p.Spec.PodSelector = &metav1.LabelSelector{MatchLabels: pairs(kv)}
	}
}

func namespaceSelector(kv ...string) policyOption {
	return func(p *v1alpha1.NetworkPluginPolicy) {
		p.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: pairs(kv)}
	}
}

func matchCondition(name, expr string) policyOption {
	return func(p *v1alpha1.NetworkPluginPolicy) {
		p.Spec.MatchConditions = append(p.Spec.MatchConditions, v1alpha1.MatchCondition{Name: name, Expression: expr})
	}
}

func generation(g int64) policyOption {
	return func(p *v1alpha1.NetworkPluginPolicy) { p.Generation = g }
}

func pairs(kv []string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

func newPod(namespace, name string, kv ...string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: pairs(kv)}}
}

func newNamespace(name string, kv ...string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: pairs(kv)}}
}

func testMetrics(t testing.TB) *Metrics {
	t.Helper()
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatalf("NewMetrics(): %v", err)
	}
	return m
}

// newTestStore returns a store fed with policies through its event handler.
func newTestStore(t testing.TB, policies ...*v1alpha1.NetworkPluginPolicy) *Store {
	t.Helper()
	s, err := NewStore(StoreOptions{RootNamespace: testRoot, Metrics: testMetrics(t)})
	if err != nil {
		t.Fatalf("NewStore(): %v", err)
	}
	h := s.Handler(context.Background())
	for _, p := range policies {
		h.OnAdd(p, true)
	}
	return s
}

func ref(namespace, name string, gen int64) *PolicyRef {
	return &PolicyRef{Namespace: namespace, Name: name, Generation: gen}
}

var (
	metavDuration5m  = metav1.Duration{Duration: 5 * time.Minute}
	metavDuration10s = metav1.Duration{Duration: 10 * time.Second}
)
