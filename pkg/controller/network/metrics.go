package network

import (
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	policyv1alpha1 "github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
)

// Metrics are the network controller's Prometheus metrics, prefix npp_. The plugin label is
// the pod's game.kruise.io/network-type as recorded in the retry state when it is a
// registered plugin name (Options.NetworkTypes), "unknown" otherwise: a bounded set.
type Metrics struct {
	// retries is npp_network_retries_total{plugin}: network-trigger-time stamps, each of
	// which makes the webhook run the plugin once more.
	retries *prometheus.CounterVec
	// readySeconds is npp_network_ready_duration_seconds{plugin}: for pods whose network was
	// not Ready at first, seconds from the first not-Ready plugin run (the retry state's
	// since) to the controller seeing the network Ready.
	readySeconds *prometheus.HistogramVec
	// exhausted is npp_network_retry_windows_exhausted_total{plugin,action}: retry windows
	// that closed with the network not Ready, by exhausted action (Event, Recreate).
	exhausted *prometheus.CounterVec
	// recreates is npp_network_recreates_total{result}: Recreate exhausted actions by
	// result (RecreateEvicted, RecreateRefused, RecreateRateLimited, RecreateNoOwner); a
	// refused or rate-limited eviction is counted at each attempt.
	recreates *prometheus.CounterVec
	// rechecks is npp_network_rechecks_total{plugin}: network-trigger-time stamps on pods
	// whose Ready network the webhook could not check (an Unknown failure), each of which
	// makes the webhook check it once more.
	rechecks *prometheus.CounterVec
	// quietRetries is npp_network_retries_from_cache_total{plugin}: retries that the caches
	// showed would fail exactly as the last one (Options.Precheck), counted in memory
	// without a pod write; they are not in npp_network_retries_total.
	quietRetries *prometheus.CounterVec
	// queueWait is npp_network_queue_wait_seconds{lane}: seconds a pod waited in the
	// controller's ready queue, from being queued (or due) to a worker taking it, by lane:
	// "urgent" (its load balancer's address or its controller's answer just arrived) or
	// "other".
	queueWait *prometheus.HistogramVec
	// lateness is npp_network_retry_lateness_seconds{plugin}: for every retry on the backoff
	// schedule, real or counted from the caches, seconds from when it was due to when the
	// controller did it (a retry at once because the pod got its node or IP is not on the
	// schedule and is not observed).
	lateness *prometheus.HistogramVec
}

// NewMetrics creates the metrics and registers them with reg. Errors come from
// reg.Register, for example when they are already registered there.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "npp_network_retries_total",
			Help: "Network plugin retries triggered by the network controller (game.kruise.io/network-trigger-time stamps), by plugin.",
		}, []string{"plugin"}),
		readySeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "npp_network_ready_duration_seconds",
			Help:    "Seconds from a pod's first not-Ready network plugin run to its network being Ready, for pods that needed retries, by plugin.",
			Buckets: []float64{1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600, 1800, 3600},
		}, []string{"plugin"}),
		exhausted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "npp_network_retry_windows_exhausted_total",
			Help: "Retry windows that closed with the pod's network not Ready, by plugin and exhausted action (Event, Recreate).",
		}, []string{"plugin", "action"}),
		recreates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "npp_network_recreates_total",
			Help: "Recreate exhausted actions by result: evicted, refused (by a PodDisruptionBudget or an admission webhook; retried), rate_limited (the namespace's limit; retried), skipped_no_owner (never deleted).",
		}, []string{"result"}),
	}
	m.rechecks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "npp_network_rechecks_total",
		Help: "Checks triggered by the network controller on pods whose Ready network the webhook could not check (an API error or timeout that said nothing about the network; the network is kept Ready meanwhile), by plugin.",
	}, []string{"plugin"})
	m.quietRetries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "npp_network_retries_from_cache_total",
		Help: "Network plugin retries that the manager's caches showed would fail exactly as the last one, counted without a pod write, by plugin.",
	}, []string{"plugin"})
	m.lateness = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "npp_network_retry_lateness_seconds",
		Help:    "Seconds from when a network retry was due on its backoff schedule to when the network controller did it (a trigger stamp or a retry counted from the caches), by plugin.",
		Buckets: []float64{0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300},
	}, []string{"plugin"})
	m.queueWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "npp_network_queue_wait_seconds",
		Help:    "Seconds a pod waited in the network controller's ready queue before a worker took it, by lane: urgent (its load balancer's address or its controller's answer just arrived, served first) or other.",
		Buckets: []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
	}, []string{"lane"})
	for _, c := range []prometheus.Collector{m.retries, m.readySeconds, m.exhausted, m.recreates, m.rechecks, m.quietRetries, m.lateness, m.queueWait} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register network controller metrics: %w", err)
		}
	}
	return m, nil
}

// DefaultMetrics returns the metrics registered in controller-runtime's metrics.Registry,
// created on first use, so that any number of reconcilers share them. It panics if that
// registration fails (a name clash with another collector).
var DefaultMetrics = sync.OnceValue(func() *Metrics {
	m, err := NewMetrics(ctrlmetrics.Registry)
	if err != nil {
		panic(err)
	}
	return m
})

// Initialize creates every series of the plugins' labels at zero: retries, retries from the
// caches, rechecks, lateness and ready durations for each plugin, exhausted windows for each
// plugin and action, and Recreates for each result. A counter series that first appears at
// 1 has no increase to Prometheus (rate and increase need a previous sample), so without it
// the first exhausted window after a start would never raise the alert
// NetworkPluginPolicyRetryWindowsExhausted (config/prometheus).
func (m *Metrics) Initialize(plugins []string) {
	for _, p := range plugins {
		m.retries.WithLabelValues(p)
		m.quietRetries.WithLabelValues(p)
		m.rechecks.WithLabelValues(p)
		m.lateness.WithLabelValues(p)
		m.readySeconds.WithLabelValues(p)
		for _, a := range []policyv1alpha1.ExhaustedAction{policyv1alpha1.ExhaustedActionEvent, policyv1alpha1.ExhaustedActionRecreate} {
			m.exhausted.WithLabelValues(p, string(a))
		}
	}
	for _, r := range []string{RecreateEvicted, RecreateRefused, RecreateRateLimited, RecreateNoOwner} {
		m.recreates.WithLabelValues(r)
	}
}

// observeWait records seconds waited in the ready queue's lane (npp_network_queue_wait_seconds).
func (m *Metrics) observeWait(lane string, seconds float64) {
	m.queueWait.WithLabelValues(lane).Observe(seconds)
}
