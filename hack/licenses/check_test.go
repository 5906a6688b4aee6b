package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestJudge(t *testing.T) {
	cases := map[string]struct {
		scans       []fileScan
		want        []string
		wantProblem string
	}{
		"apache": {
			scans: []fileScan{{Name: "LICENSE", Percent: 99, IDs: []string{"Apache-2.0"}}},
			want:  []string{"Apache-2.0"},
		},
		"two files, two permissive licenses": {
			scans: []fileScan{{Name: "LICENSE", Percent: 95, IDs: []string{"MIT"}}, {Name: "LICENSE.bsd", Percent: 97, IDs: []string{"BSD-3-Clause"}}},
			want:  []string{"BSD-3-Clause", "MIT"},
		},
		"no file": {
			wantProblem: "no license file",
		},
		"copyleft": {
			scans:       []fileScan{{Name: "COPYING", Percent: 99, IDs: []string{"AGPL-3.0"}}},
			want:        []string{"AGPL-3.0"},
			wantProblem: "license AGPL-3.0 is not allowed",
		},
		"weak copyleft": {
			scans:       []fileScan{{Name: "LICENSE", Percent: 99, IDs: []string{"MPL-2.0"}}},
			want:        []string{"MPL-2.0"},
			wantProblem: "license MPL-2.0 is not allowed",
		},
		"extra terms beside a known license": {
			scans:       []fileScan{{Name: "LICENSE", Percent: 40, IDs: []string{"MIT"}}},
			want:        []string{"MIT"},
			wantProblem: "only 40% of the text",
		},
		"nothing recognised": {
			scans:       []fileScan{{Name: "LICENSE", Percent: 0}},
			wantProblem: "no known license recognised",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, problem := judge(tc.scans, defaultMinCoverage)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("licenses (-want,+got):\n%s", diff)
			}
			if tc.wantProblem == "" && problem != "" || !strings.Contains(problem, tc.wantProblem) {
				t.Errorf("problem = %q, want one containing %q", problem, tc.wantProblem)
			}
		})
	}
}

// TestCheckModuleReadsThisProjectsLicense scans the repository's own LICENSE with
// licensecheck, as the release check does for every module.
func TestCheckModuleReadsThisProjectsLicense(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "LICENSE")); err != nil {
		t.Fatal(err)
	}
	r := checkModule(module{Path: "network-plugin-policy", Dir: root, Main: true}, defaultMinCoverage)
	if r.Problem != "" || !cmp.Equal(r.Licenses, []string{"Apache-2.0"}) {
		t.Errorf("got licenses %v, problem %q; want Apache-2.0 and none", r.Licenses, r.Problem)
	}
}

// TestCheckModuleWithoutLicense is a module directory with no license file.
func TestCheckModuleWithoutLicense(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("no license here"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := checkModule(module{Path: "example.com/x", Version: "v1.0.0", Dir: dir}, defaultMinCoverage); !strings.Contains(r.Problem, "no license file") {
		t.Errorf("problem = %q, want no license file", r.Problem)
	}
}
