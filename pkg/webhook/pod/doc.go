// Package pod is the mutating admission webhook for pods that carry the OpenKruise Game
// annotation game.kruise.io/network-type: it runs the network plugin the annotation names on
// pod CREATE, UPDATE and DELETE, under the timeout of the NetworkPluginPolicy Decision in
// force, and applies the Decision's failure mode when the plugin fails (DESIGN.md section 6):
// Synchronous denies the request; Asynchronous admits the pod with its network NotReady, the
// retry state written to policy.game.kruise.io/network-retry, and an admission warning.
//
// It is the only place that runs plugins. The network controller only stamps
// game.kruise.io/network-trigger-time, and the UPDATE that follows comes back here.
package pod
