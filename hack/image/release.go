package main

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// semverTag is a release version: v, then Semantic Versioning 2.0.0's MAJOR.MINOR.PATCH
// with an optional pre-release (no build metadata: an image tag may not hold "+").
var semverTag = regexp.MustCompile(`^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$`)

// completeScript is the program kubectl runs to complete `kubectl npp` (cmd/nppctl).
const completeScript = "kubectl_complete-npp"

// krewPlugin is the krew index's name of the kubectl plugin (kubectl krew install npp).
const krewPlugin = "npp"

// writeRelease writes, into o.releaseDir beside the kubectl-npp binaries that buildRelease
// wrote there:
//   - kubectl-npp_<version>_<os>_<arch>.tar.gz (.zip on windows): the binary as kubectl-npp
//     (.exe), the LICENSE and (but on windows) completeScript, dated at the commit, the same
//     bytes for the same commit;
//   - npp.yaml: the krew plugin manifest over those archives, with their SHA-256 and the
//     URLs they will have once uploaded to the release <o.source>/releases/download/<version>/
//     (a template until that release exists);
//   - RELEASE-NOTES.md: the changelog's section of the version ("## [0.1.0]"), or its
//     Unreleased section when it has none yet (said in the notes), and the images with
//     their index digests;
//   - SHA256SUMS: of every file there (sha256sum's format), the chart's archive included
//     when make release has put it there first.
//
// It returns the paths written. Errors name the file.
func writeRelease(root string, o options, built []result) ([]string, error) {
	var written []string
	bins, err := filepath.Glob(filepath.Join(o.releaseDir, "kubectl-npp-*"))
	if err != nil {
		return nil, err
	}
	type archive struct{ os, arch, name, sum, bin string }
	var archives []archive
	license, err := os.ReadFile(filepath.Join(root, "LICENSE"))
	if err != nil {
		return nil, err
	}
	complete, err := os.ReadFile(filepath.Join(root, "cmd", "nppctl", completeScript))
	if err != nil {
		return nil, err
	}
	for _, b := range bins {
		base := filepath.Base(b)
		if strings.HasSuffix(base, ".cdx.json") {
			continue
		}
		osArch := strings.TrimSuffix(strings.TrimPrefix(base, "kubectl-npp-"), ".exe")
		goos, arch, ok := strings.Cut(osArch, "-")
		if !ok {
			continue
		}
		s, err := readStamp(b)
		if err != nil {
			return nil, err
		}
		body, err := os.ReadFile(b)
		if err != nil {
			return nil, err
		}
		a := archive{os: goos, arch: arch, bin: "kubectl-npp"}
		var data []byte
		if goos == "windows" {
			a.bin += ".exe"
			a.name = fmt.Sprintf("kubectl-npp_%s_%s_%s.zip", o.version, goos, arch)
			data, err = zipFiles(s.Time, map[string][]byte{a.bin: body, "LICENSE": license}, map[string]os.FileMode{a.bin: 0o755, "LICENSE": 0o644})
		} else {
			a.name = fmt.Sprintf("kubectl-npp_%s_%s_%s.tar.gz", o.version, goos, arch)
			data, err = tarGzFiles(s.Time, map[string][]byte{a.bin: body, "LICENSE": license, completeScript: complete},
				map[string]int64{a.bin: 0o755, "LICENSE": 0o644, completeScript: 0o755})
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", a.name, err)
		}
		path := filepath.Join(o.releaseDir, a.name)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return nil, err
		}
		sum := sha256.Sum256(data)
		a.sum = hex.EncodeToString(sum[:])
		archives = append(archives, a)
		written = append(written, path)
	}
	sort.Slice(archives, func(i, j int) bool { return archives[i].name < archives[j].name })

	var m strings.Builder
	fmt.Fprintf(&m, `# The krew plugin manifest of kubectl npp %[1]s, made by make release. A template until the
# release exists: the URLs are those the archives will have once uploaded to it, and the
# sha256 values are those of the archives beside this file.
apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: %[2]s
spec:
  version: %[1]s
  homepage: %[3]s
  shortDescription: Validate, test and explain NetworkPluginPolicies
  description: |
    nppctl as a kubectl plugin: validate, test, explain and diff the NetworkPluginPolicies
    of network-plugin-policy offline or against a cluster, and show the status of game
    servers' networks (kubectl npp status).
  platforms:
`, o.version, krewPlugin, o.source)
	for _, a := range archives {
		fmt.Fprintf(&m, "  - selector:\n      matchLabels:\n        os: %s\n        arch: %s\n    uri: %s/releases/download/%s/%s\n    sha256: %s\n    bin: %s\n",
			a.os, a.arch, o.source, o.version, a.name, a.sum, a.bin)
	}
	manifest := filepath.Join(o.releaseDir, krewPlugin+".yaml")
	if err := os.WriteFile(manifest, []byte(m.String()), 0o644); err != nil {
		return nil, err
	}
	written = append(written, manifest)

	notes, err := releaseNotes(o.changelog, o.version, built)
	if err != nil {
		return nil, err
	}
	notesPath := filepath.Join(o.releaseDir, "RELEASE-NOTES.md")
	if err := os.WriteFile(notesPath, []byte(notes), 0o644); err != nil {
		return nil, err
	}
	written = append(written, notesPath)

	sums, err := sumFiles(o.releaseDir)
	if err != nil {
		return nil, err
	}
	sumsPath := filepath.Join(o.releaseDir, "SHA256SUMS")
	if err := os.WriteFile(sumsPath, []byte(sums), 0o644); err != nil {
		return nil, err
	}
	return append(written, sumsPath), nil
}

// releaseNotes returns the notes of version: a title, the changelog's section of the version
// (its heading "## [<version without v>]" or "## [<version>]"), or the Unreleased section with
// a line saying the changelog has no section of the version yet, and the images built.
// Errors: the changelog cannot be read, or has neither section.
func releaseNotes(changelog, version string, built []result) (string, error) {
	f, err := os.Open(changelog)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sections := map[string][]string{}
	var current string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## [") {
			current = strings.TrimPrefix(line[:strings.Index(line, "]")], "## [")
			continue
		}
		if current != "" && !strings.HasPrefix(line, "[") { // link references end the file
			sections[current] = append(sections[current], line)
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# network-plugin-policy %s\n", version)
	body, ok := sections[strings.TrimPrefix(version, "v")]
	if !ok {
		body, ok = sections[version]
	}
	if !ok {
		if body, ok = sections["Unreleased"]; !ok {
			return "", fmt.Errorf("%s: no section [%s] nor [Unreleased]", changelog, strings.TrimPrefix(version, "v"))
		}
		fmt.Fprintf(&b, "\n(%s has no section of %s yet: these are its Unreleased changes. Move them under \"## [%s] - <date>\" before tagging.)\n",
			filepath.Base(changelog), version, strings.TrimPrefix(version, "v"))
	}
	b.WriteString(strings.TrimRight(strings.Join(body, "\n"), "\n") + "\n")
	if len(built) > 0 {
		b.WriteString("\n### Images\n\n")
		for _, r := range built {
			fmt.Fprintf(&b, "- `%s` (index `%s`)\n", r.Ref, r.Digest)
		}
	}
	return b.String(), nil
}

// sumFiles returns the SHA-256 of every regular file directly in dir but SHA256SUMS, by
// name, in sha256sum's format.
func sumFiles(dir string) (string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, e := range entries {
		if !e.Type().IsRegular() || e.Name() == "SHA256SUMS" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return "", err
		}
		sum := sha256.Sum256(data)
		fmt.Fprintf(&b, "%s  %s\n", hex.EncodeToString(sum[:]), e.Name())
	}
	return b.String(), nil
}

// tarGzFiles returns a gzip-compressed tar archive of files (name to content, with modes),
// in name order, dated mod, owned by root, with a gzip header without a name or time: the
// same input gives the same bytes.
func tarGzFiles(mod time.Time, files map[string][]byte, modes map[string]int64) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, n := range sortedNames(files) {
		h := &tar.Header{Name: n, Mode: modes[n], Size: int64(len(files[n])), ModTime: mod.UTC(), Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(files[n]); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// zipFiles returns a zip archive of files (name to content, with modes), in name order, dated
// mod: the same input gives the same bytes.
func zipFiles(mod time.Time, files map[string][]byte, modes map[string]os.FileMode) ([]byte, error) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, n := range sortedNames(files) {
		h := &zip.FileHeader{Name: n, Method: zip.Deflate, Modified: mod.UTC()}
		h.SetMode(modes[n])
		w, err := zw.CreateHeader(h)
		if err != nil {
			return nil, err
		}
		if _, err := w.Write(files[n]); err != nil {
			return nil, err
		}
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func sortedNames(files map[string][]byte) []string {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
