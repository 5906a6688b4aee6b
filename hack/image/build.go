package main

import (
	"context"
	"debug/buildinfo"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// platform is a target of a build: GOOS and GOARCH, as in an OCI platform.
type platform struct{ OS, Arch string }

// String is "os/arch", as in the -platforms flag.
func (p platform) String() string { return p.OS + "/" + p.Arch }

// exe is the suffix of the platform's executables: ".exe" on windows.
func (p platform) exe() string {
	if p.OS == "windows" {
		return ".exe"
	}
	return ""
}

// parsePlatforms parses a comma-separated list of os/arch. The error names the bad entry.
func parsePlatforms(s string) ([]platform, error) {
	var out []platform
	for _, f := range strings.Split(s, ",") {
		os, arch, ok := strings.Cut(strings.TrimSpace(f), "/")
		if !ok || os == "" || arch == "" {
			return nil, fmt.Errorf("-platforms: %q is not os/arch", f)
		}
		out = append(out, platform{OS: os, Arch: arch})
	}
	return out, nil
}

// stamp is what the Go toolchain recorded in a binary's build info about its source: the
// main module's version (a tag, or a pseudo-version from the commit, "+dirty" when the tree
// had uncommitted changes), the commit and its time.
type stamp struct {
	Version, Revision string
	Time              time.Time
	Modified          bool
}

// goBuild builds pkg (relative to root, the repository) for p into out: a static binary
// (CGO_ENABLED=0), without file system paths (-trimpath) or symbol tables (-s -w), with the
// VCS stamp (-buildvcs=true) and the default instruction-set levels whatever the
// environment says (GOAMD64=v1, GOARM64=v8.0, no GOEXPERIMENT), so that one commit and one
// toolchain always give the same bytes. env adds variables to the go command's environment
// (GOCACHE=<dir> for a build that must not reuse the build cache); nil adds none. It returns
// the stamp read back from the binary's build info. Errors carry the go command's output.
func goBuild(ctx context.Context, root, pkg string, p platform, out string, env []string) (stamp, error) {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=true", "-ldflags=-s -w", "-o", out, pkg)
	cmd.Dir = root
	// The environment must not change the bytes: the instruction-set levels at their
	// defaults, no experiments, no flags from the user's go env.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Arch, "GOFLAGS=",
		"GOAMD64=v1", "GOARM64=v8.0", "GOEXPERIMENT=")
	cmd.Env = append(cmd.Env, env...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return stamp{}, fmt.Errorf("go build %s for %s: %w\n%s", pkg, p, err, b)
	}
	return readStamp(out)
}

// readStamp reads the stamp of the binary at path. It is an error when the binary carries no
// commit (built outside a Git checkout, or with -buildvcs=false): an image must say what it
// was built from.
func readStamp(path string) (stamp, error) {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return stamp{}, fmt.Errorf("read the build info of %s: %w", path, err)
	}
	s := stamp{Version: bi.Main.Version}
	for _, kv := range bi.Settings {
		switch kv.Key {
		case "vcs.revision":
			s.Revision = kv.Value
		case "vcs.time":
			if s.Time, err = time.Parse(time.RFC3339, kv.Value); err != nil {
				return stamp{}, fmt.Errorf("%s: vcs.time %q: %w", path, kv.Value, err)
			}
		case "vcs.modified":
			s.Modified = kv.Value == "true"
		}
	}
	if s.Revision == "" || s.Time.IsZero() {
		return stamp{}, fmt.Errorf("%s carries no commit in its build info (build from a Git checkout)", path)
	}
	return s, nil
}

// tag is the stamp's version as an image tag: a tag may not hold "+", so "+dirty" becomes
// "-dirty" (the OCI distribution specification's tag grammar, [a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}).
func (s stamp) tag() string { return strings.ReplaceAll(s.Version, "+", "-") }
