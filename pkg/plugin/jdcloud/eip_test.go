package jdcloud

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// TestJdCloudEIP: OKG's annotations at CREATE (an unknown parameter is a warning naming it);
// Waiting at the first update, and kept until the controller has written the EIP's id and
// address; then Ready with OKG's bytes. The enable annotation removed is a parameterError
// naming it (OKG: internalError "eip plugin is not enabled").
func TestJdCloudEIP(t *testing.T) {
	ctx := context.Background()
	p := NewEIP(plugin.ResultWriters{})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "games", Name: "gs-0", Annotations: map[string]string{
		networkstatus.AnnotationNetworkType: EIPName,
		networkstatus.AnnotationNetworkConf: `[{"name":"Bandwidth","value":"10"},{"name":"ChargeType","value":"postpaid_by_usage"},{"name":"Fixed","value":"true"},{"name":"Isp","value":"BGP"}]`,
	}}, Status: corev1.PodStatus{PodIP: "10.0.0.5"}}
	pod, err := p.OnPodAdded(ctx, nil, pod)
	if !plugin.IsWarning(err) || plugin.AsError(err).Param != "Isp" {
		t.Errorf("CREATE: %v, want a warning naming Isp", err)
	}
	for k, v := range map[string]string{AnnotationEIPEnable: "true", AnnotationEIPName: "games/gs-0", AnnotationEIPBandwidth: "10",
		AnnotationEIPCharge: "postpaid_by_usage", AnnotationEIPStatic: "true"} {
		if pod.Annotations[k] != v {
			t.Errorf("%s = %q, want %q", k, pod.Annotations[k], v)
		}
	}
	waiting := `{"currentNetworkState":"Waiting","createTime":null,"lastTransitionTime":null}`
	pod.Annotations[AnnotationEIPIP] = "203.0.113.9" // the address without the id: not an answer yet
	for i := range 2 {
		if pod, err = p.OnPodUpdated(ctx, nil, pod); err != nil || pod.Annotations[networkstatus.AnnotationNetworkStatus] != waiting {
			t.Fatalf("update %d: status %s (%v), want Waiting", i, pod.Annotations[networkstatus.AnnotationNetworkStatus], err)
		}
	}
	pod.Annotations[AnnotationEIPID] = "fip-1"
	if pod, err = p.OnPodUpdated(ctx, nil, pod); err != nil {
		t.Fatal(err)
	}
	ready := `{"internalAddresses":[{"ip":"10.0.0.5"}],"externalAddresses":[{"ip":"203.0.113.9"}],"currentNetworkState":"Ready","createTime":null,"lastTransitionTime":null}`
	if got := pod.Annotations[networkstatus.AnnotationNetworkStatus]; got != ready {
		t.Errorf("answered: %s, want %s", got, ready)
	}
	delete(pod.Annotations, AnnotationEIPEnable)
	if _, err := p.OnPodUpdated(ctx, nil, pod); plugin.TypeOf(err) != plugin.ParameterError || plugin.AsError(err).Param != AnnotationEIPEnable {
		t.Errorf("enable annotation removed: %v, want a parameterError naming it", err)
	}
}
