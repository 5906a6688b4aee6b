package policy

import (
	"fmt"
	"slices"
	"time"

	"github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
)

// bounds is the compiled spec.bounds of a root policy: the platform's caps on what namespace
// policies decide for the pods and plugins the root policy selects.
type bounds struct {
	failureModes         []v1alpha1.FailureMode     // empty: any
	minInterval          time.Duration              // 0: no floor
	maxWindow            time.Duration              // 0: no cap
	exhaustedActions     []v1alpha1.ExhaustedAction // empty: any
	requireReadinessGate bool
}

func compileBounds(b *v1alpha1.PolicyBounds) *bounds {
	out := &bounds{
		failureModes:     slices.Clone(b.FailureModes),
		exhaustedActions: slices.Clone(b.ExhaustedActions),
	}
	if b.MinInterval != nil {
		out.minInterval = b.MinInterval.Duration
	}
	if b.MaxWindow != nil {
		out.maxWindow = b.MaxWindow.Duration
	}
	out.requireReadinessGate = b.ReadinessGate != nil && *b.ReadinessGate == v1alpha1.ReadinessGateRequired
	return out
}

// Cap is one value of a namespace policy's decision that a root policy's bounds changed.
type Cap struct {
	// Field is the decision field: failureMode, readinessGate, retry.window, retry.interval,
	// retry.maxInterval or retry.exhaustedAction.
	Field string
	// From is the value the namespace policy decided, To the value after the cap.
	From, To string
	// Policy is the namespace policy that decided From. Read-only: shared with the snapshot.
	Policy *PolicyRef
	// By is the root policy whose bounds capped it. Read-only: shared with the snapshot.
	By *PolicyRef
}

// String returns, for example, "retry.window 8760h0m0s of game/p@1 capped to 10m0s by root
// policy npp-system/bounds@2".
func (c Cap) String() string {
	return fmt.Sprintf("%s %s of %s capped to %s by root policy %s", c.Field, c.From, c.Policy, c.To, c.By)
}

// clamp caps the groups of d supplied by namespace policies (tenant[i] true for group bit i)
// at the bounds of the root policies in by, most specific first; the most specific is applied
// last, so it decides when two bounds conflict. Every change is recorded in
// d.Explanation.Caps, as a note, and as the CappedBy of the group's Source.
func clamp(d *Decision, tenant [4]bool, by []*CompiledPolicy) {
	exp := &d.Explanation
	record := func(src *Source, field, from, to string, root *CompiledPolicy) {
		c := Cap{Field: field, From: from, To: to, Policy: src.Policy, By: &root.ref}
		exp.Caps = append(exp.Caps, c)
		exp.Notes = append(exp.Notes, c.String())
		src.CappedBy = &root.ref
	}
	for i := len(by) - 1; i >= 0; i-- {
		root, b := by[i], by[i].bounds
		if tenant[0] && len(b.failureModes) > 0 && !slices.Contains(b.failureModes, d.Mode) {
			from := d.Mode
			d.Mode = b.failureModes[0]
			record(&exp.Failure, "failureMode", string(from), string(d.Mode), root)
		}
		if tenant[2] && b.requireReadinessGate && !d.ReadinessGate {
			d.ReadinessGate = true
			record(&exp.ReadinessGate, "readinessGate", "false", "true", root)
		}
		if !tenant[3] {
			continue
		}
		r := &d.Retry
		if b.maxWindow > 0 && r.Window > b.maxWindow {
			from := r.Window
			r.Window = b.maxWindow
			record(&exp.Retry, "retry.window", from.String(), r.Window.String(), root)
		}
		if b.minInterval > 0 && r.Interval < b.minInterval {
			from := r.Interval
			r.Interval = b.minInterval
			record(&exp.Retry, "retry.interval", from.String(), r.Interval.String(), root)
		}
		if r.MaxInterval < r.Interval {
			from := r.MaxInterval
			r.MaxInterval = r.Interval
			record(&exp.Retry, "retry.maxInterval", from.String(), r.MaxInterval.String(), root)
		}
		if len(b.exhaustedActions) > 0 && !slices.Contains(b.exhaustedActions, r.ExhaustedAction) {
			from := r.ExhaustedAction
			r.ExhaustedAction = b.exhaustedActions[0]
			record(&exp.Retry, "retry.exhaustedAction", string(from), string(r.ExhaustedAction), root)
		}
	}
	if r := &d.Retry; tenant[3] && r.Interval >= r.Window {
		// The window was capped below the namespace policy's interval, or two root policies'
		// bounds conflict (one's interval floor is not below another's window cap): keep the
		// cap and retry within it, as pkg/networkretry requires interval < window.
		from := r.Interval
		r.Interval = r.Window / 2
		r.MaxInterval = max(r.Interval, min(r.MaxInterval, r.Window))
		exp.Notes = append(exp.Notes, fmt.Sprintf("retry.interval %s is not shorter than the capped window %s; interval %s used",
			from, r.Window, r.Interval))
	}
}
