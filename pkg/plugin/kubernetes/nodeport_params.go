package kubernetes

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

const (
	// ParamPortProtocols is NodePort's parameter "<port>[/<PROTO>],...": the pod
	// ports the Service exposes.
	ParamPortProtocols = "PortProtocols"
	// ParamFixed ("true"/"false", default false) keeps the per-pod Service (and
	// Ingress) when the pod is deleted; OKG's FixedKey.
	ParamFixed = "Fixed"
	// ParamAllowNotReadyContainers is "<container>,<container>...": containers whose
	// being not ready does not take the pod out of its Service (OKG's
	// AllowNotReadyContainers).
	ParamAllowNotReadyContainers = "AllowNotReadyContainers"
)

const portProtocolsForm = `"<port>[/<PROTO>],..." where <port> is 1-65535 and <PROTO> is TCP (default), UDP or SCTP`

// servicePortSpec is one exposed port.
type servicePortSpec struct {
	port     int32
	protocol corev1.Protocol
}

// nodePortParams is the parsed network-conf of a NodePort pod.
type nodePortParams struct {
	ports         []servicePortSpec
	fixed         bool
	allowNotReady []string
}

// canonical is the string the Service hash is computed from: ports and Fixed.
func (p nodePortParams) canonical() string {
	var b strings.Builder
	for _, sp := range p.ports {
		fmt.Fprintf(&b, "%d/%s,", sp.port, sp.protocol)
	}
	fmt.Fprintf(&b, "fixed=%t", p.fixed)
	return b.String()
}

// parseNodePortParams parses NodePort's network-conf. PortProtocols is required (a
// conf with HostPort's ContainerPorts instead says so); duplicate port/protocol pairs,
// bad numbers, lower-case protocols and a non-boolean Fixed are ParameterErrors naming
// the parameter. Unknown parameters give a warning-level error with the params.
func parseNodePortParams(conf networkstatus.Conf) (nodePortParams, error) {
	var p nodePortParams
	values := conf.Values(ParamPortProtocols)
	switch {
	case len(values) == 0 && len(conf.Values(ParamContainerPorts)) > 0:
		return p, plugin.ParamErrorf(ParamPortProtocols, "is required, expected %s; ContainerPorts is a parameter of %s, not of %s", portProtocolsForm, HostPortName, NodePortName)
	case len(values) == 0:
		return p, plugin.ParamErrorf(ParamPortProtocols, "is required, expected %s", portProtocolsForm)
	case len(values) > 1:
		return p, plugin.ParamErrorf(ParamPortProtocols, "is given %d times, list all ports in one value: %s", len(values), portProtocolsForm)
	}
	for _, item := range strings.Split(values[0], ",") {
		portStr, proto, hasProto := strings.Cut(item, "/")
		port, err := parsePort(portStr)
		if err != nil {
			return nodePortParams{}, plugin.ParamErrorf(ParamPortProtocols, "%v, expected %s", err, portProtocolsForm)
		}
		sp := servicePortSpec{port: port, protocol: corev1.ProtocolTCP}
		if hasProto {
			pr, err := parseProtocol(proto, false)
			if err != nil {
				return nodePortParams{}, plugin.ParamErrorf(ParamPortProtocols, "port %d: %v", port, err)
			}
			sp.protocol = corev1.Protocol(pr)
		}
		if slices.Contains(p.ports, sp) {
			return nodePortParams{}, plugin.ParamErrorf(ParamPortProtocols, "port %d/%s is listed twice", sp.port, sp.protocol)
		}
		p.ports = append(p.ports, sp)
	}
	fixed, err := parseBoolParam(conf, ParamFixed)
	if err != nil {
		return nodePortParams{}, err
	}
	p.fixed = fixed
	for _, v := range conf.Values(ParamAllowNotReadyContainers) {
		for _, name := range strings.Split(v, ",") {
			if name = strings.TrimSpace(name); name != "" && !slices.Contains(p.allowNotReady, name) {
				p.allowNotReady = append(p.allowNotReady, name)
			}
		}
	}
	return p, unknownParams(NodePortName, conf, ParamPortProtocols, ParamFixed, ParamAllowNotReadyContainers)
}

// parseBoolParam parses an optional boolean parameter given at most once (default
// false), accepting strconv.ParseBool's forms.
func parseBoolParam(conf networkstatus.Conf, name string) (bool, error) {
	values := conf.Values(name)
	switch len(values) {
	case 0:
		return false, nil
	case 1:
		b, err := strconv.ParseBool(values[0])
		if err != nil {
			return false, plugin.ParamErrorf(name, "value %q must be \"true\" or \"false\"", values[0])
		}
		return b, nil
	default:
		return false, plugin.ParamErrorf(name, "is given %d times, expected once", len(values))
	}
}

// servicePortName names a Service port: the port number, as OKG does, with the
// protocol appended ("7777-udp") when the same number is exposed for two protocols.
func servicePortName(sp servicePortSpec, all []servicePortSpec) string {
	name := strconv.Itoa(int(sp.port))
	for _, o := range all {
		if o.port == sp.port && o.protocol != sp.protocol {
			return name + "-" + strings.ToLower(string(sp.protocol))
		}
	}
	return name
}
