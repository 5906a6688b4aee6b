package gameserverset

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apiserver/pkg/cel/environment"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	policyv1alpha1 "github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/alibabacloud"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/kubernetes"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/volcengine"
	"github.com/okg-extensions/network-plugin-policy/pkg/policy"
)

var served = []string{kubernetes.HostPortName, kubernetes.NodePortName, kubernetes.IngressName}

func registry(t *testing.T) *plugin.Registry {
	t.Helper()
	r, err := plugin.NewRegistry(kubernetes.Plugins(plugin.DefaultConfig())...)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.InitAll(context.Background(), nil, plugin.DefaultConfig()); err != nil {
		t.Fatal(err)
	}
	return r
}

// request is an admission request for the GameServerSet spec (JSON), old spec "" on CREATE.
func request(t *testing.T, spec, oldSpec string) admission.Request {
	t.Helper()
	obj := func(spec string) runtime.RawExtension {
		return runtime.RawExtension{Raw: []byte(`{"apiVersion":"game.kruise.io/v1alpha1","kind":"GameServerSet","metadata":{"name":"lobby","namespace":"games"},"spec":` + spec + `}`)}
	}
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Create, Object: obj(spec)}}
	if oldSpec != "" {
		req.Operation, req.OldObject = admissionv1.Update, obj(oldSpec)
	}
	return req
}

const containers = `"gameServerTemplate":{"spec":{"containers":[{"name":"game","image":"game:1"}]}}`

func TestValidator(t *testing.T) {
	cases := map[string]struct {
		spec, oldSpec string
		allowed       bool
		message       string // in the denial, or in a warning when allowed
	}{
		"NodePort with its parameters": {spec: `{"network":{"networkType":"Kubernetes-NodePort","networkConf":[{"name":"PortProtocols","value":"7777/UDP"}]},` + containers + `}`, allowed: true},
		"HostPort naming a container":  {spec: `{"network":{"networkType":"Kubernetes-HostPort","networkConf":[{"name":"ContainerPorts","value":"game:7777/UDP"}]},` + containers + `}`, allowed: true},
		"HostPort naming no container": {spec: `{"network":{"networkType":"Kubernetes-HostPort","networkConf":[{"name":"ContainerPorts","value":"sidecar:7777/UDP"}]},` + containers + `}`,
			message: `spec.network.networkConf[0].value: Invalid value: "sidecar:7777/UDP"`},
		"NodePort without PortProtocols": {spec: `{"network":{"networkType":"Kubernetes-NodePort","networkConf":[]},` + containers + `}`,
			message: "spec.network.networkConf: Required value: parameterError: parameter PortProtocols"},
		"an unknown parameter is a warning": {spec: `{"network":{"networkType":"Kubernetes-NodePort","networkConf":[{"name":"PortProtocols","value":"7777"},{"name":"Portprotocols","value":"1"}]},` + containers + `}`,
			allowed: true, message: "spec.network.networkConf: "},
		"networkType required (OKG's check)": {spec: `{"network":{"networkConf":[]}}`, message: "spec.network.networkType: Required value: network type is required"},
		"no network at all":                  {spec: `{"replicas":1}`, allowed: true},
		"networkType immutable, from this manager's to OKG's": {spec: `{"network":{"networkType":"AlibabaCloud-SLB"}}`, oldSpec: `{"network":{"networkType":"Kubernetes-NodePort"}}`,
			message: "change network type is not allowed"},
		"networkType immutable between two of this manager's": {spec: `{"network":{"networkType":"Kubernetes-HostPort","networkConf":[{"name":"ContainerPorts","value":"game:7777/UDP"}]},` + containers + `}`,
			oldSpec: `{"network":{"networkType":"Kubernetes-NodePort"}}`, message: "change network type is not allowed"},
		"networkType set on an UPDATE where there was none": {spec: `{"network":{"networkType":"Kubernetes-NodePort","networkConf":[{"name":"PortProtocols","value":"7777"}]}}`, oldSpec: `{"replicas":1}`, allowed: true},
		"another product's type is OKG's to validate":       {spec: `{"network":{"networkType":"AlibabaCloud-SLB","networkConf":[{"name":"Anything","value":"x"}]}}`, allowed: true},
	}
	v := &Validator{Plugins: registry(t)}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			resp := v.Handle(context.Background(), request(t, tc.spec, tc.oldSpec))
			if resp.Allowed != tc.allowed {
				t.Fatalf("allowed = %v, want %v: %v", resp.Allowed, tc.allowed, resp.Result)
			}
			got := strings.Join(resp.Warnings, "\n")
			if !tc.allowed {
				got = resp.Result.Message
			}
			if !strings.Contains(got, tc.message) {
				t.Errorf("message %q, want it to contain %q", got, tc.message)
			}
		})
	}
}

func TestStepBackAdmitsUnchecked(t *testing.T) {
	v := &Validator{Plugins: registry(t), StepBack: func(string) (bool, string) { return true, "OKG serves them" }}
	if resp := v.Handle(context.Background(), request(t, `{"network":{"networkConf":[]}}`, "")); !resp.Allowed {
		t.Errorf("denied while stepping back: %v", resp.Result)
	}
}

// TestMatchConditionsNeverError evaluates the entry's matchConditions in the API server's
// CEL environment on valid and invalid GameServerSets: they never error (the entry's
// failurePolicy is Fail), and together they call the webhook only for a served type on
// CREATE or on a change of spec.network.
func TestMatchConditionsNeverError(t *testing.T) {
	env, err := environment.MustBaseEnvSet(version.MajorMinor(1, 34)).Env(environment.StoredExpressions)
	if err != nil {
		t.Fatal(err)
	}
	env, err = env.Extend(cel.Variable("object", cel.DynType), cel.Variable("oldObject", cel.DynType), cel.Variable("request", cel.DynType))
	if err != nil {
		t.Fatal(err)
	}
	var prgs []cel.Program
	for _, c := range MatchConditions(served) {
		ast, iss := env.Compile(c.Expression)
		if iss.Err() != nil {
			t.Fatalf("%s: %v", c.Name, iss.Err())
		}
		prg, err := env.Program(ast)
		if err != nil {
			t.Fatal(err)
		}
		prgs = append(prgs, prg)
	}
	decode := func(spec string) any {
		if spec == "" {
			return nil
		}
		var o any
		if err := json.Unmarshal([]byte(`{"metadata":{"name":"a"},"spec":`+spec+`}`), &o); err != nil {
			t.Fatal(err)
		}
		return o
	}
	cases := map[string]struct {
		spec, oldSpec string
		called        bool
	}{
		"create of a served type":           {spec: `{"network":{"networkType":"Kubernetes-NodePort"}}`, called: true},
		"create of OKG's type":              {spec: `{"network":{"networkType":"AlibabaCloud-SLB"}}`},
		"scale of a served type":            {spec: `{"replicas":3,"network":{"networkType":"Kubernetes-NodePort"}}`, oldSpec: `{"replicas":2,"network":{"networkType":"Kubernetes-NodePort"}}`},
		"network-conf change":               {spec: `{"network":{"networkType":"Kubernetes-NodePort","networkConf":[{"name":"PortProtocols","value":"1"}]}}`, oldSpec: `{"network":{"networkType":"Kubernetes-NodePort"}}`, called: true},
		"type change from served to OKG's":  {spec: `{"network":{"networkType":"AlibabaCloud-SLB"}}`, oldSpec: `{"network":{"networkType":"Kubernetes-NodePort"}}`, called: true},
		"network removed from a served one": {spec: `{"replicas":1}`, oldSpec: `{"network":{"networkType":"Kubernetes-NodePort"}}`, called: true},
		"network of the wrong type":         {spec: `{"network":"Kubernetes-NodePort"}`, oldSpec: `{"network":null}`},
		"spec null":                         {spec: `null`, oldSpec: `[]`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			op := "CREATE"
			if tc.oldSpec != "" {
				op = "UPDATE"
			}
			called := true
			for i, prg := range prgs {
				out, _, err := prg.Eval(map[string]any{"object": decode(tc.spec), "oldObject": decode(tc.oldSpec), "request": map[string]any{"operation": op}})
				if err != nil {
					t.Fatalf("condition %d errors (failurePolicy Fail would refuse the write): %v", i, err)
				}
				called = called && out.Value() == true
			}
			if called != tc.called {
				t.Errorf("webhook called = %v, want %v", called, tc.called)
			}
		})
	}
}

// TestConfigHoldsTheMatchConditions: config/webhook's patch (and so the chart) installs the
// entry with MatchConditions of no type: until the manager's first look at OKG, OKG validates
// every GameServerSet, and a manager not ready yet refuses none.
func TestConfigHoldsTheMatchConditions(t *testing.T) {
	data, err := os.ReadFile("../../../config/webhook/validating_patch.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Webhooks []struct {
			Name            string `json:"name"`
			MatchConditions []struct {
				Name       string `json:"name"`
				Expression string `json:"expression"`
			} `json:"matchConditions"`
		} `json:"webhooks"`
	}
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	want := MatchConditions(nil)
	for _, w := range cfg.Webhooks {
		if w.Name != WebhookName {
			continue
		}
		if len(w.MatchConditions) != len(want) {
			t.Fatalf("%d matchConditions, want %d", len(w.MatchConditions), len(want))
		}
		for i, c := range w.MatchConditions {
			if c.Name != want[i].Name || c.Expression != want[i].Expression {
				t.Errorf("matchCondition %d = %s: %s\nwant %s: %s", i, c.Name, c.Expression, want[i].Name, want[i].Expression)
			}
		}
		return
	}
	t.Errorf("no entry %s in the patch", WebhookName)
}

// TestObjectChecksAreWarnings: what depends on other objects (an IngressClass that does not
// exist, a host another namespace's Ingress serves) is an admission warning at apply, never
// a denial: GitOps applies objects in any order.
func TestObjectChecksAreWarnings(t *testing.T) {
	other := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: "shop"},
		Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: "lobby0.example.com"}}}}
	c := fake.NewClientBuilder().WithObjects(other).WithIndex(&networkingv1.Ingress{}, kubernetes.IngressHostIndex, kubernetes.IngressHosts).Build()
	v := &Validator{Plugins: registry(t), Reader: c}
	spec := `{"network":{"networkType":"Kubernetes-Ingress","networkConf":[{"name":"Host","value":"lobby<id>.example.com"},{"name":"Path","value":"/"},` +
		`{"name":"PathType","value":"Prefix"},{"name":"Port","value":"8080"},{"name":"IngressClassName","value":"%s"}]},` + containers + `}`
	for class, want := range map[string]string{
		"missing": `class "missing" does not exist in the cluster`,
	} {
		resp := v.Handle(context.Background(), request(t, fmt.Sprintf(spec, class), ""))
		if !resp.Allowed || !strings.Contains(strings.Join(resp.Warnings, "\n"), want) {
			t.Errorf("class %s: allowed %v, warnings %q; want allowed with a warning containing %q", class, resp.Allowed, resp.Warnings, want)
		}
	}
	c = fake.NewClientBuilder().WithObjects(other, &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "nginx"}}).
		WithIndex(&networkingv1.Ingress{}, kubernetes.IngressHostIndex, kubernetes.IngressHosts).Build()
	v.Reader = c
	resp := v.Handle(context.Background(), request(t, fmt.Sprintf(spec, "nginx"), ""))
	if want := `host "lobby0.example.com" is already served by an Ingress of namespace "shop"`; !resp.Allowed || !strings.Contains(strings.Join(resp.Warnings, "\n"), want) {
		t.Errorf("allowed %v, warnings %q; want allowed with a warning containing %q", resp.Allowed, resp.Warnings, want)
	}
}

// TestCloudTypesValidatedAsPods: with a cloud provider served, a GameServerSet of its
// load-balancer or EIP types gets its network-conf checked at apply as the pods' admission
// would check it (an AlibabaCloud-SLB without SlbIds is refused, naming the parameter; an
// unknown parameter is a warning), and removing spec.network, which OKG allows, is allowed;
// changing a networkType while both objects have one is refused, as OKG refuses it.
func TestCloudTypesValidatedAsPods(t *testing.T) {
	cfg := plugin.Config{AlibabaCloud: plugin.AlibabaCloudConfig{Enable: true, SLB: &plugin.PortRangeConfig{MinPort: 500, MaxPort: 600}},
		Volcengine: plugin.VolcengineConfig{Enable: true}}
	r, err := plugin.NewRegistry(append(alibabacloud.Plugins(cfg), volcengine.Plugins(cfg)...)...)
	if err != nil {
		t.Fatal(err)
	}
	v := &Validator{Plugins: r}
	slb := func(conf string) string {
		return `{"network":{"networkType":"AlibabaCloud-SLB","networkConf":` + conf + `},` + containers + `}`
	}
	for name, tc := range map[string]struct {
		spec, oldSpec string
		allowed       bool
		message       string
	}{
		"SLB with its parameters":  {spec: slb(`[{"name":"SlbIds","value":"lb-a"},{"name":"PortProtocols","value":"7777/UDP"}]`), allowed: true},
		"SLB without SlbIds":       {spec: slb(`[{"name":"PortProtocols","value":"7777/UDP"}]`), message: "SlbIds"},
		"SLB, a bad PortProtocols": {spec: slb(`[{"name":"SlbIds","value":"lb-a"},{"name":"PortProtocols","value":"x/UDP"}]`), message: "spec.network.networkConf[1].value"},
		"SLB, an unknown parameter is a warning": {spec: slb(`[{"name":"SlbIds","value":"lb-a"},{"name":"PortProtocols","value":"7777"},{"name":"Slbids","value":"x"}]`),
			allowed: true, message: "Slbids"},
		"EIP with its parameters": {spec: `{"network":{"networkType":"Volcengine-EIP","networkConf":[]},` + containers + `}`, allowed: true},
		"an unchanged network-conf a rule would refuse is a warning": {spec: `{"network":{"networkType":"AlibabaCloud-SLB","networkConf":[{"name":"PortProtocols","value":"7777"}]},"replicas":3,` + containers + `}`,
			oldSpec: `{"network":{"networkType":"AlibabaCloud-SLB","networkConf":[{"name":"PortProtocols","value":"7777"}]},"replicas":2,` + containers + `}`, allowed: true, message: "unchanged, would be refused"},
		"spec.network removed (OKG allows it)": {spec: `{"replicas":1}`, oldSpec: slb(`[{"name":"SlbIds","value":"lb-a"},{"name":"PortProtocols","value":"7777"}]`), allowed: true},
		"networkType changed while both have one": {spec: `{"network":{"networkType":"Volcengine-EIP","networkConf":[]}}`,
			oldSpec: slb(`[{"name":"SlbIds","value":"lb-a"},{"name":"PortProtocols","value":"7777"}]`), message: "change network type is not allowed"},
	} {
		t.Run(name, func(t *testing.T) {
			resp := v.Handle(context.Background(), request(t, tc.spec, tc.oldSpec))
			if resp.Allowed != tc.allowed {
				t.Fatalf("allowed = %v, want %v: %v", resp.Allowed, tc.allowed, resp.Result)
			}
			got := strings.Join(resp.Warnings, "\n")
			if !tc.allowed {
				got = resp.Result.Message
			}
			if !strings.Contains(got, tc.message) {
				t.Errorf("message %q, want it to contain %q", got, tc.message)
			}
		})
	}
}

// TestNetworkConfRulesAtGameServerSetValidation: the root policies' network-conf rules run
// at GameServerSet validation as at its pods' admission: an SLB id the rule does not list is
// refused on the field of the parameter the rule reads (SlbIds), naming the rule; a listed
// one passes; an unchanged network-conf is a warning; another namespace is not selected.
func TestNetworkConfRulesAtGameServerSetValidation(t *testing.T) {
	cfg := plugin.Config{AlibabaCloud: plugin.AlibabaCloudConfig{Enable: true, SLB: &plugin.PortRangeConfig{MinPort: 500, MaxPort: 600}}}
	r, err := plugin.NewRegistry(alibabacloud.Plugins(cfg)...)
	if err != nil {
		t.Fatal(err)
	}
	m, err := policy.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	store, err := policy.NewStore(policy.StoreOptions{RootNamespace: "npp-system", Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	store.Handler(context.Background()).OnAdd(&policyv1alpha1.NetworkPluginPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "npp-system", Name: "games-ids", UID: "u", Generation: 1},
		Spec: policyv1alpha1.NetworkPluginPolicySpec{Plugins: []string{"*"},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "games"}},
			NetworkConfRules:  []policyv1alpha1.NetworkConfRule{{Name: "listed", Expression: "network.loadBalancerIDs.all(id, id == 'lb-a')", Message: "games may use lb-a only"}}},
	}, true)
	games := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "games", Labels: map[string]string{"kubernetes.io/metadata.name": "games"}}}
	v := &Validator{Plugins: r, Resolver: policy.NewResolver(store), Namespaces: fake.NewClientBuilder().WithObjects(games).Build()}
	slb := func(id string) string {
		return `{"network":{"networkType":"AlibabaCloud-SLB","networkConf":[{"name":"SlbIds","value":"` + id + `"},{"name":"PortProtocols","value":"7777"}]},` + containers + `}`
	}
	for name, tc := range map[string]struct {
		spec, oldSpec string
		allowed       bool
		message       string
	}{
		"a listed id":            {spec: slb("lb-a"), allowed: true},
		"an id the rule refuses": {spec: slb("lb-other"), message: `spec.network.networkConf[0].value: Invalid value: "lb-other": parameterError: parameter SlbIds: refused by rule listed of root policy npp-system/games-ids@1: games may use lb-a only`},
		"unchanged":              {spec: slb("lb-other"), oldSpec: slb("lb-other"), allowed: true, message: "unchanged, would be refused"},
	} {
		t.Run(name, func(t *testing.T) {
			resp := v.Handle(context.Background(), request(t, tc.spec, tc.oldSpec))
			if resp.Allowed != tc.allowed {
				t.Fatalf("allowed = %v, want %v: %v", resp.Allowed, tc.allowed, resp.Result)
			}
			got := strings.Join(resp.Warnings, "\n")
			if !tc.allowed {
				got = resp.Result.Message
			}
			if !strings.Contains(got, tc.message) {
				t.Errorf("message %q, want it to contain %q", got, tc.message)
			}
		})
	}
}
