package lb_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/jdcloud"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/lb"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// serviceRaces reads plugin.MetricCreateRaces{kind="Service"}.
func serviceRaces(t *testing.T) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	if err := reg.Register(plugin.CreateRacesCollector()); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "kind" && l.GetValue() == "Service" {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// TestCreateRaceAdoptsThePodsService: two admissions of one pod at the same moment both find
// its Service missing; the one whose create the API server refuses (AlreadyExists) reads the
// Service the other created and goes on with it in the same run: no error, the Service as the
// other run made it, a Ready network-status once it has its address, the race counted.
func TestCreateRaceAdoptsThePodsService(t *testing.T) {
	ctx := context.Background()
	conf := `[{"name":"NlbIds","value":"lb-a"},{"name":"PortProtocols","value":"7777/UDP"}]`
	pod := runningPod(jdcloud.NLBName, conf)
	key := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	// The other admission's Service, made by the plugin itself, with the cloud's address.
	c0 := fakeClient(t)
	if _, err := jdcloud.NewNLB(lb.Range{Min: 500, Max: 700}).OnPodUpdated(ctx, c0, pod.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	first := &corev1.Service{}
	if err := c0.Get(ctx, key, first); err != nil {
		t.Fatal(err)
	}
	first.ResourceVersion = ""
	first.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "203.0.113.7"}}

	c := fake.NewClientBuilder().WithScheme(testScheme).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if _, ok := obj.(*corev1.Service); ok {
				if err := c.Create(ctx, first.DeepCopy()); err != nil { // the other run's lands first
					t.Fatal(err)
				}
			}
			return c.Create(ctx, obj, opts...)
		},
	}).Build()
	before := serviceRaces(t)
	out, err := jdcloud.NewNLB(lb.Range{Min: 500, Max: 700}).OnPodUpdated(ctx, c, pod.DeepCopy())
	if err != nil {
		t.Fatalf("OnPodUpdated: %v, want the raced Service adopted", err)
	}
	if got := serviceRaces(t) - before; got != 1 {
		t.Errorf("%s grew by %v, want 1", plugin.MetricCreateRaces, got)
	}
	st, err := networkstatus.StatusFromPod(out)
	if err != nil || st == nil || st.CurrentNetworkState != networkstatus.NetworkReady {
		t.Errorf("status = %+v (%v), want Ready in the same run", st, err)
	}
	got := &corev1.Service{}
	if err := c.Get(ctx, key, got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.Ports[0].Port != first.Spec.Ports[0].Port || got.Annotations[jdcloud.AnnotationNLBID] != "lb-a" {
		t.Errorf("Service %+v, want the other run's (port %d)", got.Spec.Ports, first.Spec.Ports[0].Port)
	}
}
