// Package alibabacloud holds the Alibaba Cloud network plugins: AlibabaCloud-SLB, a per-pod
// LoadBalancer Service on one of the Classic Load Balancers (SLB) the network-conf names,
// built on the load-balancer engine (pkg/plugin/lb) with OKG's keys, annotations and
// checks. Alibaba's cloud controller (CCM) reconciles the Service into listeners on that
// SLB and reports its address in the Service's status.
package alibabacloud
