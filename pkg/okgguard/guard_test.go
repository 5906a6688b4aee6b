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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

const hostPort = "Kubernetes-HostPort"

func kube(s Status) map[string]Status { return map[string]Status{"kubernetes": s} }

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
			got := g.Evaluate(context.Background())["kubernetes"]
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
	if back, _ := g.StepBack(hostPort); back || g.Current("kubernetes").State != StateUnknown {
		t.Fatalf("before the first look: StepBack %v, state %s; want false, unknown", back, g.Current("kubernetes").State)
	}
	if err := g.Check(nil); err == nil {
		t.Error("ready before the first look")
	}
	changed := g.Changed()
	g.set(ctx, kube(Status{State: StateConflict, Reason: "OKG's provider is on"}))
	select {
	case <-changed:
	default:
		t.Error("Changed not closed when a conflict started")
	}
	if back, why := g.StepBack(hostPort); !back || why != "OKG's provider is on" {
		t.Errorf("StepBack = %v, %q during a conflict", back, why)
	}
	if err := g.Check(nil); err == nil || !strings.Contains(err.Error(), "OKG's provider is on") {
		t.Errorf("Check = %v, want the reason", err)
	}
	if v := testutil.ToFloat64(m.WithLabelValues("kubernetes", string(StateConflict))); v != 1 {
		t.Errorf("npp_okg_coexistence{state=conflict} = %v, want 1", v)
	}
	same := g.Changed()
	g.set(ctx, kube(Status{State: StateConflict, Reason: "OKG's provider is on"}))
	select {
	case <-same:
		t.Error("Changed closed without a change of state")
	default:
	}
	// One failed read during a conflict does not end it.
	g.set(ctx, kube(Status{State: StateUnknown, Reason: "cannot read: 429"}))
	if back, why := g.StepBack(hostPort); !back || !strings.Contains(why, "OKG's provider is on") || !strings.Contains(why, "429") {
		t.Errorf("StepBack = %v, %q after an unknown look during a conflict, want still back with both reasons", back, why)
	}
	g.set(ctx, kube(Status{State: StateUnknown, Reason: "cannot read: timeout"}))
	if _, why := g.StepBack(hostPort); strings.Count(why, "still stepping back") != 1 {
		t.Errorf("reason %q grows with every unknown look", why)
	}
	g.set(ctx, kube(Status{State: StateDisabled}))
	select {
	case <-same:
	default:
		t.Error("Changed not closed when the conflict ended")
	}
	if back, _ := g.StepBack(hostPort); back || g.Check(nil) != nil {
		t.Error("still steps back after the conflict ended")
	}
	if v := testutil.ToFloat64(m.WithLabelValues("kubernetes", string(StateConflict))); v != 0 {
		t.Errorf("npp_okg_coexistence{state=conflict} = %v after the conflict, want 0", v)
	}
}

// TestProvidersDecidedOneByOne: OKG's [alibabacloud] enable steps this manager back from the
// Alibaba Cloud types only; a cloud provider is not taken over while pods or GameServerSets
// of its types that this manager does not serve exist, and they are named; /readyz fails only
// when every served provider steps back.
func TestProvidersDecidedOneByOne(t *testing.T) {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	gssGVK := schema.GroupVersionKind{Group: "game.kruise.io", Version: "v1alpha1", Kind: "GameServerSet"}
	scheme.AddKnownTypeWithName(gssGVK, &unstructured.Unstructured{})
	scheme.AddKnownTypeWithName(gssGVK.GroupVersion().WithKind("GameServerSetList"), &unstructured.UnstructuredList{})
	gss := &unstructured.Unstructured{}
	gss.SetGroupVersionKind(gssGVK)
	gss.SetNamespace("games")
	gss.SetName("eips")
	if err := unstructured.SetNestedField(gss.Object, "Volcengine-EIP", "spec", "network", "networkType"); err != nil {
		t.Fatal(err)
	}
	served := map[string]bool{hostPort: true, "AlibabaCloud-SLB": true, "HwCloud-ELB": true, "Volcengine-CLB": true}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(okgWebhook(), gss,
		okgConfig("[kubernetes]\nenable = false\n[alibabacloud]\nenable = true\n[hwcloud]\nenable = false\n")).Build()
	g := &Guard{Reader: c, APIReader: c, WebhookConfiguration: DefaultWebhookConfiguration, ConfigMap: cmKey,
		Providers: []string{"kubernetes", "alibabacloud", "hwcloud", "volcengine"}, Served: func(t string) bool { return served[t] }}
	inf := &fakeInformer{}
	if _, err := g.UsePodInformer(inf); err != nil {
		t.Fatal(err)
	}
	eip := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "games", Name: "eip-0", Annotations: map[string]string{networkTypeAnnotation: "HwCloud-CCE-EIP"}}}
	inf.handler.OnAdd(eip, true)
	inf.handler.OnAdd(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "games", Name: "elb-0", Annotations: map[string]string{networkTypeAnnotation: "HwCloud-ELB"}}}, true)

	got := g.Evaluate(ctx)
	want := map[string]State{"kubernetes": StateDisabled, "alibabacloud": StateConflict, "hwcloud": StateConflict, "volcengine": StateConflict}
	for p, st := range want {
		if got[p].State != st {
			t.Errorf("%s: %+v, want %s", p, got[p], st)
		}
	}
	if r := got["hwcloud"].Reason; !strings.Contains(r, "pod games/eip-0 (HwCloud-CCE-EIP)") || strings.Contains(r, "elb-0") {
		t.Errorf("hwcloud's reason %q should name the unserved pod only", r)
	}
	if r := got["volcengine"].Reason; !strings.Contains(r, "GameServerSet games/eips (Volcengine-EIP)") {
		t.Errorf("volcengine's reason %q should name the GameServerSet", r)
	}
	if r := got["alibabacloud"].Reason; !strings.Contains(r, "[alibabacloud] enable = true") {
		t.Errorf("alibabacloud's reason %q should name OKG's table", r)
	}
	g.set(ctx, got)
	if back, _ := g.StepBack("AlibabaCloud-SLB"); !back {
		t.Error("AlibabaCloud-SLB not left to OKG while OKG serves [alibabacloud]")
	}
	if back, _ := g.StepBack(hostPort); back {
		t.Error("Kubernetes-HostPort left to OKG with OKG's [kubernetes] off")
	}
	if back, _ := g.StepBack("AmazonWebServices-NLB"); back {
		t.Error("a type of no provider served here steps back")
	}
	if err := g.Check(nil); err != nil {
		t.Errorf("not ready while the kubernetes provider is served: %v", err)
	}

	// The pod goes: hwcloud is taken over; the conflict with OKG's alibabacloud stays.
	inf.handler.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "games/eip-0", Obj: eip})
	got = g.Evaluate(ctx)
	if got["hwcloud"].State != StateDisabled {
		t.Errorf("hwcloud after the pod went: %+v, want disabled", got["hwcloud"])
	}
	// Handed over, a new pod of an unserved type is reported, not stepped back from: OKG's
	// provider is off, so stepping back would leave every HwCloud pod without a plugin.
	g.set(ctx, got)
	inf.handler.OnAdd(eip, false)
	if got = g.Evaluate(ctx); got["hwcloud"].State != StateDisabled || !got["hwcloud"].Unserved || !strings.Contains(got["hwcloud"].Reason, "eip-0") {
		t.Errorf("hwcloud served, then an unserved pod: %+v, want still disabled, Unserved, naming the pod", got["hwcloud"])
	}
}

// TestNewerTypeHoldsTheHandover: a pod of a type that OKG's release this manager follows does
// not have (AlibabaCloud-AutoNLBs-V3, a newer OKG's) counts, by its provider's prefix, as one
// this manager does not serve: with OKG's [alibabacloud] off, the provider is not taken over
// while the pod exists, and the reason names it.
func TestNewerTypeHoldsTheHandover(t *testing.T) {
	ctx := context.Background()
	served := map[string]bool{"AlibabaCloud-SLB": true}
	c := fake.NewClientBuilder().WithObjects(okgWebhook(), okgConfig("[alibabacloud]\nenable = false\n")).Build()
	g := &Guard{Reader: c, APIReader: c, WebhookConfiguration: DefaultWebhookConfiguration, ConfigMap: cmKey,
		Providers: []string{"alibabacloud"}, Served: func(t string) bool { return served[t] }}
	inf := &fakeInformer{}
	if _, err := g.UsePodInformer(inf); err != nil {
		t.Fatal(err)
	}
	inf.handler.OnAdd(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "games", Name: "v3-0", Annotations: map[string]string{networkTypeAnnotation: "AlibabaCloud-AutoNLBs-V3"}}}, true)
	got := g.Evaluate(ctx)
	if got["alibabacloud"].State != StateConflict || !strings.Contains(got["alibabacloud"].Reason, "pod games/v3-0 (AlibabaCloud-AutoNLBs-V3)") {
		t.Errorf("alibabacloud with a pod of a newer OKG's type: %+v, want not taken over, naming the pod", got["alibabacloud"])
	}
}

// TestOKGsTablesMatchedWithoutCase: OKG's decoder matches table and key names without case, so
// [AlibabaCloud] Enable = true enables its provider; the guard reads it the same way.
func TestOKGsTablesMatchedWithoutCase(t *testing.T) {
	for toml, provider := range map[string]string{
		"[AlibabaCloud]\nEnable = true\n": "alibabacloud", "[Kubernetes]\nenable = true\n": "kubernetes",
		"[kubernetes]\nenable = false\n[KUBERNETES]\nENABLE = true\n": "kubernetes",
	} {
		if got := decide("x", cmKey, toml, provider); got.State != StateConflict {
			t.Errorf("%q for %s: %+v, want a conflict", toml, provider, got)
		}
	}
	if got := decide("x", cmKey, "[AlibabaCloud]\nEnable = false\n", "alibabacloud"); got.State != StateDisabled {
		t.Errorf("disabled in another case: %+v", got)
	}
}

// fakeInformer keeps the one handler the guard registers.
type fakeInformer struct {
	cache.Informer
	handler toolscache.ResourceEventHandler
}

func (f *fakeInformer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	f.handler = h
	return nil, nil
}

// TestLookedOnlyOnceDecided: a first look that leaves a provider Unknown (a read that timed
// out) decides nothing: Looked stays false and the replica not ready, so that no controller
// acts beside an OKG that may serve the provider; a conclusive look decides at once, and
// after inconclusiveLooks Unknown looks in a row the guard counts as decided all the same
// (Unknown is not a conflict), with Changed closed at the decision.
func TestLookedOnlyOnceDecided(t *testing.T) {
	ctx := context.Background()
	unknown := kube(Status{State: StateUnknown, Reason: "cannot read ConfigMap: timeout"})

	g := &Guard{ConfigMap: cmKey}
	g.set(ctx, unknown)
	if g.Looked() || g.Check(nil) == nil {
		t.Errorf("after an Unknown first look: Looked %v, Check %v; want not decided, not ready", g.Looked(), g.Check(nil))
	}
	changed := g.Changed()
	g.set(ctx, kube(Status{State: StateConflict, Reason: "OKG's provider is on"}))
	if !g.Looked() {
		t.Error("a conclusive look did not decide")
	}
	select {
	case <-changed:
	default:
		t.Error("Changed not closed at the decision")
	}

	g = &Guard{ConfigMap: cmKey}
	for i := range inconclusiveLooks {
		if g.Looked() {
			t.Fatalf("decided after %d Unknown looks, want %d", i, inconclusiveLooks)
		}
		changed := g.Changed()
		g.set(ctx, unknown)
		if i == inconclusiveLooks-1 {
			select {
			case <-changed:
			default:
				t.Error("Changed not closed when Unknown looks decided")
			}
		}
	}
	if !g.Looked() || g.Check(nil) != nil {
		t.Errorf("after %d Unknown looks: Looked %v, Check %v; want decided and ready (Unknown is not a conflict)", inconclusiveLooks, g.Looked(), g.Check(nil))
	}
}
