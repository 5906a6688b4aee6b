package alibabacloud

import (
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/lb"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/sharedport"
)

// Network types of the shared-port plugins (OKG's names; OKG gives them no alias).
const (
	SLBSharedPortName = "AlibabaCloud-SLB-SharedPort"
	NLBSharedPortName = "AlibabaCloud-NLB-SharedPort"
)

// Service label and limit of the shared-port plugins (OKG's); NLB-SharedPort names its NLB
// in ParamNLBIDs, one id.
const (
	// LabelSLBSharedPort marks an AlibabaCloud-SLB-SharedPort Service ("true").
	LabelSLBSharedPort = "game.kruise.io/AlibabaCloud-SLB-SharedPort"
	// slbMaxBackends is how many pods one SLB serves at most (OKG's hard-coded limit, the
	// cloud's).
	slbMaxBackends = 200
)

// NewSLBSharedPort returns AlibabaCloud-SLB-SharedPort (pkg/plugin/sharedport): one
// LoadBalancer Service per SLB of SlbIds, named after it, with AnnotationLBID,
// force-override-listeners and the label LabelSLBSharedPort "true", selecting the pods
// labelled LabelLBID with its id; each pod joins the listed SLB with the fewest backends
// below 200 (the first listed on a tie), chosen at CREATE; Ready at the Service's ingress IP.
// ManagedServiceNames and ManagedServiceSelector are read as OKG reads them (the selector's
// label follows the network's enable and disable). Its listener ports are claimed in
// AlibabaCloud-SLB's port ledger, which per-pod SLB Services claim theirs in.
func NewSLBSharedPort() *sharedport.Plugin {
	return sharedport.New(sharedport.Spec{Name: SLBSharedPortName, IDsParam: ParamSLBIDs, MaxBackends: slbMaxBackends,
		IDAnnotation: AnnotationLBID, PodLabel: LabelLBID, ServiceLabels: map[string]string{LabelSLBSharedPort: "true"},
		ManagedServiceParams: true, ReadyStatusAtCreate: true, LedgerGroup: SLBName})
}

// NewNLBSharedPort returns AlibabaCloud-NLB-SharedPort (pkg/plugin/sharedport): one
// LoadBalancer Service of class alibabacloud.com/nlb named after the NLB NlbIds names (one id),
// with AnnotationLBID, force-override-listeners and the network-conf's hash
// (lb.AnnotationConfigHash), selecting the pods labelled LabelLBID with its id; a Service
// whose hash differs is brought to the pod's network-conf; Ready at the ingress hostname
// (endPoint). Its listener ports are claimed in AlibabaCloud-NLB's port ledger.
func NewNLBSharedPort() *sharedport.Plugin {
	return sharedport.New(sharedport.Spec{Name: NLBSharedPortName, IDsParam: ParamNLBIDs, SingleID: true,
		IDAnnotation: AnnotationLBID, PodLabel: LabelLBID, Class: "alibabacloud.com/nlb",
		HashAnnotation: lb.AnnotationConfigHash, EndpointAddress: true, LedgerGroup: NLBName})
}
