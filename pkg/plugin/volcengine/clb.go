package volcengine

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/lb"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// CLBName is the network type of the CLB plugin (OKG's name); CLBAlias its family.
const (
	CLBName  = "Volcengine-CLB"
	CLBAlias = "CLB-Network"
	// AnnotationCLBID names the CLB the Service's listeners go on; Volcengine's cloud
	// controller also labels the Service with it.
	AnnotationCLBID = "service.beta.kubernetes.io/volcengine-loadbalancer-id"
)

// Network-conf parameters of Volcengine-CLB (OKG's names).
const (
	ParamCLBIDs             = "ClbIds"
	ParamEnableMultiIngress = "EnableMultiIngress"
	ParamEnableClbScatter   = "EnableClbScatter"
)

// CLBSpec is Volcengine-CLB for the load-balancer engine: ids in ClbIds (repeats dropped),
// the first CLB with room, ports named "<port>-<protocol>" (no TCPUDP), the Service created
// in the run that writes the first NotReady status, the scheduler and address-type
// annotations under the user's Annotations, and with EnableMultiIngress one external
// address per ingress and port, per ingress first (OKG's order), and with EnableClbScatter
// the CLBs taken round-robin. Exhausted ports are OKG's InternalError.
func CLBSpec() lb.Spec {
	return lb.Spec{
		Name: CLBName, Alias: CLBAlias,
		IDsParam: ParamCLBIDs, DedupIDs: true, IDAnnotation: AnnotationCLBID, IDLabel: AnnotationCLBID,
		OwnedAnnotations: []string{AnnotationCLBID, "service.beta.kubernetes.io/volcengine-loadbalancer-scheduler",
			"service.beta.kubernetes.io/volcengine-loadbalancer-address-type"},
		FirstFit: true, PortNames: lb.PortNameWithProtocol, CreateAtFirstRun: true,
		Params:        []string{lb.ParamAnnotations, lb.ParamAllocateLoadBalancerNodePorts, ParamEnableMultiIngress, ParamEnableClbScatter},
		Customize:     customizeCLB,
		ExhaustedType: plugin.InternalError,
		Exhausted: func(_ []string, n int) string {
			return fmt.Sprintf("unable to find load balancer with %d available ports", n)
		},
		ExternalAddresses: externalCLB,
		IngressMajor:      true,
		ScatterParam:      ParamEnableClbScatter,
	}
}

// NewCLB returns the Volcengine-CLB plugin handing out listener ports of rng
// ([volcengine.clb]: max_port excluded, as in OKG).
func NewCLB(rng lb.Range) *lb.Plugin {
	rng.MaxInclusive = false
	return lb.New(CLBSpec(), rng)
}

// customizeCLB writes OKG's Volcengine-CLB annotations (scheduler wrr, address type PUBLIC,
// then the Annotations parameter over them) and allocateLoadBalancerNodePorts (true unless
// AllocateLoadBalancerNodePorts is false).
func customizeCLB(conf networkstatus.Conf, svc *corev1.Service) error {
	svc.Annotations["service.beta.kubernetes.io/volcengine-loadbalancer-scheduler"] = "wrr"
	svc.Annotations["service.beta.kubernetes.io/volcengine-loadbalancer-address-type"] = "PUBLIC"
	if err := lb.ApplyAnnotations(conf, svc); err != nil {
		return err
	}
	if err := lb.ApplyAllocateNodePorts(conf, svc); err != nil {
		return err
	}
	return nil
}

// externalCLB is OKG's Volcengine external address: the first ingress's ip, or with
// EnableMultiIngress true and several ingresses one address per ingress.
func externalCLB(conf networkstatus.Conf, svc *corev1.Service, port corev1.ServicePort) []networkstatus.NetworkAddress {
	ingress := svc.Status.LoadBalancer.Ingress[:1]
	if multiIngress(conf) {
		ingress = svc.Status.LoadBalancer.Ingress
	}
	out := make([]networkstatus.NetworkAddress, 0, len(ingress))
	for _, in := range ingress {
		out = append(out, networkstatus.NetworkAddress{IP: in.IP,
			Ports: []networkstatus.NetworkPort{{Name: strconv.Itoa(int(port.TargetPort.IntVal)), Port: networkstatus.IntPort(port.Port), Protocol: port.Protocol}}})
	}
	return out
}

// multiIngress reads EnableMultiIngress as OKG does: the last value strconv.ParseBool
// accepts, false without one.
func multiIngress(conf networkstatus.Conf) bool {
	on := false
	for _, v := range conf.Values(ParamEnableMultiIngress) {
		if b, err := strconv.ParseBool(v); err == nil {
			on = b
		}
	}
	return on
}
