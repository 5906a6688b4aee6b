package main

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

// testPlatforms are the platforms make test builds: linux on this machine's architecture, so
// that on Linux the test can run what it built. make release (-twice) checks every platform
// it ships the same way (reproduce, reproduceRelease); cross-compiling for arm64 took most of
// the image check's time on a machine with empty caches (docs/development.md#time-budget).
var testPlatforms = []platform{{"linux", runtime.GOARCH}}

// TestImagesAreReproducible builds every image for testPlatforms, then again with reproduce
// (as make release does for every platform, there with an empty build cache, here with the
// same one), which requires the same index digest and the same bytes of the OCI archive, the
// docker archives and the SBOMs; then it checks what the build holds: a valid OCI index over
// testPlatforms, each image running /<name> as 65532 with the OCI labels of the commit, one
// layer with the binary and its SBOM and nothing else (no shell), a docker archive of the
// same image, and (on Linux) a binary whose --version names the commit.
func TestImagesAreReproducible(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the images twice")
	}
	ctx := context.Background()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	head, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatalf("git rev-parse HEAD: %v", err)
	}
	a := t.TempDir()
	for _, c := range components {
		t.Run(c.Name, func(t *testing.T) {
			ra, err := buildComponent(ctx, root, a, c, testPlatforms, "https://example.invalid/src", naming{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := reproduce(ctx, root, a, c, testPlatforms, "https://example.invalid/src", naming{}, ra, nil); err != nil {
				t.Error(err)
			}
			if ra.Stamp.Revision != strings.TrimSpace(string(head)) {
				t.Errorf("revision %q, want HEAD %q", ra.Stamp.Revision, head)
			}
			checkLayout(t, filepath.Join(a, c.Repository), c, ra)
			checkDockerArchive(t, a, c, ra)
			if runtime.GOOS != "linux" {
				return
			}
			bin := filepath.Join(a, ".build", c.Name+"-"+testPlatforms[0].OS+"-"+testPlatforms[0].Arch)
			out, err := exec.Command(bin, versionArgs(c)...).CombinedOutput()
			if err != nil || !strings.Contains(string(out), ra.Stamp.Revision) || !strings.Contains(string(out), ra.Stamp.Version) {
				t.Errorf("%s %v: %q (%v), want its version %s and revision %s", c.Name, versionArgs(c), out, err, ra.Stamp.Version, ra.Stamp.Revision)
			}
		})
	}
}

// TestSameFilesNamesTheDifference: reproduce's comparison fails on a file whose bytes differ
// or that one build lacks, and names it.
func TestSameFilesNamesTheDifference(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	for dir, body := range map[string]string{a: "one", b: "two"} {
		if err := os.WriteFile(filepath.Join(dir, "x.oci.tar"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "same.cdx.json"), []byte("same"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := sameFiles(a, b, []string{"same.cdx.json"}); err != nil {
		t.Errorf("equal files: %v", err)
	}
	if err := sameFiles(a, b, []string{"same.cdx.json", "x.oci.tar"}); err == nil || !strings.Contains(err.Error(), "x.oci.tar differs") {
		t.Errorf("different files: %v, want an error naming x.oci.tar", err)
	}
	if err := sameFiles(a, b, []string{"missing.docker.tar"}); err == nil || !strings.Contains(err.Error(), "missing.docker.tar") {
		t.Errorf("a missing file: %v, want an error naming it", err)
	}
}

// versionArgs are the arguments that make c print its version.
func versionArgs(c component) []string {
	if c.Name == "nppctl" {
		return []string{"version"}
	}
	return []string{"--version"}
}

// checkLayout validates the OCI layout at dir and every image in it.
func checkLayout(t *testing.T, dir string, c component, r result) {
	t.Helper()
	lp, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	top, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 || im.Manifests[0].Digest != r.Digest || im.Manifests[0].Annotations["io.containerd.image.name"] != r.Ref {
		t.Fatalf("index.json: %+v, want the index %s named %s", im.Manifests, r.Digest, r.Ref)
	}
	idx, err := top.ImageIndex(r.Digest)
	if err != nil {
		t.Fatal(err)
	}
	if err := validate.Index(idx); err != nil {
		t.Fatalf("the OCI index is not valid: %v", err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range m.Manifests {
		got = append(got, d.Platform.OS+"/"+d.Platform.Architecture)
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Config.User != "65532:65532" || !slices.Equal(cfg.Config.Entrypoint, []string{"/" + c.Name}) {
			t.Errorf("%s: user %q, entrypoint %q; want 65532:65532 and /%s", d.Platform, cfg.Config.User, cfg.Config.Entrypoint, c.Name)
		}
		if !cfg.Created.Time.Equal(r.Stamp.Time) {
			t.Errorf("%s: created %v, want the commit's time %v", d.Platform, cfg.Created.Time, r.Stamp.Time)
		}
		for k, want := range map[string]string{
			"org.opencontainers.image.revision": r.Stamp.Revision,
			"org.opencontainers.image.version":  r.Stamp.Version,
			"org.opencontainers.image.source":   "https://example.invalid/src",
		} {
			if cfg.Config.Labels[k] != want {
				t.Errorf("%s: label %s = %q, want %q", d.Platform, k, cfg.Config.Labels[k], want)
			}
		}
		checkFiles(t, img, c, r)
	}
	var want []string
	for _, p := range testPlatforms {
		want = append(want, p.String())
	}
	if !slices.Equal(got, want) {
		t.Errorf("platforms %v, want %v", got, want)
	}
}

// checkFiles requires the image's only files to be /<name> (executable) and its SBOM, which
// names the binary's module at the stamp's version.
func checkFiles(t *testing.T, img v1.Image, c component, r result) {
	t.Helper()
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers: %d (%v), want 1", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	var names []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if h.Name == c.Name && h.Mode != 0o755 {
			t.Errorf("/%s mode %o, want 755", c.Name, h.Mode)
		}
		if h.Name == "sbom/"+c.Name+".cdx.json" {
			var bom struct {
				BOMFormat string `json:"bomFormat"`
				Metadata  struct {
					Component struct{ Name, Version string }
				}
				Components []struct{ Name string }
			}
			data, _ := io.ReadAll(tr)
			if err := json.Unmarshal(data, &bom); err != nil {
				t.Fatalf("SBOM: %v", err)
			}
			if bom.BOMFormat != "CycloneDX" || bom.Metadata.Component.Version != r.Stamp.Version ||
				!slices.ContainsFunc(bom.Components, func(x struct{ Name string }) bool { return x.Name == "sigs.k8s.io/yaml" }) {
				t.Errorf("SBOM: format %q, main component %+v, %d components; want CycloneDX, version %s, and the linked modules",
					bom.BOMFormat, bom.Metadata.Component, len(bom.Components), r.Stamp.Version)
			}
		}
	}
	want := []string{c.Name, "sbom/", "sbom/" + c.Name + ".cdx.json"}
	if !slices.Equal(names, want) {
		t.Errorf("files %v, want only %v (no shell, nothing else)", names, want)
	}
}

// checkDockerArchive loads each platform's docker archive, as docker load would read it, and
// requires its tag and the image of the index.
func checkDockerArchive(t *testing.T, dir string, c component, r result) {
	t.Helper()
	tag, err := name.NewTag(r.Ref)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range testPlatforms {
		img, err := tarball.ImageFromPath(filepath.Join(dir, c.Repository+"-"+p.OS+"-"+p.Arch+".docker.tar"), &tag)
		if err != nil {
			t.Fatalf("docker archive for %s, tag %s: %v", p, tag, err)
		}
		cfg, err := img.RawConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		var got v1.ConfigFile
		if err := json.Unmarshal(cfg, &got); err != nil || got.Architecture != p.Arch || !bytes.Contains(cfg, []byte(r.Stamp.Revision)) {
			t.Errorf("docker archive for %s: config for %s (%v), want %s of revision %s", p, got.Architecture, err, p.Arch, r.Stamp.Revision)
		}
	}
}
