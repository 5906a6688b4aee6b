package alibabacloud

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/lb"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// NLBName is the network type of the NLB plugin (OKG's name); NLBAlias its family.
const (
	NLBName  = "AlibabaCloud-NLB"
	NLBAlias = "NLB-Network"
	// ParamNLBIDs lists the NLB ids.
	ParamNLBIDs = "NlbIds"
	// NLBLoadBalancerClass is the Service's loadBalancerClass, which Alibaba's NLB
	// controller serves (Kubernetes' own service controller skips classed Services).
	NLBLoadBalancerClass = "alibabacloud.com/nlb"
)

// NLBSpec is AlibabaCloud-NLB for the load-balancer engine: as SLB, but ports named
// "<port>" (no TCPUDP), externalTrafficPolicy Local, loadBalancerClass alibabacloud.com/nlb,
// OKG's NLB health-check keys (flag on by default, a connect port), the network-conf
// checked before the first NotReady status, and an external address with the ingress's
// hostname as endPoint.
func NLBSpec() lb.Spec {
	return lb.Spec{
		Name: NLBName, Alias: NLBAlias,
		IDsParam: ParamNLBIDs, IDAnnotation: AnnotationLBID, IDLabel: LabelLBID, OwnedAnnotations: ownedAnnotations,
		PortNames: lb.PortNamePlain, ParseFirst: true,
		Params: []string{ParamHealthCheckFlag, ParamHealthCheckType, ParamHealthCheckConnectPort, ParamHealthCheckConnectTimout,
			ParamHealthCheckInterval, ParamHealthyThreshold, ParamUnhealthyThreshold, ParamHealthCheckURI, ParamHealthCheckDomain, ParamHealthCheckMethod},
		Customize:     customizeNLB,
		ExhaustedType: plugin.ParameterError,
		Exhausted:     lb.NoAvailablePorts,
		ExternalAddresses: func(_ networkstatus.Conf, svc *corev1.Service, port corev1.ServicePort) []networkstatus.NetworkAddress {
			in := svc.Status.LoadBalancer.Ingress[0]
			return []networkstatus.NetworkAddress{{IP: in.IP, EndPoint: in.Hostname,
				Ports: []networkstatus.NetworkPort{{Name: strconv.Itoa(int(port.TargetPort.IntVal)), Port: networkstatus.IntPort(port.Port), Protocol: port.Protocol}}}}
		},
	}
}

// NewNLB returns the AlibabaCloud-NLB plugin handing out listener ports of rng
// ([alibabacloud.nlb]: max_port included).
func NewNLB(rng lb.Range) *lb.Plugin {
	rng.MaxInclusive = true
	return lb.New(NLBSpec(), rng)
}

// customizeNLB adds what OKG's NLB plugin writes besides the engine's common fields.
func customizeNLB(conf networkstatus.Conf, svc *corev1.Service) error {
	hc, err := parseHealthCheck(conf, true)
	if err != nil {
		return err
	}
	hc.write(svc, true)
	svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	svc.Spec.LoadBalancerClass = ptr.To(NLBLoadBalancerClass)
	return nil
}
