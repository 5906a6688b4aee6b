package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
	"github.com/okg-extensions/network-plugin-policy/pkg/client/clientset/versioned"
)

// A tenant (namespace) policy beyond a root policy's bounds: the validating webhook warns at
// kubectl apply, naming the field and the root policy; the pod webhook caps the decision (the
// pod's network-decision annotation says "capped by root policy", the retry state carries the
// capped schedule); nppctl explain --live explains the caps.
func TestTenantPolicyBeyondRootBounds(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "bounds", nil)
	hostPortBound, nodePortBound := "bounds-hp-"+ns, "bounds-np-"+ns
	// The root policies select this test's namespace only, so other tests are not capped.
	roots := fmt.Sprintf(`apiVersion: policy.game.kruise.io/v1alpha1
kind: NetworkPluginPolicy
metadata: {name: %[1]s, namespace: %[3]s}
spec:
  plugins: ["Kubernetes-HostPort"]
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: %[4]s}}
  bounds: {failureModes: [Synchronous]}
---
apiVersion: policy.game.kruise.io/v1alpha1
kind: NetworkPluginPolicy
metadata: {name: %[2]s, namespace: %[3]s}
spec:
  plugins: ["Kubernetes-NodePort"]
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: %[4]s}}
  bounds: {minInterval: 2s, maxWindow: 10m}
`, hostPortBound, nodePortBound, rootNS, ns)
	applyPolicy(t, roots)
	t.Cleanup(func() { _, _ = kubectl(t, roots, "delete", "--ignore-not-found", "-f", "-") })

	tenant := fmt.Sprintf(`apiVersion: policy.game.kruise.io/v1alpha1
kind: NetworkPluginPolicy
metadata: {name: greedy, namespace: %s}
spec:
  plugins: ["Kubernetes-HostPort", "Kubernetes-NodePort"]
  failureMode: Asynchronous
  retry: {window: 8760h, interval: 1ms, maxInterval: 1s, exhaustedAction: Recreate}
`, ns)
	wantWarnings := []string{
		"spec.failureMode: Asynchronous is outside failureModes [Synchronous] of root policy " + rootNS + "/" + hostPortBound + " for Kubernetes-HostPort",
		"spec.retry.window: 8760h0m0s is above maxWindow 10m0s of root policy " + rootNS + "/" + nodePortBound + " for Kubernetes-NodePort",
		"spec.retry.interval: 1ms is below minInterval 2s of root policy " + rootNS + "/" + nodePortBound + " for Kubernetes-NodePort",
	}
	hasAll := func(out string) bool {
		for _, w := range wantWarnings {
			if !strings.Contains(out, w) {
				return false
			}
		}
		return true
	}
	// Barrier: the manager's cache has both root policies (a server-side dry run stores nothing).
	eventually(t, 30*time.Second, "the validating webhook sees the root policies' bounds", func(context.Context) (bool, error) {
		out, err := kubectl(t, tenant, "apply", "--dry-run=server", "-f", "-")
		return err == nil && hasAll(out), err
	})
	out, err := kubectl(t, tenant, "apply", "-f", "-")
	if err != nil {
		t.Fatalf("kubectl apply of the tenant policy: %v\n%s", err, out)
	}
	if !hasAll(out) {
		t.Errorf("kubectl apply output:\n%s\nwant the warnings %q", out, wantWarnings)
	}
	waitForPolicy(t, ns, "greedy", "Kubernetes-NodePort")

	// HostPort: the tenant's Asynchronous is capped to Synchronous (the plugin succeeds, so
	// the pod is admitted and carries the decision).
	hostPort := gamePodTemplate("hp", "Kubernetes-HostPort", `[{"name":"ContainerPorts","value":"game:7777/UDP"}]`)
	hostPort.Spec.Containers[0].Ports[0].Name = "game"
	hp := probePod(ns, "Kubernetes-HostPort")
	hp.GenerateName, hp.Name = "", "hp-0"
	hp.Labels = hostPort.Labels
	hp.Annotations = hostPort.Annotations
	hp.Spec.Containers = hostPort.Spec.Containers
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, hp, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create HostPort pod: %v", err)
	}
	// NodePort without PortProtocols: a parameterError, admitted NotReady by the tenant's
	// Asynchronous, with the schedule capped.
	np := probePod(ns, "Kubernetes-NodePort")
	np.GenerateName, np.Name = "", "np-0"
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, np, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create NodePort pod: %v", err)
	}

	got, err := cs.CoreV1().Pods(ns).Get(ctx, "hp-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantDecision := "Synchronous by policy " + ns + "/greedy@1, capped by root policy " + rootNS + "/" + hostPortBound + "@1"
	if d := got.Annotations[annotationDecision]; d != wantDecision {
		t.Errorf("pod hp-0: decision %q, want %q", d, wantDecision)
	}
	got, err = cs.CoreV1().Pods(ns).Get(ctx, "np-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d, want := got.Annotations[annotationDecision], "Asynchronous by policy "+ns+"/greedy@1"; d != want {
		t.Errorf("pod np-0: decision %q, want %q", d, want)
	}
	if st := retryState(t, got); st == nil || st.Window.Duration != 10*time.Minute || st.Interval.Duration != 2*time.Second ||
		st.MaxInterval.Duration != 2*time.Second {
		t.Errorf("pod np-0: retry state %+v, want window 10m, interval 2s, maxInterval 2s (capped)", st)
	}

	// Explained: nppctl explain --live reports the same decision and each cap.
	nppctl := buildNppctl(t)
	for _, c := range []struct {
		pod, errorType, decision string
		notes                    []string
	}{
		{"hp-0", "", wantDecision, []string{
			"failureMode Asynchronous of " + ns + "/greedy@1 capped to Synchronous by root policy " + rootNS + "/" + hostPortBound + "@1",
		}},
		{"np-0", "parameterError", "Asynchronous by policy " + ns + "/greedy@1", []string{
			"retry.window 8760h0m0s of " + ns + "/greedy@1 capped to 10m0s by root policy " + rootNS + "/" + nodePortBound + "@1",
			"retry.interval 1ms of " + ns + "/greedy@1 capped to 2s by root policy " + rootNS + "/" + nodePortBound + "@1",
		}},
	} {
		args := []string{"explain", "--live", "pod/" + c.pod, "-n", ns, "--kubeconfig", cp.KubeconfigPath, "--root-namespace", rootNS, "-o", "json"}
		if c.errorType != "" {
			args = append(args, "--error-type", c.errorType)
		}
		cmd := exec.Command(nppctl, args...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("nppctl %s: %v", strings.Join(args, " "), err)
		}
		var res []struct {
			NetworkDecision string   `json:"networkDecision"`
			Notes           []string `json:"notes"`
		}
		if err := json.Unmarshal(out, &res); err != nil || len(res) != 1 {
			t.Fatalf("nppctl explain: %v\n%s", err, out)
		}
		if res[0].NetworkDecision != c.decision {
			t.Errorf("nppctl explain %s: decision %q, want %q", c.pod, res[0].NetworkDecision, c.decision)
		}
		notes := strings.Join(res[0].Notes, "\n")
		for _, n := range c.notes {
			if !strings.Contains(notes, n) {
				t.Errorf("nppctl explain %s: notes\n%s\nwant %q", c.pod, notes, n)
			}
		}
	}
}

// TestRootBoundsFailClosed: a root policy's bounds apply when its matchConditions cannot be
// evaluated for a pod. Here the condition reads a label the pod does not carry (an error:
// no such key), and the pod's author controls its labels: without the label, the tenant's
// Recreate is still capped to the root's Event, and the explanation says why.
func TestRootBoundsFailClosed(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "failclosed", nil)
	bound := "failclosed-" + ns
	root := fmt.Sprintf(`apiVersion: policy.game.kruise.io/v1alpha1
kind: NetworkPluginPolicy
metadata: {name: %s, namespace: %s}
spec:
  plugins: ["Kubernetes-NodePort"]
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: %s}}
  matchConditions:
  - {name: not-dev, expression: "object.metadata.labels['tier'] != 'dev'"}
  bounds: {exhaustedActions: [Event]}
`, bound, rootNS, ns)
	applyPolicy(t, root)
	t.Cleanup(func() { _, _ = kubectl(t, root, "delete", "--ignore-not-found", "-f", "-") })
	tenant := fmt.Sprintf(`apiVersion: policy.game.kruise.io/v1alpha1
kind: NetworkPluginPolicy
metadata: {name: recreate, namespace: %s}
spec:
  plugins: ["Kubernetes-NodePort"]
  failureMode: Asynchronous
  retry: {window: 10m, exhaustedAction: Recreate}
`, ns)
	want := "spec.retry.exhaustedAction: Recreate is outside exhaustedActions [Event] of root policy " + rootNS + "/" + bound
	// Barrier: the manager's cache has the root policy (its bounds warn at apply).
	eventually(t, 30*time.Second, "the validating webhook sees the root policy's bounds", func(context.Context) (bool, error) {
		out, err := kubectl(t, tenant, "apply", "--dry-run=server", "-f", "-")
		return err == nil && strings.Contains(out, want), err
	})
	if out, err := kubectl(t, tenant, "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply of the tenant policy: %v\n%s", err, out)
	}
	waitForPolicy(t, ns, "recreate", "Kubernetes-NodePort")

	// No PortProtocols: a parameterError, admitted NotReady by the tenant's Asynchronous.
	np := probePod(ns, "Kubernetes-NodePort")
	np.GenerateName, np.Name = "", "np-0"
	delete(np.Labels, "tier")
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, np, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create NodePort pod: %v", err)
	}
	got, err := cs.CoreV1().Pods(ns).Get(ctx, "np-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st := retryState(t, got); st == nil || st.ExhaustedAction != "Event" {
		t.Errorf("pod np-0 without label tier: retry state %+v, want exhaustedAction Event (the root's bound applies although its matchCondition failed)", st)
	}
}

// TestRootPolicyThatStopsCompilingKeepsItsBounds: a root policy whose new generation does
// not compile (here written while the validating webhook was away; an upgrade that changes
// the CEL environment does the same to a stored one) is not dropped: the bounds and
// selection of its last good generation stay in force, its status says Ready=False with the
// compile error and the generation kept, and the manager logs it at error level. A tenant's
// Recreate stays capped to the root's Event for a new pod.
func TestRootPolicyThatStopsCompilingKeepsItsBounds(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "stopscompiling", nil)
	name := "stops-" + ns
	root := func(expr string) string {
		return fmt.Sprintf(`apiVersion: policy.game.kruise.io/v1alpha1
kind: NetworkPluginPolicy
metadata: {name: %s, namespace: %s}
spec:
  plugins: ["Kubernetes-NodePort"]
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: %s}}
  matchConditions:
  - {name: not-canary, expression: %q}
  bounds: {exhaustedActions: [Event]}
`, name, rootNS, ns, expr)
	}
	applyPolicy(t, root("!('canary' in object.metadata.labels)"))
	t.Cleanup(func() { _, _ = kubectl(t, root("true"), "delete", "--ignore-not-found", "-f", "-") })
	tenant := fmt.Sprintf(`apiVersion: policy.game.kruise.io/v1alpha1
kind: NetworkPluginPolicy
metadata: {name: recreate, namespace: %s}
spec:
  plugins: ["Kubernetes-NodePort"]
  failureMode: Asynchronous
  retry: {window: 10m, exhaustedAction: Recreate}
`, ns)
	want := "spec.retry.exhaustedAction: Recreate is outside exhaustedActions [Event] of root policy " + rootNS + "/" + name
	eventually(t, 30*time.Second, "the validating webhook sees the root policy's bounds", func(context.Context) (bool, error) {
		out, err := kubectl(t, tenant, "apply", "--dry-run=server", "-f", "-")
		return err == nil && strings.Contains(out, want), err
	})
	applyPolicy(t, tenant)
	waitForPolicy(t, ns, "recreate", "Kubernetes-NodePort")

	// Generation 2 does not compile: written around the validating webhook.
	if err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, mgr.Webhooks.Validating, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	reinstalled := false
	reinstall := func() {
		if !reinstalled {
			reinstalled = true
			if err := mgr.InstallWebhooks(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(reinstall)
	applyPolicy(t, root("object.metadata.labels['tier'] ==="))
	reinstall()

	pc := versioned.NewForConfigOrDie(cp.Config)
	eventually(t, 30*time.Second, "root policy Ready=False keeping generation 1", func(ctx context.Context) (bool, error) {
		p, err := pc.PolicyV1alpha1().NetworkPluginPolicies(rootNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(p.Status.Conditions, policyv1alpha1.ConditionReady)
		return p.Generation == 2 && p.Status.ObservedGeneration == 2 && c != nil && c.Status == metav1.ConditionFalse &&
			strings.Contains(c.Message, "the bounds and selection of generation 1, the last that compiled, stay in force") &&
			strings.Contains(c.Message, "spec.matchConditions[0].expression"), nil
	})
	logged := "Root policy does not compile; the bounds and selection of its last good generation stay in force"
	if logs := mgr.LogTails(8 << 20); !strings.Contains(logs, logged) {
		t.Errorf("no replica logged %q", logged)
	}

	np := probePod(ns, "Kubernetes-NodePort")
	np.GenerateName, np.Name = "", "np-0"
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, np, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create NodePort pod: %v", err)
	}
	got, err := cs.CoreV1().Pods(ns).Get(ctx, "np-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st := retryState(t, got); st == nil || st.ExhaustedAction != "Event" {
		t.Errorf("pod np-0 under a root policy that stopped compiling: retry state %+v, want exhaustedAction Event (generation 1's bound)", st)
	}
}
