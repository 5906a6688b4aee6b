package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint/support"
)

const chartDir = "../../charts/network-plugin-policy"

// render renders the chart (Render) as release name in namespace ns and splits the objects.
func render(t *testing.T, name, ns string, vals map[string]any) ([]map[string]any, error) {
	t.Helper()
	out, err := Render(chartDir, name, ns, vals)
	if err != nil {
		return nil, err
	}
	return SplitYAML([]byte(out))
}

func mustRender(t *testing.T, name, ns string, vals map[string]any) map[string]map[string]any {
	t.Helper()
	objs, err := render(t, name, ns, vals)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	return byKindName(objs)
}

func byKindName(objs []map[string]any) map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, o := range objs {
		meta, _ := o["metadata"].(map[string]any)
		out[fmt.Sprintf("%s/%v", kind(o), meta["name"])] = o
	}
	return out
}

// chartOnlyLabels are the labels the chart adds to every object (Helm's conventions) and
// config/default does not.
var chartOnlyLabels = []string{"app.kubernetes.io/instance", "app.kubernetes.io/managed-by", "app.kubernetes.io/version", "helm.sh/chart", "app.kubernetes.io/name"}

// normalize drops what may differ between the chart and config/default without changing
// what is deployed: the chart's own labels on top-level objects (both keep the pod
// template's and selectors' labels) and empty annotations.
func normalize(o map[string]any) map[string]any {
	meta, _ := o["metadata"].(map[string]any)
	if labels, ok := meta["labels"].(map[string]any); ok {
		for _, k := range chartOnlyLabels {
			delete(labels, k)
		}
		if len(labels) == 0 {
			delete(meta, "labels")
		}
	}
	if a, ok := meta["annotations"]; ok && a == nil {
		delete(meta, "annotations")
	}
	return o
}

// TestChartRendersConfigDefault requires the chart, with its default values, installed as
// release network-plugin-policy in network-plugin-policy-system (and the image
// network-plugin-policy:latest), to render exactly the
// objects of `kubectl kustomize config/default` (but the Namespace, which Helm's
// --create-namespace makes), apart from the chart's own labels: the same RBAC, webhook
// entries, Deployment, Services, PodDisruptionBudget, Secret and CRD.
func TestChartRendersConfigDefault(t *testing.T) {
	want, err := Kustomize(context.Background(), "../../config/default")
	if err != nil {
		t.Fatal(err)
	}
	// config/default names the image network-plugin-policy:latest; the chart's default is
	// the release's, ghcr.io/okg-extensions/network-plugin-policy:<appVersion>.
	got := mustRender(t, "network-plugin-policy", Namespace, map[string]any{"image": map[string]any{"repository": "network-plugin-policy", "tag": "latest"}})
	seen := map[string]bool{}
	for key, w := range byKindName(want) {
		if strings.HasPrefix(key, "Namespace/") {
			continue
		}
		seen[key] = true
		g, ok := got[key]
		if !ok {
			t.Errorf("%s: in config/default, not rendered by the chart", key)
			continue
		}
		if diff := cmp.Diff(normalize(w), normalize(g)); diff != "" {
			t.Errorf("%s: the chart differs from config/default (-config/default,+chart):\n%s", key, diff)
		}
	}
	for key := range got {
		if !seen[key] {
			t.Errorf("%s: rendered by the chart with its defaults, not in config/default", key)
		}
	}
}

// TestChartLints runs helm lint (the Helm SDK's) on the chart with its defaults and with
// every optional part on; any message of warning severity or worse fails.
func TestChartLints(t *testing.T) {
	for name, vals := range map[string]map[string]any{
		"defaults": nil,
		"everything on": {
			"certificates":   map[string]any{"mode": "cert-manager"},
			"metrics":        map[string]any{"serviceMonitor": map[string]any{"enabled": true}},
			"networkPolicy":  map[string]any{"enabled": true},
			"providerConfig": map[string]any{"enabled": true},
		},
	} {
		t.Run(name, func(t *testing.T) {
			l := action.NewLint()
			l.Strict = true
			l.KubeVersion = &chartutil.KubeVersion{Version: "v1.37.2", Major: "1", Minor: "37"}
			res := l.Run([]string{chartDir}, vals)
			for _, m := range res.Messages {
				if m.Severity >= support.WarningSev {
					t.Errorf("helm lint: %s", m)
				}
			}
			for _, err := range res.Errors {
				t.Errorf("helm lint: %v", err)
			}
		})
	}
}

func container(t *testing.T, objs map[string]map[string]any, deployment string) map[string]any {
	t.Helper()
	d, ok := objs["Deployment/"+deployment]
	if !ok {
		t.Fatalf("no Deployment %s", deployment)
	}
	spec := d["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	return spec["containers"].([]any)[0].(map[string]any)
}

func args(t *testing.T, objs map[string]map[string]any, deployment string) []string {
	t.Helper()
	var out []string
	for _, a := range container(t, objs, deployment)["args"].([]any) {
		out = append(out, a.(string))
	}
	return out
}

func TestChartValues(t *testing.T) {
	t.Run("another release name names everything after it and tells the manager", func(t *testing.T) {
		objs := mustRender(t, "games", "net", nil)
		for _, key := range []string{"Deployment/games-network-plugin-policy-manager", "MutatingWebhookConfiguration/games-network-plugin-policy-mutating-webhook-configuration",
			"ClusterRole/games-network-plugin-policy-manager-role", "Secret/games-network-plugin-policy-webhook-cert"} {
			if _, ok := objs[key]; !ok {
				t.Errorf("no %s", key)
			}
		}
		a := args(t, objs, "games-network-plugin-policy-manager")
		for _, want := range []string{"--webhook-service-name=games-network-plugin-policy-webhook-service",
			"--webhook-secret-name=games-network-plugin-policy-webhook-cert",
			"--mutating-webhook-configuration=games-network-plugin-policy-mutating-webhook-configuration",
			"--validating-webhook-configuration=games-network-plugin-policy-validating-webhook-configuration"} {
			if !slices.Contains(a, want) {
				t.Errorf("args %v lack %s", a, want)
			}
		}
		wh := objs["MutatingWebhookConfiguration/games-network-plugin-policy-mutating-webhook-configuration"]["webhooks"].([]any)[0].(map[string]any)
		svc := wh["clientConfig"].(map[string]any)["service"].(map[string]any)
		if svc["namespace"] != "net" || svc["name"] != "games-network-plugin-policy-webhook-service" {
			t.Errorf("webhook service %v, want net/games-network-plugin-policy-webhook-service", svc)
		}
	})
	t.Run("cert-manager mode", func(t *testing.T) {
		objs := mustRender(t, "network-plugin-policy", Namespace, map[string]any{"certificates": map[string]any{"mode": "cert-manager"}})
		for _, key := range []string{"Certificate/network-plugin-policy-webhook-cert", "Issuer/network-plugin-policy-selfsigned",
			"Certificate/network-plugin-policy-ca", "Issuer/network-plugin-policy-ca"} {
			if _, ok := objs[key]; !ok {
				t.Errorf("no %s", key)
			}
		}
		// The serving certificate is renewed under the chart's CA, so the injected CA stays.
		ref := objs["Certificate/network-plugin-policy-webhook-cert"]["spec"].(map[string]any)["issuerRef"].(map[string]any)
		if ref["name"] != "network-plugin-policy-ca" || ref["kind"] != "Issuer" {
			t.Errorf("serving certificate issuerRef %v, want the CA Issuer network-plugin-policy-ca", ref)
		}
		if ca := objs["Certificate/network-plugin-policy-ca"]["spec"].(map[string]any); ca["isCA"] != true {
			t.Errorf("CA certificate spec %v, want isCA", ca)
		}
		if _, ok := objs["Secret/network-plugin-policy-webhook-cert"]; ok {
			t.Error("an empty Secret beside cert-manager's Certificate: both would own it")
		}
		if !slices.Contains(args(t, objs, "network-plugin-policy-manager"), "--cert-rotation=false") {
			t.Error("no --cert-rotation=false in cert-manager mode")
		}
		for _, key := range []string{"MutatingWebhookConfiguration/network-plugin-policy-mutating-webhook-configuration", "ValidatingWebhookConfiguration/network-plugin-policy-validating-webhook-configuration"} {
			ann, _ := objs[key]["metadata"].(map[string]any)["annotations"].(map[string]any)
			if ann["cert-manager.io/inject-ca-from"] != Namespace+"/network-plugin-policy-webhook-cert" {
				t.Errorf("%s: annotations %v, want cert-manager.io/inject-ca-from", key, ann)
			}
		}
	})
	t.Run("image digest, timeout, root namespace, priority class", func(t *testing.T) {
		objs := mustRender(t, "network-plugin-policy", Namespace, map[string]any{
			"image":             map[string]any{"repository": "registry.example/npp", "digest": "sha256:" + strings.Repeat("a", 64)},
			"webhook":           map[string]any{"timeoutSeconds": 15},
			"rootNamespace":     "platform",
			"priorityClassName": "",
		})
		c := container(t, objs, "network-plugin-policy-manager")
		if c["image"] != "registry.example/npp@sha256:"+strings.Repeat("a", 64) {
			t.Errorf("image %v", c["image"])
		}
		a := args(t, objs, "network-plugin-policy-manager")
		if !slices.Contains(a, "--webhook-timeout=15s") || !slices.Contains(a, "--root-namespace=platform") {
			t.Errorf("args %v, want --webhook-timeout=15s and --root-namespace=platform", a)
		}
		for _, w := range objs["MutatingWebhookConfiguration/network-plugin-policy-mutating-webhook-configuration"]["webhooks"].([]any) {
			// The pod entries follow the value; the pods/status entry keeps its own 10 s.
			if name := w.(map[string]any)["name"]; name == "status.mpod.policy.game.kruise.io" {
				continue
			}
			if ts := w.(map[string]any)["timeoutSeconds"]; ts != float64(15) {
				t.Errorf("timeoutSeconds %v of %v, want 15", ts, w.(map[string]any)["name"])
			}
		}
		spec := objs["Deployment/network-plugin-policy-manager"]["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
		if _, ok := spec["priorityClassName"]; ok {
			t.Error("priorityClassName \"\" still renders one")
		}
	})
	t.Run("provider config as OKG's TOML", func(t *testing.T) {
		objs := mustRender(t, "network-plugin-policy", Namespace, map[string]any{"providerConfig": map[string]any{"enabled": true,
			"kubernetes": map[string]any{"hostPort": map[string]any{"minPort": 20000, "maxPort": 20100, "maxPodsPerPort": 2, "maxPortsPerPod": 4, "maxReservedPortsPerNamespace": 0},
				"ingress": map[string]any{"allowedHostSuffixes": []any{".games.example"}, "allowedIngressClasses": []any{"nginx-public"}}}}})
		ann, _ := objs["Deployment/network-plugin-policy-manager"]["spec"].(map[string]any)["template"].(map[string]any)["metadata"].(map[string]any)["annotations"].(map[string]any)
		if ann["checksum/provider-config"] == nil {
			t.Error("no checksum/provider-config on the pod template: a change of the configuration would not restart the manager")
		}
		cm, ok := objs["ConfigMap/network-plugin-policy-provider-config"]
		if !ok {
			t.Fatal("no ConfigMap network-plugin-policy-provider-config")
		}
		got := cm["data"].(map[string]any)["config.toml"]
		want := "[kubernetes]\nenable = true\n[kubernetes.hostPort]\nmin_port = 20000\nmax_port = 20100\nmax_pods_per_port = 2\nmax_ports_per_pod = 4\nmax_reserved_ports_per_namespace = 0\n[kubernetes.ingress]\nallowed_host_suffixes = [\".games.example\"]\nallowed_ingress_classes = [\"nginx-public\"]\n"
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("config.toml (-want,+got):\n%s", diff)
		}
	})
	t.Run("logLevel and extraArgs", func(t *testing.T) {
		objs := mustRender(t, "network-plugin-policy", Namespace, map[string]any{"logLevel": "debug", "extraArgs": []any{"--max-recreates-per-namespace-per-minute=5"}})
		args := objs["Deployment/network-plugin-policy-manager"]["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["args"].([]any)
		if n := len(args); n < 2 || args[n-2] != "--zap-log-level=debug" || args[n-1] != "--max-recreates-per-namespace-per-minute=5" {
			t.Errorf("args end %v, want --zap-log-level=debug and the extra flag last", args)
		}
		if _, err := render(t, "network-plugin-policy", Namespace, map[string]any{"logLevel": "verbose"}); err == nil || !strings.Contains(err.Error(), "logLevel") {
			t.Errorf("logLevel verbose: %v, want the schema's error naming logLevel", err)
		}
	})
	t.Run("cloud providers' tables appended", func(t *testing.T) {
		tables := "[alibabacloud]\nenable = true\n[alibabacloud.slb]\nmin_port = 500\nmax_port = 700\nblock_ports = [593]\n"
		objs := mustRender(t, "network-plugin-policy", Namespace, map[string]any{"providerConfig": map[string]any{"enabled": true, "cloudProviders": tables}})
		got := objs["ConfigMap/network-plugin-policy-provider-config"]["data"].(map[string]any)["config.toml"].(string)
		if !strings.HasSuffix(got, "max_port = 9000\n"+tables) {
			t.Errorf("config.toml = %q, want the Kubernetes tables and then %q", got, tables)
		}
	})
	t.Run("cloud providers' tables without enabled are rendered, with the default Kubernetes tables", func(t *testing.T) {
		tables := "[volcengine]\nenable = true\n[volcengine.clb]\nmin_port = 500\nmax_port = 700\n"
		objs := mustRender(t, "network-plugin-policy", Namespace, map[string]any{"providerConfig": map[string]any{"cloudProviders": tables}})
		cm, ok := objs["ConfigMap/network-plugin-policy-provider-config"]
		if !ok {
			t.Fatalf("providerConfig.cloudProviders set, providerConfig.enabled false: no ConfigMap (the manager would serve no cloud type)")
		}
		want := "[kubernetes]\nenable = true\n[kubernetes.hostPort]\nmin_port = 8000\nmax_port = 9000\n" + tables
		if got := cm["data"].(map[string]any)["config.toml"].(string); got != want {
			t.Errorf("config.toml = %q, want %q", got, want)
		}
		tmpl := objs["Deployment/network-plugin-policy-manager"]["spec"].(map[string]any)["template"].(map[string]any)
		if ann, _ := tmpl["metadata"].(map[string]any)["annotations"].(map[string]any); ann["checksum/provider-config"] == nil {
			t.Errorf("pod template annotations %v: no checksum/provider-config, so a change would not roll the pods", ann)
		}
		for _, blank := range []string{"", "  \n"} {
			objs := mustRender(t, "network-plugin-policy", Namespace, map[string]any{"providerConfig": map[string]any{"cloudProviders": blank}})
			if _, ok := objs["ConfigMap/network-plugin-policy-provider-config"]; ok {
				t.Errorf("cloudProviders %q without enabled rendered a ConfigMap, want none (the built-in defaults)", blank)
			}
		}
	})
	t.Run("allowed_annotations = [] and allowed_ingress_classes = [] are expressible", func(t *testing.T) {
		objs := mustRender(t, "network-plugin-policy", Namespace, map[string]any{"providerConfig": map[string]any{"enabled": true,
			"kubernetes": map[string]any{"ingress": map[string]any{"allowedAnnotations": []any{}, "allowedIngressClasses": []any{}}}}})
		got := objs["ConfigMap/network-plugin-policy-provider-config"]["data"].(map[string]any)["config.toml"]
		if !strings.Contains(got.(string), "[kubernetes.ingress]\nallowed_annotations = []\nallowed_ingress_classes = []\n") {
			t.Errorf("config.toml = %q, want the ingress table with allowed_annotations = [] and allowed_ingress_classes = []", got)
		}
		objs = mustRender(t, "network-plugin-policy", Namespace, map[string]any{"providerConfig": map[string]any{"enabled": true}})
		if got := objs["ConfigMap/network-plugin-policy-provider-config"]["data"].(map[string]any)["config.toml"]; strings.Contains(got.(string), "allowed_") {
			t.Errorf("config.toml = %q, want no allowed_annotations nor allowed_ingress_classes by default", got)
		}
	})
	t.Run("ServiceMonitor and NetworkPolicy", func(t *testing.T) {
		objs := mustRender(t, "network-plugin-policy", Namespace, map[string]any{
			"metrics":       map[string]any{"serviceMonitor": map[string]any{"enabled": true}},
			"networkPolicy": map[string]any{"enabled": true},
		})
		for _, key := range []string{"ServiceMonitor/network-plugin-policy-manager", "NetworkPolicy/network-plugin-policy-manager"} {
			if _, ok := objs[key]; !ok {
				t.Errorf("no %s", key)
			}
		}
	})
	t.Run("an unknown certificates mode is an error naming the value", func(t *testing.T) {
		_, err := render(t, "network-plugin-policy", Namespace, map[string]any{"certificates": map[string]any{"mode": "vault"}})
		if err == nil || !strings.Contains(err.Error(), "/certificates/mode") || !strings.Contains(err.Error(), "'self', 'cert-manager'") {
			t.Errorf("render: %v, want the schema's error naming certificates.mode and its values", err)
		}
	})
}

// TestValuesSchemaRefusesBadValues: values.schema.json makes helm install (and template,
// upgrade, lint) fail on a value out of range or a misspelt key, naming it.
func TestValuesSchemaRefusesBadValues(t *testing.T) {
	for name, tc := range map[string]struct {
		vals map[string]any
		want string
	}{
		"timeoutSeconds above the API server's 30": {vals: map[string]any{"webhook": map[string]any{"timeoutSeconds": 31}}, want: "/webhook/timeoutSeconds"},
		"a misspelt top-level key":                 {vals: map[string]any{"replicaCont": 3}, want: "replicaCont"},
		"a misspelt nested key": {vals: map[string]any{"providerConfig": map[string]any{"kubernetes": map[string]any{"hostPort": map[string]any{"maxPort": 9000, "minport": 8000}}}},
			want: "minport"},
		"a port out of range": {vals: map[string]any{"providerConfig": map[string]any{"kubernetes": map[string]any{"hostPort": map[string]any{"maxPort": 70000}}}},
			want: "/providerConfig/kubernetes/hostPort/maxPort"},
		"a digest that is not sha256": {vals: map[string]any{"image": map[string]any{"digest": "latest"}}, want: "/image/digest"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := render(t, "network-plugin-policy", Namespace, tc.vals)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("render: %v, want a schema error naming %q", err, tc.want)
			}
		})
	}
}

// TestValuesSchemaCoversValuesYAML: every key of values.yaml is declared in
// values.schema.json, down to the objects the schema describes property by property (it
// refuses keys it does not declare, so a new value without a schema entry would make the
// chart refuse its own defaults; this names it instead).
func TestValuesSchemaCoversValuesYAML(t *testing.T) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := json.Unmarshal(ch.Schema, &schema); err != nil {
		t.Fatalf("values.schema.json: %v", err)
	}
	var walk func(path string, vals map[string]any, schema map[string]any)
	walk = func(path string, vals map[string]any, schema map[string]any) {
		props, ok := schema["properties"].(map[string]any)
		if !ok {
			return // an object the schema takes whole (resources, affinity, ...)
		}
		for k, v := range vals {
			sub, ok := props[k].(map[string]any)
			if !ok {
				t.Errorf("values.yaml key %s%s is not in values.schema.json", path, k)
				continue
			}
			if m, ok := v.(map[string]any); ok {
				walk(path+k+".", m, sub)
			}
		}
	}
	walk("", ch.Values, schema)
}

// TestChartPostDeleteHookRemovesTheOKGCondition: with okg.manageGameServerSetValidation (the
// default) the chart has post-delete hooks: a Job that runs the manager's image with
// --remove-okg-gameserverset-condition once the manager's pods are gone, under a
// ServiceAccount of its own bound to exactly that (get and patch on OKG's one
// configuration, list pods in the release namespace); without it, none.
func TestChartPostDeleteHookRemovesTheOKGCondition(t *testing.T) {
	hooks := func(vals map[string]any) []map[string]any {
		t.Helper()
		ch, err := loader.Load(chartDir)
		if err != nil {
			t.Fatal(err)
		}
		inst := action.NewInstall(&action.Configuration{})
		inst.DryRun, inst.ClientOnly, inst.Replace = true, true, true
		inst.ReleaseName, inst.Namespace = "network-plugin-policy", Namespace
		inst.KubeVersion = &chartutil.KubeVersion{Version: "v1.37.2", Major: "1", Minor: "37"}
		rel, err := inst.Run(ch, vals)
		if err != nil {
			t.Fatal(err)
		}
		var out []map[string]any
		for _, h := range rel.Hooks {
			objs, err := SplitYAML([]byte(h.Manifest))
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, objs...)
		}
		return out
	}
	objs := byKindName(hooks(map[string]any{"image": map[string]any{"tag": "v9"}}))
	const name = "network-plugin-policy-okg-condition-cleanup"
	for _, key := range []string{"ServiceAccount/", "ClusterRole/", "ClusterRoleBinding/", "Role/", "RoleBinding/", "Job/"} {
		o, ok := objs[key+name]
		if !ok {
			t.Errorf("no hook %s%s", key, name)
			continue
		}
		if a := o["metadata"].(map[string]any)["annotations"].(map[string]any); a["helm.sh/hook"] != "post-delete" {
			t.Errorf("%s%s hook annotations %v, want post-delete", key, name, a)
		}
	}
	if len(objs) != 6 {
		t.Errorf("%d hook objects, want 6: %v", len(objs), objs)
	}
	rules := fmt.Sprint(objs["ClusterRole/"+name]["rules"])
	if rules != "[map[apiGroups:[admissionregistration.k8s.io] resourceNames:[kruise-game-validating-webhook] resources:[validatingwebhookconfigurations] verbs:[get patch]]]" {
		t.Errorf("ClusterRole rules %s", rules)
	}
	job := objs["Job/"+name]
	spec := job["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	ctr := spec["containers"].([]any)[0].(map[string]any)
	if spec["serviceAccountName"] != name || ctr["image"] != "ghcr.io/okg-extensions/network-plugin-policy:v9" ||
		fmt.Sprint(ctr["args"]) != "[--remove-okg-gameserverset-condition --wait-for-pods-gone=app.kubernetes.io/name=network-plugin-policy]" {
		t.Errorf("hook Job: serviceAccountName %v, image %v, args %v", spec["serviceAccountName"], ctr["image"], ctr["args"])
	}
	if l := job["spec"].(map[string]any)["template"].(map[string]any)["metadata"].(map[string]any)["labels"].(map[string]any); l["app.kubernetes.io/name"] == "network-plugin-policy" {
		t.Errorf("the Job's pods carry the manager's selector labels %v: it would wait for itself", l)
	}
	if got := hooks(map[string]any{"okg": map[string]any{"manageGameServerSetValidation": false}}); len(got) != 0 {
		t.Errorf("hooks without okg.manageGameServerSetValidation: %v", got)
	}
}

// TestOKGConfigMapFlagAndRBACAgree: the ConfigMap --okg-config-map names is the one the
// manager's ClusterRole may get (resourceNames), in config/default and in the chart, with its
// default values and with okg.configMap set: a manager that may not read it would stay back.
func TestOKGConfigMapFlagAndRBACAgree(t *testing.T) {
	check := func(t *testing.T, objs map[string]map[string]any, deployment, role, want string) {
		t.Helper()
		a := args(t, objs, deployment)
		if !slices.Contains(a, "--okg-config-map="+want) {
			t.Errorf("args %v, want --okg-config-map=%s", a, want)
		}
		cr, ok := objs["ClusterRole/"+role]
		if !ok {
			t.Fatalf("no ClusterRole %s", role)
		}
		_, name, _ := strings.Cut(want, "/")
		var names []any
		for _, r := range cr["rules"].([]any) {
			rule := r.(map[string]any)
			if slices.Contains(rule["resources"].([]any), any("configmaps")) {
				names = append(names, rule["resourceNames"].([]any)...)
			}
		}
		if len(names) != 1 || names[0] != name {
			t.Errorf("configmaps resourceNames %v, want [%s]", names, name)
		}
	}
	t.Run("config/default", func(t *testing.T) {
		objs, err := Kustomize(context.Background(), "../../config/default")
		if err != nil {
			t.Fatal(err)
		}
		check(t, byKindName(objs), "network-plugin-policy-manager", "network-plugin-policy-manager-role", "kruise-game-system/kruise-game-manager-config")
	})
	t.Run("chart defaults", func(t *testing.T) {
		check(t, mustRender(t, "network-plugin-policy", Namespace, nil), "network-plugin-policy-manager", "network-plugin-policy-manager-role", "kruise-game-system/kruise-game-manager-config")
	})
	t.Run("chart okg.configMap set", func(t *testing.T) {
		objs := mustRender(t, "network-plugin-policy", Namespace, map[string]any{"okg": map[string]any{"configMap": map[string]any{"namespace": "okg", "name": "okg-config"}}})
		check(t, objs, "network-plugin-policy-manager", "network-plugin-policy-manager-role", "okg/okg-config")
	})
}

// TestPackageIsReproducible: make release's chart archive (Package: helm package with the
// release version) is the same bytes when packaged again a second later, carries the version
// (without v) and the appVersion, and its default image is the release's image, the name
// make release gives the images: ghcr.io/okg-extensions/network-plugin-policy:<version>.
func TestPackageIsReproducible(t *testing.T) {
	dir := t.TempDir()
	a, err := Package("../..", "../../charts/network-plugin-policy", filepath.Join(dir, "a"), "v1.2.3-rc.1")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // Helm dates entries with the time of the call
	b, err := Package("../..", "../../charts/network-plugin-policy", filepath.Join(dir, "b"), "v1.2.3-rc.1")
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(a) != "network-plugin-policy-1.2.3-rc.1.tgz" {
		t.Errorf("archive %s, want network-plugin-policy-1.2.3-rc.1.tgz", filepath.Base(a))
	}
	ba, _ := os.ReadFile(a)
	bb, _ := os.ReadFile(b)
	if len(ba) == 0 || !bytes.Equal(ba, bb) {
		t.Errorf("two packages of one commit differ (%d and %d bytes)", len(ba), len(bb))
	}
	ch, err := loader.Load(a)
	if err != nil {
		t.Fatal(err)
	}
	if ch.Metadata.Version != "1.2.3-rc.1" || ch.Metadata.AppVersion != "v1.2.3-rc.1" {
		t.Errorf("version %s, appVersion %s", ch.Metadata.Version, ch.Metadata.AppVersion)
	}
	out, err := Render(a, "network-plugin-policy", Namespace, map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "image: ghcr.io/okg-extensions/network-plugin-policy:v1.2.3-rc.1") {
		t.Error("the packaged chart's default image is not ghcr.io/okg-extensions/network-plugin-policy:v1.2.3-rc.1")
	}
	if _, err := Package("../..", "../../charts/network-plugin-policy", dir, "1.2.3"); err == nil {
		t.Error("a version without v was accepted")
	}
}

// TestChartHostNetworkAndPorts: hostNetwork runs the manager on the nodes' network with the
// ports of its values (webhook, metrics, probes: container ports, flags, the webhook
// Service's target), dnsPolicy ClusterFirstWithHostNet, and required anti-affinity per node
// in place of the preferred default (a nodeAffinity of the values is kept); the controller's
// values become its flags.
func TestChartHostNetworkAndPorts(t *testing.T) {
	objs := mustRender(t, "npp", "ops", map[string]any{
		"hostNetwork": true, "webhook": map[string]any{"port": 10250 + 3}, "metrics": map[string]any{"port": 10254}, "healthProbePort": 10255,
		"controller": map[string]any{"maxConcurrentReconciles": 4, "minRetryInterval": "2s"},
		"affinity": map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{
			"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{map[string]any{"key": "pool", "operator": "In", "values": []any{"system"}}}}}}}},
	})
	name := "npp-network-plugin-policy"
	spec := objs["Deployment/"+name+"-manager"]["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	if spec["hostNetwork"] != true || spec["dnsPolicy"] != "ClusterFirstWithHostNet" {
		t.Errorf("hostNetwork %v, dnsPolicy %v", spec["hostNetwork"], spec["dnsPolicy"])
	}
	aff := spec["affinity"].(map[string]any)
	anti, _ := aff["podAntiAffinity"].(map[string]any)
	if _, ok := anti["requiredDuringSchedulingIgnoredDuringExecution"]; !ok || anti["preferredDuringSchedulingIgnoredDuringExecution"] != nil || aff["nodeAffinity"] == nil {
		t.Errorf("affinity %v: want required anti-affinity only, and the nodeAffinity kept", aff)
	}
	a := strings.Join(args(t, objs, name+"-manager"), " ")
	for _, want := range []string{"--webhook-port=10253", "--metrics-bind-address=:10254", "--health-probe-bind-address=:10255", "--max-concurrent-reconciles=4", "--min-retry-interval=2s"} {
		if !strings.Contains(a, want) {
			t.Errorf("args %s: no %s", a, want)
		}
	}
	ports := map[string]any{}
	for _, p := range container(t, objs, name+"-manager")["ports"].([]any) {
		ports[p.(map[string]any)["name"].(string)] = p.(map[string]any)["containerPort"]
	}
	if fmt.Sprint(ports) != "map[metrics:10254 probes:10255 webhook:10253]" {
		t.Errorf("container ports %v", ports)
	}
	svc := objs["Service/"+name+"-webhook-service"]["spec"].(map[string]any)["ports"].([]any)[0].(map[string]any)
	if fmt.Sprint(svc["targetPort"]) != "10253" {
		t.Errorf("webhook Service targetPort %v", svc["targetPort"])
	}
	strategy := objs["Deployment/"+name+"-manager"]["spec"].(map[string]any)["strategy"]
	if fmt.Sprint(strategy) != "map[rollingUpdate:map[maxSurge:0 maxUnavailable:1] type:RollingUpdate]" {
		t.Errorf("strategy %v, want one pod at a time without a surge", strategy)
	}
	// The NetworkPolicy admits the ports of the values, and affinity may be null.
	objs = mustRender(t, "npp", "ops", map[string]any{"hostNetwork": true, "affinity": nil, "webhook": map[string]any{"port": 10253},
		"networkPolicy": map[string]any{"enabled": true, "metricsFrom": []any{map[string]any{"namespaceSelector": map[string]any{}}}}})
	np := objs["NetworkPolicy/"+name+"-manager"]["spec"].(map[string]any)["ingress"].([]any)
	if fmt.Sprint(np[0].(map[string]any)["ports"]) != "[map[port:10253 protocol:TCP]]" || fmt.Sprint(np[1].(map[string]any)["ports"]) != "[map[port:8443 protocol:TCP]]" {
		t.Errorf("NetworkPolicy ingress %v, want the webhook port 10253 and the metrics port 8443", np)
	}
}

// TestChartObservabilityKeepsTheJob: under another release name, the ServiceMonitor sets the
// job label metrics.job, and the PrometheusRule (the rules of config/prometheus) and the
// dashboard ConfigMap (config/grafana's, with the sidecar's label) select that job, so the
// alerts and panels do not silently select nothing; a changed metrics.job changes all three.
// The metrics reader's binding names Prometheus's ServiceAccount.
func TestChartObservabilityKeepsTheJob(t *testing.T) {
	for _, job := range []string{"", "npp-metrics"} {
		vals := map[string]any{"metrics": map[string]any{
			"serviceMonitor":   map[string]any{"enabled": true, "prometheusServiceAccount": map[string]any{"name": "prometheus-k8s", "namespace": "monitoring"}},
			"prometheusRule":   map[string]any{"enabled": true, "labels": map[string]any{"release": "kube-prometheus"}},
			"grafanaDashboard": map[string]any{"enabled": true, "namespace": "grafana"},
		}}
		want := "network-plugin-policy-metrics-service"
		if job != "" {
			vals["metrics"].(map[string]any)["job"], want = job, job
		}
		objs := mustRender(t, "games", "ops", vals)
		name := "games-network-plugin-policy"
		ep := objs["ServiceMonitor/"+name+"-manager"]["spec"].(map[string]any)["endpoints"].([]any)[0].(map[string]any)
		if fmt.Sprint(ep["relabelings"]) != fmt.Sprintf("[map[replacement:%s targetLabel:job]]", want) {
			t.Errorf("ServiceMonitor relabelings %v, want job %s", ep["relabelings"], want)
		}
		rule := objs["PrometheusRule/"+name]
		groups, _ := json.Marshal(rule["spec"])
		if !strings.Contains(string(groups), `job=\"`+want+`\"`) || (job != "" && strings.Contains(string(groups), "network-plugin-policy-metrics-service")) ||
			!strings.Contains(string(groups), "NetworkPluginPolicyWebhookDown") || !strings.Contains(string(groups), "{{ $labels.name }}") {
			t.Errorf("PrometheusRule spec does not select job %s or lost Prometheus's templates: %.300s", want, groups)
		}
		if rule["metadata"].(map[string]any)["labels"].(map[string]any)["release"] != "kube-prometheus" {
			t.Errorf("PrometheusRule labels %v", rule["metadata"])
		}
		cm := objs["ConfigMap/"+name+"-dashboard"]
		meta := cm["metadata"].(map[string]any)
		dash := cm["data"].(map[string]any)["network-plugin-policy.json"].(string)
		if meta["namespace"] != "grafana" || meta["labels"].(map[string]any)["grafana_dashboard"] != "1" || !json.Valid([]byte(dash)) ||
			!strings.Contains(dash, `job=\"`+want+`\"`) {
			t.Errorf("dashboard ConfigMap %v: not valid JSON on job %s", meta, want)
		}
		b := objs["ClusterRoleBinding/"+name+"-metrics-reader-prometheus"]
		if fmt.Sprint(b["roleRef"].(map[string]any)["name"]) != name+"-metrics-reader" || fmt.Sprint(b["subjects"]) != "[map[kind:ServiceAccount name:prometheus-k8s namespace:monitoring]]" {
			t.Errorf("metrics reader binding %v", b)
		}
	}
}

// TestLedgerConfigMapsFlagAndRBACAgree: the port ledger's ConfigMaps that config/default and
// the chart create are the ones --lb-ledger-name names (<name>-0 to -7, the manager's
// lb.LedgerConfigMapNames; this module does not import the manager's)
// and the only ConfigMaps the manager's Role may get and update, with the chart's default
// name and with fullnameOverride: a manager that may not write them serves no load balancer.
func TestLedgerConfigMapsFlagAndRBACAgree(t *testing.T) {
	check := func(t *testing.T, objs map[string]map[string]any, deployment, role, base string) {
		t.Helper()
		a := args(t, objs, deployment)
		if base != defaultLedgerName && !slices.Contains(a, "--lb-ledger-name="+base) {
			t.Errorf("args %v, want --lb-ledger-name=%s", a, base)
		}
		want := ledgerNames(base)
		for _, name := range want {
			if _, ok := objs["ConfigMap/"+name]; !ok {
				t.Errorf("no ConfigMap %s", name)
			}
		}
		r, ok := objs["Role/"+role]
		if !ok {
			t.Fatalf("no Role %s", role)
		}
		var names []string
		for _, x := range r["rules"].([]any) {
			rule := x.(map[string]any)
			if slices.Contains(rule["resources"].([]any), any("configmaps")) {
				if fmt.Sprint(rule["verbs"]) != "[get update]" {
					t.Errorf("configmaps verbs %v, want [get update]", rule["verbs"])
				}
				for _, n := range rule["resourceNames"].([]any) {
					names = append(names, n.(string))
				}
			}
		}
		if !slices.Equal(names, want) {
			t.Errorf("configmaps resourceNames %v, want %v", names, want)
		}
	}
	t.Run("config/default", func(t *testing.T) {
		objs, err := Kustomize(context.Background(), "../../config/default")
		if err != nil {
			t.Fatal(err)
		}
		check(t, byKindName(objs), "network-plugin-policy-manager", "network-plugin-policy-manager-role", defaultLedgerName)
	})
	t.Run("chart defaults", func(t *testing.T) {
		check(t, mustRender(t, "network-plugin-policy", Namespace, nil), "network-plugin-policy-manager", "network-plugin-policy-manager-role", defaultLedgerName)
	})
	t.Run("chart fullnameOverride", func(t *testing.T) {
		check(t, mustRender(t, "network-plugin-policy", Namespace, map[string]any{"fullnameOverride": "npp"}), "npp-manager", "npp-manager-role", "npp-lb-ledger")
	})
}

// defaultLedgerName is the manager's --lb-ledger-name default (lb.DefaultLedgerName).
const defaultLedgerName = "network-plugin-policy-lb-ledger"

// ledgerNames is lb.LedgerConfigMapNames: base-0 to base-7.
func ledgerNames(base string) []string {
	var out []string
	for i := range 8 {
		out = append(out, fmt.Sprintf("%s-%d", base, i))
	}
	return out
}

// TestLeaderOwnedEntriesRenderLive: every entry of LeaderOwnedEntries is in the generated
// webhook templates and renders its live matchConditions (a renamed entry would silently go
// back to the chart's defaults at each upgrade), and no other entry does.
func TestLeaderOwnedEntriesRenderLive(t *testing.T) {
	b, err := os.ReadFile("../../charts/network-plugin-policy/templates/zz_generated.webhooks.yaml")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	for _, entry := range LeaderOwnedEntries {
		if !strings.Contains(text, fmt.Sprintf("%q) }}", entry)) {
			t.Errorf("entry %s renders no live matchConditions (is it still in config/default?)", entry)
		}
	}
	if got := strings.Count(text, "npp.liveMatchConditions"); got != len(LeaderOwnedEntries) {
		t.Errorf("%d entries render live matchConditions, want %d (LeaderOwnedEntries)", got, len(LeaderOwnedEntries))
	}
}
