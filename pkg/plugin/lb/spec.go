package lb

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// AnnotationConfigHash is the Service annotation OKG's load-balancer plugins write with a
// hash of the parameters the Service was built from. OKG's value (a hash of a dump of its
// private types) cannot be reproduced, so it is opaque here: the engine writes its own and
// compares Services by what they hold, not by this value.
const AnnotationConfigHash = "game.kruise.io/network-config-hash"

// Spec describes one family-A plugin to the engine: what OKG's plugin of that name writes.
// A provider package fills one in per plugin (for example pkg/plugin/alibabacloud's SLB).
type Spec struct {
	// Name is the network type, e.g. "AlibabaCloud-SLB".
	Name string
	// Alias is OKG's cross-provider family name, e.g. "LB-Network".
	Alias string
	// IDsParam is the network-conf parameter listing the load balancer ids, comma-separated
	// ("SlbIds"); required.
	IDsParam string
	// DedupIDs drops repeated ids (Volcengine-CLB).
	DedupIDs bool
	// SingleID makes IDsParam name exactly one load balancer (HwCloud-CCE-ELB's
	// kubernetes.io/elb.id): a value with a comma, or an empty one, is a ParameterError
	// naming it.
	SingleID bool
	// AutoCreateParam is the network-conf parameter that asks the cloud controller to create
	// a load balancer for the Service instead of naming one (HwCloud-CCE-ELB's
	// kubernetes.io/elb.autocreate, a JSON object copied onto the Service by Customize);
	// "" when the plugin has none. With a non-empty value and no IDsParam the Service is
	// made without the id annotation, on the first ports of the range (each Service has a
	// load balancer of its own, so nothing is allocated or claimed), and the cloud
	// controller's id annotation, once written, is kept and counted. Both parameters
	// together are a ParameterError naming both.
	AutoCreateParam string
	// AutoCreateAllowed lets a network-conf use AutoCreateParam. A load balancer the cloud
	// creates for a pod is a billable resource outside every load balancer the platform
	// named, so it is the platform's decision, in the provider configuration; without it
	// the parameter is a ParameterError naming it (where OKG creates one).
	AutoCreateAllowed bool
	// AutoCreateKey is the provider configuration key that sets AutoCreateAllowed, named in
	// that error ("[hwcloud.cce] allow_elb_autocreate").
	AutoCreateKey string
	// ProtectedAnnotations are Service annotations the plugin writes itself (exact keys,
	// besides IDAnnotation and AnnotationConfigHash, which always are): a network-conf that
	// would set one (an Annotations entry, or with ConfAnnotations a parameter of that name)
	// is a ParameterError naming it, so that a pod cannot move its Service to a load
	// balancer, or onto ports, that were never allocated to it (JdCloud-NLB's load balancer
	// specification). OKG writes the user's entries over its own.
	ProtectedAnnotations []string
	// LedgerGroup names the ledger the plugin's claims go in ("" for Name): plugins that
	// hand out ports of the same load balancers by the same id annotation share one
	// (HwCloud-ELB and HwCloud-CCE-ELB, both on kubernetes.io/elb.id), so that neither gives
	// a port the other has claimed for a Service not made yet.
	LedgerGroup string
	// ConfAnnotations marks a plugin that copies every network-conf parameter it does not
	// read itself onto the Service as an annotation (HwCloud-CCE-ELB, in Customize): no
	// parameter is unknown to it, but those of NotActedOn get a warning.
	ConfAnnotations bool
	// NotActedOn are parameters OKG's plugin acts on and this one does not (with
	// ConfAnnotations, it only copies them): a warning names them.
	NotActedOn []string
	// IDAnnotation is the Service annotation that names the load balancer, which the
	// provider's cloud controller reads.
	IDAnnotation string
	// IDLabel is the label the provider's cloud controller puts on a Service it manages with
	// the load balancer id ("" when none); the allocator counts Services that carry only it.
	IDLabel string
	// FirstFit takes the first configured id with room (Volcengine-CLB); otherwise the last
	// one with room, as OKG's other plugins do.
	FirstFit bool
	// AllowTCPUDP accepts TCPUDP in PortProtocols (two Service ports on one listener port).
	AllowTCPUDP bool
	// PortNames returns the Service port names for a PortProtocols entry, one per protocol
	// (two for TCPUDP).
	PortNames func(p PortProtocol) []string
	// OwnedAnnotations are the Service annotations the plugin may write from the
	// network-conf (exact keys): one the desired Service no longer has (a health check
	// switched off) is removed at the next patch. Any other annotation, even under the
	// cloud's prefix, is someone else's and never touched.
	OwnedAnnotations []string
	// Params lists the network-conf parameters the plugin reads besides IDsParam,
	// PortProtocols and Fixed; any other is a warning.
	Params []string
	// Customize sets the provider's annotations, labels and spec fields on svc (already
	// holding type, selector, ports, owners and the id annotation) from conf. Its errors
	// are ParameterErrors naming the parameter.
	Customize func(conf networkstatus.Conf, svc *corev1.Service) error
	// ExhaustedType and Exhausted are the error when no configured load balancer has
	// enough free ports: OKG's type, and its message for ids.
	ExhaustedType plugin.ErrorType
	// Exhausted returns the exhaustion message for the configured ids and the number of
	// ports asked for.
	Exhausted func(ids []string, n int) string
	// ParseFirst checks the provider's own parameters (Customize) before the first run's
	// NotReady status, so that a bad value fails the first UPDATE (Ali-NLB's health-check
	// keys); otherwise the first run writes the status only (the others).
	ParseFirst bool
	// CreateAtFirstRun goes on to create the Service in the run that writes the first
	// NotReady status (Volcengine-CLB); the others create it at the next run.
	CreateAtFirstRun bool
	// ExternalAddresses returns the network-status external addresses of a Ready Service
	// for one Service port, given the pod's network-conf (nil: OKG's default, the first
	// ingress's ip).
	ExternalAddresses func(conf networkstatus.Conf, svc *corev1.Service, port corev1.ServicePort) []networkstatus.NetworkAddress
	// ScatterParam, when set, names a boolean network-conf parameter (strconv.ParseBool;
	// anything else is a ParameterError naming it) that, true, starts the scan over the ids at
	// a round-robin index, the one after the id of this plugin's last such allocation, rather
	// than at the first id (OKG's Volcengine-CLB EnableClbScatter). The index is this
	// replica's, as OKG's is its process's.
	ScatterParam string
	// IngressMajor orders the external addresses per ingress, then per port, when
	// ExternalAddresses returns one address per ingress for each port (in ingress order):
	// OKG's Volcengine-CLB with EnableMultiIngress loops over the ingresses outside and the
	// ports inside. false: per port, then as ExternalAddresses returns them.
	IngressMajor bool
	// ServiceType is the type of the pod's Service: "" for LoadBalancer (every plugin whose
	// cloud controller answers with the Service's ingress), ClusterIP for a plugin whose
	// load balancer is bound by objects of its own (AmazonWebServices-NLB). A ClusterIP
	// Service keeps its type while the network is disabled.
	ServiceType corev1.ServiceType
	// Serve, when set, is the part of a run that goes beyond the Service: it makes the
	// plugin's other objects for the Service as it stands and tells whether the network is
	// Ready from what their controllers report, in place of the Service's ingress
	// (AmazonWebServices-NLB: TargetGroups, Listeners and TargetGroupBindings). The engine
	// calls it after it created the Service, and in every run in which the Service matches
	// the network-conf; while the network is disabled (run.Disabled) the run's status is left
	// as it was, as OKG leaves it. Its errors are the run's: a CloudError with the cloud's
	// message, an APICallError (reads: Unknown), a ParameterError.
	Serve func(ctx context.Context, c client.Client, run ServeRun) (ready bool, err error)
	// ServeObjects are the kinds Serve reads, one empty object of each: the manager caches
	// them (plugin.CachedReader) and Serve reads them through ServeRun.Reader.
	ServeObjects []client.Object
	// Results are the kinds in which other controllers answer for Serve's objects
	// (plugin.ResultObjectsReader): an answer runs the pod again.
	Results []plugin.ResultKind
}

// ServeRun is what Spec.Serve is given: the pod as the run sees it, its Service as it stands
// (owners, ports and load balancer annotation written), the pod's network-conf and whether
// its network is disabled (label game.kruise.io/network-disabled).
type ServeRun struct {
	Pod      *corev1.Pod
	Service  *corev1.Service
	Conf     networkstatus.Conf
	Disabled bool
	// Reader reads the kinds of Spec.ServeObjects: the manager's cache (Plugin.UseResultReader),
	// else the run's client.
	Reader client.Reader
}

// serviceType is the Spec's ServiceType with its default, LoadBalancer.
func (s Spec) serviceType() corev1.ServiceType {
	if s.ServiceType == "" {
		return corev1.ServiceTypeLoadBalancer
	}
	return s.ServiceType
}

// NoAvailablePorts is OKG's exhaustion message of SLB, Ali-NLB and HwCloud-ELB, its typo
// included: "there are no avaialable ports for [<ids>]".
func NoAvailablePorts(ids []string, _ int) string {
	return fmt.Sprintf("there are no avaialable ports for %v", ids)
}

// ParamFixed is the network-conf parameter that makes the Service the GameServerSet's, so
// that it outlives the pod (OKG's).
const ParamFixed = "Fixed"

// NoAvaliablePorts is OKG's exhaustion message of HwCloud-CCE-ELB, its own typo included
// (not NoAvailablePorts' one): "there are no avaliable ports for [<id>]".
func NoAvaliablePorts(ids []string, _ int) string {
	return fmt.Sprintf("there are no avaliable ports for %v", ids)
}

// PortNameWithProtocol is the port naming of SLB, HwCloud-ELB and Volcengine-CLB:
// "<port>-<protocol in lower case>", and for TCPUDP one of each.
func PortNameWithProtocol(p PortProtocol) []string {
	if p.Protocol == ProtocolTCPUDP {
		return []string{portText(p.Port) + "-tcp", portText(p.Port) + "-udp"}
	}
	return []string{portText(p.Port) + "-" + strings.ToLower(string(p.Protocol))}
}

// PortNamePlain is the port naming of Ali-NLB and JdCloud-NLB: "<port>".
func PortNamePlain(p PortProtocol) []string { return []string{portText(p.Port)} }

// ParamAnnotations is the network-conf parameter of extra Service annotations
// (Volcengine-CLB, JdCloud-NLB): "<key>:<value>,...".
const ParamAnnotations = "Annotations"

// ApplyAnnotations puts the Annotations parameter's entries on svc, over what is there.
// OKG skips an entry without ':' and sends any key to the API server, which refuses an
// invalid one with the whole Service; here an entry without ':' is skipped as in OKG and an
// invalid key is a ParameterError naming Annotations.
func ApplyAnnotations(conf networkstatus.Conf, svc *corev1.Service) error {
	for _, v := range conf.Values(ParamAnnotations) {
		for _, entry := range strings.Split(v, ",") {
			k, val, ok := strings.Cut(entry, ":")
			if !ok {
				continue
			}
			if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
				return plugin.ParamErrorf(ParamAnnotations, "%q is not an annotation key: %s", k, strings.Join(msgs, "; "))
			}
			svc.Annotations[k] = val
		}
	}
	return nil
}

// ParamAllocateLoadBalancerNodePorts is the network-conf parameter of Volcengine-CLB and
// JdCloud-NLB that sets the Service's allocateLoadBalancerNodePorts.
const ParamAllocateLoadBalancerNodePorts = "AllocateLoadBalancerNodePorts"

// ApplyAllocateNodePorts sets svc's allocateLoadBalancerNodePorts: true, or the
// AllocateLoadBalancerNodePorts parameter's value; one that is not a boolean is a
// ParameterError naming it.
func ApplyAllocateNodePorts(conf networkstatus.Conf, svc *corev1.Service) error {
	allocate := true
	if v, ok := conf.Last(ParamAllocateLoadBalancerNodePorts); ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return plugin.ParamErrorf(ParamAllocateLoadBalancerNodePorts, "%q is not a boolean, expected true or false", v)
		}
		allocate = b
	}
	svc.Spec.AllocateLoadBalancerNodePorts = &allocate
	return nil
}
