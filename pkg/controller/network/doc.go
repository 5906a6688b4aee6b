// Package network is the network retry and readiness controller for game-server pods: pods
// that carry the OKG annotation game.kruise.io/network-type.
//
// The controller never runs network plugins and never resolves policies; the mutating pod
// webhook does both and records, when the network is not Ready after a plugin run, the retry
// state in the pod annotation policy.game.kruise.io/network-retry (package networkretry). The
// controller reads that state and decides when the next retry is due: it stamps
// game.kruise.io/network-trigger-time (RFC 3339) on the pod, and the resulting pod UPDATE makes
// the webhook run the plugin again. When the network is Ready it clears the retry state, sets
// the pod readiness-gate condition game.kruise.io/network-ready to True and records a
// NetworkReady event; when the retry window closes it records a NetworkRetryExhausted event,
// sets the condition to False and takes the policy's exhausted action (Event, or Recreate:
// delete the pod so its owner creates it again), exactly once per pod UID. While the network
// is not Ready the condition is False, with the reason (NetworkNotReady,
// NetworkRetryStateInvalid, NetworkRetryExhausted).
//
// The window starts at the first not-Ready plugin run or when the pod is scheduled, whichever
// is later: a Pending pod is never exhausted. A pod that gets its node or IP is retried at
// once (GotNodeOrIP). Options.MinRetryInterval is the platform's floor on every interval.
// Options.MaxConcurrentReconciles workers take pods from a namespace-fair workqueue
// (namespaceFairQueue), so one namespace's backlog does not hold up another's retries.
//
// All state lives on the pod, so a manager restart or a leader change resumes the schedule
// where it was: the window is never restarted.
package network
