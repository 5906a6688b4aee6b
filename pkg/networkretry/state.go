package networkretry

import (
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
)

// Annotation is the pod annotation that holds State as JSON.
const Annotation = policyv1alpha1.AnnotationNetworkRetry

// BuiltInDefault is State.Policy when no policy supplied the retry schedule.
const BuiltInDefault = "built-in default"

// State is the retry state of one pod's network, serialized as JSON in Annotation. Times are
// RFC 3339 with second precision (metav1.Time); durations are Go duration strings
// (metav1.Duration), as in the NetworkPluginPolicy API.
type State struct {
	// Plugin is the network plugin's name (the pod's game.kruise.io/network-type).
	Plugin string `json:"plugin"`
	// Policy names the policy that supplied the retry schedule,
	// "<namespace>/<name>@<generation>", or BuiltInDefault.
	Policy string `json:"policy"`
	// Since is when the network was first seen not Ready by the webhook, the start of the
	// window; it is kept across attempts, never reset while the pod lives.
	Since metav1.Time `json:"since"`
	// LastAttempt is when the webhook last ran the plugin for this pod.
	LastAttempt metav1.Time `json:"lastAttempt"`
	// Attempts counts the plugin runs that left the network not Ready, the first included.
	Attempts int32 `json:"attempts"`
	// LastError is the last plugin failure, nil when the plugin succeeded but the network is
	// not Ready yet (for example a NodePort Service waiting for its node port).
	LastError *Error `json:"lastError,omitempty"`
	// Window, Interval and MaxInterval are the Decision's retry schedule at the last attempt.
	Window      metav1.Duration `json:"window"`
	Interval    metav1.Duration `json:"interval"`
	MaxInterval metav1.Duration `json:"maxInterval"`
	// ExhaustedAction is what the network controller does when the window closes.
	ExhaustedAction policyv1alpha1.ExhaustedAction `json:"exhaustedAction"`
	// Exhausted is when the network controller found the window closed and took the
	// ExhaustedAction; set once, so the action is never taken twice.
	Exhausted *metav1.Time `json:"exhausted,omitempty"`
}

// Error is a plugin failure as recorded in State.
type Error struct {
	// Type is the plugin error category: apiCallError, internalError, parameterError,
	// notImplementedError, retryError or timeout (OKG's categories plus timeout).
	Type string `json:"type"`
	// Message is the error's text.
	Message string `json:"message"`
}

// FromPod returns the State in pod's Annotation, nil when the pod has none, and an error
// naming the annotation when its value is not a valid State.
func FromPod(pod *corev1.Pod) (*State, error) {
	v, ok := pod.Annotations[Annotation]
	if !ok {
		return nil, nil
	}
	return Decode(v)
}

// Decode parses a State from its JSON form; the error names the annotation and says what is
// wrong (not JSON, or a window, interval or maxInterval that is not positive, or maxInterval
// shorter than interval).
func Decode(v string) (*State, error) {
	var s State
	if err := json.Unmarshal([]byte(v), &s); err != nil {
		return nil, fmt.Errorf("annotation %s: want a JSON retry state: %w", Annotation, err)
	}
	if s.Window.Duration <= 0 || s.Interval.Duration <= 0 || s.MaxInterval.Duration < s.Interval.Duration {
		return nil, fmt.Errorf("annotation %s: want window > 0, interval > 0 and maxInterval >= interval, got window %s, interval %s, maxInterval %s",
			Annotation, s.Window.Duration, s.Interval.Duration, s.MaxInterval.Duration)
	}
	return &s, nil
}

// Encode returns the JSON form of s for Annotation.
func (s *State) Encode() (string, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return "", fmt.Errorf("encode %s: %w", Annotation, err)
	}
	return string(b), nil
}

// Deadline is when the window closes: Since + Window.
func (s *State) Deadline() time.Time { return s.Since.Add(s.Window.Duration) }

// Backoff is the delay after attempt n (1-based) before the next one: Interval doubled n-1
// times, capped at MaxInterval. Attempt 0 or less has no delay.
func (s *State) Backoff(n int32) time.Duration {
	if n <= 0 {
		return 0
	}
	d := s.Interval.Duration
	for i := int32(1); i < n; i++ {
		if d >= s.MaxInterval.Duration/2 {
			return s.MaxInterval.Duration
		}
		d *= 2
	}
	return min(d, s.MaxInterval.Duration)
}

// NextAttempt is when the network controller should trigger the next retry:
// LastAttempt + Backoff(Attempts).
func (s *State) NextAttempt() time.Time {
	return s.LastAttempt.Add(s.Backoff(s.Attempts))
}

// Record returns the State after one more plugin run at now that left the network not Ready,
// with pluginErr (nil when the plugin succeeded) and the schedule of the current Decision.
// prev is the pod's State before the run (nil if none): its Since is kept, its Attempts
// counted on; Exhausted is kept so that the exhausted action is never taken twice.
func Record(prev *State, now time.Time, plugin, policy string, pluginErr *Error, window, interval, maxInterval time.Duration,
	action policyv1alpha1.ExhaustedAction) *State {
	s := &State{
		Plugin:          plugin,
		Policy:          policy,
		Since:           metav1.NewTime(now),
		LastAttempt:     metav1.NewTime(now),
		Attempts:        1,
		LastError:       pluginErr,
		Window:          metav1.Duration{Duration: window},
		Interval:        metav1.Duration{Duration: interval},
		MaxInterval:     metav1.Duration{Duration: maxInterval},
		ExhaustedAction: action,
	}
	if prev != nil {
		s.Since = prev.Since
		s.Attempts = prev.Attempts + 1
		s.Exhausted = prev.Exhausted
	}
	return s
}
