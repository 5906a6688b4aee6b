package policy

import (
	"strings"
	"testing"
)

// TestLintUnregisteredEntry: an entry that names no registered plugin warns that its pods
// pass through untouched, and a near-miss of a registered name suggests the name instead.
func TestLintUnregisteredEntry(t *testing.T) {
	known := []Plugin{hostPort, nodePort, {Name: "Kubernetes-Ingress"}}
	cases := map[string]struct {
		entry    string
		want     []string
		wantNone []string
	}{
		"cloud type": {
			entry:    "AlibabaCloud-SLB",
			want:     []string{`spec.plugins[0]: no registered network plugin has the name or alias "AlibabaCloud-SLB"`, "passes pods of that network type through untouched", "no effect"},
			wantNone: []string{"did you mean"},
		},
		"near-miss": {
			entry:    "kubernetes-hostport",
			want:     []string{`"kubernetes-hostport"; did you mean Kubernetes-HostPort?`, `spelled "kubernetes-hostport"`},
			wantNone: []string{"no effect"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Lint(&newPolicy("game", "p", plugins(tc.entry)).Spec, LintOptions{Plugins: known})
			if len(got) != 1 {
				t.Fatalf("Lint() = %q, want one warning", got)
			}
			for _, w := range tc.want {
				if !strings.Contains(got[0], w) {
					t.Errorf("warning %q does not contain %q", got[0], w)
				}
			}
			for _, w := range tc.wantNone {
				if strings.Contains(got[0], w) {
					t.Errorf("warning %q contains %q", got[0], w)
				}
			}
		})
	}
}
