package kubernetes

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

const (
	// ParamContainerPorts is HostPort's parameter:
	// "<container>:<port>[/<PROTO>],<port>[/<PROTO>]...", one entry per container.
	ParamContainerPorts = "ContainerPorts"
	// PortSameAsHost in place of a port number makes the container port equal to the
	// allocated host port.
	PortSameAsHost = "SameAsHost"
)

const containerPortsForm = `"<container>:<port>[/<PROTO>],..." where <port> is 1-65535 or SameAsHost and <PROTO> is TCP (default), UDP, SCTP or TCPUDP`

// hostPortRequest is one requested host port: the container port (0 = SameAsHost) and
// the protocol (TCP, UDP, SCTP or TCPUDP).
type hostPortRequest struct {
	port     int32
	protocol string
}

// containerHostPorts is one ContainerPorts entry.
type containerHostPorts struct {
	container string
	ports     []hostPortRequest
}

// hostPortParams is the parsed network-conf of a HostPort pod, in the order written.
type hostPortParams struct {
	containers []containerHostPorts
}

// count returns how many host ports the pod needs (TCPUDP shares one).
func (p hostPortParams) count() int {
	n := 0
	for _, c := range p.containers {
		n += len(c.ports)
	}
	return n
}

// forContainer returns the ContainerPorts entry of the named container.
func (p hostPortParams) forContainer(name string) (containerHostPorts, bool) {
	for _, c := range p.containers {
		if c.container == name {
			return c, true
		}
	}
	return containerHostPorts{}, false
}

// hostPortParamsOf decodes the pod's network-conf and parses it against the pod's container
// names (parseHostPortParams); a network-conf that does not decode is that error.
func hostPortParamsOf(pod *corev1.Pod) (hostPortParams, error) {
	conf, err := networkstatus.ConfFromPod(pod)
	if err != nil {
		return hostPortParams{}, err
	}
	names := make([]string, 0, len(pod.Spec.Containers))
	for _, ctr := range pod.Spec.Containers {
		names = append(names, ctr.Name)
	}
	return parseHostPortParams(conf, names)
}

// parseHostPortParams parses HostPort's network-conf against the pod's container
// names. Errors are ParameterErrors naming ContainerPorts with the expected form; a
// conf with unknown parameters but valid ContainerPorts returns the params and a
// warning-level error.
func parseHostPortParams(conf networkstatus.Conf, containers []string) (hostPortParams, error) {
	var p hostPortParams
	for _, v := range conf.Values(ParamContainerPorts) {
		name, list, ok := strings.Cut(v, ":")
		if !ok || name == "" || list == "" {
			return hostPortParams{}, plugin.ParamErrorf(ParamContainerPorts, "value %q is not of the form %s", v, containerPortsForm)
		}
		if !slices.Contains(containers, name) {
			return hostPortParams{}, plugin.ParamErrorf(ParamContainerPorts, "container %q does not exist in the pod (containers: %s)", name, strings.Join(containers, ", "))
		}
		if slices.ContainsFunc(p.containers, func(c containerHostPorts) bool { return c.container == name }) {
			return hostPortParams{}, plugin.ParamErrorf(ParamContainerPorts, "container %q appears in more than one entry, list all its ports in one: %s", name, containerPortsForm)
		}
		c := containerHostPorts{container: name}
		for _, item := range strings.Split(list, ",") {
			portStr, proto, hasProto := strings.Cut(item, "/")
			r := hostPortRequest{protocol: "TCP"}
			if portStr != PortSameAsHost {
				port, err := parsePort(portStr)
				if err != nil {
					return hostPortParams{}, plugin.ParamErrorf(ParamContainerPorts, "container %q: %v, expected %s", name, err, containerPortsForm)
				}
				r.port = port
			}
			if hasProto {
				pr, err := parseProtocol(proto, true)
				if err != nil {
					return hostPortParams{}, plugin.ParamErrorf(ParamContainerPorts, "container %q port %s: %v", name, portStr, err)
				}
				r.protocol = pr
			}
			c.ports = append(c.ports, r)
		}
		p.containers = append(p.containers, c)
	}
	if len(p.containers) == 0 {
		return hostPortParams{}, plugin.ParamErrorf(ParamContainerPorts, "is required, expected %s", containerPortsForm)
	}
	return p, unknownParams(HostPortName, conf, ParamContainerPorts)
}

// isFatal reports whether a parse error must stop the plugin (anything but a warning).
func isFatal(err error) bool {
	return err != nil && !plugin.IsWarning(err)
}
