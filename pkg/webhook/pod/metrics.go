package pod

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Outcomes of an admission request, the outcome label of npp_admission_decisions_total.
const (
	// OutcomeAllowed: the plugin succeeded (or there was nothing to change), the pod is
	// terminating (an UPDATE passed through with mode ""), or the request is a DELETE, which
	// is allowed untouched (the webhook configuration does not send DELETEs; see
	// AsyncWebhookName).
	OutcomeAllowed = "allowed"
	// OutcomeDenied: the plugin failed under a Synchronous decision at CREATE, or at an
	// UPDATE that changes network-type, network-conf or container ports.
	OutcomeDenied = "denied"
	// OutcomeAdmittedNotReady: the plugin failed at CREATE or UPDATE and the pod was admitted
	// with its network NotReady: an Asynchronous decision, or a Synchronous one at an UPDATE
	// that leaves the network's inputs alone (the mode label is then Synchronous).
	OutcomeAdmittedNotReady = "admitted_not_ready"
	// OutcomeKeptUnverified: the plugin failed at an UPDATE of a pod whose network was
	// Ready, with an error that says nothing about the network (plugin.Error.KeepsReady: a
	// read failed, a timeout, or a patch of the pod's existing Service or Ingress was not
	// accepted: throttled, failed, refused by another admission controller); the pod is
	// admitted with its network kept Ready and is checked again
	// (networkretry.UnverifiedAnnotation).
	OutcomeKeptUnverified = "kept_ready_unverified"
	// OutcomeAllowedWithWarnings: the plugin did its work but returned warnings only (an
	// unknown network-conf parameter, say); the pod is admitted with the plugin's changes and
	// an admission warning each, and the failure mode is not consulted.
	OutcomeAllowedWithWarnings = "allowed_with_warnings"
	// OutcomePassedThrough: the network type is neither a registered plugin name nor a
	// near-miss of one (an OKG cloud type such as AlibabaCloud-SLB): admitted untouched, with
	// mode "" and plugin label "unknown".
	OutcomePassedThrough = "passed_through"
	// OutcomeErrored: the request could not be handled (bad object, policy resolution error).
	OutcomeErrored = "errored"
)

// Metrics are the pod webhook's Prometheus metrics (prefix npp_, DESIGN.md section 7).
type Metrics struct {
	// Decisions counts admission requests by plugin, operation, mode and outcome. The plugin
	// label is a registered plugin name or "unknown" (plugin.Registry.MetricLabel), never the
	// pod's raw network-type: near-misses, passed-through types and undecodable requests are
	// "unknown".
	Decisions *prometheus.CounterVec
	// PluginDuration observes plugin calls in seconds by plugin (a registered name: only
	// registered plugins run), operation and result ("success", warnings included, or the
	// plugin error type).
	PluginDuration *prometheus.HistogramVec
}

// NewMetrics creates the metrics and registers them with reg (for the manager,
// sigs.k8s.io/controller-runtime/pkg/metrics.Registry); an already registered collector of
// the same name is reused, so two webhooks in one process (tests) share it.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		Decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "npp_admission_decisions_total",
			Help: "Pod admission requests handled by the network webhook, by plugin, operation, failure mode and outcome (allowed, allowed_with_warnings, denied, admitted_not_ready, passed_through, errored); plugin is a registered plugin name or unknown.",
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
