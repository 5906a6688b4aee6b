// Package hwcloud holds the Huawei Cloud network plugins: HwCloud-ELB, a per-pod
// LoadBalancer Service on one of the Elastic Load Balancers the network-conf names, built on
// the load-balancer engine (pkg/plugin/lb) with OKG's keys and checks; Huawei's cloud
// controller reconciles it.
package hwcloud
