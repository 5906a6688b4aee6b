package pod

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/okg-extensions/network-plugin-policy/pkg/networkretry"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/jdcloud"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/kubernetes"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/lb"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// TestPrecheck: run against the caches with writes refused, the NodePort plugin tells a
// Service create that the namespace's quota refuses, with the message the webhook records
// for a real run, once a real run had the API server refuse it (before that, the cache
// alone cannot tell); a run that would create the Service, or a type that is not
// registered, cannot be told, and nothing is written either way.
func TestPrecheck(t *testing.T) {
	np := kubernetes.NewNodePort()
	reg, err := plugin.NewRegistry(np)
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "gs-0", Namespace: testNS, UID: "u0", Annotations: map[string]string{
			networkstatus.AnnotationNetworkType: kubernetes.NodePortName,
			networkstatus.AnnotationNetworkConf: `[{"name":"PortProtocols","value":"7777/UDP"}]`,
		}},
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "game"}}},
	}
	zero := resource.MustParse("0")
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "no-node-ports", Namespace: testNS},
		Spec:   corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceServicesNodePorts: zero}},
		Status: corev1.ResourceQuotaStatus{Hard: corev1.ResourceList{corev1.ResourceServicesNodePorts: zero}, Used: corev1.ResourceList{corev1.ResourceServicesNodePorts: zero}}}
	ctx := context.Background()

	// The API server's quota admission, as the fake client does not have one.
	full := fake.NewClientBuilder().WithObjects(quota.DeepCopy()).WithStatusSubresource(&corev1.ResourceQuota{}).
		WithInterceptorFuncs(interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			return apierrors.NewForbidden(corev1.Resource("services"), obj.GetName(), errors.New(
				"exceeded quota: no-node-ports, requested: services.nodeports=1, used: services.nodeports=0, limited: services.nodeports=0"))
		}}).Build()
	if got, ok := Precheck(ctx, reg, full, pod); ok {
		t.Fatalf("Precheck before the API server refused a create = %+v, true; want false (the cache alone cannot tell)", got)
	}
	// The webhook's real run: the API server refuses.
	_, runErr := plugin.Run(ctx, PrecheckTimeout, np, plugin.OperationUpdate, full, pod)
	failure, _ := plugin.Split(runErr)
	got, ok := Precheck(ctx, reg, full, pod)
	if !ok || got.Type != string(plugin.APICallError) || !strings.Contains(got.Message, "exceeded quota: no-node-ports") || got.Unknown || !got.FromCache {
		t.Fatalf("Precheck with the quota full = %+v, %v; want the quota refusal, from the cache", got, ok)
	}
	// It records the same message as the real run.
	if failure == nil || errorText(failure) != got.Message || string(failure.Type) != got.Type {
		t.Errorf("real run: %v; want %s: %s", failure, got.Type, got.Message)
	}

	empty := fake.NewClientBuilder().Build()
	if got, ok := Precheck(ctx, reg, empty, pod); ok {
		t.Errorf("Precheck when the Service would be created = %+v, true; want false", got)
	}
	var svcs corev1.ServiceList
	if err := empty.List(ctx, &svcs, client.InNamespace(testNS)); err != nil || len(svcs.Items) != 0 {
		t.Errorf("Precheck wrote: %v (%v)", svcs.Items, err)
	}
	other := pod.DeepCopy()
	other.Annotations[networkstatus.AnnotationNetworkType] = "Alibaba-Cloud-SLB"
	if got, ok := Precheck(ctx, reg, full, other); ok {
		t.Errorf("Precheck of a type that is not registered = %+v, true; want false", got)
	}
}

// TestPredictionForTheClosingRun: the webhook marks a plugin run WithoutPrediction when the
// pod's last failure was predicted from the caches and its window's end has come, and only
// then.
func TestPredictionForTheClosingRun(t *testing.T) {
	state := func(fromCache bool, since time.Time) *corev1.Pod {
		p := gamePod(asyncNm)
		p.Spec.NodeName = "n1"
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(since)}}
		st := networkretry.State{Plugin: asyncNm, Policy: "built-in default", Since: metav1.NewTime(since), LastAttempt: metav1.NewTime(since), Attempts: 3,
			Window: metav1.Duration{Duration: time.Minute}, Interval: metav1.Duration{Duration: time.Second}, MaxInterval: metav1.Duration{Duration: time.Second}, ExhaustedAction: "Event",
			LastError: &networkretry.Error{Type: "apiCallError", Message: "exceeded quota", FromCache: fromCache}}
		v, err := st.Encode()
		if err != nil {
			t.Fatal(err)
		}
		p.Annotations[networkretry.Annotation] = v
		return p
	}
	now := testNow
	for name, tc := range map[string]struct {
		pod  *corev1.Pod
		want bool // prediction allowed
	}{
		"predicted, window over":    {pod: state(true, now.Add(-2*time.Minute)), want: false},
		"predicted, window open":    {pod: state(true, now.Add(-10*time.Second)), want: true},
		"API server's, window over": {pod: state(false, now.Add(-2*time.Minute)), want: true},
		"no retry state":            {pod: gamePod(asyncNm), want: true},
	} {
		t.Run(name, func(t *testing.T) {
			st, err := networkretry.FromPodAt(tc.pod, now)
			if err != nil {
				t.Fatal(err)
			}
			if got := plugin.PredictionAllowed(predictionFor(context.Background(), st, tc.pod, now)); got != tc.want {
				t.Errorf("prediction allowed = %t, want %t", got, tc.want)
			}
		})
	}
}

// TestPrecheckClaimsNoLoadBalancerPort: a load-balancer plugin records the ports it hands out
// in its ledger, written through a client of its own, not the precheck's: run ReadOnly, the
// precheck of a pod whose Service is not made yet claims nothing in the ledger and holds
// nothing in the allocator (another pod still gets every port), and a load balancer this
// replica sees full is told from the caches as the real run's exhaustion error.
func TestPrecheckClaimsNoLoadBalancerPort(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().Build()
	newPlugin := func() *lb.Plugin {
		p := jdcloud.NewNLB(lb.Range{Min: 700, Max: 702}) // 700, 701
		p.UseLedger(&lb.ConfigMapLedger{Client: c, Namespace: "npp", Plugin: p.LedgerKey()})
		if err := p.Init(ctx, c, plugin.Config{}); err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := newPlugin()
	reg, err := plugin.NewRegistry(p)
	if err != nil {
		t.Fatal(err)
	}
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS, UID: "u-" + types.UID(name), Annotations: map[string]string{
				networkstatus.AnnotationNetworkType:   jdcloud.NLBName,
				networkstatus.AnnotationNetworkConf:   `[{"name":"NlbIds","value":"lb-a"},{"name":"PortProtocols","value":"7777/UDP"}]`,
				networkstatus.AnnotationNetworkStatus: `{"currentNetworkState":"NotReady","createTime":null,"lastTransitionTime":null}`,
			}},
			Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "game"}}},
		}
	}
	for _, name := range []string{"gs-0", "gs-1"} {
		if got, ok := Precheck(ctx, reg, c, pod(name)); ok {
			t.Errorf("Precheck of %s = %+v, true; want false (only a real run can tell)", name, got)
		}
	}
	var cms corev1.ConfigMapList
	if err := c.List(ctx, &cms); err != nil || len(cms.Items) != 0 {
		t.Fatalf("the precheck wrote the ledger: %d ConfigMaps (%v)", len(cms.Items), err)
	}
	// Both ports are still free: two real runs get them, and then the load balancer is full.
	for _, name := range []string{"gs-2", "gs-3"} {
		if _, err := plugin.Run(ctx, PrecheckTimeout, p, plugin.OperationUpdate, c, pod(name)); err != nil && !plugin.IsWarning(err) {
			t.Fatalf("real run of %s: %v", name, err)
		}
	}
	got, ok := Precheck(ctx, reg, c, pod("gs-4"))
	if !ok || !strings.Contains(got.Message, "lb-a") {
		t.Errorf("Precheck with lb-a full = %+v, %v; want its exhaustion error from the caches", got, ok)
	}
}
