// Package networkretry is the retry state of a pod whose network is not Ready, kept on the pod
// itself in the annotation policy.game.kruise.io/network-retry so that a manager restart or a
// leader change loses nothing: the mutating pod webhook writes it each time it runs a plugin
// and the network is not Ready (with the schedule of the policy Decision in force), and the
// network controller reads it to decide when to stamp game.kruise.io/network-trigger-time
// (the next retry), when the window has closed, and how long the network took to get Ready.
//
// The annotation is the manager's own, but it sits on an object pod authors write: decoding
// rejects what the manager never writes (times in the future beyond MaxClockSkew, attempts
// outside 1..MaxAttempts, an exhausted mark without the pod UID it was recorded for), and the
// window never starts before the pod is scheduled (WindowStart).
package networkretry
