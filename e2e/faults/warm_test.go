//go:build faults

package faults

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// TestFirstAdmissionAfterRestart measures what a replica's first admission costs after a
// start, against the hundredth: both replicas are stopped and started again (each ready only
// once the Service, Ingress, Node and ResourceQuota informers have synced), and then a Ready
// NodePort game server gets 100 label patches in a row. Each patch is an UPDATE that runs the
// plugin (it reads the pod's Service and Node from the cache). The figures go to
// docs/benchmarks.md ("First admission after a restart"); the test only requires every patch
// to be admitted with the network kept Ready.
func TestFirstAdmissionAfterRestart(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "warm")
	createStatefulSet(t, ns, "np", 1, gameServer(ns, "np", "Kubernetes-NodePort", nodePortConf))
	eventually(t, time.Minute, "NodePort network Ready", func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "np-0", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		st, _ := networkstatus.StatusFromPod(p)
		return st != nil && st.CurrentNetworkState == networkstatus.NetworkReady, nil
	})
	mgr.Stop()
	if err := mgr.Start(ctx); err != nil {
		t.Fatalf("start the manager again: %v", err)
	}
	var took []time.Duration
	for i := range 100 {
		start := time.Now()
		p, err := cs.CoreV1().Pods(ns).Patch(ctx, "np-0", types.MergePatchType, []byte(fmt.Sprintf(`{"metadata":{"labels":{"n":"%d"}}}`, i)), metav1.PatchOptions{})
		took = append(took, time.Since(start))
		if err != nil {
			t.Fatalf("patch %d after the restart: %v", i+1, err)
		}
		if st, _ := networkstatus.StatusFromPod(p); st == nil || st.CurrentNetworkState != networkstatus.NetworkReady {
			t.Fatalf("patch %d after the restart: network %+v, want Ready kept", i+1, st)
		}
	}
	rest := slices.Clone(took[1:])
	slices.Sort(rest)
	t.Logf("first admission after a restart: 1st UPDATE %s, 100th %s, median of the 2nd-100th %s, max of the 2nd-100th %s",
		took[0].Round(100*time.Microsecond), took[99].Round(100*time.Microsecond), rest[len(rest)/2].Round(100*time.Microsecond), rest[len(rest)-1].Round(100*time.Microsecond))
}
