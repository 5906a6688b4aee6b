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

// String is "<version> (revision <revision>, <time>, <go version>)", for --version and logs.
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
	return fmt.Sprintf("%s (revision %s, %s)", i.Version, rev, i.GoVersion)
}
