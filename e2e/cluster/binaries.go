package cluster

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

// Names of the control-plane binaries that Binaries can provide.
const (
	BinKubeAPIServer         = "kube-apiserver"
	BinEtcd                  = "etcd"
	BinKubeScheduler         = "kube-scheduler"
	BinKubeControllerManager = "kube-controller-manager"
	BinKwok                  = "kwok"
)

// KwokStagesFile is the file beside the kwok binary that holds the Stage objects kwok runs
// with (node fast and heartbeat, pod fast, from the kwok module); kwok does nothing without
// stages.
const KwokStagesFile = "kwok-stages.yaml"

// envtestBinaries are the binaries setup-envtest downloads; the others can only be built.
var envtestBinaries = []string{BinKubeAPIServer, BinEtcd}

// downloadTimeout bounds the setup-envtest step; without a network it fails in well under a
// second, with one a download of about 100 MB takes a minute or two.
const downloadTimeout = 5 * time.Minute

// Binaries returns a directory that holds every binary in names, trying in order: the
// directory in $KUBEBUILDER_ASSETS; the cache <repo>/bin/k8s/<KubeVersion>-<GOOS>-<GOARCH>/;
// a download with setup-envtest into that cache (only for kube-apiserver and etcd); a build
// from the Go module proxy with hack/build-controlplane.sh into that cache (a cold build of
// kube-apiserver takes about 16 minutes on 2 cores, see docs/development.md). Progress and
// the reasons a step was skipped are written to log. It returns an error naming the last step
// that failed when no step provides all binaries.
func Binaries(ctx context.Context, names []string, log io.Writer) (string, error) {
	if log == nil {
		log = io.Discard
	}
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		missing := missingBinaries(dir, names)
		if len(missing) == 0 {
			return dir, nil
		}
		fmt.Fprintf(log, "cluster: KUBEBUILDER_ASSETS=%s lacks %s; looking further\n", dir, strings.Join(missing, ", "))
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	version, err := KubeVersion(root)
	if err != nil {
		return "", err
	}
	cache := CacheDir(root, version)
	missing := missingBinaries(cache, names)
	if len(missing) == 0 {
		return cache, nil
	}

	if !slices.ContainsFunc(missing, func(n string) bool { return !slices.Contains(envtestBinaries, n) }) {
		if err := download(ctx, root, version, log); err != nil {
			fmt.Fprintf(log, "cluster: setup-envtest could not download %s: %v; building from the Go module proxy\n", version, err)
		} else if missing = missingBinaries(cache, names); len(missing) == 0 {
			return cache, nil
		}
	}

	fmt.Fprintf(log, "cluster: building %s %s from the Go module proxy into %s (cold: about 20 minutes; see docs/development.md)\n",
		strings.Join(missing, ", "), version, cache)
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "build-controlplane.sh"), missing...)
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build %s with hack/build-controlplane.sh: %w", strings.Join(missing, ", "), err)
	}
	if missing := missingBinaries(cache, names); len(missing) > 0 {
		return "", fmt.Errorf("hack/build-controlplane.sh ran but %s lacks %s", cache, strings.Join(missing, ", "))
	}
	return cache, nil
}

// CacheDir returns the cache directory of the control-plane binaries of Kubernetes version
// (such as "1.37.2") under the repository root: bin/k8s/<version>-<GOOS>-<GOARCH>, the layout
// setup-envtest uses for its --bin-dir.
func CacheDir(root, version string) string {
	return filepath.Join(root, "bin", "k8s", fmt.Sprintf("%s-%s-%s", version, runtime.GOOS, runtime.GOARCH))
}

// download asks setup-envtest (pinned in hack/tools/go.mod) to fetch kube-apiserver and etcd
// of version into <root>/bin/k8s/.
func download(ctx context.Context, root, version string, log io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, downloadTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "tool", "-modfile="+filepath.Join(root, "hack", "tools", "go.mod"),
		"setup-envtest", "use", "--print=path", "--bin-dir="+filepath.Join(root, "bin"), version)
	cmd.Dir = root
	cmd.Stderr = log
	out, err := cmd.Output()
	if err != nil {
		return err
	}
	if dir := strings.TrimSpace(string(out)); dir != CacheDir(root, version) {
		return fmt.Errorf("setup-envtest put the binaries in %s, not in %s", dir, CacheDir(root, version))
	}
	return nil
}

// missingBinaries returns the names in names that are not executable files in dir (kwok
// also counts as missing without its KwokStagesFile).
func missingBinaries(dir string, names []string) []string {
	var missing []string
	for _, n := range names {
		info, err := os.Stat(filepath.Join(dir, n))
		if err != nil || info.IsDir() || info.Mode()&0o111 == 0 {
			missing = append(missing, n)
		} else if _, err := os.Stat(filepath.Join(dir, KwokStagesFile)); n == BinKwok && err != nil {
			missing = append(missing, n)
		}
	}
	return missing
}
