package lb

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
)

// ParamPortProtocols is the network-conf parameter listing the pod's ports, OKG's
// "<port>[/<PROTOCOL>],..." with TCP as the default protocol and TCPUDP for both.
const ParamPortProtocols = "PortProtocols"

// PortProtocol is one entry of PortProtocols: a pod (target) port and its protocol, TCP,
// UDP, SCTP or TCPUDP.
type PortProtocol struct {
	// Port is the pod's port, 1-65535.
	Port int32
	// Protocol is TCP, UDP, SCTP or ProtocolTCPUDP.
	Protocol corev1.Protocol
}

// ProtocolTCPUDP is the PortProtocols protocol that asks for both TCP and UDP on one port
// (OKG's).
const ProtocolTCPUDP corev1.Protocol = "TCPUDP"

// ParsePortProtocols parses a PortProtocols value. OKG skips an entry whose port is not a
// number and takes the protocol verbatim, so that a lower-case one makes a Service the API
// server refuses; here each is a ParameterError naming PortProtocols and the expected form,
// as is an empty list (OKG: a Service without ports, refused). allowTCPUDP is false for the
// plugins whose Service cannot carry both protocols on one port (Ali-NLB, Volcengine-CLB,
// JdCloud-NLB: OKG makes an invalid Service).
func ParsePortProtocols(value string, allowTCPUDP bool) ([]PortProtocol, error) {
	expected := `expected "<port>[/<PROTOCOL>],..." with port 1-65535 and PROTOCOL TCP (the default), UDP or SCTP`
	if allowTCPUDP {
		expected = `expected "<port>[/<PROTOCOL>],..." with port 1-65535 and PROTOCOL TCP (the default), UDP, SCTP or TCPUDP`
	}
	var out []PortProtocol
	for _, entry := range strings.Split(value, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		portText, proto, hasProto := strings.Cut(entry, "/")
		port, err := strconv.ParseInt(portText, 10, 32)
		if err != nil || port < 1 || port > 65535 {
			return nil, plugin.ParamErrorf(ParamPortProtocols, "%q is not a port, %s", entry, expected)
		}
		p := PortProtocol{Port: int32(port), Protocol: corev1.ProtocolTCP}
		if hasProto {
			p.Protocol = corev1.Protocol(proto)
			switch p.Protocol {
			case corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP:
			case ProtocolTCPUDP:
				if !allowTCPUDP {
					return nil, plugin.ParamErrorf(ParamPortProtocols, "%q: TCPUDP is not supported by this plugin, %s", entry, expected)
				}
			default:
				return nil, plugin.ParamErrorf(ParamPortProtocols, "%q has protocol %q, %s", entry, proto, expected)
			}
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, plugin.ParamErrorf(ParamPortProtocols, "is required, %s", expected)
	}
	return out, nil
}

// String formats p as in PortProtocols.
func (p PortProtocol) String() string { return fmt.Sprintf("%d/%s", p.Port, p.Protocol) }
