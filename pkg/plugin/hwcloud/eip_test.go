package hwcloud

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// TestCCEEIP: OKG's annotations at CREATE (the allow-listed Yangtse parameters; another one is
// a warning naming it, OKG logs it); OKG's Waiting status at the first update; Ready only once
// Yangtse has reported the EIP, with it and the pod's IP (OKG reports Ready at the second run
// whatever happened, without an address); a report that is not an address is named.
func TestCCEEIP(t *testing.T) {
	ctx := context.Background()
	p := NewCCEEIP(plugin.ResultWriters{})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "games", Name: "gs-0", Annotations: map[string]string{
		networkstatus.AnnotationNetworkType: CCEEIPName,
		networkstatus.AnnotationNetworkConf: `[{"name":"yangtse.io/pod-with-eip","value":"true"},{"name":"yangtse.io/eip-bandwidth-size","value":"5"},{"name":"Bandwidth","value":"5"}]`,
	}}, Status: corev1.PodStatus{PodIP: "10.0.0.5"}}
	pod, err := p.OnPodAdded(ctx, nil, pod)
	if !plugin.IsWarning(err) || plugin.AsError(err).Param != "Bandwidth" {
		t.Errorf("CREATE: %v, want a warning naming Bandwidth", err)
	}
	if pod.Annotations["yangtse.io/pod-with-eip"] != "true" || pod.Annotations["yangtse.io/eip-bandwidth-size"] != "5" || pod.Annotations["Bandwidth"] != "" {
		t.Errorf("CREATE annotations %v", pod.Annotations)
	}
	waiting := `{"currentNetworkState":"Waiting","createTime":null,"lastTransitionTime":null}`
	for i := range 2 {
		if pod, err = p.OnPodUpdated(ctx, nil, pod); err != nil || pod.Annotations[networkstatus.AnnotationNetworkStatus] != waiting {
			t.Fatalf("update %d before Yangtse answered: status %s (%v), want Waiting", i, pod.Annotations[networkstatus.AnnotationNetworkStatus], err)
		}
	}
	pod.Annotations[AnnotationAllocatedEIP] = "eip?"
	if _, err := p.OnPodUpdated(ctx, nil, pod); plugin.TypeOf(err) != plugin.ParameterError || plugin.AsError(err).Param != AnnotationAllocatedEIP {
		t.Errorf("a report that is not an address: %v, want a parameterError naming it", err)
	}
	pod.Annotations[AnnotationAllocatedEIP] = "203.0.113.9"
	if pod, err = p.OnPodUpdated(ctx, nil, pod); err != nil {
		t.Fatal(err)
	}
	ready := `{"internalAddresses":[{"ip":"10.0.0.5"}],"externalAddresses":[{"ip":"203.0.113.9"}],"currentNetworkState":"Ready","createTime":null,"lastTransitionTime":null}`
	if got := pod.Annotations[networkstatus.AnnotationNetworkStatus]; got != ready {
		t.Errorf("after Yangtse's report: %s, want %s", got, ready)
	}
}
