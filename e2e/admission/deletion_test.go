package admission

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// TestPodWhosePluginFailsStaysDeletable reproduces the undeletable pod: a pod admitted NotReady
// under an Asynchronous policy, whose plugin keeps failing once the policy is gone (the
// built-in default is then Synchronous). A label patch, which does not touch the network, is
// admitted; so is the DELETE, and an UPDATE of the terminating pod passes through unchanged.
func TestPodWhosePluginFailsStaysDeletable(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "deletable", nil)
	applyPolicy(t, `
apiVersion: policy.game.kruise.io/v1alpha1
kind: NetworkPluginPolicy
metadata: {name: admit-all, namespace: `+ns+`}
spec:
  plugins: ["*"]
  failureMode: Asynchronous
`)
	// A near-miss of Kubernetes-HostPort fails every time (a parameterError); a type that is
	// not registered at all would be passed through untouched.
	pod := probePod(ns, "Kubernetes-Hostport")
	pod.Name, pod.GenerateName = "slb-0", ""
	// Never scheduled (kwok would finish the deletion at once) and held by a finalizer, so
	// the pod stays terminating after its DELETE until the test lets it go.
	pod.Spec.NodeSelector = map[string]string{"e2e.policy.game.kruise.io/no-such-node": "true"}
	pod.Finalizers = []string{holdFinalizer}
	eventually(t, 30*time.Second, "pod admitted NotReady under the Asynchronous policy", func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		return err == nil, nil
	})
	t.Cleanup(func() { // a failed run must not leave the namespace stuck on the finalizer
		_, _ = cs.CoreV1().Pods(ns).Patch(context.Background(), pod.Name, types.MergePatchType,
			[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	})
	created, err := cs.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := networkstatus.StatusFromPod(created); st == nil || st.CurrentNetworkState != networkstatus.NetworkNotReady {
		t.Fatalf("network-status after admission = %+v, want NotReady", st)
	}
	if out, err := kubectl(t, "", "delete", "npp", "-n", ns, "admit-all"); err != nil {
		t.Fatalf("delete policy: %v\n%s", err, out)
	}
	// The policy is gone once a dry-run CREATE of the same pod is denied again.
	eventually(t, 30*time.Second, "built-in Synchronous default in force again", func(ctx context.Context) (bool, error) {
		probe := probePod(ns, "Kubernetes-Hostport")
		_, err := cs.CoreV1().Pods(ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), "denied by built-in default"), nil
	})

	// A label patch does not change what the network depends on: admitted, the failure
	// recorded as NotReady with a retry, not denied.
	patched, err := cs.CoreV1().Pods(ns).Patch(ctx, pod.Name, types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"game.kruise.io/opsState":"Maintaining"}}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("label patch on a pod whose plugin fails under a Synchronous decision: %v, want it admitted", err)
	}
	if st, _ := networkstatus.StatusFromPod(patched); st == nil || st.CurrentNetworkState != networkstatus.NetworkNotReady {
		t.Errorf("network-status after the label patch = %+v, want NotReady kept", st)
	}
	// A change of what the network depends on is still denied.
	_, err = cs.CoreV1().Pods(ns).Patch(ctx, pod.Name, types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"game.kruise.io/network-conf":"[{\"name\":\"Port\",\"value\":\"80\"}]"}}}`), metav1.PatchOptions{})
	if err == nil || !strings.Contains(err.Error(), "denied by built-in default") {
		t.Errorf("network-conf patch under the Synchronous default: %v, want it denied", err)
	}

	// DELETE: admitted; the pod is terminating.
	if out, err := kubectl(t, "", "delete", "pod", "-n", ns, pod.Name, "--wait=false"); err != nil {
		t.Fatalf("kubectl delete pod: %v\n%s", err, out)
	}
	terminating, err := cs.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if terminating.DeletionTimestamp == nil {
		t.Fatalf("pod %s is not terminating after kubectl delete", pod.Name)
	}
	// An UPDATE of the terminating pod passes through unchanged: no plugin, no new status.
	before := terminating.Annotations[networkstatus.AnnotationNetworkStatus]
	updated, err := cs.CoreV1().Pods(ns).Patch(ctx, pod.Name, types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"drained":"true"}}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("label patch of a terminating pod: %v, want it admitted", err)
	}
	if got := updated.Annotations[networkstatus.AnnotationNetworkStatus]; got != before {
		t.Errorf("a terminating pod was mutated: network-status %q, was %q", got, before)
	}
	// Releasing the finalizer is one more UPDATE of the terminating pod; then it goes.
	if _, err := cs.CoreV1().Pods(ns).Patch(ctx, pod.Name, types.JSONPatchType,
		[]byte(`[{"op":"remove","path":"/metadata/finalizers"}]`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("remove the finalizer of the terminating pod: %v", err)
	}
	eventually(t, 30*time.Second, "pod gone", func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// holdFinalizer keeps a test's pod terminating until the test removes it.
const holdFinalizer = "e2e.policy.game.kruise.io/hold"
