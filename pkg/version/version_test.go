package version

import "testing"

func TestString(t *testing.T) {
	for name, tc := range map[string]struct {
		in   Info
		want string
	}{
		"release": {Info{Version: "v0.2.0", Revision: "abc", Time: "2026-12-02T08:00:00Z", GoVersion: "go1.26.8"},
			"v0.2.0 (revision abc, 2026-12-02T08:00:00Z, go1.26.8)"},
		"dirty": {Info{Version: "v0.0.0-20261202080000-abc+dirty", Revision: "abc", Modified: true, GoVersion: "go1.26.8"},
			"v0.0.0-20261202080000-abc+dirty (revision abc, modified, go1.26.8)"},
		"no VCS":       {Info{Version: "(devel)", GoVersion: "go1.26.8"}, "(devel) (revision unknown, go1.26.8)"},
		"from a Lease": {Info{Version: "v0.2.0", Revision: "abc", CELEnvironment: "1.34"}, "v0.2.0 (revision abc, CEL environment 1.34)"},
		"CEL environment": {Info{Version: "v0.2.0", Revision: "abc", GoVersion: "go1.26.8", CELEnvironment: "1.34"},
			"v0.2.0 (revision abc, go1.26.8, CEL environment 1.34)"},
	} {
		t.Run(name, func(t *testing.T) {
			if got := tc.in.String(); got != tc.want {
				t.Errorf("String() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestGetHasAVersion(t *testing.T) {
	if Get().Version == "" || Get().GoVersion == "" {
		t.Errorf("Get() = %+v, want a version and a Go version", Get())
	}
}

// TestAnnotationsRoundTrip: the Lease annotations carry version, revision and CEL
// environment, all three even when one is unknown.
func TestAnnotationsRoundTrip(t *testing.T) {
	in := Info{Version: "v0.0.0-20261203-abc+dirty", CELEnvironment: "1.34", GoVersion: "go1.26.8"}
	a := in.Annotations()
	if len(a) != 3 {
		t.Fatalf("Annotations() = %v, want three keys", a)
	}
	got, ok := FromAnnotations(a)
	if !ok || got.Version != in.Version || got.Revision != "" || got.CELEnvironment != "1.34" {
		t.Errorf("FromAnnotations(Annotations()) = %+v, %v", got, ok)
	}
	if _, ok := FromAnnotations(map[string]string{"other": "x"}); ok {
		t.Error("FromAnnotations without the version annotation reported ok")
	}
}
