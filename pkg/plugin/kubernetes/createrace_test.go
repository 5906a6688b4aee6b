package kubernetes

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// createRaces reads plugin.MetricCreateRaces for kind.
func createRaces(t *testing.T, kind string) float64 {
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
				if l.GetName() == "kind" && l.GetValue() == kind {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// TestCreateRaceAdoptsThePodsService: two admissions of one pod at the same moment both find
// its Service missing and both create it; the one the API server refuses (AlreadyExists)
// reads the Service the other created and goes on with it, in the same run: no error, a Ready
// network-status, the race counted. A Service of the same name that is not the pod's is
// still refused as not managed, race or not, and not counted.
func TestCreateRaceAdoptsThePodsService(t *testing.T) {
	ctx := context.Background()
	pod := newPod("gs-0", NodePortName, param("PortProtocols", "80")).uid("u0").node("n1").ip("10.0.0.9")
	// The Service the other admission made: the plugin's own, from a run of its own.
	c0 := newClient(newNode("n1", extIP("1.2.3.4")))
	if _, err := NewNodePort().OnPodUpdated(ctx, c0, pod.obj()); err != nil {
		t.Fatal(err)
	}
	// As the API server stored it: with its node port.
	own := getService(t, c0, "gs-0")
	own.Spec.Ports[0].NodePort = 30080
	theirs := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "gs-0"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Ports: []corev1.ServicePort{{Port: 443}}}}

	for name, tc := range map[string]struct {
		first   client.Object
		wantErr bool
	}{
		"the pod's own Service: adopted":   {first: own},
		"someone else's: refused, as ever": {first: theirs, wantErr: true},
	} {
		t.Run(name, func(t *testing.T) {
			first := tc.first.DeepCopyObject().(client.Object)
			first.SetResourceVersion("")
			first.SetNamespace(pod.obj().Namespace)
			c := fake.NewClientBuilder().WithObjects(newNode("n1", extIP("1.2.3.4"))).WithInterceptorFuncs(interceptor.Funcs{
				Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
					if _, ok := obj.(*corev1.Service); ok {
						// The other admission's create lands first.
						if err := c.Create(ctx, first.DeepCopyObject().(client.Object)); err != nil {
							t.Fatal(err)
						}
					}
					return c.Create(ctx, obj, opts...)
				},
			}).Build()
			before := createRaces(t, "Service")
			out, err := NewNodePort().OnPodUpdated(ctx, c, pod.obj())
			want := 1.0 // adopted
			if tc.wantErr {
				want = 0 // someone else's: no race of this pod's
			}
			if got := createRaces(t, "Service") - before; got != want {
				t.Errorf("%s grew by %v, want %v", plugin.MetricCreateRaces, got, want)
			}
			if tc.wantErr {
				wantError(t, err, plugin.ParameterError, "", false, "exists and is not managed by network-plugin-policy")
				return
			}
			if err != nil {
				t.Fatalf("OnPodUpdated: %v, want the raced Service adopted", err)
			}
			if st := status(t, out); st == nil || st.CurrentNetworkState != networkstatus.NetworkReady {
				t.Errorf("status = %+v, want Ready in the same run", st)
			}
		})
	}
}
