package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// update rewrites the golden files: go test ./cmd/nppctl -update.
var update = flag.Bool("update", false, "rewrite testdata/golden/*.golden with the current output")

// samples is the GitOps example that `make test` runs through nppctl test.
const samples = "../../config/samples/gitops"

// statusNow is the time of testdata/status's cluster dump.
const statusNow = "2026-12-03T10:00:00Z"

// TestGolden pins the output and exit code of every command: testdata/golden/NAME.golden
// holds the exit code, stdout and stderr of `nppctl ARGS...`.
func TestGolden(t *testing.T) {
	cases := map[string]struct {
		name  string // binary name; empty is nppctl
		args  []string
		stdin string
	}{
		"validate-samples": {args: []string{"validate", samples}},
		"validate-stdin": {args: []string{"validate", "-"}, stdin: `{"apiVersion":"policy.game.kruise.io/v1alpha1","kind":"NetworkPluginPolicy",` +
			`"metadata":{"name":"from-stdin"},"spec":{"plugins":["Kubernetes-NodePort"],"timeout":"45s"}}`},
		// Bad input: not YAML, CEL syntax error (line and column), schema and CEL rule of the
		// CRD, another kind (a note, not an error).
		"validate-bad":          {args: []string{"validate", "testdata/bad"}},
		"validate-bad-json":     {args: []string{"validate", "-o", "json", "testdata/bad"}},
		"validate-samples-json": {args: []string{"validate", "-o", "json", samples}},
		"validate-missing-path": {args: []string{"validate", "testdata/does-not-exist.yaml"}},
		"validate-no-args":      {args: []string{"validate"}},
		// A tenant policy beyond a root policy's bounds: warnings as the webhook gives at apply.
		"validate-bounds":    {args: []string{"validate", "testdata/bounds"}},
		"validate-duplicate": {args: []string{"validate", samples + "/policies", samples + "/policies/gitops-default.yaml"}},
		"explain-samples": {args: []string{"explain", "--policies", samples + "/policies", "--pod", samples + "/workloads.yaml",
			"--namespace", samples + "/namespaces.yaml", "--error-type", "apiCallError", "--error-message", "create service: exceeded quota"}},
		"explain-json": {args: []string{"explain", "--policies", samples + "/policies", "--pod", "testdata/pods/lobby.yaml",
			"--namespace", samples + "/namespaces.yaml", "-o", "json"}},
		"explain-yaml-update": {args: []string{"explain", "--policies", samples + "/policies", "--pod", samples + "/workloads.yaml",
			"--operation", "UPDATE", "--error-type", "parameterError", "-o", "yaml"}},
		"explain-invalid-policies": {args: []string{"explain", "--policies", "testdata/bad/cel-syntax.yaml," + samples + "/policies",
			"--pod", "testdata/pods/lobby.yaml"}},
		"explain-bounds": {args: []string{"explain", "--policies", "testdata/bounds", "--pod", "testdata/pods/lobby.yaml",
			"--error-type", "apiCallError"}},
		"explain-other-types":          {args: []string{"explain", "--policies", samples + "/policies", "--pod", "testdata/pods/other-types.yaml"}},
		"explain-no-network-type":      {args: []string{"explain", "--policies", samples + "/policies", "--pod", "testdata/pods/no-network-type.yaml"}},
		"explain-usage":                {args: []string{"explain", "--pod", "testdata/pods/lobby.yaml"}},
		"explain-live-usage":           {args: []string{"explain", "--live", "pod/x", "--policies", samples}},
		"explain-live-no-pod":          {args: []string{"explain", "--live", "x"}},
		"diff-usage":                   {args: []string{"diff", "--policies", samples}},
		"explain-bad-error-type":       {args: []string{"explain", "--policies", samples, "--pod", "testdata/pods/lobby.yaml", "--error-type", "oops"}},
		"test-samples":                 {args: []string{"test", samples}},
		"test-failing-junit":           {args: []string{"test", "--output", "junit", "testdata/tests/failing"}},
		"test-failing-json":            {args: []string{"test", "-o", "json", "testdata/tests/failing"}},
		"test-failing":                 {args: []string{"test", "testdata/tests/failing"}},
		"test-unknown-field":           {args: []string{"test", "testdata/tests/unknown-field"}},
		"test-plugin-runs":             {args: []string{"test", "testdata/tests/plugin-runs"}},
		"test-plugin-runs-bad-cluster": {args: []string{"test", "testdata/tests/plugin-runs-bad-cluster"}},
		"test-cloud-plugin-runs":       {args: []string{"--provider-config", "testdata/tests/cloud/provider.toml", "test", "testdata/tests/cloud"}},
		// A policy for cloud types: served with the provider configuration that enables
		// them, of no effect without it.
		"validate-cloud":            {args: []string{"--provider-config", "testdata/tests/cloud/provider.toml", "validate", "testdata/tests/cloud/policy.yaml"}},
		"validate-cloud-not-served": {args: []string{"validate", "testdata/tests/cloud/policy.yaml"}},
		"explain-cloud": {args: []string{"--provider-config", "testdata/tests/cloud/provider.toml", "explain", "--policies", "testdata/tests/cloud/policy.yaml",
			"--pod", "testdata/tests/cloud/pods.yaml", "--namespace", samples + "/namespaces.yaml", "--error-type", "apiCallError", "--error-reason", "QuotaExceeded",
			"--error-message", "exceeded quota: eips"}},
		"preflight":                {args: []string{"preflight", "-f", "testdata/preflight/dump.yaml"}},
		"preflight-json":           {args: []string{"preflight", "-f", "testdata/preflight/dump.yaml", "-o", "json"}},
		"preflight-shared-cluster": {args: []string{"preflight", "-f", "testdata/preflight/dump.yaml", "--provider-config", "testdata/preflight/shared-cluster.toml"}},
		"preflight-bad-output":     {args: []string{"preflight", "-f", "testdata/preflight/dump.yaml", "-o", "yaml"}},
		"test-no-manifest":         {args: []string{"test", "testdata/pods"}},
		"diff": {args: []string{"diff", "--base", samples + "/policies", "--policies", "testdata/proposed",
			"--pods", samples + "/workloads.yaml,testdata/pods/lobby.yaml", "--namespace", samples + "/namespaces.yaml", "--error-type", "apiCallError"}},
		"diff-unchanged": {args: []string{"diff", "--base", samples + "/policies", "--policies", samples + "/policies",
			"--pods", samples + "/workloads.yaml"}},
		"kubectl-plugin-help": {name: kubectlPluginName, args: []string{"--help"}},
		// status from a cluster dump: every network state, the manager's replicas and Lease.
		"status":                    {args: []string{"status", "--pods", "testdata/status", "--now", statusNow}},
		"status-json":               {args: []string{"status", "--pods", "testdata/status", "--now", statusNow, "-o", "json"}},
		"status-yaml":               {args: []string{"status", "--pods", "testdata/status", "--now", statusNow, "-o", "yaml", "-n", "lobby"}},
		"status-no-games":           {args: []string{"status", "--pods", samples + "/namespaces.yaml", "--now", statusNow}},
		"preflight-cloud":           {args: []string{"--provider-config", "testdata/preflight-cloud/provider.toml", "preflight", "-f", "testdata/preflight-cloud/objects.yaml"}},
		"preflight-cloud-json":      {args: []string{"--provider-config", "testdata/preflight-cloud/provider.toml", "preflight", "-o", "json", "-f", "testdata/preflight-cloud/objects.yaml"}},
		"preflight-rules":           {args: []string{"preflight", "-f", "testdata/rules/pod.yaml", "--policies", "testdata/rules/policy.yaml"}},
		"explain-reason":            {args: []string{"explain", "--policies", "testdata/rules/reason-policy.yaml", "--pod", "testdata/rules/pod.yaml", "--error-type", "retryError", "--error-reason", "PortsExhausted"}},
		"explain-bad-reason":        {args: []string{"explain", "--policies", "testdata/rules/reason-policy.yaml", "--pod", "testdata/rules/pod.yaml", "--error-type", "retryError", "--error-reason", "Full"}},
		"explain-rules":             {args: []string{"explain", "--policies", "testdata/rules/policy.yaml", "--pod", "testdata/rules/pod.yaml"}},
		"status-one-lb":             {args: []string{"status", "--pods", "testdata/status", "--now", statusNow, "--load-balancer", "lb-arena", "-o", "json"}},
		"status-unused-shared":      {args: []string{"status", "--pods", "testdata/status-shared", "--now", statusNow}},
		"status-unused-shared-json": {args: []string{"status", "--pods", "testdata/status-shared", "--now", statusNow, "-o", "json", "-n", "lobby"}},
		"status-bad-output":         {args: []string{"status", "--pods", "testdata/status", "-o", "wide"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			bin := tc.name
			if bin == "" {
				bin = "nppctl"
			}
			var out, errOut bytes.Buffer
			code := run(bin, tc.args, strings.NewReader(tc.stdin), &out, &errOut)
			got := fmt.Sprintf("# nppctl %s\n# exit code %d\n# stdout\n%s# stderr\n%s", strings.Join(tc.args, " "), code, out.String(), errOut.String())
			path := filepath.Join("testdata", "golden", name+".golden")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("read golden file (run go test ./cmd/nppctl -update): %v", err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("output of nppctl %s (-want,+got):\n%s", strings.Join(tc.args, " "), diff)
			}
		})
	}
}

// TestPreflightGuardrailsAreHeadings: every guardrail a preflight finding names is a heading
// of docs/okg-compatibility.md, where the difference is explained.
func TestPreflightGuardrailsAreHeadings(t *testing.T) {
	data, err := os.ReadFile("../../docs/okg-compatibility.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{headingBadInput, headingIngressGuards, headingHostPortInTmpl, headingForeignObjects, headingRules, headingProviderWhole} {
		if !strings.Contains(string(data), "\n### "+h+"\n") {
			t.Errorf("docs/okg-compatibility.md has no heading %q", h)
		}
	}
}
