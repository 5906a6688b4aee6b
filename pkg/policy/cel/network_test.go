package cel

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/cel/environment"
)

// TestNetworkVariable: spec.networkConfRules see the network variable, typed (a field
// misspelt is a compile error), with empty lists when the plugin has no such notion, and do
// not see the pod (object), whose author writes it; matchConditions do not see network and
// are told where it is.
func TestNetworkVariable(t *testing.T) {
	env, err := NewEnv()
	if err != nil {
		t.Fatal(err)
	}
	vars := testVariables()
	vars.Network = &Network{LoadBalancerIDs: []string{"lb-a", "lb-b"}, Ports: []Port{{Port: 7777, Protocol: "UDP"}},
		Parameters: []Parameter{{Name: "SlbIds", Value: "lb-a,lb-b"}}}
	for expr, want := range map[string]bool{
		"network.loadBalancerIDs.all(id, id in ['lb-a', 'lb-b'])":                               true,
		"network.loadBalancerIDs.all(id, id.startsWith('lb-a'))":                                false,
		"network.ports.all(p, p.port >= 7000 && p.protocol == 'UDP')":                           true,
		"!network.createsCloudResources && network.hosts == [] && size(network.classes) == 0":   true,
		"network.parameters.exists(p, p.name == 'SlbIds' && p.value == 'lb-a,lb-b')":            true,
		"namespaceObject.metadata.labels.env == 'prod' && plugin.name == 'Kubernetes-NodePort'": true,
	} {
		prg, _, ferr := env.Compile(field.NewPath("spec", "networkConfRules").Index(0).Child("expression"), expr, KindNetworkConfRule, environment.NewExpressions)
		if ferr != nil {
			t.Errorf("%s: %v", expr, ferr)
			continue
		}
		got, err := prg.EvalBool(context.Background(), NewActivation(vars))
		if err != nil || got != want {
			t.Errorf("%s = %v (%v), want %v", expr, got, err, want)
		}
	}
	empty := testVariables()
	prg, _, ferr := env.Compile(field.NewPath("x"), "network.loadBalancerIDs == [] && network.ports == [] && !network.createsCloudResources", KindNetworkConfRule, environment.NewExpressions)
	if ferr != nil {
		t.Fatal(ferr)
	}
	if got, err := prg.EvalBool(context.Background(), NewActivation(empty)); err != nil || !got {
		t.Errorf("no view: %v (%v), want the empty view", got, err)
	}
	if _, _, ferr := env.Compile(field.NewPath("x"), "network.loadBalancerIds == []", KindNetworkConfRule, environment.NewExpressions); ferr == nil {
		t.Error("a misspelt field compiled")
	}
	_, _, ferr = env.Compile(field.NewPath("x"), "object.metadata.labels.team == 'a'", KindNetworkConfRule, environment.NewExpressions)
	if ferr == nil || !strings.Contains(ferr.Detail, "do not see the pod") {
		t.Errorf("object in a rule: %v, want an error saying rules do not see the pod", ferr)
	}
	_, _, ferr = env.Compile(field.NewPath("x"), "network.loadBalancerIDs == []", KindMatchCondition, environment.NewExpressions)
	if ferr == nil || !strings.Contains(ferr.Detail, "only in spec.networkConfRules") {
		t.Errorf("network in a matchCondition: %v, want a hint that it is declared in networkConfRules only", ferr)
	}
}
