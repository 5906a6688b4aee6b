package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
)

// releaseVersion is a release version: v, then Semantic Versioning's MAJOR.MINOR.PATCH with an
// optional pre-release (the images' tag, so no build metadata).
var releaseVersion = regexp.MustCompile(`^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$`)

// Package packages the chart in dir as `helm package --version <version without v>
// --app-version <version>` does (Helm's loader, which honours .helmignore, and chartutil.Save)
// into out, and returns the archive's path. Helm dates every entry with the time of the
// call; here the entries are rewritten dated at the commit of root (git log -1 %ct), and the
// gzip stream without a time, so one commit always gives the same bytes: the archive can be
// rebuilt and checked against SHA256SUMS, and pushed to an OCI registry with helm push.
// Errors: a version that is not vMAJOR.MINOR.PATCH[-PRE], Helm's, git's.
func Package(root, dir, out, version string) (string, error) {
	if !releaseVersion.MatchString(version) {
		return "", fmt.Errorf("-version %q: expected vMAJOR.MINOR.PATCH with an optional -PRERELEASE, such as v0.1.0", version)
	}
	ch, err := loader.Load(dir)
	if err != nil {
		return "", err
	}
	ch.Metadata.Version = strings.TrimPrefix(version, "v")
	ch.Metadata.AppVersion = version
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", err
	}
	path, err := chartutil.Save(ch, out)
	if err != nil {
		return "", err
	}
	ct, err := exec.Command("git", "-C", root, "log", "-1", "--format=%ct").Output()
	if err != nil {
		return "", fmt.Errorf("git log: the commit's time: %w", err)
	}
	secs, err := strconv.ParseInt(strings.TrimSpace(string(ct)), 10, 64)
	if err != nil {
		return "", fmt.Errorf("git log: the commit's time %q: %w", ct, err)
	}
	return path, redate(path, time.Unix(secs, 0).UTC())
}

// redate rewrites the gzip-compressed tar archive at path with every entry dated mod and the
// gzip header without a time, keeping the entries, their order and Helm's gzip header fields.
func redate(path string, mod time.Time) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Header.Extra, zw.Header.Comment = zr.Header.Extra, zr.Header.Comment
	tr, tw := tar.NewReader(zr), tar.NewWriter(zw)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		h.ModTime, h.AccessTime, h.ChangeTime = mod, time.Time{}, time.Time{}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}
