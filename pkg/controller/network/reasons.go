package network

// Event reasons, which are also the reasons of the readiness-gate condition
// game.kruise.io/network-ready where one is written.
const (
	// ReasonNetworkReady (Normal event, condition True): the pod's network is Ready; the event
	// says how long it took since the first not-Ready plugin run (or since the pod was created
	// when the first run succeeded) and how many plugin runs failed.
	ReasonNetworkReady = "NetworkReady"
	// ReasonNetworkRetryExhausted (Warning event, condition False): the retry window closed with
	// the network not Ready; the event names the plugin, the last error type and message, the
	// attempts, the policy, the window and the exhausted action.
	ReasonNetworkRetryExhausted = "NetworkRetryExhausted"
	// ReasonNetworkRetryStateInvalid (Warning event): the retry-state annotation
	// policy.game.kruise.io/network-retry does not parse; the event names the annotation and the
	// parse error. No retry is triggered until the webhook or a person rewrites it.
	ReasonNetworkRetryStateInvalid = "NetworkRetryStateInvalid"
)

// Event actions (the events.k8s.io/v1 "action" field: what the controller did or failed to do).
const (
	// actionClearRetry: the retry state was removed, or the condition set True, because the
	// network is Ready.
	actionClearRetry = "ClearNetworkRetry"
	// actionReadRetry: the retry state could not be read.
	actionReadRetry = "ReadNetworkRetry"
)
