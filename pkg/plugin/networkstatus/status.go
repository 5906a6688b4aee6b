package networkstatus

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// NetworkState is the state of a pod's network: Ready, NotReady or Waiting (OKG).
type NetworkState string

const (
	// NetworkReady: the plugin published the addresses and they are usable.
	NetworkReady NetworkState = "Ready"
	// NetworkNotReady: the plugin has not (yet) built the network.
	NetworkNotReady NetworkState = "NotReady"
	// NetworkWaiting: OKG's intermediate state while a change is being applied.
	NetworkWaiting NetworkState = "Waiting"
)

// NetworkStatus is the value of the game.kruise.io/network-status annotation, OKG's
// v1alpha1.NetworkStatus with the same JSON tags and omitempty choices. The two times
// have omitempty but are structs, so a zero time is always written, as null.
type NetworkStatus struct {
	// NetworkType is the plugin name that produced the status (optional).
	NetworkType string `json:"networkType,omitempty"`
	// InternalAddresses are the pod-side addresses (usually the pod IP).
	InternalAddresses []NetworkAddress `json:"internalAddresses,omitempty"`
	// ExternalAddresses are the addresses players connect to (node IP, load balancer).
	ExternalAddresses []NetworkAddress `json:"externalAddresses,omitempty"`
	// DesiredNetworkState is the state the owner asks for (set by OKG, kept as is).
	DesiredNetworkState NetworkState `json:"desiredNetworkState,omitempty"`
	// CurrentNetworkState is the state the plugin observed.
	CurrentNetworkState NetworkState `json:"currentNetworkState,omitempty"`
	// CreateTime is when the status was first written (RFC 3339, null when zero).
	CreateTime metav1.Time `json:"createTime,omitempty"`
	// LastTransitionTime is when CurrentNetworkState last changed (RFC 3339, null when
	// zero).
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
}

// NetworkAddress is one address with its ports. IP is always written, even empty.
type NetworkAddress struct {
	// IP is an IPv4 or IPv6 address; "" when the address is only a name (EndPoint).
	IP string `json:"ip"`
	// Ports are the ports reachable at IP.
	Ports []NetworkPort `json:"ports,omitempty"`
	// PortRange is a contiguous range of ports, for plugins that hand out ranges.
	PortRange *NetworkPortRange `json:"portRange,omitempty"`
	// EndPoint is a DNS name or host for the address (Kubernetes-Ingress: the host).
	EndPoint string `json:"endPoint,omitempty"`
}

// NetworkPort is one named port. Port is an int-or-string (a number, or a path for
// Kubernetes-Ingress in some OKG versions).
type NetworkPort struct {
	// Name identifies the port, e.g. "game-7777" (HostPort: <container>-<port>).
	Name string `json:"name"`
	// Protocol is TCP, UDP or SCTP; omitted when not meaningful (Ingress).
	Protocol corev1.Protocol `json:"protocol,omitempty"`
	// Port is the port number.
	Port *intstr.IntOrString `json:"port,omitempty"`
}

// NetworkPortRange is a range of ports "<low>-<high>" for one protocol.
type NetworkPortRange struct {
	// Protocol is TCP, UDP or SCTP.
	Protocol corev1.Protocol `json:"protocol,omitempty"`
	// PortRange is "<low>-<high>", e.g. "8000-8009".
	PortRange string `json:"portRange,omitempty"`
}

// IntPort returns a *intstr.IntOrString holding the number p, for NetworkPort.Port.
func IntPort(p int32) *intstr.IntOrString {
	v := intstr.FromInt32(p)
	return &v
}
