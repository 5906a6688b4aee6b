package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestParseVariants: an entry names an environment, another binary, or both, and maybe a
// provider configuration; an entry with neither, an environment entry that is not
// KEY=value, or an unknown provider configuration is refused.
func TestParseVariants(t *testing.T) {
	got, err := parseVariants("gogc50:GOGC=50; before@/tmp/m-before ;both@/tmp/m:GOGC=50,GOMEMLIMIT=1;slb:providers=slb,GOGC=50")
	if err != nil {
		t.Fatal(err)
	}
	want := []variant{{name: "gogc50", env: []string{"GOGC=50"}}, {name: "before", binary: "/tmp/m-before"},
		{name: "both", binary: "/tmp/m", env: []string{"GOGC=50", "GOMEMLIMIT=1"}},
		{name: "slb", env: []string{"GOGC=50"}, providers: "slb"}}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(variant{})); diff != "" {
		t.Errorf("(-want,+got):\n%s", diff)
	}
	for _, bad := range []string{"name", "name:", ":GOGC=50", "name:GOGC", "@/tmp/m", "name:providers=none"} {
		if _, err := parseVariants(bad); err == nil {
			t.Errorf("parseVariants(%q) accepted", bad)
		}
	}
}
