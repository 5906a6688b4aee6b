// Package volcengine holds the Volcengine network plugins: Volcengine-CLB, a per-pod
// LoadBalancer Service on one of the Classic Load Balancers the network-conf names, built on
// the load-balancer engine (pkg/plugin/lb) with OKG's keys; Volcengine's cloud controller
// reconciles it.
package volcengine
