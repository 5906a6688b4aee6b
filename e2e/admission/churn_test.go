package admission

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
	podwebhook "github.com/okg-extensions/network-plugin-policy/pkg/webhook/pod"
)

// TestPolicyChurnWhileAdmitting is a fault of the fault campaign (docs/reliability.md): a
// policy is updated as fast as 8 writers can for 10 s (about 100 times a second on an idle
// 2-core machine), each update flipping its failureMode
// (generation 1, 3, 5, ... Asynchronous; 2, 4, ... Synchronous), while 4 clients admit NodePort
// pods (dry-run CREATEs, which run the whole admission but store nothing). Required: no
// admission fails, and every decision's failure mode is the one of the policy generation
// that the decision names (a decision made from a half-updated policy would not match).
func TestPolicyChurnWhileAdmitting(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ns := newNamespace(t, "churn", nil)
	applyPolicy(t, fmt.Sprintf(`
apiVersion: policy.game.kruise.io/v1alpha1
kind: NetworkPluginPolicy
metadata: {name: churn, namespace: %s}
spec:
  plugins: ["Kubernetes-NodePort"]
  failureMode: Asynchronous
`, ns))
	waitForPolicy(t, ns, "churn", "Kubernetes-NodePort")
	cfg := rest.CopyConfig(cp.Config)
	cfg.QPS, cfg.Burst = 1000, 1000
	fast := kubernetes.NewForConfigOrDie(cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)
	policies := dyn.Resource(schema.GroupVersionResource{Group: "policy.game.kruise.io", Version: "v1alpha1", Resource: "networkpluginpolicies"}).Namespace(ns)

	// 8 writers flip the failureMode as fast as the API server and the validating webhook
	// take it (the aim is 100 a second). Only a real flip bumps the generation, whoever
	// wrote it, so odd generations stay Asynchronous and even ones Synchronous.
	var updates, updateErrs atomic.Int64
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; ctx.Err() == nil; i++ {
				mode := "Asynchronous"
				if i%2 == 1 {
					mode = "Synchronous"
				}
				if _, err := policies.Patch(ctx, "churn", types.MergePatchType, []byte(`{"spec":{"failureMode":"`+mode+`"}}`), metav1.PatchOptions{}); err != nil {
					if ctx.Err() == nil {
						updateErrs.Add(1)
					}
					continue
				}
				updates.Add(1)
			}
		}()
	}
	var admitted, failed, torn atomic.Int64
	var mu sync.Mutex
	var firstProblem string
	problem := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		if firstProblem == "" {
			firstProblem = s
		}
	}
	prefix := "policy " + ns + "/churn@"
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				pod := probePod(ns, "Kubernetes-NodePort")
				pod.Annotations[networkstatus.AnnotationNetworkConf] = nodePortConf
				got, err := fast.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
				if err != nil {
					// The client's own rate limiter refuses a request whose wait would outlast
					// the run's deadline, before it is sent: the run is ending, not an
					// admission failing.
					if ctx.Err() == nil && !strings.Contains(err.Error(), "would exceed context deadline") {
						failed.Add(1)
						problem(err.Error())
					}
					continue
				}
				admitted.Add(1)
				decision := got.Annotations[podwebhook.AnnotationDecision]
				mode, rest, _ := strings.Cut(decision, " by ")
				gen, err := strconv.Atoi(strings.TrimPrefix(rest, prefix))
				if !strings.HasPrefix(rest, prefix) || err != nil {
					torn.Add(1)
					problem("decision " + decision)
					continue
				}
				if want := map[bool]string{true: "Asynchronous", false: "Synchronous"}[gen%2 == 1]; mode != want {
					torn.Add(1)
					problem(fmt.Sprintf("decision %q: generation %d is %s", decision, gen, want))
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("fault: policy churn: %d policy patches in 10s (%d failed), %d admissions, %d failed, %d decisions not matching their policy generation",
		updates.Load(), updateErrs.Load(), admitted.Load(), failed.Load(), torn.Load())
	if failed.Load() != 0 || torn.Load() != 0 {
		t.Errorf("%d admissions failed and %d decisions did not match their policy's generation during the churn, want 0 and 0; first: %s",
			failed.Load(), torn.Load(), firstProblem)
	}
	gens, err := policies.Get(context.Background(), "churn", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if gens.GetGeneration() < 50 {
		t.Errorf("the policy reached generation %d in 10s: the churn did not happen", gens.GetGeneration())
	}
}
