package integrations

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	lua "github.com/yuin/gopher-lua"
	"sigs.k8s.io/yaml"
)

const (
	healthScript = "../../config/argocd/health-networkpluginpolicy.lua"
	argoCDConfig = "../../config/argocd/argocd-cm.yaml"
	healthKey    = "resource.customizations.health.policy.game.kruise.io_NetworkPluginPolicy"
)

// toLua converts a decoded JSON value into a Lua value the way Argo CD hands objects to
// health scripts: maps become tables with string keys, lists tables with keys 1..n.
func toLua(L *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case map[string]any:
		t := L.NewTable()
		for k, e := range v {
			t.RawSetString(k, toLua(L, e))
		}
		return t
	case []any:
		t := L.NewTable()
		for _, e := range v {
			t.Append(toLua(L, e))
		}
		return t
	case string:
		return lua.LString(v)
	case float64:
		return lua.LNumber(v)
	case int64:
		return lua.LNumber(v)
	case bool:
		return lua.LBool(v)
	default:
		return lua.LNil
	}
}

// health runs script on the object in objYAML, as Argo CD does (the object in the global
// obj, the script's returned table read for status and message).
func health(t *testing.T, script, objYAML string) (status, message string) {
	t.Helper()
	var obj map[string]any
	if err := yaml.Unmarshal([]byte(objYAML), &obj); err != nil {
		t.Fatal(err)
	}
	L := lua.NewState(lua.Options{SkipOpenLibs: false})
	defer L.Close()
	L.SetGlobal("obj", toLua(L, obj))
	if err := L.DoString(script); err != nil {
		t.Fatalf("health script: %v", err)
	}
	hs, ok := L.Get(-1).(*lua.LTable)
	if !ok {
		t.Fatalf("health script returned %s, want a table", L.Get(-1).Type())
	}
	return hs.RawGetString("status").String(), hs.RawGetString("message").String()
}

// TestArgoCDHealth runs the NetworkPluginPolicy health check on the states the manager
// writes: Ready, not yet read, observedGeneration behind, Ready condition of an older
// generation, rejected (InvalidExpression, InvalidSpec), Ready Unknown, and Ready with a
// warning.
func TestArgoCDHealth(t *testing.T) {
	script, err := os.ReadFile(healthScript)
	if err != nil {
		t.Fatal(err)
	}
	const meta = "apiVersion: policy.game.kruise.io/v1alpha1\nkind: NetworkPluginPolicy\nmetadata: {name: p, namespace: arena, generation: 3}\n"
	for _, tc := range []struct {
		name, status, wantStatus, wantMessage string
	}{
		{"ready", `{observedGeneration: 3, conditions: [{type: Ready, status: "True", reason: Accepted, observedGeneration: 3, message: in force}]}`,
			"Healthy", "Accepted"},
		{"ready with a warning", `{observedGeneration: 3, warnings: ["Asynchronous on Kubernetes-HostPort without exhaustedAction Recreate"], conditions: [{type: Ready, status: "True", reason: Accepted, observedGeneration: 3}]}`,
			"Healthy", "Accepted with 1 warning(s): Asynchronous on Kubernetes-HostPort without exhaustedAction Recreate"},
		{"not read yet", `{}`, "Progressing", "Waiting for the network-plugin-policy manager to read the policy"},
		{"observedGeneration behind", `{observedGeneration: 2, conditions: [{type: Ready, status: "True", reason: Accepted, observedGeneration: 2}]}`,
			"Progressing", "Waiting for the manager to read generation 3"},
		{"condition of an older generation", `{observedGeneration: 3, conditions: [{type: Ready, status: "True", reason: Accepted, observedGeneration: 2}]}`,
			"Progressing", "Waiting for the manager to compile generation 3"},
		{"rejected expression", `{observedGeneration: 3, conditions: [{type: Ready, status: "False", reason: InvalidExpression, observedGeneration: 3, message: "spec.rules[0].matchConditions[0].expression: undeclared reference to 'pood'"}]}`,
			"Degraded", "InvalidExpression: spec.rules[0].matchConditions[0].expression: undeclared reference to 'pood'"},
		{"rejected spec", `{observedGeneration: 3, conditions: [{type: Ready, status: "False", reason: InvalidSpec, observedGeneration: 3, message: "spec.rules[0].plugins[0]: unknown plugin"}]}`,
			"Degraded", "InvalidSpec: spec.rules[0].plugins[0]: unknown plugin"},
		{"unknown", `{observedGeneration: 3, conditions: [{type: Ready, status: Unknown, observedGeneration: 3, message: compiling}]}`,
			"Progressing", "compiling"},
		{"no Ready condition", `{observedGeneration: 3, conditions: [{type: Other, status: "True"}]}`,
			"Progressing", "Waiting for the Ready condition"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, message := health(t, string(script), meta+"status: "+tc.status+"\n")
			if status != tc.wantStatus || message != tc.wantMessage {
				t.Errorf("health = %s %q, want %s %q", status, message, tc.wantStatus, tc.wantMessage)
			}
		})
	}
}

// argoCDConfigMap decodes config/argocd/argocd-cm.yaml.
func argoCDConfigMap(t *testing.T) struct {
	Data map[string]string `json:"data"`
} {
	t.Helper()
	raw, err := os.ReadFile(argoCDConfig)
	if err != nil {
		t.Fatal(err)
	}
	var cm struct {
		Data map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal(raw, &cm); err != nil {
		t.Fatal(err)
	}
	return cm
}

// TestArgoCDConfigHoldsTheScript: the argocd-cm snippet carries the same health script as
// the .lua file.
func TestArgoCDConfigHoldsTheScript(t *testing.T) {
	script, err := os.ReadFile(healthScript)
	if err != nil {
		t.Fatal(err)
	}
	cm := argoCDConfigMap(t)
	if cm.Data[healthKey] != string(script) {
		t.Errorf("%s: data[%s] differs from %s", argoCDConfig, healthKey, healthScript)
	}
}

// TestGitOpsDirectoryAppliesNoTest: the sample GitOps directory has a kustomization.yaml
// that lists every Kubernetes object file in it and no nppctl Test file, so Flux and Argo CD
// (which build a directory with a kustomization.yaml by kustomize) never apply a Test. A
// subdirectory with a test.yaml of its own (plugin-runs/: an nppctl Test, its in-memory cluster and
// expected objects) is the Test's, and none of its files is listed.
func TestGitOpsDirectoryAppliesNoTest(t *testing.T) {
	const dir = "../../config/samples/gitops"
	raw, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		Resources []string `json:"resources"`
	}
	if err := yaml.Unmarshal(raw, &k); err != nil {
		t.Fatal(err)
	}
	var want []string
	err = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && path != dir {
			if _, statErr := os.Stat(filepath.Join(path, "test.yaml")); statErr == nil {
				if k.Resources != nil && slices.ContainsFunc(k.Resources, func(r string) bool {
					rel, _ := filepath.Rel(dir, path)
					return strings.HasPrefix(r, rel+"/")
				}) {
					t.Errorf("kustomization.yaml lists a file of %s, which holds an nppctl Test's files", path)
				}
				return filepath.SkipDir
			}
		}
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") || filepath.Base(path) == "kustomization.yaml" {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.Contains(string(b), "\nkind: Test\n") {
			return nil
		}
		rel, _ := filepath.Rel(dir, path)
		want = append(want, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(want)
	got := slices.Clone(k.Resources)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("kustomization.yaml resources = %v, want every object file and no Test: %v", got, want)
	}
}

// TestPrometheusRuleMatchesRulesFile: config/prometheus's PrometheusRule carries exactly the
// groups of its plain rules file (which `make test-observability` tests with promtool).
func TestPrometheusRuleMatchesRulesFile(t *testing.T) {
	var file struct {
		Groups []any `json:"groups"`
	}
	var rule struct {
		APIVersion string         `json:"apiVersion"`
		Kind       string         `json:"kind"`
		Metadata   map[string]any `json:"metadata"`
		Spec       struct {
			Groups []any `json:"groups"`
		} `json:"spec"`
	}
	for path, v := range map[string]any{"../../config/prometheus/rules.yaml": &file, "../../config/prometheus/prometheusrule.yaml": &rule} {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.UnmarshalStrict(raw, v); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	if len(file.Groups) == 0 || rule.Kind != "PrometheusRule" {
		t.Fatalf("rules file with %d groups, PrometheusRule of kind %q", len(file.Groups), rule.Kind)
	}
	if !reflect.DeepEqual(file.Groups, rule.Spec.Groups) {
		t.Error("config/prometheus/prometheusrule.yaml spec.groups differ from rules.yaml groups")
	}
}

// TestArgoCDApplicationHealth: the Application health check of argocd-cm reports the
// Application's own health (what makes a sync wave of Applications wait), and Progressing
// before Argo CD has assessed it.
func TestArgoCDApplicationHealth(t *testing.T) {
	cm := argoCDConfigMap(t)
	script := cm.Data["resource.customizations.health.argoproj.io_Application"]
	if script == "" {
		t.Fatal("argocd-cm has no Application health check")
	}
	for obj, want := range map[string]string{
		"metadata: {name: a}\n": "Progressing",
		"metadata: {name: a}\nstatus: {health: {status: Healthy}}\n":                     "Healthy",
		"metadata: {name: a}\nstatus: {health: {status: Degraded, message: crashing}}\n": "Degraded",
	} {
		if got, _ := health(t, script, obj); got != want {
			t.Errorf("health of %q = %s, want %s", obj, got, want)
		}
	}
}

// TestArgoCDHelmApplication: the Application of the released chart ignores exactly the
// fields application.yaml ignores (what the manager writes), installs the chart's current
// version, and orders itself before the policies' Application.
func TestArgoCDHelmApplication(t *testing.T) {
	decode := func(path string) []map[string]any {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var out []map[string]any
		for _, doc := range strings.Split(string(raw), "\n---\n") {
			var o map[string]any
			if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
				t.Fatal(err)
			}
			out = append(out, o)
		}
		return out
	}
	kustomize := decode("../../config/argocd/application.yaml")[0]
	helm := decode("../../config/argocd/application-helm.yaml")
	manager, policies := helm[0], helm[1]
	if !reflect.DeepEqual(manager["spec"].(map[string]any)["ignoreDifferences"], kustomize["spec"].(map[string]any)["ignoreDifferences"]) {
		t.Error("application-helm.yaml's ignoreDifferences differ from application.yaml's")
	}
	var chart struct {
		Version string `json:"version"`
	}
	raw, err := os.ReadFile("../../charts/network-plugin-policy/Chart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &chart); err != nil {
		t.Fatal(err)
	}
	src := manager["spec"].(map[string]any)["source"].(map[string]any)
	if src["chart"] != "network-plugin-policy" || src["targetRevision"] != chart.Version {
		t.Errorf("source %v, want the chart network-plugin-policy at %s", src, chart.Version)
	}
	wave := func(o map[string]any) string {
		return o["metadata"].(map[string]any)["annotations"].(map[string]any)["argocd.argoproj.io/sync-wave"].(string)
	}
	if wave(manager) >= wave(policies) {
		t.Errorf("sync waves: manager %s, policies %s; want the manager first", wave(manager), wave(policies))
	}
}
