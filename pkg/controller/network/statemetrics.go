package network

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// DefaultTopNamespaces is StateCollectorOptions.TopNamespaces when zero: the manager's
// --metrics-top-namespaces default.
const DefaultTopNamespaces = 10

// stateListTimeout bounds the cache reads of one scrape: before the pod informer has synced,
// a read waits for it, and a scrape must not hang that long.
const stateListTimeout = 5 * time.Second

// StateCollectorOptions configure a StateCollector.
type StateCollectorOptions struct {
	// NetworkTypes are the registered plugins' names: only pods of these types are counted,
	// and they are the plugin label's values (a bounded set).
	NetworkTypes []string
	// TopNamespaces is how many namespaces, those with the most not-Ready networks, get a
	// series of npp_network_not_ready_pods_by_namespace; DefaultTopNamespaces when zero, none
	// when negative.
	TopNamespaces int
	// Clock gives the current time for ages; the real clock when nil.
	Clock clock.PassiveClock
}

// StateCollector is a prometheus.Collector of the game servers' network state, computed at
// each scrape from the manager's pod cache (the informer every replica keeps for its
// webhook), so every replica serves the same figures, leader or not. Its metrics:
//
//   - npp_network_pods{plugin,state}, gauge: game servers by plugin and PodState, every
//     state of every plugin exported, zero included;
//   - npp_network_not_ready_oldest_seconds{plugin}, gauge: seconds since the oldest
//     not-Ready network of the plugin was first seen not Ready (PodNetwork.NotReadySince),
//     0 when none is;
//   - npp_network_catch_up_backlog{plugin}, gauge: game servers no webhook replica has
//     decided, which the catch-up controller stamps;
//   - npp_network_not_ready_pods_by_namespace{namespace,plugin}, gauge: not-Ready networks
//     (NotReady, Retrying, Exhausted) of the TopNamespaces namespaces with the most of them
//     (ties by name), at most TopNamespaces x plugins series.
//
// Pods are read through the NetworkTypeIndex field index, without deep copies, so a scrape
// costs time in the game servers, not in every pod. A read that fails (the cache not synced
// within 5 seconds) makes the collector export nothing and log the error, rather than
// figures that would read as "no pods".
type StateCollector struct {
	reader client.Reader
	opts   StateCollectorOptions
	types  map[string]bool

	pods, oldest, backlog, byNamespace *prometheus.Desc
}

// NewStateCollector returns a StateCollector that lists pods through reader (the manager's
// cache, with RegisterIndexes applied).
func NewStateCollector(reader client.Reader, opts StateCollectorOptions) *StateCollector {
	if opts.TopNamespaces == 0 {
		opts.TopNamespaces = DefaultTopNamespaces
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	types := map[string]bool{}
	for _, t := range opts.NetworkTypes {
		types[t] = true
	}
	return &StateCollector{
		reader: reader, opts: opts, types: types,
		pods: prometheus.NewDesc("npp_network_pods",
			"Game servers (pods with a registered game.kruise.io/network-type, not terminating) by plugin and network state: Ready, Waiting, NotReady (no retry), Retrying, Exhausted, Pending (no network-status yet). Every replica serves it from its pod cache.",
			[]string{"plugin", "state"}, nil),
		oldest: prometheus.NewDesc("npp_network_not_ready_oldest_seconds",
			"Seconds since the oldest not-Ready network (NotReady, Retrying, Exhausted) of the plugin was first seen not Ready; 0 when none is. Every replica serves it from its pod cache.",
			[]string{"plugin"}, nil),
		backlog: prometheus.NewDesc("npp_network_catch_up_backlog",
			"Game servers that no webhook replica has decided (no policy.game.kruise.io/network-decision annotation), by plugin: the catch-up controller's backlog. Every replica serves it from its pod cache.",
			[]string{"plugin"}, nil),
		byNamespace: prometheus.NewDesc("npp_network_not_ready_pods_by_namespace",
			"Not-Ready networks (NotReady, Retrying, Exhausted) by namespace and plugin, for the namespaces with the most of them only (--metrics-top-namespaces). Every replica serves it from its pod cache.",
			[]string{"namespace", "plugin"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *StateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.pods
	ch <- c.oldest
	ch <- c.backlog
	ch <- c.byNamespace
}

// Collect implements prometheus.Collector.
func (c *StateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), stateListTimeout)
	defer cancel()
	s, err := c.Summarize(ctx)
	if err != nil {
		ctrllog.Log.WithName("network-state-metrics").Error(err, "Network state gauges not exported in this scrape")
		return
	}
	for _, plugin := range c.opts.NetworkTypes {
		p := s.Plugins[plugin]
		for _, st := range PodStates {
			ch <- prometheus.MustNewConstMetric(c.pods, prometheus.GaugeValue, float64(p.Pods[st]), plugin, string(st))
		}
		oldest := 0.0
		if !p.OldestNotReady.IsZero() {
			oldest = max(s.Now.Sub(p.OldestNotReady).Seconds(), 0)
		}
		ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, oldest, plugin)
		ch <- prometheus.MustNewConstMetric(c.backlog, prometheus.GaugeValue, float64(p.CatchUp), plugin)
	}
	for _, ns := range s.TopNamespaces(c.opts.TopNamespaces) {
		for plugin, n := range s.Namespaces[ns] {
			ch <- prometheus.MustNewConstMetric(c.byNamespace, prometheus.GaugeValue, float64(n), ns, plugin)
		}
	}
}

// PluginSummary are the counts of one plugin's game servers.
type PluginSummary struct {
	// Pods counts game servers by state.
	Pods map[PodState]int
	// OldestNotReady is the earliest PodNetwork.NotReadySince of a not-Ready network, zero
	// when none is.
	OldestNotReady time.Time
	// CatchUp counts game servers no webhook replica has decided.
	CatchUp int
}

// Summary are the game servers' networks at one time.
type Summary struct {
	// Now is when they were read.
	Now time.Time
	// Plugins are the counts by plugin name.
	Plugins map[string]*PluginSummary
	// Namespaces counts not-Ready networks by namespace and plugin; namespaces without one
	// are absent.
	Namespaces map[string]map[string]int
}

// Summarize reads every game server of the collector's network types from its reader and
// counts them (Classify). Errors are the reader's.
func (c *StateCollector) Summarize(ctx context.Context) (*Summary, error) {
	s := &Summary{Now: c.opts.Clock.Now(), Plugins: map[string]*PluginSummary{}, Namespaces: map[string]map[string]int{}}
	for _, plugin := range c.opts.NetworkTypes {
		s.Plugins[plugin] = &PluginSummary{Pods: map[PodState]int{}}
		var pods corev1.PodList
		if err := c.reader.List(ctx, &pods, client.MatchingFields{NetworkTypeIndex: plugin}, client.UnsafeDisableDeepCopy); err != nil {
			return nil, err
		}
		for i := range pods.Items {
			s.Add(&pods.Items[i], c.types)
		}
	}
	return s, nil
}

// Add counts pod (Classify at s.Now with types) into s; a pod Classify rejects is skipped.
func (s *Summary) Add(pod *corev1.Pod, types map[string]bool) {
	n, ok := Classify(pod, types, s.Now)
	if !ok {
		return
	}
	p := s.Plugins[n.Plugin]
	if p == nil {
		p = &PluginSummary{Pods: map[PodState]int{}}
		s.Plugins[n.Plugin] = p
	}
	p.Pods[n.State]++
	if n.CatchUp {
		p.CatchUp++
	}
	if !n.State.NotReady() {
		return
	}
	if !n.NotReadySince.IsZero() && (p.OldestNotReady.IsZero() || n.NotReadySince.Before(p.OldestNotReady)) {
		p.OldestNotReady = n.NotReadySince
	}
	if s.Namespaces[pod.Namespace] == nil {
		s.Namespaces[pod.Namespace] = map[string]int{}
	}
	s.Namespaces[pod.Namespace][n.Plugin]++
}

// TopNamespaces returns at most n namespaces of s.Namespaces, those with the most not-Ready
// networks first, ties by name; none when n is zero or less.
func (s *Summary) TopNamespaces(n int) []string {
	if n <= 0 {
		return nil
	}
	type entry struct {
		ns    string
		count int
	}
	all := make([]entry, 0, len(s.Namespaces))
	for ns, byPlugin := range s.Namespaces {
		total := 0
		for _, v := range byPlugin {
			total += v
		}
		all = append(all, entry{ns, total})
	}
	slices.SortFunc(all, func(a, b entry) int {
		return cmp.Or(cmp.Compare(b.count, a.count), cmp.Compare(a.ns, b.ns))
	})
	out := make([]string, 0, min(n, len(all)))
	for _, e := range all[:min(n, len(all))] {
		out = append(out, e.ns)
	}
	return out
}

var _ prometheus.Collector = (*StateCollector)(nil)
