//go:build faults

package faults

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/okg-extensions/network-plugin-policy/e2e/cluster"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// brownout is how long the fault proxy degrades the manager's API calls.
const brownout = 30 * time.Second

// TestAPIBrownout puts the fault proxy between the manager and the API server for 30 s: of
// the manager's requests (watches excepted), 20 % are answered 500, 20 % 429 and 10 % held
// 5 s. Meanwhile the 10 Ready NodePort game servers of a StatefulSet get a label patch each
// second (each an UPDATE that runs the plugin), and the StatefulSet scales to 15. Their
// policy's window is 20 s with exhaustedAction Recreate, so a brownout that counted as broken
// would evict pods. Counted and required: Ready networks turned NotReady 0, Recreates 0; the
// label patches the webhook failed are counted (the async entry is failurePolicy Ignore, so
// none is refused), and every network is Ready within 2 minutes after the brownout.
func TestAPIBrownout(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "brownout")
	applyNodePortPolicy(t, ns, "recreate", "  retry: {window: 20s, interval: 2s, maxInterval: 4s, exhaustedAction: Recreate}")
	createStatefulSet(t, ns, "bo", 10, gameServer(ns, "bo", "Kubernetes-NodePort", nodePortConf))
	uids := map[types.UID]bool{}
	eventually(t, 2*time.Minute, "10 NodePort networks Ready", func(ctx context.Context) (bool, error) {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil || len(pods.Items) != 10 {
			return false, err
		}
		for _, p := range pods.Items {
			if st, _ := networkstatus.StatusFromPod(&p); st == nil || st.CurrentNetworkState != networkstatus.NetworkReady {
				return false, nil
			}
			uids[p.UID] = true
		}
		return true, nil
	})
	recreatesBefore, err := mgr.Metric(ctx, "npp_network_recreates_total")
	if err != nil {
		t.Fatal(err)
	}
	erroredBefore, err := mgr.Metric(ctx, "npp_admission_decisions_total", `outcome="errored"`)
	if err != nil {
		t.Fatal(err)
	}

	fp := mgr.FaultProxy
	fp.SetFaults(&cluster.Faults{Error: 0.2, TooManyRequests: 0.2, StallProbability: 0.1, Stall: 5 * time.Second})
	start := time.Now()
	scale := []byte(`{"spec":{"replicas":15}}`)
	if _, err := cs.AppsV1().StatefulSets(ns).Patch(ctx, "bo", types.MergePatchType, scale, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	patches, patchErrs, turned := 0, 0, 0
	for i := 0; time.Since(start) < brownout; i++ {
		for k := range 10 {
			name := fmt.Sprintf("bo-%d", k)
			p, err := cs.CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType, []byte(fmt.Sprintf(`{"metadata":{"labels":{"tick":"%d"}}}`, i)), metav1.PatchOptions{})
			patches++
			if err != nil {
				patchErrs++
				continue
			}
			if st, _ := networkstatus.StatusFromPod(p); uids[p.UID] && (st == nil || st.CurrentNetworkState != networkstatus.NetworkReady) {
				turned++
				t.Errorf("Ready network of %s turned %v during the brownout", name, st)
			}
		}
		time.Sleep(time.Second)
	}
	fp.SetFaults(nil)
	injected := fmt.Sprintf("%d answered 500, %d answered 429, %d held 5s, %d forwarded", fp.Errors.Load(), fp.TooManyRequests.Load(), fp.Stalled.Load(), fp.Forwarded.Load())

	took := eventually(t, 2*time.Minute, "15 networks Ready after the brownout", func(ctx context.Context) (bool, error) {
		return allNetworksReady(ctx, ns, 15)
	})
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kept := 0
	for _, p := range pods.Items {
		if uids[p.UID] {
			kept++
		}
	}
	recreatesAfter, err := mgr.Metric(ctx, "npp_network_recreates_total")
	if err != nil {
		t.Fatal(err)
	}
	erroredAfter, err := mgr.Metric(ctx, "npp_admission_decisions_total", `outcome="errored"`)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fault: API brownout %s (manager's requests: %s): %d label patches of Ready pods, %d failed, %d webhook requests errored; Ready networks turned NotReady %d; Recreates %v; %d of the 10 Ready pods kept; all 15 networks Ready %s after the brownout",
		brownout, injected, patches, patchErrs, int(erroredAfter-erroredBefore), turned, recreatesAfter-recreatesBefore, kept, took.Round(100*time.Millisecond))
	if recreatesAfter != recreatesBefore || kept != 10 {
		t.Errorf("Recreates during the brownout: %v, pods kept %d of 10; want 0 and 10", recreatesAfter-recreatesBefore, kept)
	}
}
