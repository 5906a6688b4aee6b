// Package networkretry is the retry state of a pod whose network is not Ready, kept on the pod
// itself in the annotation policy.game.kruise.io/network-retry so that a manager restart or a
// leader change loses nothing: the mutating pod webhook writes it each time it runs a plugin
// and the network is not Ready (with the schedule of the policy Decision in force), and the
// network controller reads it to decide when to stamp game.kruise.io/network-trigger-time
// (the next retry), when the window has closed, and how long the network took to get Ready.
package networkretry
