package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"

	cdx "github.com/CycloneDX/cyclonedx-go"
	"github.com/CycloneDX/cyclonedx-gomod/pkg/generate/bin"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/rs/zerolog"
)

// nonRoot is the user and group the images run as: 65532, "nonroot" in the distroless
// images, which the Deployment's securityContext (runAsNonRoot) accepts.
const nonRoot = "65532:65532"

// sbomDir is where an image holds the SBOM of its binary.
const sbomDir = "sbom"

// component is one program shipped as an image.
type component struct {
	// Name is the binary's name, at the image's root; the entrypoint is /<Name>.
	Name string
	// Package is the Go package built, relative to the repository.
	Package string
	// Repository is the image's name without a registry.
	Repository string
	// Description is the org.opencontainers.image.description label.
	Description string
}

// ociLabels are the OCI image annotations (image-spec annotations.md) of an image of c built
// from s: source, revision, version, creation time, title, description and licence.
func ociLabels(c component, s stamp, source string) map[string]string {
	return map[string]string{
		"org.opencontainers.image.source":      source,
		"org.opencontainers.image.revision":    s.Revision,
		"org.opencontainers.image.version":     s.Version,
		"org.opencontainers.image.created":     s.Time.UTC().Format("2006-01-02T15:04:05Z"),
		"org.opencontainers.image.title":       c.Repository,
		"org.opencontainers.image.description": c.Description,
		"org.opencontainers.image.licenses":    "Apache-2.0",
	}
}

// sbomFor returns the CycloneDX SBOM (JSON) of the binary at path, generated from its Go
// build info by cyclonedx-gomod: the main module at its version and every module linked in,
// with package URLs. Its timestamp is the commit's time, so it is the same for one commit.
func sbomFor(path string, s stamp) ([]byte, error) {
	g, err := bin.NewGenerator(path, bin.WithLogger(zerolog.Nop()))
	if err != nil {
		return nil, fmt.Errorf("SBOM of %s: %w", path, err)
	}
	bom, err := g.Generate()
	if err != nil {
		return nil, fmt.Errorf("SBOM of %s: %w", path, err)
	}
	bom.Metadata.Timestamp = s.Time.UTC().Format("2006-01-02T15:04:05Z")
	var buf bytes.Buffer
	if err := cdx.NewBOMEncoder(&buf, cdx.BOMFileFormatJSON).SetPretty(true).Encode(bom); err != nil {
		return nil, fmt.Errorf("encode the SBOM of %s: %w", path, err)
	}
	return buf.Bytes(), nil
}

// buildImage returns the OCI image of one platform: a single layer with /<name> (0755) and
// /sbom/<name>.cdx.json (0644), owned by root and dated at the commit; the config runs
// /<name> as nonRoot, with the labels, and the creation time of the commit. There is no
// shell and nothing else in the image.
func buildImage(c component, p platform, binPath string, sbom []byte, s stamp, labels map[string]string) (v1.Image, error) {
	program, err := os.ReadFile(binPath)
	if err != nil {
		return nil, err
	}
	var layerTar bytes.Buffer
	tw := tar.NewWriter(&layerTar)
	for _, f := range []struct {
		name string
		mode int64
		data []byte
		dir  bool
	}{
		{name: c.Name, mode: 0o755, data: program},
		{name: sbomDir + "/", mode: 0o755, dir: true},
		{name: sbomDir + "/" + c.Name + ".cdx.json", mode: 0o644, data: sbom},
	} {
		h := &tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data)), ModTime: s.Time.UTC(),
			Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if f.dir {
			h.Typeflag = tar.TypeDir
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := layerTar.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("layer of %s for %s: %w", c.Name, p, err)
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, MediaType: types.OCILayer, History: v1.History{
		Created: v1.Time{Time: s.Time.UTC()}, CreatedBy: fmt.Sprintf("hack/image: go build %s (%s)", c.Package, p),
	}})
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = p.OS, p.Arch
	cfg.Created = v1.Time{Time: s.Time.UTC()}
	cfg.Config = v1.Config{
		Entrypoint: []string{"/" + c.Name},
		User:       nonRoot,
		WorkingDir: "/",
		Labels:     labels,
	}
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return nil, err
	}
	return mutate.Annotations(img, labels).(v1.Image), nil
}

// buildIndex returns the image index of c over the images, one per platform, annotated with
// the labels.
func buildIndex(images map[platform]v1.Image, order []platform, labels map[string]string) (v1.ImageIndex, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range order {
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add: images[p],
			Descriptor: v1.Descriptor{
				MediaType: types.OCIManifestSchema1,
				Platform:  &v1.Platform{OS: p.OS, Architecture: p.Arch},
			},
		})
	}
	return mutate.Annotations(idx, labels).(v1.ImageIndex), nil
}
