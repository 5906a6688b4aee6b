package lb_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/alibabacloud"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/lb"
)

// TestLateServiceGoneRacingANewCreate forces the interleaving docs/replicas.md rules out: a
// replica handles the delete event of gs-0's old Service (made at t0, its pod's claim of
// port 500 at t0 too), reads (live) that no pod or Service of that name exists, and right
// then, 30 s later, a new pod gs-0's CREATE claims the same port in the ledger. The release
// that follows leaves that claim: it releases only claims made up to the deleted Service's
// creation. Without the race, the old claim is released.
func TestLateServiceGoneRacingANewCreate(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	for _, race := range []bool{true, false} {
		ctx := context.Background()
		clk := clocktesting.NewFakeClock(t0)
		old := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "gs-0", CreationTimestamp: metav1.NewTime(t0),
			Annotations: map[string]string{alibabacloud.AnnotationLBID: "lb-a"}},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Name: "7777-udp", Port: 500, Protocol: corev1.ProtocolUDP}}}}
		c := fakeClient(t)
		ledger := &lb.ConfigMapLedger{Client: c, Namespace: "npp", Plugin: alibabacloud.SLBName, Now: clk.Now}
		p := alibabacloud.NewSLB(lb.Range{Min: 500, Max: 501})
		p.UseClock(clk)
		p.UseLedger(ledger)
		if err := p.Init(ctx, c, plugin.Config{}); err != nil {
			t.Fatal(err)
		}
		p.ServiceSeen(old) // the replica counted the old Service
		if _, err := ledger.Claim(ctx, "lb-a", []int32{500}, "default/gs-0", nil); err != nil {
			t.Fatal(err)
		}
		clk.Step(30 * time.Second)
		raced := false
		live := interceptor.NewClient(c.(client.WithWatch), interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				err := c.Get(ctx, key, obj, opts...)
				if _, isPod := obj.(*corev1.Pod); isPod && race && !raced {
					// The new pod's CREATE lands between the read and the release.
					raced = true
					if _, cerr := ledger.Claim(ctx, "lb-a", []int32{500}, "default/gs-0", nil); cerr != nil {
						t.Fatal(cerr)
					}
				}
				return err
			},
		})
		if err := p.ServiceGone(ctx, live, "default/gs-0", old.CreationTimestamp.Time); err != nil {
			t.Fatal(err)
		}
		claims, err := ledger.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, held := claims["lb-a"][500]
		if race && (!raced || !held) {
			t.Errorf("race (%v): claims %v; the new pod's claim, made after the read, was released", raced, claims)
		}
		if !race && held {
			t.Errorf("no race: claims %v; the old pod's claim was not released", claims)
		}
	}
}

// TestServiceGoneReleasesAnotherReplicasRecord: replica A makes gs-0's Service (its claim
// dated t0); replica B, which did not make it, runs the pod 5 s later and records the
// Service's ports in the ledger too (it adopts the Service). When the Service is gone,
// B's record is released with A's: it is dated at the Service's creation, not at B's run,
// so the release of the claims made up to the Service's creation covers it. Before, B's
// record was dated at its run and stayed until the leader's sweep, a minute or two later
// (seen in e2e/admission's TestFixedPortsFreedWithTheGameServerSet).
func TestServiceGoneReleasesAnotherReplicasRecord(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(t0)
	c := fakeClient(t)
	replicas := []*lb.Plugin{alibabacloud.NewSLB(lb.Range{Min: 500, Max: 519}), alibabacloud.NewSLB(lb.Range{Min: 500, Max: 519})}
	ledger := &lb.ConfigMapLedger{Client: c, Namespace: "npp", Plugin: alibabacloud.SLBName, Now: clk.Now}
	for _, r := range replicas {
		r.UseClock(clk)
		r.UseLedger(ledger)
		if err := r.Init(ctx, c, plugin.Config{}); err != nil {
			t.Fatal(err)
		}
	}
	pod := runningPod(alibabacloud.SLBName, `[{"name":"SlbIds","value":"lb-a"},{"name":"PortProtocols","value":"7777/UDP"}]`)
	if _, err := replicas[0].OnPodUpdated(ctx, c, pod.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(pod), svc); err != nil {
		t.Fatal(err)
	}
	// The fake client does not set creation times: the API server would have, at t0.
	svc.CreationTimestamp = metav1.NewTime(t0)
	if err := c.Update(ctx, svc); err != nil {
		t.Fatal(err)
	}
	clk.Step(5 * time.Second)
	replicas[1].ServiceSeen(svc)
	if _, err := replicas[1].OnPodUpdated(ctx, c, pod.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	claims, err := ledger.Load(ctx)
	if err != nil || claims["lb-a"][svc.Spec.Ports[0].Port].Owner != "default/"+pod.Name {
		t.Fatalf("after both replicas ran: claims %v (%v), want the Service's port held by %s", claims, err, pod.Name)
	}
	if err := c.Delete(ctx, svc); err != nil {
		t.Fatal(err)
	}
	for _, r := range replicas { // the pod was never stored: gone too
		if err := r.ServiceGone(ctx, c, "default/"+pod.Name, t0); err != nil {
			t.Fatal(err)
		}
	}
	if claims, err := ledger.Load(ctx); err != nil || len(claims["lb-a"]) != 0 {
		t.Errorf("after the Service is gone: claims %v (%v), want none", claims, err)
	}
}
