package jdcloud

import (
	"encoding/json"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/lb"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// NLBName is the network type of the plugin (OKG's name); NLBAlias its family.
const (
	NLBName  = "JdCloud-NLB"
	NLBAlias = "NLB-Network"
	// AnnotationNLBID names the NLB; JD Cloud's cloud controller also labels the Service
	// with it.
	AnnotationNLBID = "service.beta.kubernetes.io/jdcloud-loadbalancer-id"
	// AnnotationLBSpec is the JSON load-balancer spec JD Cloud's cloud controller reads.
	AnnotationLBSpec = "service.beta.kubernetes.io/jdcloud-load-balancer-spec"
)

// Network-conf parameters of JdCloud-NLB (OKG's names: two are annotation keys).
const (
	ParamNLBIDs    = "NlbIds"
	ParamAlgorithm = "service.beta.kubernetes.io/jdcloud-lb-algorithm"
	ParamIdleTime  = "service.beta.kubernetes.io/jdcloud-lb-idle-time"
)

// NLBSpec is JdCloud-NLB for the load-balancer engine: ids in NlbIds, the last NLB with
// room, ports named "<port>" (no TCPUDP), the load-balancer spec annotation with one
// listener per Service port, the user's Annotations. Where OKG has no exhaustion error (it
// creates the Service with an empty NLB id), exhausted ports are a ParameterError naming
// NlbIds.
func NLBSpec() lb.Spec {
	return lb.Spec{
		Name: NLBName, Alias: NLBAlias,
		IDsParam: ParamNLBIDs, IDAnnotation: AnnotationNLBID, IDLabel: AnnotationNLBID,
		OwnedAnnotations: []string{AnnotationLBSpec, AnnotationNLBID}, ProtectedAnnotations: []string{AnnotationLBSpec},
		PortNames:     lb.PortNamePlain,
		Params:        []string{lb.ParamAnnotations, ParamAlgorithm, ParamIdleTime, lb.ParamAllocateLoadBalancerNodePorts},
		Customize:     customizeNLB,
		ExhaustedType: plugin.ParameterError,
		Exhausted: func(ids []string, n int) string {
			return fmt.Sprintf("no load balancer of %v has %d free ports", ids, n)
		},
	}
}

// NewNLB returns the JdCloud-NLB plugin handing out listener ports of rng ([jdcloud.nlb]:
// max_port excluded, no blocked ports, as in OKG).
func NewNLB(rng lb.Range) *lb.Plugin {
	rng.MaxInclusive, rng.Block = false, nil
	return lb.New(NLBSpec(), rng)
}

// lbSpec is the JSON of AnnotationLBSpec, OKG's field order.
type lbSpec struct {
	Version          string     `json:"version"`
	LoadBalancerID   string     `json:"loadBalancerId"`
	LoadBalancerType string     `json:"loadBalancerType"`
	Internal         bool       `json:"internal"`
	Listeners        []listener `json:"listeners"`
}

type listener struct {
	Protocol                  string  `json:"protocol"`
	ConnectionIdleTimeSeconds int     `json:"connectionIdleTimeSeconds"`
	Backend                   backend `json:"backend"`
}

type backend struct {
	ProxyProtocol bool   `json:"proxyProtocol"`
	Algorithm     string `json:"algorithm"`
}

// customizeNLB writes OKG's JdCloud-NLB spec annotation (version v1, the NLB id, type nlb,
// public, one listener per Service port with the idle time, 600 s by default, and the
// algorithm, RoundRobin by default), the Annotations parameter, and
// allocateLoadBalancerNodePorts (true unless the parameter is false). An idle time that is
// not a number keeps the default, as in OKG.
func customizeNLB(conf networkstatus.Conf, svc *corev1.Service) error {
	algorithm := "RoundRobin"
	if v, ok := conf.Last(ParamAlgorithm); ok {
		algorithm = v
	}
	idle := 600
	if v, ok := conf.Last(ParamIdleTime); ok {
		if n, err := strconv.Atoi(v); err == nil {
			idle = n
		}
	}
	spec := lbSpec{Version: "v1", LoadBalancerID: svc.Annotations[AnnotationNLBID], LoadBalancerType: "nlb"}
	for _, p := range svc.Spec.Ports {
		spec.Listeners = append(spec.Listeners, listener{Protocol: string(p.Protocol), ConnectionIdleTimeSeconds: idle,
			Backend: backend{Algorithm: algorithm}})
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return plugin.Wrap(plugin.InternalError, err, "encode %s", AnnotationLBSpec)
	}
	svc.Annotations[AnnotationLBSpec] = string(b)
	if err := lb.ApplyAnnotations(conf, svc); err != nil {
		return err
	}
	if err := lb.ApplyAllocateNodePorts(conf, svc); err != nil {
		return err
	}
	return nil
}
