package network

import (
	"k8s.io/utils/clock"
)

// DefaultControllerName is the controller's name in the manager (its logger, its metrics
// labels and its workqueue) when Options.ControllerName is empty. Controller names must be
// unique within one manager.
const DefaultControllerName = "network-retry"

// EventReporter is the reportingController of the events.k8s.io/v1 Events the controller
// records; pass it to manager.GetEventRecorder. client-go derives the reportingInstance as
// EventReporter + "-" + hostname, which must stay within 128 characters.
const EventReporter = "policy.game.kruise.io/network-controller"

// Options configure a Reconciler. The zero value is usable.
type Options struct {
	// ControllerName names the controller in the manager; DefaultControllerName when empty.
	ControllerName string
	// MaxConcurrentReconciles is how many pods are reconciled in parallel; 1 when zero or
	// less.
	MaxConcurrentReconciles int
	// Clock gives the current time for retry schedules, condition transition times and
	// durations; the real clock when nil. Tests inject k8s.io/utils/clock/testing.FakeClock.
	Clock clock.PassiveClock
	// Metrics are the Prometheus metrics the controller updates; DefaultMetrics() (registered
	// in controller-runtime's metrics.Registry) when nil.
	Metrics *Metrics
}

// withDefaults returns o with its empty fields set to their defaults.
func (o Options) withDefaults() Options {
	if o.ControllerName == "" {
		o.ControllerName = DefaultControllerName
	}
	if o.MaxConcurrentReconciles < 1 {
		o.MaxConcurrentReconciles = 1
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Metrics == nil {
		o.Metrics = DefaultMetrics()
	}
	return o
}
