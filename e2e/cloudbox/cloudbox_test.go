package cloudbox

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/okg-extensions/network-plugin-policy/e2e/cluster"
)

// cp is the control plane of this package's tests.
var cp *cluster.ControlPlane

func TestMain(m *testing.M) { os.Exit(cluster.Main(m, &cp)) }

const idKey = "service.beta.kubernetes.io/alibaba-cloud-loadbalancer-id"

func lbService(ns, name, id string, ports ...int32) *corev1.Service {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{idKey: id}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": name}}}
	for _, p := range ports {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: fmt.Sprintf("p%d", p), Port: p, Protocol: corev1.ProtocolUDP})
	}
	return svc
}

// ingressOf waits up to timeout for svc's first ingress address, "" if none came.
func ingressOf(ctx context.Context, cs kubernetes.Interface, ns, name string, timeout time.Duration) string {
	var ip string
	_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		svc, err := cs.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil || len(svc.Status.LoadBalancer.Ingress) == 0 {
			return false, nil
		}
		ip = svc.Status.LoadBalancer.Ingress[0].IP
		return true, nil
	})
	return ip
}

// TestCloudInABox: Kubernetes' own service controller with the box's cloud gives each load
// balancer id its own address; beyond a load balancer's listener quota it records the
// cloud's message in a SyncLoadBalancerFailed Event and leaves the Service without an
// ingress, until the quota is raised; a Service of Alibaba's NLB class gets its address from
// the box's own status writer; a RetryError holds a Service back until it clears.
func TestCloudInABox(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cloud := New(idKey)
	cloud.IDLabel = "service.k8s.alibaba/loadbalancer-id"
	cloud.SetQuota("lb-q", 1)
	if err := Start(ctx, cp.Config, cloud, 2); err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(cp.Config)
	ns := "cloudbox"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	create := func(svcs ...*corev1.Service) {
		t.Helper()
		for _, svc := range svcs {
			if _, err := cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	create(lbService(ns, "a", "lb-a", 500), lbService(ns, "b", "lb-b", 500), lbService(ns, "q1", "lb-q", 501))
	if a, b := ingressOf(ctx, cs, ns, "a", 30*time.Second), ingressOf(ctx, cs, ns, "b", 30*time.Second); a != cloud.Address("lb-a") || b != cloud.Address("lb-b") || a == b {
		t.Errorf("ingress of a %q and b %q, want %s and %s", a, b, cloud.Address("lb-a"), cloud.Address("lb-b"))
	}
	if ingressOf(ctx, cs, ns, "q1", 30*time.Second) == "" {
		t.Error("q1, within lb-q's quota, got no ingress")
	}
	// q2 only once q1 holds lb-q's one listener: created together, the controller's two
	// workers may ensure either first.
	create(lbService(ns, "q2", "lb-q", 502))
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		svc, err := cs.CoreV1().Services(ns).Get(ctx, "a", metav1.GetOptions{})
		return err == nil && svc.Labels[cloud.IDLabel] == "lb-a", nil
	}); err != nil {
		t.Errorf("Service a has no %s label after its load balancer was ensured", cloud.IDLabel)
	}
	var note string
	_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		evs, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=q2,reason=SyncLoadBalancerFailed"})
		if err != nil || len(evs.Items) == 0 {
			return false, nil
		}
		note = evs.Items[0].Message
		return true, nil
	})
	if !strings.Contains(note, "QuotaExceeded.Listeners") {
		t.Fatalf("q2 beyond lb-q's quota: event %q, want SyncLoadBalancerFailed with the cloud's quota message", note)
	}
	if ip := ingressOf(ctx, cs, ns, "q2", time.Second); ip != "" {
		t.Errorf("q2 beyond the quota got ingress %s", ip)
	}
	cloud.SetQuota("lb-q", 0)
	if ingressOf(ctx, cs, ns, "q2", time.Minute) == "" {
		t.Error("q2 got no ingress within a minute of the quota being raised")
	}
	nlb := lbService(ns, "nlb", "lb-n", 500)
	nlb.Spec.LoadBalancerClass = ptr.To("alibabacloud.com/nlb")
	if _, err := cs.CoreV1().Services(ns).Create(ctx, nlb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if ip := ingressOf(ctx, cs, ns, "nlb", 30*time.Second); ip != cloud.Address("lb-n") {
		t.Errorf("an NLB-class Service got ingress %q, want %s (the box's status writer for the class)", ip, cloud.Address("lb-n"))
	}
	cloud.SetError(NewRetryError("load balancer is provisioning", time.Second))
	if _, err := cs.CoreV1().Services(ns).Create(ctx, lbService(ns, "r", "lb-r", 500), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if ip := ingressOf(ctx, cs, ns, "r", 3*time.Second); ip != "" {
		t.Errorf("r got ingress %s while the cloud answers RetryError", ip)
	}
	cloud.SetError(nil)
	if ingressOf(ctx, cs, ns, "r", 10*time.Second) == "" {
		t.Error("r got no ingress within 10 s of the RetryError clearing (it is retried every second)")
	}
}
