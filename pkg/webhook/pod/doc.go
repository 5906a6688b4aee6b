// Package pod is the mutating admission webhook for pods that carry the OpenKruise Game
// annotation game.kruise.io/network-type: it runs the network plugin the annotation names on
// pod CREATE and UPDATE, under the timeout of the NetworkPluginPolicy Decision in
// force, and applies the Decision's failure mode when the plugin fails (DESIGN.md section 6):
// Synchronous denies the request; Asynchronous admits the pod with its network NotReady, the
// retry state written to policy.game.kruise.io/network-retry, and an admission warning.
// A pod whose network type is not a registered plugin name is passed through untouched (no
// status, no retry state, no decision annotation, no event: OKG's own webhook owns its cloud
// types), unless the type is a near-miss of a registered name (plugin.Registry.NearMiss:
// kubernetes-hostport, Kubernetes-HostPrt), which is a parameterError that suggests the name
// and that the policy decides. A plugin that returns warnings only (plugin.Split: an unknown
// network-conf parameter, say) did its work: the pod is admitted as the plugin left it, with
// an admission warning each; only failures go through the failure mode. The metrics' plugin
// label is a registered name or "unknown".
// Three requests are never denied: a DELETE (the webhook configuration does not send it; if
// one arrives, it is allowed and nothing runs: a later admission controller may still refuse
// it, and the pod's network objects go by garbage collection once the pod is gone), an UPDATE of
// a terminating pod (passed through unchanged, no plugin runs), and an UPDATE that leaves
// network-type, network-conf and the container ports alone (a Synchronous failure is then
// handled as an Asynchronous one).
//
// The JSON patch is built from the fields plugins and the webhook write (annotations,
// labels, container ports, readiness gates); when a plugin changed anything else, it is a
// diff of the whole pod.
//
// It is the only place that runs plugins. The network controller only stamps
// game.kruise.io/network-trigger-time, and the UPDATE that follows comes back here.
package pod
