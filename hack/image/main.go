// Command image builds the project's OCI images without a container engine, with
// go-containerregistry: one image per program (the manager, nppctl), each an index over
// linux/amd64 and linux/arm64, from static Go binaries, reproducible from the commit (same
// commit, same toolchain: same digests). It also builds nppctl's release binaries (the
// kubectl plugin kubectl-npp). `make image` runs it; docs/deploy.md says what it writes and
// how to load or push it.
//
//	go run . -root ../.. -out ../../bin/image
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// components are the programs shipped as images.
var components = []component{
	{Name: "manager", Package: "./cmd/manager", Repository: "network-plugin-policy",
		Description: "NetworkPluginPolicy manager: the mutating pod webhook running the Kubernetes network plugins, and its controllers"},
	{Name: "nppctl", Package: "./cmd/nppctl", Repository: "network-plugin-policy-nppctl",
		Description: "nppctl: validate, test, explain and diff NetworkPluginPolicies (also the kubectl plugin kubectl npp)"},
}

// testComponents are the images of the real-node suite (e2e/realnode): containerd's
// sandbox and a UDP and TCP echo game server, built the same way (-test-images).
var testComponents = []component{
	{Name: "pause", Package: "./e2e/images/pause", Repository: "npp-pause",
		Description: "The real-node suite's sandbox (pause) container"},
	{Name: "echo", Package: "./e2e/images/echo", Repository: "npp-echo",
		Description: "The real-node suite's game server: a UDP and TCP echo that names its pod"},
}

func main() {
	root := flag.String("root", "../..", "The repository to build from (a Git checkout: the images carry its commit).")
	out := flag.String("out", "../../bin/image", "Where the images and their SBOMs go.")
	plats := flag.String("platforms", "linux/amd64,linux/arm64", "The images' platforms, os/arch, comma-separated.")
	release := flag.String("release-platforms", "linux/amd64,linux/arm64,darwin/amd64,darwin/arm64,windows/amd64,windows/arm64", "The platforms of the kubectl-npp release binaries; empty for none.")
	releaseDir := flag.String("release-dir", "", "Where the kubectl-npp release binaries go; empty for <out>/release.")
	testImages := flag.Bool("test-images", false, "Build the real-node suite's images (pause, echo) instead of the project's, and no release binaries.")
	source := flag.String("source", "https://github.com/okg-extensions/network-plugin-policy", "The org.opencontainers.image.source label, and with -version the release's home.")
	registry := flag.String("registry", "", "The images' repositories' prefix; empty for docker.io/library (the name docker load gives an image without one).")
	version := flag.String("version", "", "A release version (vMAJOR.MINOR.PATCH[-PRE]): the images' tag; and in -release-dir, beside the binaries, the kubectl-npp archives, the krew manifest, the release notes cut from -changelog and SHA256SUMS of every file there (make release).")
	changelog := flag.String("changelog", "", "With -version, the changelog to cut the release notes from; empty for <root>/CHANGELOG.md.")
	twice := flag.Bool("twice", false, "Build every image and release binary a second time, for each of -platforms and -release-platforms, into a scratch directory and with an empty Go build cache, and fail unless both builds give the same digests and bytes (make release).")
	flag.Parse()
	build := components
	if *testImages {
		build, *release = testComponents, ""
	}
	if *releaseDir == "" {
		*releaseDir = filepath.Join(*out, "release")
	}
	if *changelog == "" {
		*changelog = filepath.Join(*root, "CHANGELOG.md")
	}
	o := options{root: *root, out: *out, plats: *plats, release: *release, releaseDir: *releaseDir, source: *source,
		naming: naming{Registry: *registry, Tag: *version}, version: *version, changelog: *changelog, twice: *twice}
	if err := run(context.Background(), os.Stdout, build, o); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

// options are main's flags.
type options struct {
	root, out, plats, release, releaseDir, source string
	naming                                        naming
	// version, when set, makes a release (writeRelease); changelog is the notes' source.
	version, changelog string
	// twice checks that a second build gives the same bytes (reproduce, reproduceRelease).
	twice bool
}

// run builds every component of build into o.out and the release binaries into
// o.releaseDir, printing to w one line per image (its reference and its index digest) and
// per release file; with o.version it then writes the rest of the release (writeRelease).
// With o.twice it builds each image and the release binaries a second time, with a Go build
// cache of its own that starts empty (a directory under os.TempDir(), removed at the end),
// and fails on any difference (reproduce, reproduceRelease) before it goes on; each check
// that passed prints a line "reproduced: <what>" first. After a failure, what the first
// build already wrote stays in o.out and o.releaseDir, and nothing of writeRelease is written.
func run(ctx context.Context, w io.Writer, build []component, o options) error {
	if o.version != "" && !semverTag.MatchString(o.version) {
		return fmt.Errorf("-version %q: expected vMAJOR.MINOR.PATCH with an optional -PRERELEASE, such as v0.1.0", o.version)
	}
	platforms, err := parsePlatforms(o.plats)
	if err != nil {
		return err
	}
	root, err := filepath.Abs(o.root)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	var again []string // the second builds' environment
	if o.twice {
		cache, err := os.MkdirTemp("", "image-twice-gocache-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(cache)
		again = []string{"GOCACHE=" + cache}
	}
	var built []result
	for _, c := range build {
		res, err := buildComponent(ctx, root, o.out, c, platforms, o.source, o.naming, nil)
		if err != nil {
			return err
		}
		if o.twice {
			if err := reproduce(ctx, root, o.out, c, platforms, o.source, o.naming, res, again); err != nil {
				return err
			}
			fmt.Fprintf(w, "reproduced: %s %s for %s\n", res.Ref, res.Digest, o.plats)
		}
		built = append(built, res)
		fmt.Fprintf(w, "%s %s\n", res.Ref, res.Digest)
	}
	var files []string
	if o.release != "" {
		rel, err := parsePlatforms(o.release)
		if err != nil {
			return err
		}
		if files, err = buildRelease(ctx, root, o.releaseDir, rel, nil); err != nil {
			return err
		}
		if o.twice {
			if err := reproduceRelease(ctx, root, o.releaseDir, rel, again); err != nil {
				return err
			}
			fmt.Fprintf(w, "reproduced: the kubectl-npp binaries for %s\n", o.release)
		}
	}
	if o.version != "" {
		more, err := writeRelease(root, o, built)
		if err != nil {
			return err
		}
		files = append(files, more...)
	}
	for _, f := range files {
		fmt.Fprintln(w, f)
	}
	return nil
}
