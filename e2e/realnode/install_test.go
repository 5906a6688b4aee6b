package realnode

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/okg-extensions/network-plugin-policy/e2e/cluster"
	"github.com/okg-extensions/network-plugin-policy/pkg/controller/okgvalidation"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/tencentcloud"
	podwebhook "github.com/okg-extensions/network-plugin-policy/pkg/webhook/pod"
)

// kubernetesServiceIP is the kubernetes Service's cluster IP (the first of the API server's
// service-cluster-ip-range, 10.96.0.0/16): pods reach the API server there.
const kubernetesServiceIP = "10.96.0.1"

// TestChartInstallsTheManagerAsPods installs the previous release (the chart and the manager's
// image of testdata/upgrade-from) with helm install, then upgrades it to this revision as
// make release builds it (the packaged chart archive and its default image, the release's
// image archive imported into the nodes under the name it carries; no image value is set)
// with helm upgrade (Helm's own code, hack/chart -helm): the manager runs as
// two pods on the real nodes, with its ServiceAccount, RBAC, Secret volume, probes, PDB and
// leader election; the API server calls its webhooks through the Service (aggregator
// routing: the endpoints' pod IPs, no kube-proxy). On that installation:
//   - install: a HostPort game server is admitted by those pods and answers at the address
//     its network-status announces;
//   - kill: a manager container is SIGKILLed; the kubelet restarts it, and admissions go on
//     meanwhile (counted);
//   - upgrade: helm upgrade from the previous release to this one rolls both pods to the new
//     image while game servers are admitted: 0 failed admissions; the running game server
//     keeps its pod, its network-status and its answers; Kubernetes-HostPort never leaves
//     the sync entry (the chart renders the live matchConditions: npp.liveMatchConditions);
//     Helm's three-way merge keeps the caBundle the manager injected; a second helm upgrade that changes nothing keeps the
//     caBundle and the matchConditions the leader wrote;
//   - drain: the leader's pod is evicted from its cordoned node, the PodDisruptionBudget
//     refuses the other replica's eviction until the replacement is ready;
//   - uninstall: helm uninstall leaves no webhook configuration (the CRD stays, Helm's rule),
//     and its post-delete hook removes the condition the manager kept on OKG's GameServerSet
//     entry;
//     a HostPort pod is then admitted without the webhook, and the game server still answers.
func TestChartInstallsTheManagerAsPods(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cp := cluster.StartForTest(t, cluster.Options{
		FakeNodes:      1,
		APIServerHosts: []string{kubernetesServiceIP, NodeIP(0)},
		APIServerFlags: map[string]string{"bind-address": "0.0.0.0", "enable-aggregator-routing": "true"},
	})
	// Pods reach the API server at the kubernetes Service: without kube-proxy, one DNAT rule
	// in the suite's namespace sends it to the API server's port on the first node's address.
	port := cp.URL[strings.LastIndex(cp.URL, ":")+1:]
	rule := []string{"-t", "nat", "PREROUTING", "-d", kubernetesServiceIP, "-p", "tcp", "--dport", "443", "-j", "DNAT", "--to-destination", NodeIP(0) + ":" + port}
	iptables := func(op string) ([]byte, error) {
		return exec.Command("iptables", append([]string{rule[0], rule[1], op}, rule[2:]...)...).CombinedOutput()
	}
	if out, err := iptables("-A"); err != nil {
		t.Fatalf("iptables: %v: %s", err, out)
	}
	t.Cleanup(func() { _, _ = iptables("-D") })
	var nodes []*Node
	for i := range 2 {
		nodes = append(nodes, startNode(ctx, t, cp, i))
	}
	cs := kubernetes.NewForConfigOrDie(cp.Config)
	root := "network-plugin-policy-system"
	start := time.Now()
	// helm install does not wait: the poll below says what is missing when it times out.
	t.Logf("install the previous release (%s): %s", images.PreviousRevision[:12], helm(ctx, t, cp, "install", images.PreviousChart, images.PreviousManager, 0))
	ns := "game"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Game servers first, then the manager, before the kubelets stop (CNI DEL).
		bg := context.Background()
		_ = cs.CoreV1().Pods(ns).DeleteCollection(bg, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](1)}, metav1.ListOptions{})
		_ = cs.AppsV1().Deployments(root).Delete(bg, "network-plugin-policy-manager", metav1.DeleteOptions{})
		_ = wait.PollUntilContextTimeout(bg, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			a, err1 := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			b, err2 := cs.CoreV1().Pods(root).List(ctx, metav1.ListOptions{})
			return err1 == nil && err2 == nil && len(a.Items)+len(b.Items) == 0, nil
		})
	})
	var last string
	err := wait.PollUntilContextTimeout(ctx, time.Second, 4*time.Minute, true, func(ctx context.Context) (bool, error) {
		d, err := cs.AppsV1().Deployments(root).Get(ctx, "network-plugin-policy-manager", metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		last = fmt.Sprintf("%d of %d replicas available", d.Status.AvailableReplicas, *d.Spec.Replicas)
		return d.Status.AvailableReplicas == 2 && available(d), nil
	})
	if err != nil {
		pods, _ := exec.Command("kubectl", "--kubeconfig", cp.KubeconfigPath, "-n", root, "get", "pods", "-o", "wide").CombinedOutput()
		logs, _ := exec.Command("kubectl", "--kubeconfig", cp.KubeconfigPath, "-n", root, "logs", "deployment/network-plugin-policy-manager", "--tail=30").CombinedOutput()
		t.Fatalf("the manager Deployment is not available within 4m (%s):\n%s\n%s", last, pods, logs)
	}
	t.Logf("manager available as 2 pods %s after helm install", time.Since(start).Round(time.Second))
	pods, err := cs.CoreV1().Pods(root).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=network-plugin-policy"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if !strings.HasPrefix(p.Spec.NodeName, "real-") {
			t.Errorf("manager pod %s on %s, want a real node", p.Name, p.Spec.NodeName)
		}
	}

	// A HostPort game server, admitted by the manager's pods through the Service.
	pod := echoGameServer(ns, "gs", "Kubernetes-HostPort", fmt.Sprintf(`[{"name":"ContainerPorts","value":"echo:%d/UDP"}]`, echoPort))
	pod.Spec.NodeSelector = map[string]string{RealNodeLabel: "true"}
	// The Deployment is available once both pods are ready, but an endpoint a restarted
	// container left may still be in the Service for a moment: a create the API server could
	// not deliver (connection refused) is sent again, for at most 30 s; any other error fails.
	var created *corev1.Pod
	err = wait.PollUntilContextTimeout(ctx, time.Second, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		c, err := cs.CoreV1().Pods(ns).Create(ctx, pod.DeepCopy(), metav1.CreateOptions{})
		if err != nil && strings.Contains(err.Error(), "failed calling webhook") && strings.Contains(err.Error(), "connection refused") {
			t.Logf("create the game server: %v; again", err)
			return false, nil
		}
		created = c
		return true, err
	})
	if err != nil {
		t.Fatalf("create the game server: %v", err)
	}
	if created.Annotations[podwebhook.AnnotationDecision] == "" {
		t.Fatal("the game server was admitted without the manager's decision")
	}
	_, a := readyNetwork(ctx, t, cs, ns, "gs")
	target := fmt.Sprintf("%s:%s", a.IP, a.Ports[0].Port.String())
	answers := func(when string) {
		t.Helper()
		got, err := echoOnce(ctx, "udp", target, "ping")
		if err != nil || got != "gs: ping" {
			t.Errorf("%s: the game server at %s (its network-status): %q (%v), want %q", when, target, got, err, "gs: ping")
		}
	}
	answers("installed")

	// Kill: SIGKILL one manager container; the kubelet restarts it.
	victim := pods.Items[0]
	containerID := strings.TrimPrefix(victim.Status.ContainerStatuses[0].ContainerID, "containerd://")
	node := nodeIndex(victim.Spec.NodeName)
	stopLoad := admitLoad(ctx, cp.Config, ns)
	if out, err := exec.CommandContext(ctx, cp.BinDir+"/ctr", "--address", nodes[node].Socket, "-n", "k8s.io", "tasks", "kill", "-s", "SIGKILL", containerID).CombinedOutput(); err != nil {
		t.Fatalf("kill the manager container of %s: %v: %s", victim.Name, err, out)
	}
	err = wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(root).Get(ctx, victim.Name, metav1.GetOptions{})
		if err != nil || len(p.Status.ContainerStatuses) == 0 {
			return false, nil
		}
		c := p.Status.ContainerStatuses[0]
		return c.RestartCount > 0 && c.Ready, nil
	})
	ok, failed, reasons := stopLoad()
	if err != nil {
		t.Fatalf("kill: %s not restarted and ready within 2m", victim.Name)
	}
	t.Logf("kill: %s restarted by the kubelet and ready again; meanwhile %d HostPort admissions, %d failed (the first: %q)", victim.Name, ok, failed, reasons)
	if ok == 0 {
		t.Error("kill: no admission succeeded while a manager container was restarting (the other replica serves)")
	}

	// Upgrade: helm upgrade from the previous release to this revision's chart and image,
	// while game servers are admitted.
	before, err := cs.CoreV1().Pods(ns).Get(ctx, "gs", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The CRD first, as docs/deploy.md says (Helm never upgrades crds/): server-side apply
	// takes the fields over from Helm's install (--force-conflicts), and the stored CRD is
	// this revision's.
	crds, _ := filepath.Abs("../../charts/network-plugin-policy/crds")
	if out, err := exec.CommandContext(ctx, "kubectl", "--kubeconfig", cp.KubeconfigPath, "apply", "--server-side", "--force-conflicts",
		"--field-manager=network-plugin-policy-upgrade", "-f", crds).CombinedOutput(); err != nil {
		t.Fatalf("upgrade: apply the CRD: %v: %s", err, out)
	}
	crdIsThisRevisions(ctx, t, cp, crds)
	stopLoad = admitLoad(ctx, cp.Config, ns)
	stopTimeline := upgradeTimeline(ctx, cs, root)
	// This revision as released: the packaged chart, its default image (no image value).
	upgraded := helm(ctx, t, cp, "upgrade", images.Chart, "", 4*time.Minute)
	err = wait.PollUntilContextTimeout(ctx, time.Second, 4*time.Minute, true, func(ctx context.Context) (bool, error) {
		d, err := cs.AppsV1().Deployments(root).Get(ctx, "network-plugin-policy-manager", metav1.GetOptions{})
		return err == nil && d.Status.ObservedGeneration == d.Generation && d.Status.UpdatedReplicas == 2 &&
			d.Status.AvailableReplicas == 2 && d.Status.Replicas == 2, nil
	})
	ok, failed, reasons = stopLoad()
	timeline := stopTimeline()
	if err != nil {
		t.Fatalf("upgrade: the rollout did not complete within 4m; meanwhile:\n%s", strings.Join(timeline, "\n"))
	}
	t.Logf("upgrade: %s; both replicas rolled; meanwhile %d HostPort admissions, %d failed; the rollout:\n%s", upgraded, ok, failed, strings.Join(timeline, "\n"))
	if failed != 0 || ok == 0 {
		t.Errorf("upgrade: %d admissions failed of %d, want 0 failed; the first: %q", failed, ok+failed, reasons)
	}
	// The chart renders the leader's entries with their live matchConditions, so Helm's
	// three-way merge writes nothing over the sync entry's types: HostPort creates never go
	// behind the async entry's failurePolicy Ignore during the upgrade.
	for _, line := range timeline {
		if strings.Contains(line, "synchronous types") && !strings.Contains(line, "'Kubernetes-HostPort'") {
			t.Errorf("upgrade: Kubernetes-HostPort left the sync entry (failurePolicy Fail) during the upgrade: %s", line)
		}
	}
	running, err := cs.CoreV1().Pods(root).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=network-plugin-policy"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range running.Items {
		if p.DeletionTimestamp == nil && p.Spec.Containers[0].Image != images.Manager {
			t.Errorf("upgrade: manager pod %s runs %s, want %s", p.Name, p.Spec.Containers[0].Image, images.Manager)
		}
	}
	after, err := cs.CoreV1().Pods(ns).Get(ctx, "gs", metav1.GetOptions{})
	switch {
	case err != nil:
		t.Errorf("upgrade: the game server: %v", err)
	case after.UID != before.UID || after.Status.ContainerStatuses[0].RestartCount != before.Status.ContainerStatuses[0].RestartCount:
		t.Error("upgrade: the game server was replaced or restarted")
	case after.Annotations[networkstatus.AnnotationNetworkStatus] != before.Annotations[networkstatus.AnnotationNetworkStatus]:
		t.Errorf("upgrade: the game server's network-status changed:\n%s\nto\n%s", before.Annotations[networkstatus.AnnotationNetworkStatus], after.Annotations[networkstatus.AnnotationNetworkStatus])
	}
	answers("upgraded")
	// What the manager wrote into its webhook configurations survives helm upgrade: the
	// caBundle (in no template), and the leader's matchConditions through an upgrade that
	// does not change the chart's. Read once this revision's leader has written them: the
	// lease held by one of the two current pods, then the configurations unchanged for 6 s
	// (the previous revision's leader may still hold the lease when the rollout completes,
	// and wrote its own conditions).
	if _, _, err := currentLeader(ctx, cs, root); err != nil {
		t.Fatal("upgrade: no leader among exactly two running manager pods within 2m")
	}
	var written map[string]webhookWrite
	stable := 0
	if err := wait.PollUntilContextTimeout(ctx, 2*time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		now := webhookWrites(ctx, t, cs)
		if reflect.DeepEqual(now, written) {
			stable++
		} else {
			written, stable = now, 0
		}
		return stable >= 3, nil
	}); err != nil {
		t.Fatal("upgrade: the webhook configurations kept changing for 2m after the rollout")
	}
	for entry, w := range written {
		if w.caBundle == 0 {
			t.Errorf("upgrade: webhook %s has no caBundle after helm upgrade", entry)
		}
	}
	// The pods/status entry's condition is the chart's, not the leader's: helm upgrade writes
	// this revision's, which sees every result annotation of this revision's plugins.
	statusEntry := written["network-plugin-policy-mutating-webhook-configuration/status.mpod.policy.game.kruise.io"]
	if want := tencentcloud.AnnotationPortMappingResult; !strings.Contains(statusEntry.matchConditions, want) {
		t.Errorf("upgrade: the pods/status entry's condition does not see %s (helm upgrade kept the previous release's):\n%s", want, statusEntry.matchConditions)
	}
	t.Logf("upgrade again, nothing changed: %s", helm(ctx, t, cp, "upgrade", images.Chart, "", 4*time.Minute))
	if again := webhookWrites(ctx, t, cs); !reflect.DeepEqual(again, written) {
		t.Errorf("upgrade: an upgrade that changes nothing changed what the manager wrote into its webhook configurations:\n%v\nto\n%v", written, again)
	}

	// Drain the leader's node: its manager pod is evicted, the PodDisruptionBudget refuses to
	// evict the other one until the replacement is ready, and the Deployment is whole again.
	// The leader is one of the two current pods once the old ones are gone.
	leader, other, err := currentLeader(ctx, cs, root)
	if err != nil {
		t.Fatal("drain: no leader among exactly two running manager pods within 2m")
	}
	cordon := func(node string, unschedulable bool) {
		patch := fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, unschedulable)
		if _, err := cs.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cordon(leader.Spec.NodeName, true)
	defer cordon(leader.Spec.NodeName, false)
	evict := func(p *corev1.Pod) error {
		return cs.PolicyV1().Evictions(root).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: root}})
	}
	if err := evict(leader); err != nil {
		t.Fatalf("drain: evict the leader %s: %v", leader.Name, err)
	}
	if err := evict(other); !apierrors.IsTooManyRequests(err) {
		t.Errorf("drain: evicting the other replica %s while the leader's replacement is not ready: %v, want the PodDisruptionBudget's refusal (429)", other.Name, err)
	}
	err = wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		d, err := cs.AppsV1().Deployments(root).Get(ctx, "network-plugin-policy-manager", metav1.GetOptions{})
		return err == nil && d.Status.AvailableReplicas == 2 && d.Status.Replicas == 2, nil
	})
	if err != nil {
		t.Fatal("drain: the Deployment is not whole again within 3m")
	}
	t.Logf("drain: leader %s on %s evicted, %s kept by the PodDisruptionBudget, 2 replicas again", leader.Name, leader.Spec.NodeName, other.Name)

	// OKG's GameServerSet validating webhook, as kruise-game-manager writes it (the entry only;
	// this cluster has no GameServerSet CRD, so it is never called): the manager's pods put
	// their condition on it, and the chart's post-delete hook takes it away at uninstall.
	okgEntry := admissionregistrationv1.ValidatingWebhook{
		Name: okgvalidation.EntryName, AdmissionReviewVersions: []string{"v1"},
		SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone), FailurePolicy: ptr.To(admissionregistrationv1.Fail),
		ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:9/validate-v1alpha1-gss")},
		Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
			Rule: admissionregistrationv1.Rule{APIGroups: []string{"game.kruise.io"}, APIVersions: []string{"v1alpha1"}, Resources: []string{"gameserversets"}}}},
	}
	okgConfig := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: okgvalidation.DefaultConfiguration},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{okgEntry}}
	if _, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, okgConfig, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), okgConfig.Name, metav1.DeleteOptions{})
	}()
	okgConditions := func(ctx context.Context) ([]admissionregistrationv1.MatchCondition, error) {
		v, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, okgConfig.Name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return v.Webhooks[0].MatchConditions, nil
	}
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		conds, err := okgConditions(ctx)
		return err == nil && len(conds) == 1 && conds[0].Name == okgvalidation.ConditionName, nil
	})
	if err != nil {
		t.Fatal("the manager's pods did not put their condition on OKG's GameServerSet entry within a minute")
	}

	// Uninstall.
	t.Logf("uninstall: %s", helm(ctx, t, cp, "uninstall", "", "", 4*time.Minute))
	if conds, err := okgConditions(ctx); err != nil || len(conds) != 0 {
		t.Errorf("uninstall: OKG's GameServerSet entry still has %v (%v): the post-delete hook did not remove the manager's condition", conds, err)
	}
	if left := webhookWrites(ctx, t, cs); len(left) != 0 {
		t.Errorf("uninstall: webhook entries left: %v", left)
	}
	if _, err := apiextensionsclient.NewForConfigOrDie(cp.Config).ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "networkpluginpolicies.policy.game.kruise.io", metav1.GetOptions{}); err != nil {
		t.Errorf("uninstall: the CRD (Helm keeps a chart's CRDs): %v", err)
	}
	plain := pod.DeepCopy()
	plain.Name = "after-uninstall"
	got, err := cs.CoreV1().Pods(ns).Create(ctx, plain, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		t.Fatalf("uninstall: a HostPort pod is refused: %v", err)
	}
	if got.Annotations[podwebhook.AnnotationDecision] != "" {
		t.Error("uninstall: a webhook still decides pods")
	}
	answers("uninstalled")
}

// helm runs hack/chart -helm op for release network-plugin-policy in
// network-plugin-policy-system with the chart in dir (a directory or an archive), the
// manager's image ref (never pulled: imported into the nodes), or with ref "" the chart's
// default image (the release's, imported into the nodes under that name), and the manager
// on the real nodes, waiting up to wait for the
// release's objects (0: not at all), and returns its summary; an error fails the test.
func helm(ctx context.Context, t *testing.T, cp *cluster.ControlPlane, op, dir, ref string, wait time.Duration) string {
	t.Helper()
	values := fmt.Sprintf("nodeSelector: {%q: \"true\"}\n", RealNodeLabel)
	if ref != "" {
		i := strings.LastIndex(ref, ":")
		values += fmt.Sprintf("image: {repository: %q, tag: %q, pullPolicy: Never}\n", ref[:i], ref[i+1:])
	}
	vf := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(vf, []byte(values), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"-helm", op, "-kubeconfig", cp.KubeconfigPath, "-release", "network-plugin-policy",
		"-namespace", "network-plugin-policy-system", "-values", vf, "-timeout", wait.String()}
	if dir != "" {
		args = append(args, "-chart", dir)
	}
	out, err := exec.CommandContext(ctx, images.Helm, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("helm %s: %v: %s", op, err, out)
	}
	return strings.TrimSpace(string(out))
}

// crdIsThisRevisions fails the test unless the stored NetworkPluginPolicy CRD has the
// versions and schemas of the CRD file in dir.
func crdIsThisRevisions(ctx context.Context, t *testing.T, cp *cluster.ControlPlane, dir string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) != 1 {
		t.Fatalf("CRD files in %s: %v (%v)", dir, files, err)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var want apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	got, err := apiextensionsclient.NewForConfigOrDie(cp.Config).ApiextensionsV1().CustomResourceDefinitions().Get(ctx, want.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Spec.Versions) != len(want.Spec.Versions) {
		t.Fatalf("stored CRD has %d versions, want %d", len(got.Spec.Versions), len(want.Spec.Versions))
	}
	for i := range want.Spec.Versions {
		if !reflect.DeepEqual(got.Spec.Versions[i].Schema, want.Spec.Versions[i].Schema) {
			t.Errorf("stored CRD's schema of %s is not this revision's", want.Spec.Versions[i].Name)
		}
	}
}

// webhookWrite is what the manager writes into one webhook entry of its configurations:
// the caBundle's length in bytes and the matchConditions.
type webhookWrite struct {
	caBundle        int
	matchConditions string
}

// webhookWrites returns, per "<configuration>/<webhook>", what the manager wrote into the
// entries of its two webhook configurations; none when they are gone.
func webhookWrites(ctx context.Context, t *testing.T, cs kubernetes.Interface) map[string]webhookWrite {
	t.Helper()
	got := map[string]webhookWrite{}
	m, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "network-plugin-policy-mutating-webhook-configuration", metav1.GetOptions{})
	if err == nil {
		for _, w := range m.Webhooks {
			got[m.Name+"/"+w.Name] = webhookWrite{len(w.ClientConfig.CABundle), fmt.Sprint(w.MatchConditions)}
		}
	} else if !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	v, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "network-plugin-policy-validating-webhook-configuration", metav1.GetOptions{})
	if err == nil {
		for _, w := range v.Webhooks {
			got[v.Name+"/"+w.Name] = webhookWrite{len(w.ClientConfig.CABundle), fmt.Sprint(w.MatchConditions)}
		}
	} else if !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return got
}

// currentLeader waits, up to 2 minutes, until the manager's leader election lease is held by
// one of exactly two manager pods in namespace root, none of them terminating, and returns
// the leader and the other one.
func currentLeader(ctx context.Context, cs kubernetes.Interface, root string) (leader, other *corev1.Pod, err error) {
	err = wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		leader, other = nil, nil
		lease, err := cs.CoordinationV1().Leases(root).Get(ctx, "network-plugin-policy.policy.game.kruise.io", metav1.GetOptions{})
		if err != nil || lease.Spec.HolderIdentity == nil {
			return false, nil
		}
		leaderPod, _, _ := strings.Cut(*lease.Spec.HolderIdentity, "_")
		current, err := cs.CoreV1().Pods(root).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=network-plugin-policy"})
		if err != nil || len(current.Items) != 2 {
			return false, nil
		}
		for i := range current.Items {
			p := &current.Items[i]
			if p.DeletionTimestamp != nil {
				return false, nil
			}
			if p.Name == leaderPod {
				leader = p
			} else {
				other = p
			}
		}
		return leader != nil && other != nil, nil
	})
	return leader, other, err
}

// nodeIndex is i for the node named NodeName(i).
func nodeIndex(name string) int {
	var i int
	_, _ = fmt.Sscanf(name, "real-%d", &i)
	return i
}

// admitLoad makes 2 clients of cfg admit dry-run HostPort game servers in ns until the
// returned function is called, which returns how many were admitted by the webhook and how
// many failed (refused, or admitted without its decision), with the first five failures and
// their times; a pod admitted without a decision is reported with the warnings of its
// response (a webhook that passed it through says why there).
func admitLoad(ctx context.Context, cfg *rest.Config, ns string) func() (admitted, failed int, firstFailures []string) {
	ctx, cancel := context.WithCancel(ctx)
	var mu sync.Mutex
	var ok, bad int
	var reasons []string
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		// Each client makes one request at a time: its handler holds that response's warnings
		// (and keeps them out of the test's log).
		warnings := &warningRecorder{}
		c := rest.CopyConfig(cfg)
		c.WarningHandler = warnings
		cs := kubernetes.NewForConfigOrDie(c)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				warnings.reset()
				p := &corev1.Pod{
					ObjectMeta: metav1.ObjectMeta{GenerateName: "load-", Namespace: ns, Annotations: map[string]string{
						networkstatus.AnnotationNetworkType: "Kubernetes-HostPort",
						networkstatus.AnnotationNetworkConf: `[{"name":"ContainerPorts","value":"echo:7777/UDP"}]`,
					}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "echo", Image: "echo"}}},
				}
				got, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
				if ctx.Err() != nil {
					return
				}
				mu.Lock()
				if err != nil || got.Annotations[podwebhook.AnnotationDecision] == "" {
					bad++
					why := fmt.Sprintf("admitted without a decision (warnings: %q)", warnings.get())
					if err != nil {
						why = err.Error()
					}
					if len(reasons) < 5 {
						reasons = append(reasons, time.Now().Format("15:04:05.000")+" "+why)
					}
				} else {
					ok++
				}
				mu.Unlock()
				time.Sleep(50 * time.Millisecond)
			}
		}()
	}
	return func() (int, int, []string) {
		cancel()
		wg.Wait()
		return ok, bad, reasons
	}
}

// upgradeTimeline records, until the returned function is called, each change of the
// manager's pods in root (IP, ready, terminating) and of the sync entry's
// synchronous-network-type condition (with the field manager of the newest write), each
// line with its time; the function returns the lines.
func upgradeTimeline(ctx context.Context, cs kubernetes.Interface, root string) func() []string {
	ctx, cancel := context.WithCancel(ctx)
	var mu sync.Mutex
	var lines []string
	add := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, time.Now().Format("15:04:05.000 ")+fmt.Sprintf(format, args...))
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		w, err := cs.CoreV1().Pods(root).Watch(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=network-plugin-policy"})
		if err != nil {
			add("watch pods: %v", err)
			return
		}
		defer w.Stop()
		seen := map[string]string{}
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			ready := false
			for _, c := range p.Status.Conditions {
				ready = ready || (c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue)
			}
			now := fmt.Sprintf("%s ip=%s ready=%t terminating=%t", ev.Type, p.Status.PodIP, ready, p.DeletionTimestamp != nil)
			if seen[p.Name] != now {
				seen[p.Name] = now
				add("pod %s %s", p.Name, now)
			}
		}
	}()
	go func() {
		defer wg.Done()
		w, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=network-plugin-policy-mutating-webhook-configuration"})
		if err != nil {
			add("watch the webhook configuration: %v", err)
			return
		}
		defer w.Stop()
		last := ""
		for ev := range w.ResultChan() {
			m, ok := ev.Object.(*admissionregistrationv1.MutatingWebhookConfiguration)
			if !ok {
				continue
			}
			sync := "none"
			for _, wh := range m.Webhooks {
				for _, c := range wh.MatchConditions {
					if strings.HasPrefix(wh.Name, "sync.") && c.Name == "synchronous-network-type" {
						sync = c.Expression[strings.LastIndex(c.Expression, " in ")+4:]
					}
				}
			}
			if sync == last {
				continue
			}
			last = sync
			writer, newest := "", time.Time{}
			for _, f := range m.ManagedFields {
				if f.Time != nil && !f.Time.Time.Before(newest) {
					writer, newest = f.Manager, f.Time.Time
				}
			}
			add("webhook configuration rv %s: synchronous types %s (field managers' last: %s)", m.ResourceVersion, sync, writer)
		}
	}()
	return func() []string {
		cancel()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(lines)
	}
}

// warningRecorder is a rest.WarningHandler that keeps the warnings of the last response.
type warningRecorder struct {
	mu   sync.Mutex
	msgs []string
}

// HandleWarningHeader keeps one warning (code 299, RFC 7234) of a response.
func (w *warningRecorder) HandleWarningHeader(code int, _ string, message string) {
	if code != 299 || message == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, message)
}

func (w *warningRecorder) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = nil
}

func (w *warningRecorder) get() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.msgs)
}

// available reports whether the Deployment's Available condition is True.
func available(d *appsv1.Deployment) bool {
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
