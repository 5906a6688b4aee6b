// Package lb is the engine of OpenKruise Game's family-A cloud network plugins: a per-pod
// Service of type LoadBalancer on a load balancer the pod's network-conf names (one of a
// list of ids), with the listener ports taken from a per-load-balancer range. OKG's
// AlibabaCloud-SLB, AlibabaCloud-NLB, HwCloud-ELB, Volcengine-CLB and JdCloud-NLB are the
// same mechanism with different keys; a provider package describes one of them with a Spec
// and gets a plugin.Plugin from New.
//
// None of these plugins calls a cloud API. Each writes a Kubernetes Service whose
// annotations name the load balancer; the provider's cloud controller reconciles it and
// reports the address in status.loadBalancer.ingress, which makes the network Ready.
//
// What the engine does, for valid input, is OKG's (objects and bytes), with these
// deliberate differences (docs/okg-compatibility.md):
//   - ports are chosen lowest-free, not at random;
//   - bad input (a network-conf that is not JSON, a Service of the pod's name that nobody
//     owns, a missing LB id list or PortProtocols, a protocol in lower case) is a
//     ParameterError naming the parameter, never a panic nor a Service the API server
//     refuses;
//   - the allocator is warmed from every Service on a configured load balancer, whoever
//     made it (the LB id annotation, or the cloud controller's label), so a restart never
//     hands out a port in use;
//   - ports are freed when the pod's Service is gone, not at a DELETE admission that may
//     still be refused.
package lb
