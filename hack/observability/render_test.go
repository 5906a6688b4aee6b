package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRenderSVGDrawsTheKeyPanels renders a results file holding every key panel (one series
// each, and a zero series that is left out) and checks the SVG names each panel and legend,
// and that a results file without a key panel is an error naming it.
func TestRenderSVGDrawsTheKeyPanels(t *testing.T) {
	dir := t.TempDir()
	var results []map[string]any
	for _, title := range keyPanels {
		results = append(results, map[string]any{
			"title": title, "unit": "short",
			"queries": []map[string]any{{"expr": "x", "legend": "{{plugin}} line", "series": []map[string]any{
				{"metric": map[string]string{"plugin": "Kubernetes-NodePort"}, "values": [][]any{{100.0, "1"}, {102.0, "3"}}},
				{"metric": map[string]string{"plugin": "Zero"}, "values": [][]any{{100.0, "0"}, {102.0, "0"}}},
			}}},
		})
	}
	in := filepath.Join(dir, "results.json")
	b, _ := json.Marshal(results)
	if err := os.WriteFile(in, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "d.svg")
	if err := renderSVG(in, out); err != nil {
		t.Fatal(err)
	}
	svg, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range append(keyPanels, "Kubernetes-NodePort line") {
		if !strings.Contains(string(svg), want) {
			t.Errorf("the SVG does not name %q", want)
		}
	}
	if strings.Contains(string(svg), "Zero line") {
		t.Error("a series that is zero throughout is drawn")
	}
	b, _ = json.Marshal(results[1:])
	if err := os.WriteFile(in, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := renderSVG(in, out); err == nil || !strings.Contains(err.Error(), keyPanels[0]) {
		t.Errorf("renderSVG without %q: %v, want an error naming it", keyPanels[0], err)
	}
}
