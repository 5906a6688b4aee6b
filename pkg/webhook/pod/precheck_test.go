package pod

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/kubernetes"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// TestPrecheck: run against the caches with writes refused, the NodePort plugin tells a
// Service create that the namespace's quota refuses, with the message the webhook records
// for a real run; a run that would create the Service, or a type that is not registered,
// cannot be told, and nothing is written either way.
func TestPrecheck(t *testing.T) {
	reg, err := plugin.NewRegistry(kubernetes.NewNodePort())
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "gs-0", Namespace: testNS, UID: "u0", Annotations: map[string]string{
			networkstatus.AnnotationNetworkType: kubernetes.NodePortName,
			networkstatus.AnnotationNetworkConf: `[{"name":"PortProtocols","value":"7777/UDP"}]`,
		}},
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "game"}}},
	}
	zero := resource.MustParse("0")
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "no-node-ports", Namespace: testNS},
		Spec:   corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceServicesNodePorts: zero}},
		Status: corev1.ResourceQuotaStatus{Hard: corev1.ResourceList{corev1.ResourceServicesNodePorts: zero}, Used: corev1.ResourceList{corev1.ResourceServicesNodePorts: zero}}}
	ctx := context.Background()

	full := fake.NewClientBuilder().WithObjects(quota.DeepCopy()).WithStatusSubresource(&corev1.ResourceQuota{}).Build()
	got, ok := Precheck(ctx, reg, full, pod)
	if !ok || got.Type != string(plugin.APICallError) || !strings.Contains(got.Message, "exceeded quota: no-node-ports") || got.Unknown {
		t.Fatalf("Precheck with the quota full = %+v, %v; want the quota refusal", got, ok)
	}
	// The webhook's real run fails the same way, and records the same message.
	_, runErr := plugin.Run(ctx, PrecheckTimeout, kubernetes.NewNodePort(), plugin.OperationUpdate, full, pod)
	failure, _ := plugin.Split(runErr)
	if failure == nil || errorText(failure) != got.Message || string(failure.Type) != got.Type {
		t.Errorf("real run: %v; want %s: %s", failure, got.Type, got.Message)
	}

	empty := fake.NewClientBuilder().Build()
	if got, ok := Precheck(ctx, reg, empty, pod); ok {
		t.Errorf("Precheck when the Service would be created = %+v, true; want false", got)
	}
	var svcs corev1.ServiceList
	if err := empty.List(ctx, &svcs, client.InNamespace(testNS)); err != nil || len(svcs.Items) != 0 {
		t.Errorf("Precheck wrote: %v (%v)", svcs.Items, err)
	}
	other := pod.DeepCopy()
	other.Annotations[networkstatus.AnnotationNetworkType] = "Alibaba-Cloud-SLB"
	if got, ok := Precheck(ctx, reg, full, other); ok {
		t.Errorf("Precheck of a type that is not registered = %+v, true; want false", got)
	}
}
