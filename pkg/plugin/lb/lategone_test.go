package lb_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/alibabacloud"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/lb"
)

// TestLateServiceGoneRacingANewCreate forces the interleaving docs/replicas.md rules out: a
// replica handles the delete event of gs-0's old Service, reads (live) that no pod or Service
// of that name exists, and right then a new pod gs-0's CREATE claims the same port in the
// ledger; the release that follows must leave that claim: it releases only the claims made
// before its read.
func TestLateServiceGoneRacingANewCreate(t *testing.T) {
	ctx := context.Background()
	old := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "gs-0", Annotations: map[string]string{alibabacloud.AnnotationLBID: "lb-a"}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Name: "7777-udp", Port: 500, Protocol: corev1.ProtocolUDP}}}}
	c := fakeClient(t)
	ledger := &lb.ConfigMapLedger{Client: c, Namespace: "npp", Plugin: alibabacloud.SLBName}
	p := alibabacloud.NewSLB(lb.Range{Min: 500, Max: 501})
	p.UseLedger(ledger)
	if err := p.Init(ctx, c, plugin.Config{}); err != nil {
		t.Fatal(err)
	}
	p.ServiceSeen(old) // the replica counted the old Service
	if _, err := ledger.Claim(ctx, "lb-a", []int32{500}, "default/gs-0", nil); err != nil {
		t.Fatal(err)
	}
	raced := false
	live := interceptor.NewClient(c.(client.WithWatch), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			err := c.Get(ctx, key, obj, opts...)
			if _, isPod := obj.(*corev1.Pod); isPod && !raced {
				// The new pod's CREATE lands between the read and the release.
				raced = true
				if _, cerr := ledger.Claim(ctx, "lb-a", []int32{500}, "default/gs-0", nil); cerr != nil {
					t.Fatal(cerr)
				}
			}
			return err
		},
	})
	if err := p.ServiceGone(ctx, live, "default/gs-0"); err != nil {
		t.Fatal(err)
	}
	if !raced {
		t.Fatal("the interleaving did not happen: ServiceGone read no pod")
	}
	claims, err := ledger.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if claims["lb-a"][500].Owner != "default/gs-0" {
		t.Errorf("claims %v: the new pod's claim, made after the read, was released", claims)
	}
}
