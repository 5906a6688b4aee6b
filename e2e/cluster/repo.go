package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/mod/modfile"
)

// modulePath is the Go module of this repository; RepoRoot looks for its go.mod.
const modulePath = "github.com/okg-extensions/network-plugin-policy"

// RepoRoot returns the root directory of this repository: the nearest directory at or above
// the working directory whose go.mod declares the module github.com/okg-extensions/network-plugin-policy.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("get working directory: %w", err)
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.Contains(string(data), "module "+modulePath+"\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of module %s at or above the working directory", modulePath)
		}
		dir = parent
	}
}

// KubeVersion returns the Kubernetes version of the control plane, such as "1.37.2": the
// version of k8s.io/api that the go.mod in root requires, v0.X.Y mapped to 1.X.Y (the staging
// modules are tagged v0.X.Y for Kubernetes v1.X.Y). It reads go.mod rather than the build
// information because test binaries carry no dependency versions.
func KubeVersion(root string) (string, error) {
	path := filepath.Join(root, "go.mod")
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	mod, err := modfile.ParseLax(path, data, nil)
	if err != nil {
		return "", fmt.Errorf("parse %s: %w", path, err)
	}
	for _, r := range mod.Require {
		if r.Mod.Path != "k8s.io/api" {
			continue
		}
		if !strings.HasPrefix(r.Mod.Version, "v0.") {
			return "", fmt.Errorf("%s: k8s.io/api version %q is not of the form v0.X.Y", path, r.Mod.Version)
		}
		return "1." + strings.TrimPrefix(r.Mod.Version, "v0."), nil
	}
	return "", fmt.Errorf("%s does not require k8s.io/api", path)
}
