package kubernetes

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// annotationIngressClass is the Ingress annotation that named its class before
// spec.ingressClassName, which ingress controllers still honour.
const annotationIngressClass = "kubernetes.io/ingress.class"

var (
	_ plugin.NetworkViewer = (*HostPort)(nil)
	_ plugin.NetworkViewer = (*NodePort)(nil)
	_ plugin.NetworkViewer = (*Ingress)(nil)
)

// NetworkView describes the pod's network-conf for the network-conf rules: the container
// ports of ContainerPorts, each with its protocol as written. Errors: those of ValidateConf.
func (h *HostPort) NetworkView(pod *corev1.Pod) (plugin.NetworkView, error) {
	params, err := hostPortParamsOf(pod)
	if isFatal(err) {
		return plugin.NetworkView{}, err
	}
	v := plugin.NetworkView{Params: map[string][]string{"ports": {ParamContainerPorts}}}
	for _, c := range params.containers {
		for _, p := range c.ports {
			v.Ports = append(v.Ports, plugin.ViewPort{Port: p.port, Protocol: p.protocol})
		}
	}
	return v, nil
}

// NetworkView describes the pod's network-conf for the network-conf rules: the ports of
// PortProtocols. Errors: those of ValidateConf.
func (n *NodePort) NetworkView(pod *corev1.Pod) (plugin.NetworkView, error) {
	conf, err := networkstatus.ConfFromPod(pod)
	if err != nil {
		return plugin.NetworkView{}, err
	}
	params, err := parseNodePortParams(conf)
	if isFatal(err) {
		return plugin.NetworkView{}, err
	}
	v := plugin.NetworkView{Params: map[string][]string{"ports": {ParamPortProtocols}}}
	for _, p := range params.ports {
		v.Ports = append(v.Ports, plugin.ViewPort{Port: p.port, Protocol: string(p.protocol)})
	}
	return v, nil
}

// NetworkView describes the pod's network-conf for the network-conf rules: the hosts in lower
// case (Host, with <id> replaced by the pod's ordinal when the pod has a name, and TlsHosts),
// the classes (IngressClassName, and an Annotation entry kubernetes.io/ingress.class; none
// when the cluster's default class applies) and the Service's ports (Port, TCP). Errors:
// those of ValidateConf.
func (i *Ingress) NetworkView(pod *corev1.Pod) (plugin.NetworkView, error) {
	conf, err := networkstatus.ConfFromPod(pod)
	if err != nil {
		return plugin.NetworkView{}, err
	}
	params, warn := parseIngressParams(conf, i.guard)
	if isFatal(warn) {
		return plugin.NetworkView{}, warn
	}
	if pod.Name != "" {
		if params, err = params.expand(pod.Name); err != nil {
			return plugin.NetworkView{}, err
		}
	}
	v := plugin.NetworkView{Params: map[string][]string{"hosts": {ParamHost, ParamTLSHosts}, "classes": {ParamIngressClassName}, "ports": {ParamPort}}}
	// Hosts in lower case: DNS names compare without case, as the host checks do.
	for _, h := range append([]string{params.host}, params.tlsHosts...) {
		if h = strings.ToLower(h); h != "" && !slices.Contains(v.Hosts, h) {
			v.Hosts = append(v.Hosts, h)
		}
	}
	// The class by name, and the one an Annotation entry gives the Ingress the older way.
	if params.ingressClassName != nil {
		v.Classes = append(v.Classes, *params.ingressClassName)
	}
	if c, ok := params.annotations[annotationIngressClass]; ok && !slices.Contains(v.Classes, c) {
		v.Classes = append(v.Classes, c)
		v.Params["classes"] = append(v.Params["classes"], ParamAnnotation)
	}
	for _, p := range params.ports {
		v.Ports = append(v.Ports, plugin.ViewPort{Port: p, Protocol: string(corev1.ProtocolTCP)})
	}
	return v, nil
}
