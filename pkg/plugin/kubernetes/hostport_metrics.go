package kubernetes

import "github.com/prometheus/client_golang/prometheus"

// Metric names of the HostPort plugin's usage, exported for tests that scrape them.
const (
	// MetricHostPortAllocations is a gauge of (pod, host port) pairs inside the range,
	// label source: "observed" (pods seen through the pod informer, terminating pods
	// included) or "reserved" (this replica's unexpired reservations for CREATEs its
	// informer has not shown yet).
	MetricHostPortAllocations = "npp_hostport_allocations"
	// MetricHostPortPortsInUse is a gauge of the distinct ports of the range held by at
	// least one observed pod (reservations not included).
	MetricHostPortPortsInUse = "npp_hostport_ports_in_use"
	// MetricHostPortRangePorts is a gauge of the ports in the range, max_port - min_port + 1
	// of the provider configuration: the denominator of MetricHostPortPortsInUse.
	MetricHostPortRangePorts = "npp_hostport_range_ports"
)

var (
	hostPortAllocationsDesc = prometheus.NewDesc(MetricHostPortAllocations,
		"Kubernetes-HostPort (pod, host port) pairs inside the range, by source: observed (pods in the pod informer) or reserved (CREATEs admitted by this replica, not yet in its informer).",
		[]string{"source"}, nil)
	hostPortPortsInUseDesc = prometheus.NewDesc(MetricHostPortPortsInUse,
		"Distinct host ports of the Kubernetes-HostPort range held by at least one pod in the pod informer.",
		nil, nil)
	hostPortRangePortsDesc = prometheus.NewDesc(MetricHostPortRangePorts,
		"Ports in the Kubernetes-HostPort range (max_port - min_port + 1 of the provider configuration).",
		nil, nil)
)

// hostPortCollector reads the allocator under its lock at scrape time, so admission
// pays nothing for the metrics.
type hostPortCollector struct{ h *HostPort }

// Collector returns a prometheus.Collector of MetricHostPortAllocations,
// MetricHostPortPortsInUse and MetricHostPortRangePorts for this plugin; register it once (the manager registers
// it with controller-runtime's metrics.Registry). A scrape also drops the expired
// reservations.
func (h *HostPort) Collector() prometheus.Collector { return hostPortCollector{h: h} }

// Describe sends the two descriptors.
func (c hostPortCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- hostPortAllocationsDesc
	ch <- hostPortPortsInUseDesc
	ch <- hostPortRangePortsDesc
}

// Collect sends the current usage.
func (c hostPortCollector) Collect(ch chan<- prometheus.Metric) {
	a := c.h.allocator()
	u := a.usageNow()
	ch <- prometheus.MustNewConstMetric(hostPortAllocationsDesc, prometheus.GaugeValue, float64(u.ObservedPairs), "observed")
	ch <- prometheus.MustNewConstMetric(hostPortAllocationsDesc, prometheus.GaugeValue, float64(u.ReservedPairs), "reserved")
	ch <- prometheus.MustNewConstMetric(hostPortPortsInUseDesc, prometheus.GaugeValue, float64(u.ObservedPorts))
	ch <- prometheus.MustNewConstMetric(hostPortRangePortsDesc, prometheus.GaugeValue, float64(len(a.usage))) // fixed at Init
}
