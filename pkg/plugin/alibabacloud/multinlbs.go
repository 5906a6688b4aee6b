package alibabacloud

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/lb"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

const (
	// MultiNLBsName is the network type of the Multi-NLBs plugin (OKG's name); MultiNLBsAlias
	// its family (OKG's AliasMultiNlbs).
	MultiNLBsName  = "AlibabaCloud-Multi-NLBs"
	MultiNLBsAlias = "Multi-NLBs-Network"
	// ParamNLBIDNames lists "<NLB id>/<line>,...": the n-th id of each line (an ISP line,
	// "dx", "lt", ...) is that line's NLB in level n.
	ParamNLBIDNames = "NlbIdNames"
	// AnnotationLBBelongIndex is the Multi-NLBs Service annotation holding its level, in
	// decimal (OKG's key).
	AnnotationLBBelongIndex = "game.kruise.io/lb-belong-index"
	// ServiceReadinessGatePrefix is the prefix of the readiness gate Alibaba's cloud
	// controller sets once a line's NLB serves the pod: the prefix and the line's Service
	// name ("<pod>-<lower(line)>").
	ServiceReadinessGatePrefix = "service.readiness.alibabacloud.com/"
)

// MultiNLBsSpec is AlibabaCloud-Multi-NLBs for the Multi engine (lb.Multi): one NLB-class
// Service per line, on the NLB ids of [alibabacloud.nlb]'s ledger (shared with
// AlibabaCloud-NLB and NLB-SharedPort), with OKG's NLB health-check keys (flag on by
// default), externalTrafficPolicy Local unless ExternalTrafficPolicyType is Cluster (in any
// case), allocateLoadBalancerNodePorts false and the kube-proxy label.
func MultiNLBsSpec() lb.MultiSpec {
	return lb.MultiSpec{
		Name: MultiNLBsName, Alias: MultiNLBsAlias, IDsParam: ParamNLBIDNames, IDAnnotation: AnnotationLBID,
		LevelAnnotation: AnnotationLBBelongIndex, GatePrefix: ServiceReadinessGatePrefix,
		LedgerGroup: NLBName, OwnedAnnotations: ownedAnnotations,
		Params: []string{ParamExternalTrafficPolicy, ParamHealthCheckFlag, ParamHealthCheckType, ParamHealthCheckConnectPort, ParamHealthCheckConnectTimout,
			ParamHealthCheckInterval, ParamHealthyThreshold, ParamUnhealthyThreshold, ParamHealthCheckURI, ParamHealthCheckDomain, ParamHealthCheckMethod},
		Customize: customizeMultiNLBs,
	}
}

// NewMultiNLBs returns the AlibabaCloud-Multi-NLBs plugin handing out listener ports of rng
// ([alibabacloud.nlb]: max_port included).
func NewMultiNLBs(rng lb.Range) *lb.Multi {
	rng.MaxInclusive = true
	return lb.NewMulti(MultiNLBsSpec(), rng)
}

// customizeMultiNLBs adds what OKG's Multi-NLBs plugin writes on a line's Service besides
// the engine's common fields.
func customizeMultiNLBs(conf networkstatus.Conf, svc *corev1.Service) error {
	hc, err := parseHealthCheck(conf, true)
	if err != nil {
		return err
	}
	hc.write(svc, true)
	svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	if v, ok := conf.Last(ParamExternalTrafficPolicy); ok && strings.EqualFold(v, "Cluster") {
		svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	}
	svc.Spec.LoadBalancerClass = ptr.To(NLBLoadBalancerClass)
	return nil
}
