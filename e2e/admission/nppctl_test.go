package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// annotationDecision is pkg/webhook/pod.AnnotationDecision.
const annotationDecision = "policy.game.kruise.io/network-decision"

// TestNppctlExplainMatchesWebhook: the same policy files and pod files give the same
// decision through `nppctl explain` offline, through `nppctl explain --live`, and through
// the live webhook (the network-decision annotation it writes on the admitted pod): a
// cluster-wide policy selected by namespace, a namespace policy selected by pod label, a
// failureModeExpression deciding on the plugin's actual error (a NodePort pod without
// PortProtocols fails with parameterError), and the built-in default. by-error's
// matchCondition holds at CREATE and at the network controller's retry UPDATEs alike, so
// the decision annotation the test reads is the same whichever admission wrote it last.
// Then `nppctl diff
// --live` lists exactly the pod a proposed policy change affects.
func TestNppctlExplainMatchesWebhook(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "nppctl", map[string]string{"team": "arena"})
	dir := t.TempDir()
	nppctl := buildNppctl(t)

	rootPolicy := "nppctl-" + ns
	policies := filepath.Join(dir, "policies")
	writeFile(t, filepath.Join(policies, "root.yaml"), fmt.Sprintf(`apiVersion: policy.game.kruise.io/v1alpha1
kind: NetworkPluginPolicy
metadata: {name: %s, namespace: %s}
spec:
  plugins: ["Kubernetes-NodePort"]
  namespaceSelector: {matchLabels: {team: arena, kubernetes.io/metadata.name: %s}}
  failureMode: Asynchronous
  timeout: 5s
  retry: {window: 7m}
`, rootPolicy, rootNS, ns))
	writeFile(t, filepath.Join(policies, "team.yaml"), fmt.Sprintf(`apiVersion: policy.game.kruise.io/v1alpha1
kind: NetworkPluginPolicy
metadata: {name: canary, namespace: %[1]s}
spec:
  plugins: ["*"]
  podSelector: {matchLabels: {track: canary}}
  failureMode: Synchronous
  timeout: 2s
---
apiVersion: policy.game.kruise.io/v1alpha1
kind: NetworkPluginPolicy
metadata: {name: by-error, namespace: %[1]s}
spec:
  plugins: ["Kubernetes-NodePort"]
  podSelector: {matchLabels: {app: lobby}}
  matchConditions:
  - {name: lobby, expression: "object.metadata.labels['app'] == 'lobby'"}
  failureMode: Synchronous
  failureModeExpression: "error.type == 'parameterError' ? 'Asynchronous' : 'Synchronous'"
`, ns))
	t.Cleanup(func() {
		_, _ = kubectl(t, "", "delete", "--ignore-not-found", "-f", filepath.Join(policies, "root.yaml"))
	})
	if out, err := kubectl(t, "", "apply", "-f", policies); err != nil {
		t.Fatalf("kubectl apply -f %s: %v\n%s", policies, err, out)
	}

	pod := func(name, labels, networkType, conf, ports string) string {
		annotations := networkstatus.AnnotationNetworkType + ": " + networkType
		if conf != "" {
			annotations += "\n    " + networkstatus.AnnotationNetworkConf + ": '" + conf + "'"
		}
		return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: %s
  labels: %s
  annotations:
    %s
spec:
  terminationGracePeriodSeconds: 0
  containers:
  - name: game
    image: game-server:1.0
    ports: %s
`, name, ns, labels, annotations, ports)
	}
	udp := `[{containerPort: 7777, protocol: UDP}]`
	// Pods whose plugin succeeds, and one whose plugin fails with parameterError.
	succeeding := filepath.Join(dir, "pods.yaml")
	writeFile(t, succeeding, strings.Join([]string{
		pod("plain-0", "{app: plain}", "Kubernetes-NodePort", `[{"name":"PortProtocols","value":"7777/UDP"}]`, udp),
		pod("canary-0", "{app: plain, track: canary}", "Kubernetes-NodePort", `[{"name":"PortProtocols","value":"7777/UDP"}]`, udp),
		pod("hostport-0", "{app: hostport}", "Kubernetes-HostPort", `[{"name":"ContainerPorts","value":"game:7777/UDP"}]`, `[{name: game, containerPort: 7777, protocol: UDP}]`),
	}, "---\n"))
	failing := filepath.Join(dir, "lobby.yaml")
	writeFile(t, failing, pod("lobby-0", "{app: lobby}", "Kubernetes-NodePort", "", udp))
	nsObj, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get namespace: %v", err)
	}
	writeFile(t, filepath.Join(dir, "namespace.yaml"), fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n  labels: {team: %s}\n", ns, nsObj.Labels["team"]))

	// Barrier: the webhook decides with each policy (dry runs run no plugin and store nothing).
	for _, p := range []struct{ file, policy string }{
		{succeeding, rootNS + "/" + rootPolicy}, {succeeding, ns + "/canary"}, {failing, ns + "/by-error"},
	} {
		eventually(t, 30*time.Second, "policy "+p.policy+" in force", func(context.Context) (bool, error) {
			out, err := kubectl(t, "", "create", "--dry-run=server", "-o", "jsonpath={.metadata.annotations}{'\\n'}", "-f", p.file)
			return err == nil && strings.Contains(out, "policy "+p.policy+"@"), err
		})
	}

	offline := map[string]string{}
	for _, run := range []struct {
		file  string
		extra []string
	}{
		{succeeding, nil},
		{failing, []string{"--error-type", "parameterError"}},
	} {
		args := append([]string{"explain", "--root-namespace", rootNS, "--policies", policies, "--pod", run.file,
			"--namespace", filepath.Join(dir, "namespace.yaml"), "-o", "json"}, run.extra...)
		for _, e := range explainJSON(t, nppctl, args...) {
			offline[e.Pod] = e.NetworkDecision
		}
	}

	for _, file := range []string{succeeding, failing} {
		if out, err := kubectl(t, "", "apply", "-f", file); err != nil {
			t.Fatalf("kubectl apply -f %s: %v\n%s", file, err, out)
		}
	}
	want := map[string]string{
		"plain-0":    "Asynchronous by policy " + rootNS + "/" + rootPolicy + "@1",
		"canary-0":   "Synchronous by policy " + ns + "/canary@1",
		"hostport-0": "Synchronous by built-in default",
		"lobby-0":    "Asynchronous by policy " + ns + "/by-error@1",
	}
	for name, wantDecision := range want {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get pod %s: %v", name, err)
		}
		webhook := p.Annotations[annotationDecision]
		if webhook != wantDecision {
			t.Errorf("pod %s: webhook decided %q, want %q", name, webhook, wantDecision)
		}
		if got := offline[ns+"/"+name]; got != webhook {
			t.Errorf("pod %s: nppctl explain (offline) says %q, the webhook wrote %q", name, got, webhook)
		}
		args := []string{"explain", "--live", "pod/" + name, "-n", ns, "--kubeconfig", cp.KubeconfigPath, "--root-namespace", rootNS, "-o", "json"}
		if name == "lobby-0" {
			args = append(args, "--error-type", "parameterError")
		}
		live := explainJSON(t, nppctl, args...)
		if len(live) != 1 || live[0].NetworkDecision != webhook {
			t.Errorf("pod %s: nppctl explain --live says %+v, the webhook wrote %q", name, live, webhook)
		}
	}

	// diff --live: a proposed canary policy with a longer timeout changes canary-0 only.
	proposed := filepath.Join(dir, "proposed.yaml")
	writeFile(t, proposed, fmt.Sprintf(`apiVersion: policy.game.kruise.io/v1alpha1
kind: NetworkPluginPolicy
metadata: {name: canary, namespace: %s}
spec:
  plugins: ["*"]
  podSelector: {matchLabels: {track: canary}}
  failureMode: Synchronous
  timeout: 6s
`, ns))
	cmd := exec.Command(nppctl, "diff", "--live", "--kubeconfig", cp.KubeconfigPath, "--root-namespace", rootNS, "--policies", proposed, "-o", "json")
	out, err := cmd.Output()
	if code := cmd.ProcessState.ExitCode(); code != 1 {
		t.Fatalf("nppctl diff --live: exit code %d (%v), want 1 (changes)\n%s", code, err, out)
	}
	var changes []map[string]string
	if err := json.Unmarshal(out, &changes); err != nil {
		t.Fatalf("nppctl diff --live: decode output: %v\n%s", err, out)
	}
	wantChanges := []map[string]string{{"pod": ns + "/canary-0", "field": "timeout",
		"current": "2s (" + ns + "/canary@1)", "proposed": "6s (" + ns + "/canary@2)"}}
	if diff := cmp.Diff(wantChanges, changes); diff != "" {
		t.Errorf("nppctl diff --live changes (-want,+got):\n%s", diff)
	}
}

// explained is the part of nppctl explain's JSON output the test compares.
type explained struct {
	Pod             string `json:"pod"`
	NetworkDecision string `json:"networkDecision"`
}

// explainJSON runs nppctl with args (an explain with -o json) and decodes its output.
func explainJSON(t *testing.T, nppctl string, args ...string) []explained {
	t.Helper()
	cmd := exec.Command(nppctl, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("nppctl %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	var res []explained
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("nppctl %s: decode output: %v\n%s", strings.Join(args, " "), err, out)
	}
	return res
}

// writeFile writes data to path, creating its directory.
func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}
