package networkretry

import (
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	policyv1alpha1 "github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
)

// Annotation is the pod annotation that holds State as JSON.
const Annotation = policyv1alpha1.AnnotationNetworkRetry

// BuiltInDefault is State.Policy when no policy supplied the retry schedule.
const BuiltInDefault = "built-in default"

// MaxClockSkew is how far in the future a time in a State may be when it is decoded: the
// webhook that wrote it and the controller that reads it run on different replicas, so on
// different nodes whose clocks may differ by this much (NTP keeps them within milliseconds;
// a minute leaves room for a node that lost its time source). A later time was not written by
// the manager and is rejected, so a pod author cannot keep the window open by dating its
// start in the future: the most a forged time can add to a window is MaxClockSkew.
const MaxClockSkew = time.Minute

// MaxAttempts bounds State.Attempts: Record stops counting there (no int32 wrap to a
// negative count, which would make the backoff zero) and Decode rejects a larger count. A
// million plugin runs is 11 days of retries at the 1s interval floor with no backoff at all;
// any real retry window closes long before.
const MaxAttempts int32 = 1_000_000

// State is the retry state of one pod's network, serialized as JSON in Annotation. Times are
// RFC 3339 with second precision (metav1.Time); durations are Go duration strings
// (metav1.Duration), as in the NetworkPluginPolicy API.
type State struct {
	// Plugin is the network plugin's name (the pod's game.kruise.io/network-type).
	Plugin string `json:"plugin"`
	// Policy names the policy that supplied the retry schedule,
	// "<namespace>/<name>@<generation>", or BuiltInDefault.
	Policy string `json:"policy"`
	// Since is when the network was first seen not Ready by the webhook; it is kept across
	// attempts, never reset while the pod lives. The window starts at Since or when the pod
	// is scheduled, whichever is later (WindowStart).
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
	// Paused is how much of the time since Since does not count against the window: the
	// time in which no plugin run happened although the schedule asked for one (a run more
	// than PauseSlack late: the manager or the API server was away), and the time before
	// each inconclusive run (Error.Unknown). An outage therefore
	// never uses up a window by itself. Record adds to it; omitted when zero.
	Paused metav1.Duration `json:"paused,omitempty"`
	// Exhausted is when the network controller found the window closed and took the
	// ExhaustedAction; set once, so the action is never taken twice.
	Exhausted *metav1.Time `json:"exhausted,omitempty"`
	// ExhaustedUID is the metadata.uid of the pod whose window closed at Exhausted, written
	// together with it: exhaustion is final only for that pod incarnation (ExhaustedFor), a
	// same-name successor gets a window of its own.
	ExhaustedUID types.UID `json:"exhaustedUID,omitempty"`
}

// Error is a plugin failure as recorded in State.
type Error struct {
	// Type is the plugin error category: apiCallError, internalError, parameterError,
	// notImplementedError, retryError, timeout or cloudError (OKG's categories plus this
	// project's timeout and cloudError).
	Type string `json:"type"`
	// Message is the error's text.
	Message string `json:"message"`
	// Reason is the failure's class within its type (pkg/plugin Reason: PortsExhausted,
	// QuotaExceeded, CloudRefused, ...), the CEL error.reason; empty in a state an earlier
	// release wrote.
	Reason string `json:"reason,omitempty"`
	// Unknown marks an inconclusive attempt: a failure that says nothing about the network
	// (a failed read, a timeout) or a failure of the API server rather than an answer (500,
	// 503, 504, 429, a cut connection). The time before it is Paused, not counted against
	// the window.
	Unknown bool `json:"unknown,omitempty"`
	// FromCache marks a failure the plugin predicted from the manager's caches (a Service
	// create a cached ResourceQuota cannot fit) instead of the API server's answer
	// (plugin.Error.FromCache). It counts as an attempt, but the network controller never
	// closes a window on it: it has one more attempt made, which the API server answers.
	FromCache bool `json:"fromCache,omitempty"`
}

// PauseSlack is how late a retry may come before its whole delay counts as a pause
// (State.Paused):
// under load the network controller's stamps come late by seconds (docs/benchmarks.md
// measured up to 20 s with 5,000 pods retrying), which is the manager's own pace, not an
// outage.
const PauseSlack = 30 * time.Second

// FromPod returns the State in pod's Annotation, nil when the pod has none, and an error
// naming the annotation and the field when its value is not a valid State (see Decode); times
// are checked against the real clock.
func FromPod(pod *corev1.Pod) (*State, error) {
	return FromPodAt(pod, time.Now())
}

// FromPodAt is FromPod with now as the current time (DecodeAt).
func FromPodAt(pod *corev1.Pod, now time.Time) (*State, error) {
	v, ok := pod.Annotations[Annotation]
	if !ok {
		return nil, nil
	}
	return DecodeAt(v, now)
}

// Decode parses a State from its JSON form and checks it against the real clock (DecodeAt).
func Decode(v string) (*State, error) {
	return DecodeAt(v, time.Now())
}

// DecodeAt parses a State from its JSON form and rejects values the manager never writes,
// with now as the current time. The error names the annotation and the field, and says what
// was expected:
//   - not JSON, or a field of the wrong type;
//   - window or interval not positive, maxInterval shorter than interval;
//   - since missing or later than now + MaxClockSkew;
//   - lastAttempt missing, before since - MaxClockSkew or later than now + MaxClockSkew;
//   - attempts below 1 or above MaxAttempts;
//   - exhaustedAction other than Event or Recreate;
//   - exhausted before since - MaxClockSkew, later than now + MaxClockSkew, or without exhaustedUID
//     (and exhaustedUID without exhausted).
func DecodeAt(v string, now time.Time) (*State, error) {
	var s State
	if err := json.Unmarshal([]byte(v), &s); err != nil {
		return nil, fmt.Errorf("annotation %s: want a JSON retry state: %w", Annotation, err)
	}
	if err := s.validate(now); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", Annotation, err)
	}
	return &s, nil
}

// validate returns the first problem of s as an error naming the field, nil when s is a state
// the manager could have written by now.
func (s *State) validate(now time.Time) error {
	if s.Window.Duration <= 0 || s.Interval.Duration <= 0 || s.MaxInterval.Duration < s.Interval.Duration {
		return fmt.Errorf("want window > 0, interval > 0 and maxInterval >= interval, got window %s, interval %s, maxInterval %s",
			s.Window.Duration, s.Interval.Duration, s.MaxInterval.Duration)
	}
	latest := now.Add(MaxClockSkew)
	if s.Since.IsZero() {
		return fmt.Errorf("since: want the time of the first not-Ready plugin run, got none")
	}
	if s.Since.After(latest) {
		return fmt.Errorf("since: %s is in the future (now %s, clock skew allowed %s)", rfc3339(s.Since.Time), rfc3339(now), MaxClockSkew)
	}
	if s.LastAttempt.IsZero() {
		return fmt.Errorf("lastAttempt: want the time of the last plugin run, got none")
	}
	// Since, LastAttempt and Exhausted may come from different replicas' clocks, truncated to
	// seconds: a later field may read up to MaxClockSkew earlier than since.
	earliest := s.Since.Add(-MaxClockSkew)
	if s.LastAttempt.Time.Before(earliest) {
		return fmt.Errorf("lastAttempt: %s is before since %s (clock skew allowed %s)", rfc3339(s.LastAttempt.Time), rfc3339(s.Since.Time), MaxClockSkew)
	}
	if s.LastAttempt.After(latest) {
		return fmt.Errorf("lastAttempt: %s is in the future (now %s, clock skew allowed %s)", rfc3339(s.LastAttempt.Time), rfc3339(now), MaxClockSkew)
	}
	if s.Paused.Duration < 0 || s.Paused.Duration > now.Sub(s.Since.Time)+MaxClockSkew {
		return fmt.Errorf("paused: want 0 up to the time since since, got %s", s.Paused.Duration)
	}
	if s.Attempts < 1 || s.Attempts > MaxAttempts {
		return fmt.Errorf("attempts: want 1 to %d, got %d", MaxAttempts, s.Attempts)
	}
	switch s.ExhaustedAction {
	case policyv1alpha1.ExhaustedActionEvent, policyv1alpha1.ExhaustedActionRecreate:
	default:
		return fmt.Errorf("exhaustedAction: want %s or %s, got %q", policyv1alpha1.ExhaustedActionEvent, policyv1alpha1.ExhaustedActionRecreate, s.ExhaustedAction)
	}
	switch {
	case s.Exhausted == nil && s.ExhaustedUID != "":
		return fmt.Errorf("exhaustedUID: set without exhausted")
	case s.Exhausted == nil:
	case s.ExhaustedUID == "":
		return fmt.Errorf("exhausted: set without exhaustedUID, the pod it was recorded for")
	case s.Exhausted.Time.Before(earliest):
		return fmt.Errorf("exhausted: %s is before since %s (clock skew allowed %s)", rfc3339(s.Exhausted.Time), rfc3339(s.Since.Time), MaxClockSkew)
	case s.Exhausted.After(latest):
		return fmt.Errorf("exhausted: %s is in the future (now %s, clock skew allowed %s)", rfc3339(s.Exhausted.Time), rfc3339(now), MaxClockSkew)
	}
	return nil
}

// rfc3339 formats t as the annotation does (RFC 3339, seconds, UTC).
func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// Encode returns the JSON form of s for Annotation.
func (s *State) Encode() (string, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return "", fmt.Errorf("encode %s: %w", Annotation, err)
	}
	return string(b), nil
}

// Deadline is when the window closes if it started at Since: Since + Window + Paused. The
// network controller starts the window later for a pod scheduled after Since (WindowStart).
func (s *State) Deadline() time.Time { return s.Since.Add(s.Window.Duration + s.Paused.Duration) }

// Overdue reports whether, at now, the attempt after LastAttempt is more than PauseSlack late
// (NextAttempt): no plugin run happened when the schedule asked for one, and the time since
// is not counted in Paused yet. The network controller then triggers a run instead of
// closing the window, so that the run's Record counts the pause first.
func (s *State) Overdue(now time.Time) bool {
	return now.Sub(s.NextAttempt()) > PauseSlack
}

// ExhaustedFor reports whether the window closed for the pod incarnation uid: Exhausted is
// set and was recorded for that uid. A state carried over to another pod (a same-name
// successor, a copied manifest) is not exhausted for it.
func (s *State) ExhaustedFor(uid types.UID) bool {
	return s.Exhausted != nil && s.ExhaustedUID == uid
}

// WithMinInterval returns s with its schedule raised to the platform floor: Interval at least
// floor, MaxInterval at least the new Interval. s itself is not changed; floor <= 0 returns s.
func (s *State) WithMinInterval(floor time.Duration) *State {
	if floor <= 0 || s.Interval.Duration >= floor {
		return s
	}
	c := *s
	c.Interval.Duration = floor
	c.MaxInterval.Duration = max(c.MaxInterval.Duration, floor)
	return &c
}

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
// counted on (up to MaxAttempts, where the count stays); Exhausted and ExhaustedUID are kept
// so that the exhausted action is never taken twice for that pod. Paused is kept and grows:
// by the whole time since prev's LastAttempt when pluginErr is Unknown, otherwise by the
// lateness of this run (now - prev.NextAttempt()) when it is more than PauseSlack.
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
		s.Attempts = min(max(prev.Attempts, 0), MaxAttempts-1) + 1
		s.Exhausted = prev.Exhausted
		s.ExhaustedUID = prev.ExhaustedUID
		s.Paused = prev.Paused
		switch {
		case pluginErr != nil && pluginErr.Unknown:
			s.Paused.Duration += max(now.Sub(prev.LastAttempt.Time), 0)
		default:
			if late := now.Sub(prev.NextAttempt()); late > PauseSlack {
				s.Paused.Duration += late
			}
		}
	}
	return s
}
