package lb_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/jdcloud"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/lb"
)

// createOn runs a CREATE admission of pod ns/name (a JdCloud-NLB game server on lb-a) on
// replica p and returns the ports it chose, or its error.
func createOn(ctx context.Context, p *lb.Plugin, c client.Client, ns, name string) (string, error) {
	pod := runningPod(jdcloud.NLBName, `[{"name":"NlbIds","value":"lb-a"},{"name":"PortProtocols","value":"7777/UDP"}]`)
	pod.Namespace, pod.Name, pod.UID = ns, name, ""
	pod.Annotations = map[string]string{"game.kruise.io/network-type": jdcloud.NLBName, "game.kruise.io/network-conf": pod.Annotations["game.kruise.io/network-conf"]}
	out, err := p.OnPodAdded(ctx, c, pod)
	if err != nil {
		return "", err
	}
	return out.Annotations[lb.AnnotationAllocation], nil
}

// TestRefusedCreatesHoldNothing: ports claimed at CREATE admissions whose pods never came
// into being (refused after the webhook) fill a load balancer for ClaimTTL at most, on every
// replica: before it, another namespace's pod finds no room on either replica; after it, it
// gets ports on whichever replica answers, the ledger's stale claims taken over. A claim
// whose pod does exist is never taken.
func TestRefusedCreatesHoldNothing(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC))
	c := fakeClient(t)
	replica := func() *lb.Plugin {
		p := jdcloud.NewNLB(lb.Range{Min: 700, Max: 703}) // 700, 701, 702
		p.UseClock(clk)
		p.UseLedger(&lb.ConfigMapLedger{Client: c, Namespace: "npp", Plugin: p.LedgerKey(), Now: clk.Now})
		if err := p.Init(ctx, c, plugin.Config{}); err != nil {
			t.Fatal(err)
		}
		return p
	}
	r1, r2 := replica(), replica()

	// Namespace "tenant-a": three CREATEs on replica 1 fill lb-a; none of the pods is
	// stored, but the last one's pod exists (it was admitted).
	for _, name := range []string{"a-0", "a-1", "a-2"} {
		if _, err := createOn(ctx, r1, c, "tenant-a", name); err != nil {
			t.Fatalf("CREATE of %s: %v", name, err)
		}
	}
	stored := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "a-2"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "game"}}}}
	if err := c.Create(ctx, stored); err != nil {
		t.Fatal(err)
	}
	for i, r := range []*lb.Plugin{r1, r2} {
		if _, err := createOn(ctx, r, c, "tenant-b", "b-0"); err == nil || !strings.Contains(err.Error(), "lb-a") {
			t.Errorf("replica %d, before the claims' TTL: %v, want lb-a exhausted", i+1, err)
		}
	}

	clk.Step(lb.ClaimTTL + time.Second)
	got1, err := createOn(ctx, r2, c, "tenant-b", "b-0")
	if err != nil {
		t.Fatalf("replica 2, after the claims' TTL: %v, want ports", err)
	}
	got2, err := createOn(ctx, r1, c, "tenant-b", "b-1")
	if err != nil {
		t.Fatalf("replica 1, after the claims' TTL: %v, want ports", err)
	}
	if _, err := createOn(ctx, r1, c, "tenant-b", "b-2"); err == nil {
		t.Errorf("a third pod of tenant-b got a port: the claim of the stored pod a-2 was taken")
	}
	claims, err := (&lb.ConfigMapLedger{Client: c, Namespace: "npp", Plugin: r1.LedgerKey()}).Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	owners := map[string]int32{}
	for port, cl := range claims["lb-a"] {
		owners[cl.Owner] = port
	}
	if _, ok := owners["tenant-a/a-2"]; !ok || len(owners) != 3 || owners["tenant-b/b-0"] == 0 || owners["tenant-b/b-1"] == 0 {
		t.Errorf("ledger owners %v (b-0 %s, b-1 %s), want tenant-a/a-2, tenant-b/b-0 and tenant-b/b-1", owners, got1, got2)
	}
}
