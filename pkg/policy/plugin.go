package policy

// Plugin describes a network plugin to the policy engine: what spec.plugins entries match
// and what the CEL variable plugin holds. The webhook builds it from its plugin registry.
type Plugin struct {
	// Name is the plugin's exact name, as in the game.kruise.io/network-type pod annotation,
	// for example Kubernetes-NodePort.
	Name string
	// Alias is the plugin's cross-cloud family name, for example NLB-Network; empty if none.
	Alias string
	// Synchronous is the plugin's built-in failure mode (OKG's IsSynchronous proposal): true
	// means Synchronous is the default failure mode, false Asynchronous.
	Synchronous bool
}

// PluginError describes a plugin failure to failure and retry expressions (the CEL variable
// error).
type PluginError struct {
	// Type is the error category: apiCallError, internalError, parameterError,
	// notImplementedError, retryError (OKG's categories), timeout or cloudError (a cloud controller refused the plugin's objects).
	Type string
	// Message is the error text.
	Message string
	// Reason is the failure's class within its type (plugin.Reason), the CEL error.reason;
	// empty when none is known.
	Reason string
}
