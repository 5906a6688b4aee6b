package policy

import (
	"context"
	"slices"
	"strings"
	"testing"

	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
	policycel "github.com/okg-extensions/network-plugin-policy/pkg/policy/cel"
)

func rules(r ...v1alpha1.NetworkConfRule) policyOption {
	return func(p *v1alpha1.NetworkPluginPolicy) { p.Spec.NetworkConfRules = r }
}

func confRule(name, expr, msg string) v1alpha1.NetworkConfRule {
	return v1alpha1.NetworkConfRule{Name: name, Expression: expr, Message: msg}
}

// TestCompileNetworkConfRules: rules are root-only, select by plugins and namespaceSelector
// only (a podSelector or matchConditions beside them is refused, naming the field), and their
// expressions see the network variable.
func TestCompileNetworkConfRules(t *testing.T) {
	ok := confRule("ids", "network.loadBalancerIDs.all(id, id in ['lb-a'])", "")
	cases := map[string]struct {
		policy  *v1alpha1.NetworkPluginPolicy
		wantErr string // substring of the errors; "" means accepted
	}{
		"root":                  {policy: newPolicy(testRoot, "r", rules(ok), namespaceSelector("team", "a"))},
		"namespace policy":      {policy: newPolicy("game", "r", rules(ok)), wantErr: "spec.networkConfRules: Forbidden: allowed only on policies in the root namespace"},
		"beside a podSelector":  {policy: newPolicy(testRoot, "r", rules(ok), podSelector("app", "x")), wantErr: "spec.podSelector: Forbidden: not allowed beside networkConfRules"},
		"beside matchCondition": {policy: newPolicy(testRoot, "r", rules(ok), matchCondition("c", "true")), wantErr: "spec.matchConditions: Forbidden: not allowed beside networkConfRules"},
		"not bool":              {policy: newPolicy(testRoot, "r", rules(confRule("x", "network.loadBalancerIDs", ""))), wantErr: "spec.networkConfRules[0].expression"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, res := Compile(tc.policy, CompileOptions{RootNamespace: testRoot, EnvType: environment.NewExpressions})
			got := res.Errors.ToAggregate()
			switch {
			case tc.wantErr == "" && got != nil:
				t.Errorf("errors %v, want none", got)
			case tc.wantErr != "" && (got == nil || !strings.Contains(got.Error(), tc.wantErr)):
				t.Errorf("errors %v, want %q", got, tc.wantErr)
			}
		})
	}
}

// TestCheckNetworkConf: every rule of every root policy that selects the pod (by plugins and
// namespaceSelector) must hold; a rule that errors counts as not holding; a namespaceSelector
// that cannot be matched (the Namespace was not read) selects; an Audit policy's rules are
// reported as Audit; a namespace policy's rules do not exist (refused at compile).
func TestCheckNetworkConf(t *testing.T) {
	teamA := newNamespace("team-a", "team", "a")
	lbOnly := confRule("listed-ids", "network.loadBalancerIDs.all(id, id in ['lb-a', 'lb-b'])", "team-a may use lb-a and lb-b only")
	noCreate := confRule("no-create", "!network.createsCloudResources", "")
	erroring := confRule("errs", "network.parameters[5].name == 'x'", "")
	policies := []*v1alpha1.NetworkPluginPolicy{
		newPolicy(testRoot, "team-a-ids", plugins("*"), namespaceSelector("team", "a"), rules(lbOnly)),
		newPolicy(testRoot, "no-cloud", plugins("Kubernetes-NodePort"), rules(noCreate)),
		newPolicy(testRoot, "other-team", namespaceSelector("team", "b"), rules(confRule("never", "false", ""))),
		newPolicy(testRoot, "audit-errs", rules(erroring), audit()),
	}
	store := newTestStore(t, policies...)
	check := func(ns bool, network *policycel.Network) []RuleViolation {
		t.Helper()
		in := Input{Pod: newPod("team-a", "gs-0"), Plugin: nodePort}
		if ns {
			in.Namespace = teamA
		} else {
			in.NamespaceUnknown = true
		}
		res, err := begin(context.Background(), store.Snapshot(), testMetrics(t), 0, in)
		if err != nil {
			t.Fatal(err)
		}
		return res.CheckNetworkConf(context.Background(), network)
	}
	names := func(vs []RuleViolation) []string {
		var out []string
		for _, v := range vs {
			n := v.Policy.Name + "/" + v.Rule
			if v.Audit {
				n += " (audit)"
			}
			if v.Err != nil {
				n += " (error)"
			}
			out = append(out, n)
		}
		slices.Sort(out)
		return out
	}
	allowed := &policycel.Network{LoadBalancerIDs: []string{"lb-a"}}
	if got := names(check(true, allowed)); !slices.Equal(got, []string{"audit-errs/errs (audit) (error)"}) {
		t.Errorf("allowed ids: violations %v, want only the Audit policy's erroring rule", got)
	}
	both := &policycel.Network{LoadBalancerIDs: []string{"lb-a", "lb-z"}, CreatesCloudResources: true}
	got := check(true, both)
	if want := []string{"audit-errs/errs (audit) (error)", "no-cloud/no-create", "team-a-ids/listed-ids"}; !slices.Equal(names(got), want) {
		t.Errorf("an id not listed and a created resource: violations %v, want %v", names(got), want)
	}
	for _, v := range got {
		if v.Rule == "listed-ids" && (v.Message != "team-a may use lb-a and lb-b only" || !slices.Equal(v.Fields, []string{"loadBalancerIDs"})) {
			t.Errorf("violation %+v, want the rule's message and the field it reads", v)
		}
		if v.Rule == "no-create" && !strings.Contains(v.String(), "rule no-create does not hold") {
			t.Errorf("violation %q, want the default message", v.String())
		}
	}
	// The Namespace could not be read: team-b's rule (false) selects too: fail closed.
	if got := names(check(false, allowed)); !slices.Contains(got, "other-team/never") {
		t.Errorf("Namespace unknown: violations %v, want the namespaceSelector's policies to apply", got)
	}
}
