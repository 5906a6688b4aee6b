// Package v1alpha1 holds the policy.game.kruise.io/v1alpha1 API: the NetworkPluginPolicy kind
// that decides, per network plugin, namespace, workload and error, whether a plugin failure in
// the mutating pod webhook denies the pod (Synchronous) or admits it and retries the network in
// the background (Asynchronous), with what plugin timeout and what retry window.
//
// +kubebuilder:object:generate=true
// +groupName=policy.game.kruise.io
package v1alpha1
