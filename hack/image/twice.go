package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// reproduce builds c a second time, for the same platforms, into a scratch directory and
// compares it with first, the result of the build that wrote out: the index digests must
// be equal, and so must the bytes of every file that build wrote for c (the OCI archive, each
// platform's docker archive and SBOM). The scratch directory is removed. The error names the
// first file or digest that differs. make release (-twice) and TestImagesAreReproducible
// both check reproducibility with it.
func reproduce(ctx context.Context, root, out string, c component, platforms []platform, source string, n naming, first result) error {
	dir, err := os.MkdirTemp("", "image-twice-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	second, err := buildComponent(ctx, root, dir, c, platforms, source, n)
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

// reproduceRelease builds the release binaries a second time into a scratch directory (see
// buildRelease) and requires every file that the first build wrote into dir (written, the
// paths buildRelease returned) to have the same bytes there: each kubectl-npp binary, its
// SBOM and SHA256SUMS. The scratch directory is removed. The error names the first file that
// differs.
func reproduceRelease(ctx context.Context, root, dir string, platforms []platform, written []string) error {
	scratch, err := os.MkdirTemp("", "release-twice-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	again, err := buildRelease(ctx, root, scratch, platforms)
	if err != nil {
		return fmt.Errorf("the second build of the release binaries: %w", err)
	}
	if len(again) != len(written) {
		return fmt.Errorf("the second build of the release binaries wrote %d files, the first %d", len(again), len(written))
	}
	var names []string
	for _, p := range written {
		n := filepath.Base(p)
		names = append(names, n)
		if n != "SHA256SUMS" {
			names = append(names, n+".cdx.json")
		}
	}
	return sameFiles(dir, scratch, names)
}

// sameFiles returns an error naming the first of names whose bytes differ between the
// directories a and b, or that either lacks.
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
