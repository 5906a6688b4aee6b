package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/okg-extensions/network-plugin-policy/pkg/okgguard"
)

// TestDeploymentNamesOKGsConfigMap: the --okg-config-map that config/manager passes is OKG's
// own ConfigMap (okgguard's defaults, kruise-game-manager's namespace and name), the one the
// chart's okg.configMap defaults to too (TestOKGConfigMapFlagAndRBACAgree, hack/chart).
func TestDeploymentNamesOKGsConfigMap(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "config", "manager", "manager.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := "--okg-config-map=" + okgguard.DefaultConfigMapNamespace + "/" + okgguard.DefaultConfigMapName
	if !strings.Contains(string(b), "- "+want+"\n") {
		t.Errorf("config/manager/manager.yaml does not pass %s", want)
	}
}
