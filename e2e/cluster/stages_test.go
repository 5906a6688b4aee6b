package cluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCloudStages: the kwok stages the fake nodes run with leave the cloud's readiness gates
// out of the pod-ready Stage, and a stages file without kwok's range (a kwok upgrade) is an
// error rather than a silent change of what the fake nodes do.
func TestCloudStages(t *testing.T) {
	bin, dir := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, KwokStagesFile), []byte("kind: Stage\n      "+kwokGatesRange+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	path, err := cloudStages(bin, dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{{ if not (hasPrefix "service.readiness.alibabacloud.com/" .conditionType) }}`; !strings.Contains(string(b), want) {
		t.Errorf("stages:\n%s\nwant %s", b, want)
	}
	if err := os.WriteFile(filepath.Join(bin, KwokStagesFile), []byte("kind: Stage\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := cloudStages(bin, dir); err == nil {
		t.Error("stages without kwok's readiness-gate range: no error")
	}
}
