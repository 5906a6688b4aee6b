package okgguard

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

var cmKey = types.NamespacedName{Namespace: DefaultConfigMapNamespace, Name: DefaultConfigMapName}

func okgWebhook() *admissionregistrationv1.MutatingWebhookConfiguration {
	return &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: DefaultWebhookConfiguration}}
}

func okgValidating() *admissionregistrationv1.ValidatingWebhookConfiguration {
	return &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "kruise-game-validating-webhook"}}
}

func okgConfig(toml string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: cmKey.Namespace, Name: cmKey.Name}, Data: map[string]string{ConfigKey: toml}}
}

func TestEvaluate(t *testing.T) {
	for name, tc := range map[string]struct {
		objs       []client.Object
		forbidden  bool // the ConfigMap read is refused (RBAC names another ConfigMap)
		want       State
		wantReason string
	}{
		"OKG not installed":                                 {want: StateAbsent},
		"OKG not installed, config left":                    {objs: []client.Object{okgConfig("[kubernetes]\nenable = true\n")}, want: StateAbsent},
		"OKG with its Kubernetes provider":                  {objs: []client.Object{okgWebhook(), okgConfig("[kubernetes]\nenable = true\n[kubernetes.hostPort]\nmax_port = 9000\nmin_port = 8000\n")}, want: StateConflict, wantReason: "enable = true"},
		"OKG with it off":                                   {objs: []client.Object{okgWebhook(), okgConfig("[kubernetes]\nenable = false\n[alibabacloud]\nenable = true\n")}, want: StateDisabled},
		"OKG without a [kubernetes] table":                  {objs: []client.Object{okgWebhook(), okgConfig("[alibabacloud]\nenable = true\n")}, want: StateDisabled},
		"OKG's config is not TOML":                          {objs: []client.Object{okgWebhook(), okgConfig("[kubernetes\nenable = true")}, want: StateUnknown, wantReason: "is not TOML"},
		"OKG's config cannot be read":                       {objs: []client.Object{okgWebhook()}, want: StateUnknown, wantReason: "cannot be read"},
		"OKG's config may not be read (RBAC names another)": {objs: []client.Object{okgWebhook(), okgConfig("[kubernetes]\nenable = false\n")}, forbidden: true, want: StateConflict, wantReason: "--okg-config-map and the resourceNames"},
		"only OKG's validating configuration, provider on":  {objs: []client.Object{okgValidating(), okgConfig("[kubernetes]\nenable = true\n")}, want: StateConflict},
		"only OKG's validating configuration, provider off": {objs: []client.Object{okgValidating(), okgConfig("[kubernetes]\nenable = false\n")}, want: StateDisabled},
	} {
		t.Run(name, func(t *testing.T) {
			scheme := runtime.NewScheme()
			if err := clientgoscheme.AddToScheme(scheme); err != nil {
				t.Fatal(err)
			}
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(tc.objs...).Build()
			var api client.Reader = c
			if tc.forbidden {
				api = interceptor.NewClient(c, interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					if _, ok := obj.(*corev1.ConfigMap); ok {
						return apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, key.Name, errors.New("RBAC"))
					}
					return c.Get(ctx, key, obj, opts...)
				}})
			}
			g := &Guard{Reader: c, APIReader: api, WebhookConfiguration: DefaultWebhookConfiguration, ValidatingWebhookConfiguration: "kruise-game-validating-webhook", ConfigMap: cmKey}
			got := g.Evaluate(context.Background())
			if got.State != tc.want || !strings.Contains(got.Reason, tc.wantReason) {
				t.Errorf("Evaluate = %+v, want state %s with a reason containing %q", got, tc.want, tc.wantReason)
			}
		})
	}
}

// TestStepBackFollowsTheState walks conflict and back: StepBack, Check, the Changed channel
// and the gauge follow each change of state.
func TestStepBackFollowsTheState(t *testing.T) {
	ctx := context.Background()
	m, err := NewMetric(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	g := &Guard{Metric: m, ConfigMap: cmKey}
	if back, _ := g.StepBack(); back || g.Current().State != StateUnknown {
		t.Fatalf("before the first look: StepBack %v, state %s; want false, unknown", back, g.Current().State)
	}
	if err := g.Check(nil); err == nil {
		t.Error("ready before the first look")
	}
	changed := g.Changed()
	g.set(ctx, Status{State: StateConflict, Reason: "OKG's provider is on"})
	select {
	case <-changed:
	default:
		t.Error("Changed not closed when a conflict started")
	}
	if back, why := g.StepBack(); !back || why != "OKG's provider is on" {
		t.Errorf("StepBack = %v, %q during a conflict", back, why)
	}
	if err := g.Check(nil); err == nil || !strings.Contains(err.Error(), "OKG's provider is on") {
		t.Errorf("Check = %v, want the reason", err)
	}
	if v := testutil.ToFloat64(m.WithLabelValues(string(StateConflict))); v != 1 {
		t.Errorf("npp_okg_coexistence{state=conflict} = %v, want 1", v)
	}
	same := g.Changed()
	g.set(ctx, Status{State: StateConflict, Reason: "OKG's provider is on"})
	select {
	case <-same:
		t.Error("Changed closed without a change of state")
	default:
	}
	// One failed read during a conflict does not end it.
	g.set(ctx, Status{State: StateUnknown, Reason: "cannot read: 429"})
	if back, why := g.StepBack(); !back || !strings.Contains(why, "OKG's provider is on") || !strings.Contains(why, "429") {
		t.Errorf("StepBack = %v, %q after an unknown look during a conflict, want still back with both reasons", back, why)
	}
	g.set(ctx, Status{State: StateUnknown, Reason: "cannot read: timeout"})
	if _, why := g.StepBack(); strings.Count(why, "still stepping back") != 1 {
		t.Errorf("reason %q grows with every unknown look", why)
	}
	g.set(ctx, Status{State: StateDisabled})
	select {
	case <-same:
	default:
		t.Error("Changed not closed when the conflict ended")
	}
	if back, _ := g.StepBack(); back || g.Check(nil) != nil {
		t.Error("still steps back after the conflict ended")
	}
	if v := testutil.ToFloat64(m.WithLabelValues(string(StateConflict))); v != 0 {
		t.Errorf("npp_okg_coexistence{state=conflict} = %v after the conflict, want 0", v)
	}
}
