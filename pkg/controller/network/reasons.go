package network

// Event reasons, which are also the reasons of the readiness-gate condition
// game.kruise.io/network-ready where one is written.
const (
	// ReasonNetworkReady (Normal event, condition True): the pod's network is Ready; the event
	// says how long it took since the first not-Ready plugin run (or since the pod was created
	// when the first run succeeded) and how many plugin runs failed.
	ReasonNetworkReady = "NetworkReady"
	// ReasonNetworkNotReady (condition False, no event): the network is not Ready and is
	// being retried, or waits for the pod to be scheduled; the message names the plugin, the
	// last error and when the retry window closes (or that it has not started).
	ReasonNetworkNotReady = "NetworkNotReady"
	// ReasonNetworkRetryExhausted (Warning event, condition False): the retry window closed with
	// the network not Ready; the event names the plugin, the last error type and message, the
	// attempts, the policy, the window and the exhausted action.
	ReasonNetworkRetryExhausted = "NetworkRetryExhausted"
	// ReasonNetworkRetryStateInvalid (Warning event, condition False): the retry-state
	// annotation policy.game.kruise.io/network-retry does not parse or holds values the
	// manager never writes; the event names the annotation, the field and the problem. No
	// retry is triggered until the webhook rewrites it.
	ReasonNetworkRetryStateInvalid = "NetworkRetryStateInvalid"
	// ReasonNetworkRecreateSkipped (Warning event, once per pod): the exhausted action is
	// Recreate but the pod has no controller owner that would bring it back, so it is not
	// deleted.
	ReasonNetworkRecreateSkipped = "NetworkRecreateSkipped"
	// ReasonNetworkRecreateRefused (Warning event, a series while it lasts): the eviction of a
	// Recreate was refused (a PodDisruptionBudget, an admission webhook, an API error); it is
	// tried again after RecreateRetryInterval.
	ReasonNetworkRecreateRefused = "NetworkRecreateRefused"
)

// Event actions (the events.k8s.io/v1 "action" field: what the controller did or failed to do).
const (
	// actionClearRetry: the retry state was removed, or the condition set True, because the
	// network is Ready.
	actionClearRetry = "ClearNetworkRetry"
	// actionReadRetry: the retry state could not be read.
	actionReadRetry = "ReadNetworkRetry"
	// actionRecreate: the pod was to be evicted for the Recreate exhausted action.
	actionRecreate = "Recreate"
)
