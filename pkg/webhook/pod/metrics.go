package pod

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Outcomes of an admission request, the outcome label of npp_admission_decisions_total.
const (
	// OutcomeAllowed: the plugin succeeded (or there was nothing to change).
	OutcomeAllowed = "allowed"
	// OutcomeDenied: the plugin failed under a Synchronous decision.
	OutcomeDenied = "denied"
	// OutcomeAdmittedNotReady: the plugin failed under an Asynchronous decision.
	OutcomeAdmittedNotReady = "admitted_not_ready"
	// OutcomeErrored: the request could not be handled (bad object, policy resolution error).
	OutcomeErrored = "errored"
)

// Metrics are the pod webhook's Prometheus metrics (prefix npp_, DESIGN.md section 7).
type Metrics struct {
	// Decisions counts admission requests by plugin, operation, mode and outcome.
	Decisions *prometheus.CounterVec
	// PluginDuration observes plugin calls in seconds by plugin, operation and result
	// ("success" or the plugin error type).
	PluginDuration *prometheus.HistogramVec
}

// NewMetrics creates the metrics and registers them with reg (for the manager,
// sigs.k8s.io/controller-runtime/pkg/metrics.Registry); an already registered collector of
// the same name is reused, so two webhooks in one process (tests) share it.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		Decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "npp_admission_decisions_total",
			Help: "Pod admission requests handled by the network webhook, by plugin, operation, failure mode and outcome (allowed, denied, admitted_not_ready, errored).",
		}, []string{"plugin", "operation", "mode", "outcome"}),
		PluginDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "npp_plugin_duration_seconds",
			Help:    "Duration of network plugin calls in the pod webhook, by plugin, operation and result (success or the plugin error type).",
			Buckets: []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
		}, []string{"plugin", "operation", "result"}),
	}
	var err error
	if m.Decisions, err = register(reg, m.Decisions); err != nil {
		return nil, err
	}
	if m.PluginDuration, err = register(reg, m.PluginDuration); err != nil {
		return nil, err
	}
	return m, nil
}

func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		return c, err
	}
	return c, nil
}
