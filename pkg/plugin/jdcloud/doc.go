// Package jdcloud holds the JD Cloud network plugins: JdCloud-NLB, a per-pod LoadBalancer
// Service on one of the Network Load Balancers the network-conf names, built on the
// load-balancer engine (pkg/plugin/lb) with OKG's keys; JD Cloud's cloud controller reads the
// load-balancer spec annotation and reconciles it.
package jdcloud
