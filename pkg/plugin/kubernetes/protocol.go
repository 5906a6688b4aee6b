package kubernetes

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// protocolTCPUDP is OKG's pseudo-protocol for one port served over TCP and UDP.
const protocolTCPUDP = "TCPUDP"

// parseProtocol checks an upper-case protocol name. allowTCPUDP admits OKG's TCPUDP.
// Lower-case names are rejected (the API server would reject "udp" later, after the
// port was allocated).
func parseProtocol(s string, allowTCPUDP bool) (string, error) {
	switch s {
	case string(corev1.ProtocolTCP), string(corev1.ProtocolUDP), string(corev1.ProtocolSCTP):
		return s, nil
	case protocolTCPUDP:
		if allowTCPUDP {
			return s, nil
		}
	}
	want := "TCP, UDP or SCTP"
	if allowTCPUDP {
		want = "TCP, UDP, SCTP or TCPUDP"
	}
	if up := strings.ToUpper(s); up != s && (up == "TCP" || up == "UDP" || up == "SCTP" || (allowTCPUDP && up == protocolTCPUDP)) {
		return "", fmt.Errorf("protocol %q must be upper case (%s)", s, up)
	}
	return "", fmt.Errorf("protocol %q is not one of %s", s, want)
}

// parsePort parses a port number 1-65535.
func parsePort(s string) (int32, error) {
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("port %q is not a number within 1-65535", s)
	}
	return int32(n), nil
}
