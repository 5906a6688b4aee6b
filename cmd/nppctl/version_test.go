package main

import (
	"strings"
	"testing"

	"github.com/okg-extensions/network-plugin-policy/pkg/version"
)

// TestVersionSkew: another CEL environment is skew (exit 1); another revision or version a
// warning; nothing recorded a warning.
func TestVersionSkew(t *testing.T) {
	client := version.Info{Version: "v0.0.0-20261203-abc", Revision: "abc", CELEnvironment: "1.34"}
	cases := map[string]struct {
		manager  *version.Info
		warnings []string // substrings, one per warning
		skew     bool
	}{
		"same":             {manager: &version.Info{Version: client.Version, Revision: "abc", CELEnvironment: "1.34"}},
		"another revision": {manager: &version.Info{Version: "v0.0.0-20261201-def", Revision: "def", CELEnvironment: "1.34"}, warnings: []string{"revision skew: the manager was built from def, nppctl from abc"}},
		"no revision":      {manager: &version.Info{Version: "v0.1.0", CELEnvironment: "1.34"}, warnings: []string{"version skew: the manager is v0.1.0"}},
		"another CEL":      {manager: &version.Info{Version: client.Version, Revision: "abc", CELEnvironment: "1.33"}, warnings: []string{"CEL environment skew: the manager evaluates policies with 1.33, nppctl with 1.34"}, skew: true},
		"CEL not recorded": {manager: &version.Info{Version: client.Version, Revision: "abc"}, warnings: []string{"with unknown, nppctl with 1.34"}, skew: true},
		"nothing recorded": {warnings: []string{"records no version"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, skew := versionSkew(client, tc.manager)
			if skew != tc.skew || len(got) != len(tc.warnings) {
				t.Fatalf("versionSkew = %q, %v; want %d warnings, skew %v", got, skew, len(tc.warnings), tc.skew)
			}
			for i, w := range tc.warnings {
				if !strings.Contains(got[i], w) {
					t.Errorf("warning %d = %q, want it to contain %q", i, got[i], w)
				}
			}
		})
	}
}
