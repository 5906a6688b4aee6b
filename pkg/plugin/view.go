package plugin

import (
	corev1 "k8s.io/api/core/v1"
)

// NetworkView is a pod's network-conf as its plugin reads it, in terms every plugin shares,
// for the network-conf rules of root policies (spec.networkConfRules, the CEL variable
// network). A plugin without a notion leaves it empty.
type NetworkView struct {
	// LoadBalancerIDs are the load balancers the network-conf names, in its order.
	LoadBalancerIDs []string
	// Ports are the pod's ports it asks to expose (the ports behind a load balancer's
	// listeners, the container ports of HostPort and NodePort).
	Ports []ViewPort
	// Hosts are the Ingress hosts it asks for (rules and TLS).
	Hosts []string
	// Classes are the Ingress classes it asks for.
	Classes []string
	// CreatesCloudResources is true when the network makes a billable cloud resource that
	// the platform did not name: a load balancer the cloud creates for the pod, a new EIP, an
	// operator's cloud object.
	CreatesCloudResources bool
	// Params maps each of the fields above ("loadBalancerIDs", "ports", "hosts", "classes",
	// "createsCloudResources") to the network-conf parameters it comes from, for refusals
	// that name the parameter.
	Params map[string][]string
}

// ViewPort is one port of a NetworkView: its number and protocol (TCP, UDP, TCPUDP, ...,
// as the network-conf spells it).
type ViewPort struct {
	Port     int32
	Protocol string
}

// NetworkViewer is implemented by a plugin that describes what a pod's network-conf asks
// for (NetworkView). Optional: the Plugin interface is OKG's and stays unchanged. A plugin
// without it shows the rules only the raw parameters. NetworkView reads the pod only,
// writes nothing and claims nothing; a network-conf it cannot read is the error the plugin's
// run would return (a ParameterError naming the parameter).
type NetworkViewer interface {
	NetworkView(pod *corev1.Pod) (NetworkView, error)
}
