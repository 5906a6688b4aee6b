package v1alpha1

// Condition types and reasons written to NetworkPluginPolicy status.conditions by the policy
// status controller. Flux's kstatus and Argo CD health checks read the Ready condition.
const (
	// ConditionReady is True when the policy is in force: every expression compiled.
	ConditionReady = "Ready"

	// ReasonAccepted is the reason of a True Ready condition.
	ReasonAccepted = "Accepted"
	// ReasonInvalidExpression is the reason of a False Ready condition when a CEL expression
	// does not compile; the message names the field path and the compiler error.
	ReasonInvalidExpression = "InvalidExpression"
	// ReasonInvalidSpec is the reason of a False Ready condition when the spec is invalid for a
	// reason the CRD schema cannot check, such as a namespaceSelector outside the root
	// namespace or a label selector that does not parse.
	ReasonInvalidSpec = "InvalidSpec"
)

// Pod annotations and readiness gates owned by this project (the game.kruise.io keys are
// OpenKruise Game's and live in pkg/plugin/networkstatus).
const (
	// AnnotationNetworkRetry holds, as JSON, the retry state of a pod whose network plugin
	// failed under an Asynchronous decision: first failure time, attempts, last error type
	// and message.
	AnnotationNetworkRetry = "policy.game.kruise.io/network-retry"

	// AnnotationNetworkUnverified holds the time (RFC 3339, UTC) since which the network
	// plugin could not check a pod's Ready network at UPDATE (an API error, a timeout: the
	// failure said nothing about the network). The network is kept Ready meanwhile, and the
	// network controller triggers a check again until one succeeds or finds it broken.
	AnnotationNetworkUnverified = "policy.game.kruise.io/network-unverified"

	// ReadinessGateNetworkReady is the pod readiness gate (and pod condition type) that the
	// webhook adds when a policy sets readinessGate: true, and the network controller sets to
	// True once the network is Ready.
	ReadinessGateNetworkReady = "game.kruise.io/network-ready"
)
