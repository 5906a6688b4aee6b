package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// reproduce builds c a second time, for the same platforms, into a scratch directory under
// os.TempDir() (removed afterwards), with env added to every go build of it (make release:
// GOCACHE=<an empty directory>, so that the second build compiles everything again), and
// compares it with first, the result of the build that wrote out. It returns nil when the
// index digests are equal and so are the bytes of every file that build wrote for c: the OCI
// archive, each platform's docker archive and SBOM. Otherwise the error names the digests
// or the first file that differs, or is the error of the second build or of reading a file.
// make release (-twice) and TestImagesAreReproducible check reproducibility with it.
func reproduce(ctx context.Context, root, out string, c component, platforms []platform, source string, n naming, first result, env []string) error {
	dir, err := os.MkdirTemp("", "image-twice-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	second, err := buildComponent(ctx, root, dir, c, platforms, source, n, env)
	if err != nil {
		return fmt.Errorf("the second build of %s: %w", c.Name, err)
	}
	if second.Digest != first.Digest {
		return fmt.Errorf("%s: two builds of one commit give the index digests %s and %s", c.Name, first.Digest, second.Digest)
	}
	files := []string{c.Repository + ".oci.tar"}
	for _, p := range platforms {
		files = append(files,
			fmt.Sprintf("%s-%s-%s.docker.tar", c.Repository, p.OS, p.Arch),
			fmt.Sprintf("%s-%s-%s.cdx.json", c.Name, p.OS, p.Arch))
	}
	return sameFiles(out, dir, files)
}

// reproduceRelease builds the release binaries (buildRelease) a second time into a scratch
// directory under os.TempDir() (removed afterwards), with env added to every go build, and
// returns nil when every file of that build (each kubectl-npp binary, its SBOM, SHA256SUMS)
// has the same bytes in dir, where the first build wrote them. Otherwise the error names the
// first file that differs or that dir lacks, or is the second build's error.
func reproduceRelease(ctx context.Context, root, dir string, platforms []platform, env []string) error {
	scratch, err := os.MkdirTemp("", "release-twice-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	if _, err := buildRelease(ctx, root, scratch, platforms, env); err != nil {
		return fmt.Errorf("the second build of the release binaries: %w", err)
	}
	entries, err := os.ReadDir(scratch)
	if err != nil {
		return err
	}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() {
			names = append(names, e.Name())
		}
	}
	return sameFiles(dir, scratch, names)
}

// sameFiles returns nil when each of names has the same bytes in the directories a and b.
// Otherwise it returns an error naming the first file whose bytes differ, or the error of
// reading it (a file that a or b lacks: fs.ErrNotExist, with its path).
func sameFiles(a, b string, names []string) error {
	for _, n := range names {
		x, err := os.ReadFile(filepath.Join(a, n))
		if err != nil {
			return err
		}
		y, err := os.ReadFile(filepath.Join(b, n))
		if err != nil {
			return err
		}
		if !bytes.Equal(x, y) {
			return fmt.Errorf("two builds of one commit: %s differs (%d and %d bytes)", n, len(x), len(y))
		}
	}
	return nil
}
