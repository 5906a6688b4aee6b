package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/okg-extensions/network-plugin-policy/pkg/networkretry"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
	podwebhook "github.com/okg-extensions/network-plugin-policy/pkg/webhook/pod"
)

// forgedRetry is the retry state a pod author would write to keep a window open for ever
// (since in the future), make the backoff zero (attempts about to wrap) and have the pod
// recreated in a loop (exhausted with Recreate).
const forgedRetry = `{"plugin":"Kubernetes-NodePort","policy":"built-in default","since":"2099-01-01T00:00:00Z",` +
	`"attempts":2147483647,"window":"8760h","interval":"1ms","maxInterval":"1ms","exhaustedAction":"Recreate","exhausted":"2026-01-01T00:00:00Z"}`

// warningsClient is a clientset as the test's admin whose requests' admission warnings are
// collected.
type warningsClient struct {
	kubernetes.Interface
	mu       sync.Mutex
	warnings []string
}

func (w *warningsClient) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.warnings = append(w.warnings, text)
}

func (w *warningsClient) saw(substr string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.warnings {
		if strings.Contains(s, substr) {
			return true
		}
	}
	return false
}

func newWarningsClient(t *testing.T) *warningsClient {
	w := &warningsClient{}
	cfg := rest.CopyConfig(cp.Config)
	cfg.WarningHandler = w
	w.Interface = kubernetes.NewForConfigOrDie(cfg)
	return w
}

// TestForgedOwnedAnnotations: the manager's own annotations (policy.game.kruise.io/*) are
// never taken from a pod author. At CREATE they are dropped; an UPDATE by anyone but the
// manager is reverted in the same admission, through pods/status too; each with an admission
// warning. A forged exhausted retry state with Recreate on a Ready pod does not get it
// deleted.
func TestForgedOwnedAnnotations(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "forged", nil)
	author := newWarningsClient(t)

	// CREATE: a NodePort pod, whose network is not Ready at CREATE (no node yet), so the
	// webhook writes its own retry state from scratch.
	p := probePod(ns, "Kubernetes-NodePort")
	p.Annotations[networkstatus.AnnotationNetworkConf] = nodePortConf
	p.Annotations[networkretry.Annotation] = forgedRetry
	p.Annotations[podwebhook.AnnotationDecision] = "Asynchronous by policy kube-system/everything@1"
	created, err := author.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create a pod with forged annotations: %v", err)
	}
	if !author.saw("are written by network-plugin-policy only: dropped") {
		t.Errorf("admission warnings %q, want one saying the forged annotations were dropped", author.warnings)
	}
	if d := created.Annotations[podwebhook.AnnotationDecision]; d != "Asynchronous by built-in default" {
		t.Errorf("%s = %q, want the webhook's own %q", podwebhook.AnnotationDecision, d, "Asynchronous by built-in default")
	}
	if st := retryState(t, created); st != nil && (st.Since.Year() > time.Now().Year() || st.Attempts > 10 || st.Exhausted != nil) {
		t.Errorf("retry state after CREATE = %+v, want the webhook's own (forged one kept)", st)
	}

	// UPDATE: a HostPort pod whose network is Ready (no retry state) gets a forged exhausted
	// state with Recreate.
	hp := probePod(ns, "Kubernetes-HostPort")
	hp.Annotations[networkstatus.AnnotationNetworkConf] = hostPortConf
	hp, err = cs.CoreV1().Pods(ns).Create(ctx, hp, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "HostPort pod network-Ready without retry state", func(ctx context.Context) (bool, error) {
		got, err := cs.CoreV1().Pods(ns).Get(ctx, hp.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		_, retrying := got.Annotations[networkretry.Annotation]
		return networkState(got) == networkstatus.NetworkReady && !retrying, nil
	})
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{networkretry.Annotation: forgedRetry}}})
	patched, err := author.CoreV1().Pods(ns).Patch(ctx, hp.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("patch a forged retry state: %v (want it admitted and reverted)", err)
	}
	if v, ok := patched.Annotations[networkretry.Annotation]; ok {
		t.Errorf("stored %s = %s after a pod author's patch, want it reverted (absent)", networkretry.Annotation, v)
	}
	if !author.saw("reverted to the value the manager wrote") {
		t.Errorf("admission warnings %q, want one saying the change was reverted", author.warnings)
	}
	// pods/status: a merge patch of the status subresource carrying metadata.annotations is
	// stored by the API server and does not pass the pod webhook; the pods/status entry puts
	// the manager's annotations back all the same (a privileged identity: a node, a
	// controller with a bug).
	statusWriter := newWarningsClient(t)
	forgedDecision := "Asynchronous by policy kube-system/everything@1"
	patch, _ = json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		networkretry.Annotation: forgedRetry, podwebhook.AnnotationDecision: forgedDecision}}})
	before, err := cs.CoreV1().Pods(ns).Get(ctx, hp.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	patched, err = statusWriter.CoreV1().Pods(ns).Patch(ctx, hp.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		t.Fatalf("patch pods/status with forged annotations: %v (want it admitted and reverted)", err)
	}
	if v, ok := patched.Annotations[networkretry.Annotation]; ok {
		t.Errorf("stored %s = %s after a pods/status patch, want it reverted (absent)", networkretry.Annotation, v)
	}
	if d, want := patched.Annotations[podwebhook.AnnotationDecision], before.Annotations[podwebhook.AnnotationDecision]; d != want {
		t.Errorf("stored %s = %q after a pods/status patch, want the manager's %q", podwebhook.AnnotationDecision, d, want)
	}
	if !statusWriter.saw("reverted to the value the manager wrote") {
		t.Errorf("pods/status warnings %q, want one saying the change was reverted", statusWriter.warnings)
	}
	// The network controller would delete an exhausted Recreate pod at once; give it time.
	time.Sleep(3 * time.Second)
	got, err := cs.CoreV1().Pods(ns).Get(ctx, hp.Name, metav1.GetOptions{})
	if err != nil || got.UID != hp.UID || got.DeletionTimestamp != nil {
		t.Errorf("pod after the forged exhausted state: %v (deleting %v), want the same pod, untouched", err, got.DeletionTimestamp)
	}
}

// TestOwnedAnnotationRevertCannotBeSteppedAround: an UPDATE that drops the network type while
// it forges an exhausted retry state with Recreate, followed by one that puts the type back,
// does not get a retrying game server evicted before its window closes: the first update
// reaches the webhook all the same (its matchConditions send every change to a
// policy.game.kruise.io/* annotation, whatever the type), which puts the stored state back.
func TestOwnedAnnotationRevertCannotBeSteppedAround(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "stepped", nil)
	// A NodePort game server under a Recreate policy with a long window, kept NotReady by a
	// services.nodeports quota of 0.
	setNodePortQuota(t, ns, 0)
	applyPolicy(t, fmt.Sprintf(`
apiVersion: policy.game.kruise.io/v1alpha1
kind: NetworkPluginPolicy
metadata: {name: nodeport-recreate-late, namespace: %s}
spec:
  plugins: ["Kubernetes-NodePort"]
  retry: {window: 30m, interval: 2s, maxInterval: 4s, exhaustedAction: Recreate}
`, ns))
	waitForPolicy(t, ns, "nodeport-recreate-late", "Kubernetes-NodePort")
	createStatefulSet(t, ns, "gs", 1, gamePodTemplate("gs", "Kubernetes-NodePort", nodePortConf))
	var pod *corev1.Pod
	eventually(t, time.Minute, "gs-0 retrying under the 30m window", func(ctx context.Context) (bool, error) {
		got, err := cs.CoreV1().Pods(ns).Get(ctx, "gs-0", metav1.GetOptions{})
		if err != nil {
			return false, ignoreNotFound(err)
		}
		pod = got
		st := retryState(t, got)
		return st != nil && st.Exhausted == nil && st.Policy != "" && strings.Contains(st.Policy, "nodeport-recreate-late"), nil
	})
	stored := pod.Annotations[networkretry.Annotation]

	author := newWarningsClient(t)
	forged := fmt.Sprintf(`{"plugin":"Kubernetes-NodePort","policy":"%s/nodeport-recreate-late","since":"2026-01-01T00:00:00Z",`+
		`"attempts":3,"window":"1s","interval":"2s","maxInterval":"4s","exhaustedAction":"Recreate","exhausted":"2026-01-01T00:00:00Z","exhaustedUID":"%s"}`,
		ns, pod.UID)
	// Step 1: drop the type and forge the state in one update.
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{
		networkstatus.AnnotationNetworkType: nil, networkretry.Annotation: forged}}})
	patched, err := author.CoreV1().Pods(ns).Patch(ctx, "gs-0", types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("drop the type and forge the retry state: %v (want it admitted and reverted)", err)
	}
	if v := patched.Annotations[networkretry.Annotation]; v != stored {
		t.Errorf("stored %s after dropping the type = %s, want the manager's %s", networkretry.Annotation, v, stored)
	}
	if !author.saw("reverted to the value the manager wrote") {
		t.Errorf("admission warnings %q, want one saying the change was reverted", author.warnings)
	}
	// Step 2: put the type back.
	patch, _ = json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{
		networkstatus.AnnotationNetworkType: "Kubernetes-NodePort"}}})
	if _, err := author.CoreV1().Pods(ns).Patch(ctx, "gs-0", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("put the type back: %v", err)
	}
	// The network controller would evict an exhausted Recreate pod within a second or two.
	time.Sleep(5 * time.Second)
	got, err := cs.CoreV1().Pods(ns).Get(ctx, "gs-0", metav1.GetOptions{})
	if err != nil || got.UID != pod.UID || got.DeletionTimestamp != nil {
		t.Fatalf("gs-0 after the stepped-around forgery: %v (uid %s, deleting %v), want the same pod, untouched", err, got.UID, got.DeletionTimestamp)
	}
	if st := retryState(t, got); st == nil || st.Exhausted != nil || st.Window.Duration != 30*time.Minute {
		t.Errorf("retry state = %+v, want the manager's own: 30m window, not exhausted", st)
	}
}

// TestForgedReadyStatusOpensNoGate: a network-status a pod author wrote is never what opens
// the readiness gate. A NodePort pod that cannot be scheduled (its plugin writes nothing
// until it has a node) under a readinessGate policy: its author patches a Ready
// network-status with an address of their choice; the webhook admits it but records no
// matching digest, and the network-ready condition is never set True on it.
func TestForgedReadyStatusOpensNoGate(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "forgedstatus", nil)
	applyPolicy(t, fmt.Sprintf(`
apiVersion: policy.game.kruise.io/v1alpha1
kind: NetworkPluginPolicy
metadata: {name: gated, namespace: %s}
spec:
  plugins: ["Kubernetes-NodePort"]
  readinessGate: true
  retry: {window: 10m, interval: 2s, maxInterval: 4s, exhaustedAction: Event}
`, ns))
	waitForPolicy(t, ns, "gated", "Kubernetes-NodePort")
	p := probePod(ns, "Kubernetes-NodePort")
	p.GenerateName, p.Name = "", "gs-0"
	p.Annotations[networkstatus.AnnotationNetworkConf] = nodePortConf
	p.Spec.NodeSelector = map[string]string{"e2e.policy.game.kruise.io/no-such-node": ns}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	forged := `{"externalAddresses":[{"ip":"203.0.113.66","ports":[{"name":"7777","protocol":"UDP","port":31999}]}],"currentNetworkState":"Ready","createTime":null,"lastTransitionTime":null}`
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{networkstatus.AnnotationNetworkStatus: forged}}})
	if _, err := cs.CoreV1().Pods(ns).Patch(ctx, "gs-0", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("patch a forged Ready status: %v", err)
	}
	// The controller would set the condition True within a second of a Ready status it trusts.
	time.Sleep(5 * time.Second)
	got, err := cs.CoreV1().Pods(ns).Get(ctx, "gs-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := networkCondition(got); c != nil && c.Status == corev1.ConditionTrue {
		t.Errorf("network-ready condition %+v on a forged status, want not True", c)
	}
	if podwebhook.WroteStatus(got) {
		t.Errorf("the forged status carries the manager's digest: %v", got.Annotations)
	}
}
