package hwcloud

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/lb"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// CCEELBName is the network type of the CCE ELB plugin (OKG's name); CCEELBAlias its family.
const (
	CCEELBName  = "HwCloud-CCE-ELB"
	CCEELBAlias = "CCE-ELB-Network"
	// AnnotationELBAutoCreate asks CCE's cloud controller to create an ELB for the Service
	// (a JSON object, CCE's format); CCE then writes the new ELB's id in AnnotationELBID.
	AnnotationELBAutoCreate = "kubernetes.io/elb.autocreate"
)

// cceELBOwnedAnnotations are the Service annotations HwCloud-CCE-ELB removes when the
// network-conf no longer has them: the ELB's id (in the named mode), the auto-create
// request, and the kubernetes.io/elb.* keys HwCloud-ELB writes. Any other annotation the
// network-conf put there stays when the entry is dropped (OKG's update replaces every
// annotation; here a key the plugin cannot tell from someone else's is left alone).
var cceELBOwnedAnnotations = append([]string{AnnotationELBAutoCreate}, ELBSpec().OwnedAnnotations...)

// CCEELBSpec is HwCloud-CCE-ELB for the load-balancer engine. Its network-conf names are
// CCE's own annotation keys: kubernetes.io/elb.id (one ELB) or kubernetes.io/elb.autocreate
// (an ELB per Service, made by CCE), PortProtocols, Fixed and ExternalTrafficPolicyType;
// every other entry is copied onto the Service as an annotation, as in OKG. Ports are named
// "<port>-<protocol>", TCPUDP allowed; exhaustion is OKG's ParameterError "there are no
// avaliable ports for [<id>]".
func CCEELBSpec() lb.Spec {
	return lb.Spec{
		Name: CCEELBName, Alias: CCEELBAlias,
		IDsParam: AnnotationELBID, SingleID: true, AutoCreateParam: AnnotationELBAutoCreate, AutoCreateKey: "[hwcloud.cce] allow_elb_autocreate", ConfAnnotations: true,
		LedgerGroup:  ELBName, // HwCloud-ELB's ledger: both name ELBs by kubernetes.io/elb.id
		NotActedOn:   []string{"AllowNotReadyContainers"},
		IDAnnotation: AnnotationELBID, OwnedAnnotations: cceELBOwnedAnnotations,
		AllowTCPUDP: true, PortNames: lb.PortNameWithProtocol,
		Params:        []string{AnnotationELBAutoCreate, ParamExternalTrafficPolicy},
		Customize:     customizeCCEELB,
		ExhaustedType: plugin.ParameterError,
		Exhausted:     lb.NoAvaliablePorts,
	}
}

// NewCCEELB returns the HwCloud-CCE-ELB plugin handing out listener ports of rng
// ([hwcloud.cce.elb]: max_port included, as OKG's loop does); autoCreate allows a
// network-conf to ask CCE to create the pod's ELB (kubernetes.io/elb.autocreate; [hwcloud.cce]
// allow_elb_autocreate).
func NewCCEELB(rng lb.Range, autoCreate bool) *lb.Plugin {
	rng.MaxInclusive = true
	spec := CCEELBSpec()
	spec.AutoCreateAllowed = autoCreate
	return lb.New(spec, rng)
}

// customizeCCEELB copies every network-conf entry the engine does not read (all but
// kubernetes.io/elb.id, PortProtocols, Fixed and ExternalTrafficPolicyType) onto svc as an
// annotation, the last value of a repeated name winning, as in OKG; a name that is not an
// annotation key is a ParameterError naming it (OKG sends it and the API server refuses the
// whole Service). The external traffic policy is Cluster, or Local for "Local" in any case.
func customizeCCEELB(conf networkstatus.Conf, svc *corev1.Service) error {
	engine := []string{AnnotationELBID, lb.ParamPortProtocols, lb.ParamFixed, ParamExternalTrafficPolicy}
	for _, c := range conf {
		if slices.Contains(engine, c.Name) {
			continue
		}
		if msgs := validation.IsQualifiedName(strings.ToLower(c.Name)); len(msgs) > 0 { // the API server's check
			return plugin.ParamErrorf(c.Name, "is copied onto the Service as an annotation and is not an annotation key: %s", strings.Join(msgs, "; "))
		}
		svc.Annotations[c.Name] = c.Value
	}
	svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	if v, ok := conf.Last(ParamExternalTrafficPolicy); ok && strings.EqualFold(v, "Local") {
		svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	}
	return nil
}
