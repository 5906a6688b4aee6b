package pod

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/alibabacloud"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/hwcloud"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/kubernetes"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/lb"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/volcengine"
	policycel "github.com/okg-extensions/network-plugin-policy/pkg/policy/cel"
)

// TestNetworkView: the network variable of the rules is the same notion for every plugin
// that has it: the load-balancer ids and ports of a load-balancer plugin, the container
// ports of HostPort, the hosts and class of Ingress, the cloud resources an auto-created ELB
// or a new EIP makes; the raw parameters always; the parameters each field comes from.
func TestNetworkView(t *testing.T) {
	var ing, hp plugin.Plugin
	for _, p := range kubernetes.Plugins(plugin.DefaultConfig()) {
		switch p.Name() {
		case kubernetes.IngressName:
			ing = p
		case kubernetes.HostPortName:
			hp = p
		}
	}
	pod := func(conf string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "game", Name: "gs-3", Annotations: map[string]string{networkstatus.AnnotationNetworkConf: conf}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "game"}}}}
	}
	params := func(kv ...string) []policycel.Parameter {
		var out []policycel.Parameter
		for i := 0; i+1 < len(kv); i += 2 {
			out = append(out, policycel.Parameter{Name: kv[i], Value: kv[i+1]})
		}
		return out
	}
	for _, tc := range []struct {
		name       string
		p          plugin.Plugin
		conf       string
		want       policycel.Network
		wantParams map[string][]string
	}{
		{"SLB", alibabacloud.NewSLB(lb.Range{Min: 500, Max: 600}), `[{"name":"SlbIds","value":"lb-a,lb-b"},{"name":"PortProtocols","value":"7777/UDP,80"}]`,
			policycel.Network{LoadBalancerIDs: []string{"lb-a", "lb-b"}, Ports: []policycel.Port{{Port: 7777, Protocol: "UDP"}, {Port: 80, Protocol: "TCP"}},
				Parameters: params("SlbIds", "lb-a,lb-b", "PortProtocols", "7777/UDP,80")},
			map[string][]string{"loadBalancerIDs": {"SlbIds"}, "ports": {"PortProtocols"}}},
		{"CCE-ELB auto-created", hwcloud.NewCCEELB(lb.Range{Min: 500, Max: 600}, true), `[{"name":"kubernetes.io/elb.autocreate","value":"{\"type\":\"public\"}"},{"name":"PortProtocols","value":"7777"}]`,
			policycel.Network{CreatesCloudResources: true, Ports: []policycel.Port{{Port: 7777, Protocol: "TCP"}},
				Parameters: params("kubernetes.io/elb.autocreate", `{"type":"public"}`, "PortProtocols", "7777")},
			map[string][]string{"loadBalancerIDs": {"kubernetes.io/elb.id"}, "ports": {"PortProtocols"}, "createsCloudResources": {"kubernetes.io/elb.autocreate"}}},
		{"HostPort", hp, `[{"name":"ContainerPorts","value":"game:7777/UDP,8080"}]`,
			policycel.Network{Ports: []policycel.Port{{Port: 7777, Protocol: "UDP"}, {Port: 8080, Protocol: "TCP"}}, Parameters: params("ContainerPorts", "game:7777/UDP,8080")},
			map[string][]string{"ports": {"ContainerPorts"}}},
		{"Ingress", ing, `[{"name":"Path","value":"/g<id>"},{"name":"Port","value":"80"},{"name":"PathType","value":"Prefix"},{"name":"Host","value":"gs<id>.example.com"},{"name":"IngressClassName","value":"nginx"}]`,
			policycel.Network{Hosts: []string{"gs3.example.com"}, Classes: []string{"nginx"}, Ports: []policycel.Port{{Port: 80, Protocol: "TCP"}},
				Parameters: params("Path", "/g<id>", "Port", "80", "PathType", "Prefix", "Host", "gs<id>.example.com", "IngressClassName", "nginx")},
			map[string][]string{"hosts": {"Host", "TlsHosts"}, "classes": {"IngressClassName"}, "ports": {"Port"}}},
		{"Volcengine-EIP new", volcengine.NewEIP(plugin.ResultWriters{}), `[{"name":"bandwidth","value":"5"}]`,
			policycel.Network{CreatesCloudResources: true, Parameters: params("bandwidth", "5")},
			map[string][]string{"createsCloudResources": {volcengine.AnnotationEIPID}}},
		{"Ingress, upper-case host and the class annotation", ing, `[{"name":"Path","value":"/g<id>"},{"name":"Port","value":"80"},{"name":"PathType","value":"Prefix"},{"name":"Host","value":"GS<id>.Example.com"},{"name":"Annotation","value":"kubernetes.io/ingress.class: internal"}]`,
			policycel.Network{Hosts: []string{"gs3.example.com"}, Classes: []string{"internal"}, Ports: []policycel.Port{{Port: 80, Protocol: "TCP"}},
				Parameters: params("Path", "/g<id>", "Port", "80", "PathType", "Prefix", "Host", "GS<id>.Example.com", "Annotation", "kubernetes.io/ingress.class: internal")},
			map[string][]string{"hosts": {"Host", "TlsHosts"}, "classes": {"IngressClassName", "Annotation"}, "ports": {"Port"}}},
		{"Volcengine-EIP, an empty id is a new EIP", volcengine.NewEIP(plugin.ResultWriters{}), `[{"name":"vke.volcengine.com/primary-eip-id","value":""}]`,
			policycel.Network{CreatesCloudResources: true, Parameters: params("vke.volcengine.com/primary-eip-id", "")},
			map[string][]string{"createsCloudResources": {volcengine.AnnotationEIPID}}},
		{"HwCloud-CCE-EIP, an empty id is a new EIP", hwcloud.NewCCEEIP(plugin.ResultWriters{}), `[{"name":"yangtse.io/pod-with-eip","value":"True"},{"name":"yangtse.io/eip-id","value":""}]`,
			policycel.Network{CreatesCloudResources: true, Parameters: params("yangtse.io/pod-with-eip", "True", "yangtse.io/eip-id", "")},
			map[string][]string{"createsCloudResources": {"yangtse.io/pod-with-eip", "yangtse.io/eip-id"}}},
		{"Volcengine-EIP existing", volcengine.NewEIP(plugin.ResultWriters{}), `[{"name":"vke.volcengine.com/primary-eip-id","value":"eip-1"}]`,
			policycel.Network{Parameters: params("vke.volcengine.com/primary-eip-id", "eip-1")},
			map[string][]string{"createsCloudResources": {volcengine.AnnotationEIPID}}},
	} {
		got, gotParams, err := NetworkOf(tc.p, pod(tc.conf))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if diff := cmp.Diff(tc.want, *got); diff != "" {
			t.Errorf("%s: view (-want,+got):\n%s", tc.name, diff)
		}
		if diff := cmp.Diff(tc.wantParams, gotParams); diff != "" {
			t.Errorf("%s: parameters (-want,+got):\n%s", tc.name, diff)
		}
	}
}
