package policy

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
)

func TestNewStoreFromPolicies(t *testing.T) {
	ctx := context.Background()
	store, err := NewStoreFromPolicies(ctx, StoreOptions{RootNamespace: testRoot}, []*v1alpha1.NetworkPluginPolicy{
		newPolicy(testRoot, "all", timeout(time.Second)),
		newPolicy("game", "own", plugins(nodePort.Name), timeout(2*time.Second)),
		newPolicy("game", "broken", matchCondition("bad", "object.metadata.")),
	})
	if err != nil {
		t.Fatalf("NewStoreFromPolicies(): %v", err)
	}
	if got := store.Snapshot().Len(); got != 2 {
		t.Errorf("Snapshot().Len() = %d, want 2 (the broken policy left out)", got)
	}
	if res, ok := store.Result("game", "broken"); !ok || res.Reason != v1alpha1.ReasonInvalidExpression {
		t.Errorf("Result(game/broken) = %+v, %v; want InvalidExpression", res, ok)
	}
	d, err := NewResolver(store).Resolve(ctx, Input{Pod: newPod("game", "x"), Plugin: nodePort})
	if err != nil {
		t.Fatalf("Resolve(): %v", err)
	}
	if diff := cmp.Diff("game/own@1", d.Explanation.Timeout.String()); diff != "" {
		t.Errorf("timeout source (-want,+got):\n%s", diff)
	}
}

func TestNewStoreFromPoliciesErrors(t *testing.T) {
	cases := map[string]struct {
		policies []*v1alpha1.NetworkPluginPolicy
		want     string
	}{
		"nil policy":   {policies: []*v1alpha1.NetworkPluginPolicy{nil}, want: "policy 0 is nil"},
		"no namespace": {policies: []*v1alpha1.NetworkPluginPolicy{newPolicy("", "p")}, want: "metadata.namespace and metadata.name are required"},
		"duplicate": {
			policies: []*v1alpha1.NetworkPluginPolicy{newPolicy("game", "p"), newPolicy("game", "p")},
			want:     "policy 1: duplicate NetworkPluginPolicy game/p",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := NewStoreFromPolicies(context.Background(), StoreOptions{RootNamespace: testRoot}, tc.policies)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("NewStoreFromPolicies() error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
	if _, err := NewStoreFromPolicies(context.Background(), StoreOptions{}, nil); err == nil {
		t.Errorf("NewStoreFromPolicies() without a root namespace: no error")
	}
}
