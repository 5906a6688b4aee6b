package main

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// naming is how the images are named: <Registry>/<repository>:<Tag>.
type naming struct {
	// Registry is the repositories' prefix, "docker.io/library" when empty (the name
	// `docker load` gives an image without one).
	Registry string
	// Tag is the images' tag; empty for the version the Go toolchain stamped (the commit's
	// tag, or a pseudo-version).
	Tag string
}

func (n naming) registry() string {
	if n.Registry == "" {
		return "docker.io/library"
	}
	return strings.TrimSuffix(n.Registry, "/")
}

// result is what buildComponent wrote for one component.
type result struct {
	// Ref is the image's reference, docker.io/library/<repository>:<tag> (the name
	// `ctr images import` and `docker load` give it).
	Ref string
	// Digest is the digest of the image index.
	Digest v1.Hash
	// Stamp is the source the binaries were built from.
	Stamp stamp
}

// buildComponent builds c for every platform and writes, under out:
//   - <repository>/: the OCI image layout of the index (for `crane push`, and for the
//     real-node tests);
//   - <repository>.oci.tar: the same layout as a tar archive (`ctr images import`,
//     `docker load` from Docker 25);
//   - <repository>-<os>-<arch>.docker.tar: each platform's image as a docker archive
//     (`docker load` of any version);
//   - <name>-<os>-<arch>.cdx.json: each binary's SBOM, also inside its image.
//
// The image is named <n.Registry>/<repository>:<tag>, the tag being n.Tag, or the stamp's
// version when n.Tag is empty. env goes to every go build (goBuild).
func buildComponent(ctx context.Context, root, out string, c component, platforms []platform, source string, n naming, env []string) (result, error) {
	work := filepath.Join(out, ".build")
	if err := os.MkdirAll(work, 0o755); err != nil {
		return result{}, err
	}
	images := map[platform]v1.Image{}
	var first stamp
	for i, p := range platforms {
		binPath := filepath.Join(work, fmt.Sprintf("%s-%s-%s", c.Name, p.OS, p.Arch))
		s, err := goBuild(ctx, root, c.Package, p, binPath, env)
		if err != nil {
			return result{}, err
		}
		if i == 0 {
			first = s
		} else if s != first {
			return result{}, fmt.Errorf("%s: the builds for %s and %s come from different sources (%+v, %+v)", c.Name, platforms[0], p, first, s)
		}
		sbom, err := sbomFor(binPath, s)
		if err != nil {
			return result{}, err
		}
		if err := os.WriteFile(filepath.Join(out, fmt.Sprintf("%s-%s-%s.cdx.json", c.Name, p.OS, p.Arch)), sbom, 0o644); err != nil {
			return result{}, err
		}
		if images[p], err = buildImage(c, p, binPath, sbom, s, ociLabels(c, s, source)); err != nil {
			return result{}, err
		}
	}
	idx, err := buildIndex(images, platforms, ociLabels(c, first, source))
	if err != nil {
		return result{}, err
	}
	imageTag := first.tag()
	if n.Tag != "" {
		imageTag = n.Tag
	}
	ref := n.registry() + "/" + c.Repository + ":" + imageTag
	tag, err := name.NewTag(ref, name.StrictValidation)
	if err != nil {
		return result{}, fmt.Errorf("%s: tag %q: %w", c.Name, imageTag, err)
	}
	dir := filepath.Join(out, c.Repository)
	if err := os.RemoveAll(dir); err != nil {
		return result{}, err
	}
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return result{}, err
	}
	err = lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		// The names under which containerd (and so `ctr images import`) and other OCI
		// tools list the imported image.
		"io.containerd.image.name":          ref,
		"org.opencontainers.image.ref.name": imageTag,
	}))
	if err != nil {
		return result{}, fmt.Errorf("write the OCI layout of %s: %w", c.Name, err)
	}
	if err := tarDir(dir, filepath.Join(out, c.Repository+".oci.tar"), first.Time); err != nil {
		return result{}, err
	}
	for _, p := range platforms {
		path := filepath.Join(out, fmt.Sprintf("%s-%s-%s.docker.tar", c.Repository, p.OS, p.Arch))
		if err := tarball.WriteToFile(path, tag, images[p]); err != nil {
			return result{}, fmt.Errorf("write the docker archive of %s for %s: %w", c.Name, p, err)
		}
	}
	d, err := idx.Digest()
	if err != nil {
		return result{}, err
	}
	return result{Ref: ref, Digest: d, Stamp: first}, nil
}

// tarDir writes the files under dir into the tar archive at path, in name order, dated mod,
// owned by root: the same directory gives the same bytes.
func tarDir(dir, path string, mod time.Time) error {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(files)
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	for _, p := range files {
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		h := &tar.Header{Name: filepath.ToSlash(rel), ModTime: mod.UTC(), Mode: 0o644, Typeflag: tar.TypeReg, Size: st.Size(), Format: tar.FormatPAX}
		if st.IsDir() {
			h.Name, h.Mode, h.Typeflag, h.Size = h.Name+"/", 0o755, tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if !st.IsDir() {
			src, err := os.Open(p)
			if err != nil {
				return err
			}
			_, err = io.Copy(tw, src)
			src.Close()
			if err != nil {
				return err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return f.Close()
}

// buildRelease builds nppctl for each platform as kubectl-npp-<os>-<arch> (".exe" on
// windows: the kubectl plugin `kubectl npp`; rename it to kubectl-npp on the PATH) under dir,
// each with its CycloneDX SBOM (<binary>.cdx.json), and SHA256SUMS of the binaries beside
// them (sha256sum's format), and returns the paths of the binaries and of SHA256SUMS (not of
// the SBOMs). env goes to every go build (goBuild).
func buildRelease(ctx context.Context, root, dir string, platforms []platform, env []string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var files, sums []string
	for _, p := range platforms {
		n := fmt.Sprintf("kubectl-npp-%s-%s%s", p.OS, p.Arch, p.exe())
		path := filepath.Join(dir, n)
		s, err := goBuild(ctx, root, "./cmd/nppctl", p, path, env)
		if err != nil {
			return nil, err
		}
		sbom, err := sbomFor(path, s)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(path+".cdx.json", sbom, 0o644); err != nil {
			return nil, err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(b)
		sums = append(sums, hex.EncodeToString(sum[:])+"  "+n)
		files = append(files, path)
	}
	sumsPath := filepath.Join(dir, "SHA256SUMS")
	if err := os.WriteFile(sumsPath, []byte(strings.Join(sums, "\n")+"\n"), 0o644); err != nil {
		return nil, err
	}
	return append(files, sumsPath), nil
}
