// Package version reports what a binary of this project was built from, as the Go toolchain
// recorded it in the binary's build info (runtime/debug.ReadBuildInfo): no linker flags, so
// `go build`, `go install` and `make image` binaries all say the same.
package version

import (
	"fmt"
	"runtime/debug"
)

// Info is a binary's version and source.
type Info struct {
	// Version is the main module's version: a release tag (v0.2.0), a pseudo-version of the
	// commit (v0.0.0-20261202081003-d816717aaaaa) with "+dirty" when the tree had
	// uncommitted changes, or "(devel)" when the toolchain recorded none (go run, tests).
	Version string `json:"version"`
	// Revision is the commit (vcs.revision); empty when unknown.
	Revision string `json:"revision,omitempty"`
	// Time is the commit's time, RFC 3339 (vcs.time); empty when unknown.
	Time string `json:"time,omitempty"`
	// Modified reports uncommitted changes at build time (vcs.modified).
	Modified bool `json:"modified,omitempty"`
	// GoVersion is the toolchain that built the binary (go1.26.x).
	GoVersion string `json:"goVersion"`
	// CELEnvironment is the Kubernetes version whose CEL environment the binary compiles
	// and evaluates policy expressions with (MAJOR.MINOR, the policy CEL package's
	// CompatibilityVersion); set by the caller (Get leaves it empty, as this package
	// knows nothing of CEL). Two binaries with different CEL environments may accept or
	// evaluate an expression differently.
	CELEnvironment string `json:"celEnvironment,omitempty"`
}

// Annotations on the manager's leader-election Lease, written by the leader with its own
// Info, so that `nppctl version --live` can tell which manager decides (values as in Info).
const (
	// LeaseAnnotationVersion holds Info.Version.
	LeaseAnnotationVersion = "policy.game.kruise.io/version"
	// LeaseAnnotationRevision holds Info.Revision, empty when unknown.
	LeaseAnnotationRevision = "policy.game.kruise.io/revision"
	// LeaseAnnotationCELEnvironment holds Info.CELEnvironment.
	LeaseAnnotationCELEnvironment = "policy.game.kruise.io/cel-environment"
)

// Annotations returns i as the Lease annotations (all three, an unknown value empty).
func (i Info) Annotations() map[string]string {
	return map[string]string{
		LeaseAnnotationVersion:        i.Version,
		LeaseAnnotationRevision:       i.Revision,
		LeaseAnnotationCELEnvironment: i.CELEnvironment,
	}
}

// FromAnnotations returns the Info the Lease annotations a hold (Version, Revision and
// CELEnvironment) and whether a has the version annotation at all.
func FromAnnotations(a map[string]string) (Info, bool) {
	v, ok := a[LeaseAnnotationVersion]
	return Info{Version: v, Revision: a[LeaseAnnotationRevision], CELEnvironment: a[LeaseAnnotationCELEnvironment]}, ok
}

// Get returns the running binary's Info. Without build info (never the case for a binary
// built in module mode) the version is "unknown".
func Get() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Info{Version: "unknown"}
	}
	i := Info{Version: bi.Main.Version, GoVersion: bi.GoVersion}
	for _, kv := range bi.Settings {
		switch kv.Key {
		case "vcs.revision":
			i.Revision = kv.Value
		case "vcs.time":
			i.Time = kv.Value
		case "vcs.modified":
			i.Modified = kv.Value == "true"
		}
	}
	return i
}

// String is "<version> (revision <revision>, <time>, <go version>, CEL environment
// <major.minor>)", for --version and logs; unknown parts (time, Go version, CEL environment)
// are left out.
func (i Info) String() string {
	rev := i.Revision
	if rev == "" {
		rev = "unknown"
	}
	if i.Modified {
		rev += ", modified"
	}
	if i.Time != "" {
		rev += ", " + i.Time
	}
	if i.GoVersion != "" {
		rev += ", " + i.GoVersion
	}
	if i.CELEnvironment != "" {
		rev += ", CEL environment " + i.CELEnvironment
	}
	return fmt.Sprintf("%s (revision %s)", i.Version, rev)
}
