package policy

import (
	"time"

	"github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
)

// Built-in defaults for groups no matching policy sets.
const (
	// DefaultTimeout is the plugin deadline inside admission: 8s.
	DefaultTimeout = 8 * time.Second
	// DefaultWindow is the retry window: 60s, OKG's NETWORK_TOTAL_WAITING_TIME.
	DefaultWindow = 60 * time.Second
	// DefaultInterval is the first retry delay: 5s, OKG's NETWORK_PROBE_INTERVAL_TIME.
	DefaultInterval = 5 * time.Second
	// DefaultMaxInterval caps the retry backoff: 60s.
	DefaultMaxInterval = 60 * time.Second
	// DefaultExhaustedAction is what happens when the window closes: Event.
	DefaultExhaustedAction = v1alpha1.ExhaustedActionEvent
)

// Decision is how one plugin call for one pod is handled.
type Decision struct {
	// Mode is what a plugin failure does: deny (Synchronous) or admit NotReady and retry
	// (Asynchronous).
	Mode v1alpha1.FailureMode
	// Timeout is the deadline of the plugin call.
	Timeout time.Duration
	// ReadinessGate says whether the webhook adds the game.kruise.io/network-ready readiness
	// gate at CREATE.
	ReadinessGate bool
	// Retry is the background retry schedule of an Asynchronous network.
	Retry RetrySchedule
	// Explanation says where each group came from and why other policies lost.
	Explanation Explanation
}

// RetrySchedule is the retry group of a Decision.
type RetrySchedule struct {
	// Window is how long after the first failure the network is retried.
	Window time.Duration
	// Interval is the first retry delay; each further delay doubles up to MaxInterval.
	Interval time.Duration
	// MaxInterval caps the delay between retries.
	MaxInterval time.Duration
	// ExhaustedAction is what happens when Window has passed and the network is not Ready.
	ExhaustedAction v1alpha1.ExhaustedAction
}

// defaultMode is the plugin's built-in failure mode.
func defaultMode(p Plugin) v1alpha1.FailureMode {
	if p.Synchronous {
		return v1alpha1.FailureModeSynchronous
	}
	return v1alpha1.FailureModeAsynchronous
}

func defaultDecision(p Plugin) Decision {
	return Decision{
		Mode:    defaultMode(p),
		Timeout: DefaultTimeout,
		Retry: RetrySchedule{
			Window:          DefaultWindow,
			Interval:        DefaultInterval,
			MaxInterval:     DefaultMaxInterval,
			ExhaustedAction: DefaultExhaustedAction,
		},
	}
}
