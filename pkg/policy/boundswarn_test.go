package policy

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
)

func TestSharedPlugins(t *testing.T) {
	registered := []Plugin{nodePort, hostPort}
	cases := map[string]struct {
		tenant, root []string
		want         string
	}{
		"same name":             {tenant: []string{"Kubernetes-NodePort"}, root: []string{"Kubernetes-NodePort"}, want: "Kubernetes-NodePort"},
		"other plugin":          {tenant: []string{"Kubernetes-NodePort"}, root: []string{"Kubernetes-HostPort"}, want: ""},
		"root wildcard":         {tenant: []string{"Kubernetes-HostPort"}, root: []string{"*"}, want: "Kubernetes-HostPort"},
		"tenant wildcard":       {tenant: []string{"*"}, root: []string{"Kubernetes-HostPort"}, want: "Kubernetes-HostPort"},
		"both wildcards":        {tenant: []string{"*"}, root: []string{"*"}, want: "every plugin"},
		"alias and name":        {tenant: []string{"NodePort-Network"}, root: []string{"Kubernetes-NodePort"}, want: "Kubernetes-NodePort"},
		"unregistered mismatch": {tenant: []string{"Foo"}, root: []string{"Bar"}, want: ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, sharedPlugins(tc.tenant, tc.root, registered)); diff != "" {
				t.Errorf("sharedPlugins (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestBoundsWarnings(t *testing.T) {
	recreate := v1alpha1.ExhaustedActionRecreate
	required := v1alpha1.ReadinessGateRequired
	roots := []v1alpha1.NetworkPluginPolicy{
		*newPolicy(testRoot, "prod-only", namespaceSelector("env", "prod"), bound(v1alpha1.PolicyBounds{
			ExhaustedActions: []v1alpha1.ExhaustedAction{v1alpha1.ExhaustedActionEvent}, ReadinessGate: &required})),
		*newPolicy(testRoot, "no-bounds", mode(v1alpha1.FailureModeSynchronous)),
	}
	tenant := newPolicy("game", "p", readinessGate(false), retry(v1alpha1.RetryPolicy{ExhaustedAction: &recreate}))
	got := BoundsWarnings(tenant, testRoot, roots, map[string]string{"env": "prod"}, []Plugin{nodePort, hostPort})
	want := []string{
		"spec.readinessGate: false is against readinessGate Required of root policy npp-system/prod-only for every plugin",
		"spec.retry.exhaustedAction: Recreate is outside exhaustedActions [Event] of root policy npp-system/prod-only for every plugin",
	}
	if len(got) != len(want) {
		t.Fatalf("BoundsWarnings() = %q, want %d warnings", got, len(want))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("warning %d = %q, want prefix %q", i, got[i], want[i])
		}
	}
	if got := BoundsWarnings(tenant, testRoot, roots, map[string]string{"env": "dev"}, nil); len(got) != 0 {
		t.Errorf("BoundsWarnings() in a namespace the root's namespaceSelector does not match = %q, want none", got)
	}
	if got := BoundsWarnings(newPolicy(testRoot, "r", readinessGate(false)), testRoot, roots, nil, nil); len(got) != 0 {
		t.Errorf("BoundsWarnings() for a root policy = %q, want none", got)
	}
}
