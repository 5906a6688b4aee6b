package policy

import (
	"fmt"
	"strings"
)

// group is a set of Decision field groups, merged whole from one policy each.
type group uint8

const (
	groupFailure group = 1 << iota
	groupTimeout
	groupReadinessGate
	groupRetry

	allGroups = groupFailure | groupTimeout | groupReadinessGate | groupRetry
)

// Source says where a Decision group came from.
type Source struct {
	// Policy supplied the group; nil means the built-in default. Read-only: it is shared
	// with the Store's snapshot.
	Policy *PolicyRef
	// CappedBy is the root policy whose bounds last changed a value of the group (see
	// Explanation.Caps); nil when nothing was capped. Read-only, like Policy.
	CappedBy *PolicyRef
}

// String returns namespace/name@generation or "default", followed by " (capped by root
// policy namespace/name@generation)" when a bound changed the group.
func (s Source) String() string {
	out := "default"
	if s.Policy != nil {
		out = s.Policy.String()
	}
	if s.CappedBy != nil {
		out += " (capped by root policy " + s.CappedBy.String() + ")"
	}
	return out
}

// Describe names the source as the pod webhook's messages and its
// policy.game.kruise.io/network-decision annotation do: "policy namespace/name@generation" or
// "built-in default", followed by ", capped by root policy namespace/name@generation" when a
// bound changed the group.
func (s Source) Describe() string {
	out := "built-in default"
	if s.Policy != nil {
		out = "policy " + s.Policy.String()
	}
	if s.CappedBy != nil {
		out += ", capped by root policy " + s.CappedBy.String()
	}
	return out
}

// LossReason says why a candidate policy supplied no group.
type LossReason string

const (
	// LostPodSelector: the policy's podSelector does not match the pod.
	LostPodSelector LossReason = "podSelector does not match"
	// LostNamespaceSelector: the policy's namespaceSelector does not match the namespace.
	LostNamespaceSelector LossReason = "namespaceSelector does not match"
	// LostConditionFalse: a matchCondition (Loser.Condition) evaluated to false.
	LostConditionFalse LossReason = "matchCondition is false"
	// LostConditionError: a matchCondition (Loser.Condition) failed at runtime (Loser.Err);
	// the policy counts as not matching.
	LostConditionError LossReason = "matchCondition failed"
	// LostOutranked: more specific policies already supplied every group this policy sets;
	// its matchConditions were not evaluated.
	LostOutranked LossReason = "outranked"
	// LostBudget: the request's CEL cost budget was spent before the policy's
	// matchConditions could be evaluated; the policy counts as not matching.
	LostBudget LossReason = "matchConditions not evaluated: the request's CEL cost budget is spent"
	// LostNamespaceUnknown: the pod's Namespace could not be read (Input.NamespaceUnknown),
	// so the policy's namespaceSelector cannot be matched; a bounding root policy applies
	// all the same (bounds fail closed), any other policy with a namespaceSelector does not
	// match.
	LostNamespaceUnknown LossReason = "namespaceSelector not evaluated: the pod's Namespace could not be read"
)

// Loser is a policy naming the plugin that supplied no group of the Decision.
type Loser struct {
	// Policy is the losing policy. Read-only: it is shared with the Store's snapshot.
	Policy *PolicyRef
	// Reason says why it lost.
	Reason LossReason
	// Condition is the name of the matchCondition for LostConditionFalse and
	// LostConditionError.
	Condition string
	// Err is the evaluation error for LostConditionError.
	Err error
}

// String returns "namespace/name@generation: reason".
func (l Loser) String() string {
	switch l.Reason {
	case LostConditionFalse:
		return fmt.Sprintf("%s: matchCondition %s is false", l.Policy, l.Condition)
	case LostConditionError:
		return fmt.Sprintf("%s: matchCondition %s failed: %v", l.Policy, l.Condition, l.Err)
	}
	return fmt.Sprintf("%s: %s", l.Policy, l.Reason)
}

// Explanation says, for each group of a Decision, which policy supplied it, and why the
// other policies naming the plugin lost. Losers are in precedence order.
type Explanation struct {
	// Failure, Timeout, ReadinessGate and Retry are the sources of the four groups.
	Failure, Timeout, ReadinessGate, Retry Source
	// Losers are the policies naming the plugin that supplied nothing.
	Losers []Loser
	// Notes record fallbacks, for example a failureModeExpression that failed at runtime and
	// the static failureMode used instead, and each Cap.
	Notes []string
	// Caps are the values of namespace policies that root policies' bounds changed, in the
	// order they were applied.
	Caps []Cap
}

// maxLosersInString bounds the losers String prints, so that the text fits an admission
// warning or an event message.
const maxLosersInString = 3

// String returns a one-line summary for admission warnings, events and logs, for example
// "failure=game/lb@3 timeout=default readinessGate=default retry=kube-system/all@1; lost:
// game/canary@1: matchCondition not-canary is false".
func (e Explanation) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "failure=%s timeout=%s readinessGate=%s retry=%s", e.Failure, e.Timeout, e.ReadinessGate, e.Retry)
	for _, n := range e.Notes {
		b.WriteString("; ")
		b.WriteString(n)
	}
	if len(e.Losers) > 0 {
		b.WriteString("; lost: ")
		for i, l := range e.Losers {
			if i == maxLosersInString {
				fmt.Fprintf(&b, ", and %d more", len(e.Losers)-i)
				break
			}
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(l.String())
		}
	}
	return b.String()
}
