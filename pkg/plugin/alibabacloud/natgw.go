package alibabacloud

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/eip"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// NATGWName is the network type of the NAT gateway plugin (OKG's name); NATGWAlias its family.
const (
	NATGWName  = "AlibabaCloud-NATGW"
	NATGWAlias = "NATGW-Network"
)

// Pod annotations that AlibabaCloud-NATGW writes for Alibaba's DNAT controller (OKG's keys):
// the controller maps the pod's ports on the cluster's NAT gateway and reports the mapping
// in the PodDNAT object of the pod's name.
const (
	AnnotationPodDNAT = "k8s.aliyun.com/pod-dnat"
	// AnnotationDNATExposePort is the Ports parameter, verbatim ("7777,7778"; "" without one).
	AnnotationDNATExposePort = "k8s.aliyun.com/pod-dnat-expose-port"
	// AnnotationDNATExposeProtocol is the Protocol parameter, verbatim, when given.
	AnnotationDNATExposeProtocol = "k8s.aliyun.com/pod-dnat-expose-protocol"
	// AnnotationDNATFixed is the Fixed parameter, verbatim, when given.
	AnnotationDNATFixed = "k8s.aliyun.com/pod-dnat-fixed"
)

// Network-conf parameters of AlibabaCloud-NATGW (OKG's names).
const (
	ParamPorts    = "Ports"
	ParamProtocol = "Protocol"
	ParamFixed    = "Fixed"
)

// NewNATGW returns the AlibabaCloud-NATGW plugin (pkg/plugin/eip's engine). At CREATE it writes
// AnnotationPodDNAT "true", AnnotationDNATExposePort (Ports, "" without it), and
// AnnotationDNATExposeProtocol and AnnotationDNATFixed when Protocol and Fixed are given, all
// verbatim (a later entry of a name over an earlier one); an unknown parameter is a warning.
// At UPDATE it is Waiting first, then reads the PodDNAT of the pod's name
// (alibabacloud.com/v1beta1): missing, or without status.entries, is no answer yet; else one
// internal and one external address per entry (internalIP and externalIP, the port named
// after internalPort, ports as strings, the protocol ipProtocol upper-cased, as OKG writes
// them), and Ready once there are as many entries as comma-separated values in the pod's
// AnnotationDNATExposePort (before that the state is left as it was: OKG's rule). The
// controller creates forward entries on the NAT gateway (createsCloudResources). A
// network-conf that is not JSON is a parameterError (OKG panics).
func NewNATGW() *eip.Plugin {
	return eip.New(eip.Spec{Name: NATGWName, Alias: NATGWAlias,
		Ask: func(pod *corev1.Pod, conf networkstatus.Conf) error {
			ports, _ := conf.Last(ParamPorts)
			pod.Annotations[AnnotationPodDNAT] = "true"
			pod.Annotations[AnnotationDNATExposePort] = ports
			if v, ok := conf.Last(ParamProtocol); ok {
				pod.Annotations[AnnotationDNATExposeProtocol] = v
			}
			if v, ok := conf.Last(ParamFixed); ok {
				pod.Annotations[AnnotationDNATFixed] = v
			}
			return eip.Unread(NATGWName, conf, []string{ParamPorts, ParamProtocol, ParamFixed})
		},
		Read:    readPodDNAT,
		Objects: []plugin.ResultKind{{Object: resultObject(PodDNATKind), Answer: [][]string{{"status", "entries"}}}},
	})
}

// readPodDNAT is AlibabaCloud-NATGW's answer (NewNATGW).
func readPodDNAT(ctx context.Context, c client.Reader, pod *corev1.Pod) (internal, external []networkstatus.NetworkAddress, ready, ok bool, err error) {
	obj, found, err := readResult(ctx, c, PodDNATKind, pod)
	if err != nil || !found {
		return nil, nil, false, false, err
	}
	entries, _, _ := unstructured.NestedSlice(obj.Object, "status", "entries")
	if len(entries) == 0 {
		return nil, nil, false, false, nil
	}
	field := func(e map[string]any, name string) string {
		v, _ := e[name].(string)
		return v
	}
	for _, raw := range entries {
		e, _ := raw.(map[string]any)
		protocol := corev1.Protocol(strings.ToUpper(field(e, "ipProtocol")))
		in, out := intstr.FromString(field(e, "internalPort")), intstr.FromString(field(e, "externalPort"))
		name := field(e, "internalPort")
		internal = append(internal, networkstatus.NetworkAddress{IP: field(e, "internalIP"),
			Ports: []networkstatus.NetworkPort{{Name: name, Protocol: protocol, Port: &in}}})
		external = append(external, networkstatus.NetworkAddress{IP: field(e, "externalIP"),
			Ports: []networkstatus.NetworkPort{{Name: name, Protocol: protocol, Port: &out}}})
	}
	ready = len(entries) == len(strings.Split(pod.Annotations[AnnotationDNATExposePort], ","))
	return internal, external, ready, true, nil
}
