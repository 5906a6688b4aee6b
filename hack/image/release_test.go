package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestReleaseNotesCutFromTheChangelog: the notes are the changelog's section of the version
// (with or without the v), or its Unreleased section with a line saying so; the images follow.
func TestReleaseNotesCutFromTheChangelog(t *testing.T) {
	dir := t.TempDir()
	cl := filepath.Join(dir, "CHANGELOG.md")
	text := "# Changelog\n\n## [Unreleased]\n\n### Added\n\n- next thing\n\n## [0.1.0] - 2026-12-01\n\n### Added\n\n- first thing\n\n[0.1.0]: https://example.invalid/v0.1.0\n"
	if err := os.WriteFile(cl, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	built := []result{{Ref: "ghcr.io/x/network-plugin-policy:v0.1.0"}}
	got, err := releaseNotes(cl, "v0.1.0", built)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got, "- first thing") || strings.Contains(got, "next thing") || strings.Contains(got, "example.invalid") ||
		!strings.Contains(got, "`ghcr.io/x/network-plugin-policy:v0.1.0`") {
		t.Errorf("notes of v0.1.0:\n%s", got)
	}
	got, err = releaseNotes(cl, "v0.2.0", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got, "- next thing") || !strings.Contains(got, "has no section of v0.2.0 yet") {
		t.Errorf("notes of v0.2.0:\n%s", got)
	}
}

// TestArchivesAreReproducible: the kubectl-npp archives are the same bytes for the same
// files and time, whatever the order the files come in.
func TestArchivesAreReproducible(t *testing.T) {
	mod := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	files := map[string][]byte{"kubectl-npp": []byte("binary"), "LICENSE": []byte("license")}
	a, err := tarGzFiles(mod, files, map[string]int64{"kubectl-npp": 0o755, "LICENSE": 0o644})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := tarGzFiles(mod, map[string][]byte{"LICENSE": []byte("license"), "kubectl-npp": []byte("binary")}, map[string]int64{"kubectl-npp": 0o755, "LICENSE": 0o644})
	if !bytes.Equal(a, b) {
		t.Error("two tar.gz archives of the same files differ")
	}
	z1, err := zipFiles(mod, files, map[string]os.FileMode{"kubectl-npp": 0o755, "LICENSE": 0o644})
	if err != nil {
		t.Fatal(err)
	}
	z2, _ := zipFiles(mod, files, map[string]os.FileMode{"kubectl-npp": 0o755, "LICENSE": 0o644})
	if !bytes.Equal(z1, z2) {
		t.Error("two zip archives of the same files differ")
	}
}

// TestTwiceChecksImagesAndReleaseBinaries: run with twice, as make release runs it, builds
// the real-node suite's small images a second time with a build cache of its own and says
// that each was reproduced; reproduceRelease then finds this machine's kubectl-npp, its SBOM
// and SHA256SUMS the same in a second build (with the shared cache here: make release's
// compiles them again), and names a release file that the first build's directory lacks or
// that differs. A difference between two images is TestSameFilesNamesTheDifference's.
func TestTwiceChecksImagesAndReleaseBinaries(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries twice")
	}
	ctx := context.Background()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	host := "linux/" + runtime.GOARCH
	o := options{root: root, out: out, plats: host, releaseDir: filepath.Join(out, "release"),
		source: "https://example.invalid/src", twice: true}
	var w bytes.Buffer
	if err := run(ctx, &w, testComponents, o); err != nil {
		t.Fatal(err)
	}
	for _, c := range testComponents {
		if !strings.Contains(w.String(), "reproduced: docker.io/library/"+c.Repository+":") {
			t.Errorf("run -twice printed %q, want a reproduced line for %s", w.String(), c.Repository)
		}
	}

	rel := []platform{{"linux", runtime.GOARCH}}
	dir := t.TempDir()
	if _, err := buildRelease(ctx, root, dir, rel, nil); err != nil {
		t.Fatal(err)
	}
	if err := reproduceRelease(ctx, root, dir, rel, nil); err != nil {
		t.Errorf("two builds of the release binaries: %v", err)
	}
	sbom := filepath.Join(dir, "kubectl-npp-linux-"+runtime.GOARCH+".cdx.json")
	if err := os.WriteFile(sbom, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := reproduceRelease(ctx, root, dir, rel, nil); err == nil || !strings.Contains(err.Error(), filepath.Base(sbom)+" differs") {
		t.Errorf("a changed SBOM: %v, want an error naming it", err)
	}
	if err := os.Remove(filepath.Join(dir, "SHA256SUMS")); err != nil {
		t.Fatal(err)
	}
	if err := reproduceRelease(ctx, root, dir, rel, nil); err == nil || !strings.Contains(err.Error(), "SHA256SUMS") {
		t.Errorf("a missing SHA256SUMS: %v, want an error naming it", err)
	}
}
