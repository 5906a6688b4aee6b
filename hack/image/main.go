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
	out := flag.String("out", "../../bin/image", "Where the images, SBOMs and release binaries go.")
	plats := flag.String("platforms", "linux/amd64,linux/arm64", "The images' platforms, os/arch, comma-separated.")
	release := flag.String("release-platforms", "linux/amd64,linux/arm64,darwin/amd64,darwin/arm64", "The platforms of the kubectl-npp release binaries; empty for none.")
	testImages := flag.Bool("test-images", false, "Build the real-node suite's images (pause, echo) instead of the project's, and no release binaries.")
	source := flag.String("source", "https://github.com/okg-extensions/network-plugin-policy", "The org.opencontainers.image.source label.")
	flag.Parse()
	build := components
	if *testImages {
		build, *release = testComponents, ""
	}
	if err := run(context.Background(), build, *root, *out, *plats, *release, *source); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

// run builds every component of build into out and the release binaries into out/release,
// printing one line per image: its reference and its index digest.
func run(ctx context.Context, build []component, root, out, plats, release, source string) error {
	platforms, err := parsePlatforms(plats)
	if err != nil {
		return err
	}
	root, err = filepath.Abs(root)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for _, c := range build {
		res, err := buildComponent(ctx, root, out, c, platforms, source)
		if err != nil {
			return err
		}
		fmt.Printf("%s %s\n", res.Ref, res.Digest)
	}
	if release == "" {
		return nil
	}
	rel, err := parsePlatforms(release)
	if err != nil {
		return err
	}
	files, err := buildRelease(ctx, root, filepath.Join(out, "release"), rel)
	if err != nil {
		return err
	}
	for _, f := range files {
		fmt.Println(f)
	}
	return nil
}
