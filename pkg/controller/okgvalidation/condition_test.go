package okgvalidation

import (
	"encoding/json"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apiserver/pkg/cel/environment"
)

var served = []string{"Kubernetes-NodePort", "Kubernetes-HostPort", "Kubernetes-Ingress"}

// gss is a GameServerSet as the API server hands it to a matchCondition (JSON decoded).
func gss(t *testing.T, spec string) any {
	t.Helper()
	if spec == "" {
		return nil
	}
	var o any
	if err := json.Unmarshal([]byte(`{"apiVersion":"game.kruise.io/v1alpha1","kind":"GameServerSet","metadata":{"name":"a"},"spec":`+spec+`}`), &o); err != nil {
		t.Fatal(err)
	}
	return o
}

// TestConditionSkipsExactlyTheServedTypes evaluates the condition in the API server's CEL
// environment (the base environment matchConditions compile in, with object and oldObject as
// dyn) on every shape a GameServerSet write can take, valid or not: it never errors, and it is
// false (OKG's entry skipped) only when the new and the old networkType are both served.
func TestConditionSkipsExactlyTheServedTypes(t *testing.T) {
	env, err := environment.MustBaseEnvSet(version.MajorMinor(1, 34)).Env(environment.StoredExpressions)
	if err != nil {
		t.Fatal(err)
	}
	env, err = env.Extend(cel.Variable("object", cel.DynType), cel.Variable("oldObject", cel.DynType))
	if err != nil {
		t.Fatal(err)
	}
	ast, iss := env.Compile(Condition(served).Expression)
	if iss.Err() != nil {
		t.Fatal(iss.Err())
	}
	prg, err := env.Program(ast)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		object, oldObject string
		callOKG           bool
	}{
		"create of a served type":                {object: `{"network":{"networkType":"Kubernetes-NodePort"}}`, callOKG: false},
		"create of an OKG type":                  {object: `{"network":{"networkType":"AlibabaCloud-SLB"}}`, callOKG: true},
		"create of a near-miss":                  {object: `{"network":{"networkType":"kubernetes-nodeport"}}`, callOKG: true},
		"create without network":                 {object: `{"replicas":1}`, callOKG: true},
		"create with empty network":              {object: `{"network":{}}`, callOKG: true},
		"create with networkType empty":          {object: `{"network":{"networkType":""}}`, callOKG: true},
		"update within served types":             {object: `{"network":{"networkType":"Kubernetes-HostPort"}}`, oldObject: `{"network":{"networkType":"Kubernetes-HostPort"}}`, callOKG: false},
		"update from served to another served":   {object: `{"network":{"networkType":"Kubernetes-Ingress"}}`, oldObject: `{"network":{"networkType":"Kubernetes-HostPort"}}`, callOKG: false},
		"update from OKG's type to a served one": {object: `{"network":{"networkType":"Kubernetes-HostPort"}}`, oldObject: `{"network":{"networkType":"AlibabaCloud-SLB"}}`, callOKG: true},
		"update from a served type to OKG's":     {object: `{"network":{"networkType":"AlibabaCloud-SLB"}}`, oldObject: `{"network":{"networkType":"Kubernetes-HostPort"}}`, callOKG: true},
		"update adding a served network":         {object: `{"network":{"networkType":"Kubernetes-HostPort"}}`, oldObject: `{"replicas":1}`, callOKG: true},
		"network of the wrong type":              {object: `{"network":"Kubernetes-HostPort"}`, callOKG: true},
		"null network":                           {object: `{"network":null}`, callOKG: true},
		"networkType a number":                   {object: `{"network":{"networkType":3}}`, callOKG: true},
		"spec a list":                            {object: `[]`, callOKG: true},
		"spec null":                              {object: `null`, callOKG: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out, _, err := prg.Eval(map[string]any{"object": gss(t, tc.object), "oldObject": gss(t, tc.oldObject)})
			if err != nil {
				t.Fatalf("the condition errors (under OKG's failurePolicy Fail it would refuse every GameServerSet write): %v", err)
			}
			if got := out.Value(); got != tc.callOKG {
				t.Errorf("condition = %v, want %v (true: OKG's entry is called)", got, tc.callOKG)
			}
		})
	}
}

func TestWithCondition(t *testing.T) {
	other := admissionregistrationv1.MatchCondition{Name: "someone-else", Expression: "true"}
	stale := admissionregistrationv1.MatchCondition{Name: ConditionName, Expression: "false"}
	cases := map[string]struct {
		conds   []admissionregistrationv1.MatchCondition
		served  []string
		want    []admissionregistrationv1.MatchCondition
		changed bool
	}{
		"added after the others":   {conds: []admissionregistrationv1.MatchCondition{other}, served: served, want: []admissionregistrationv1.MatchCondition{other, Condition(served)}, changed: true},
		"already there":            {conds: []admissionregistrationv1.MatchCondition{other, Condition(served)}, served: served, want: []admissionregistrationv1.MatchCondition{other, Condition(served)}},
		"stale one replaced":       {conds: []admissionregistrationv1.MatchCondition{stale, other}, served: served, want: []admissionregistrationv1.MatchCondition{other, Condition(served)}, changed: true},
		"removed when none served": {conds: []admissionregistrationv1.MatchCondition{Condition(served), other}, want: []admissionregistrationv1.MatchCondition{other}, changed: true},
		"nothing to remove":        {conds: nil, want: []admissionregistrationv1.MatchCondition{}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, changed := WithCondition(tc.conds, tc.served)
			if diff := cmp.Diff(tc.want, got); diff != "" || changed != tc.changed {
				t.Errorf("changed = %v, want %v; conditions (-want,+got):\n%s", changed, tc.changed, diff)
			}
		})
	}
}

// TestConditionOrderIndependent: replicas that list the plugins in another order write the
// same bytes, so they never undo each other's write.
func TestConditionOrderIndependent(t *testing.T) {
	if a, b := Condition(served), Condition([]string{"Kubernetes-Ingress", "Kubernetes-HostPort", "Kubernetes-NodePort"}); a != b {
		t.Errorf("conditions differ by order:\n%s\n%s", a.Expression, b.Expression)
	}
}
