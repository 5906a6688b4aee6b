package main

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
	"github.com/okg-extensions/network-plugin-policy/pkg/policy"
)

// policySource is the Source of a Decision group: policy ns/name@gen, or the built-in
// default for an empty name.
func policySource(ns, name string, gen int64) policy.Source {
	if name == "" {
		return policy.Source{}
	}
	return policy.Source{Policy: &policy.PolicyRef{Namespace: ns, Name: name, Generation: gen}}
}

func TestApplyPolicies(t *testing.T) {
	policy := func(ns, name string, gen int64, timeout string) *v1alpha1.NetworkPluginPolicy {
		p := &v1alpha1.NetworkPluginPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Generation: gen, UID: types.UID("uid-" + name)},
			Spec: v1alpha1.NetworkPluginPolicySpec{Plugins: []string{"*"}}}
		if timeout != "" {
			p.Spec.FailureMode = ptr.To(v1alpha1.FailureModeAsynchronous)
			p.Spec.Timeout = &metav1.Duration{}
			if err := p.Spec.Timeout.UnmarshalJSON([]byte(`"` + timeout + `"`)); err != nil {
				t.Fatal(err)
			}
		}
		return p
	}
	current := []*v1alpha1.NetworkPluginPolicy{policy("a", "same", 4, "5s"), policy("a", "changed", 7, "5s"), policy("a", "kept", 2, "")}
	proposed := []*v1alpha1.NetworkPluginPolicy{policy("a", "same", 1, "5s"), policy("a", "changed", 1, "9s"), policy("b", "new", 1, "")}
	var got []string
	for _, p := range applyPolicies(current, proposed) {
		got = append(got, fmt.Sprintf("%s/%s@%d", p.Namespace, p.Name, p.Generation))
	}
	// Unchanged spec: the current generation; changed: the next one; new: as read (1);
	// current policies missing from the proposal are kept.
	want := []string{"a/same@4", "a/changed@8", "a/kept@2", "b/new@1"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("applied policies (-want,+got):\n%s", diff)
	}
}

func TestDecidedBy(t *testing.T) {
	cases := map[string]struct {
		want string
		ok   bool
	}{
		"namespace/name":            {want: "ns/p", ok: true},
		"namespace/name@generation": {want: "ns/p@3", ok: true},
		"other generation":          {want: "ns/p@2", ok: false},
		"default":                   {want: "default", ok: false},
		"other policy":              {want: "ns/q", ok: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := decidedBy(tc.want, policySource("ns", "p", 3)); got != tc.ok {
				t.Errorf("decidedBy(%q) = %t, want %t", tc.want, got, tc.ok)
			}
		})
	}
	if !decidedBy("default", policySource("", "", 0)) {
		t.Errorf(`decidedBy("default") for the built-in default = false`)
	}
}
