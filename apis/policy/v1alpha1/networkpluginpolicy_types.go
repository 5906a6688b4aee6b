package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FailureMode says what the mutating pod webhook does when a network plugin fails (returns an
// error or runs past its timeout) while a pod is admitted.
//
// +kubebuilder:validation:Enum=Synchronous;Asynchronous
type FailureMode string

const (
	// FailureModeSynchronous denies the admission request: the pod is not created (CREATE) or
	// not changed (UPDATE). This is what upstream OpenKruise Game does for every plugin error.
	FailureModeSynchronous FailureMode = "Synchronous"
	// FailureModeAsynchronous admits the pod with its network marked NotReady and lets the
	// network controller retry the plugin until the network is Ready or the retry window closes.
	FailureModeAsynchronous FailureMode = "Asynchronous"
)

// ExhaustedAction says what the network controller does once a pod's retry window has closed
// and its network is still not Ready.
//
// +kubebuilder:validation:Enum=Event;Recreate
type ExhaustedAction string

const (
	// ExhaustedActionEvent records a NetworkRetryExhausted Warning event on the pod and sets its
	// network readiness-gate condition to False; the pod keeps running.
	ExhaustedActionEvent ExhaustedAction = "Event"
	// ExhaustedActionRecreate does what ExhaustedActionEvent does and then evicts the pod
	// through the Eviction API, so that its owner (a StatefulSet, a GameServerSet) creates it
	// again: PodDisruptionBudgets and eviction webhooks may refuse it (it is tried again), a
	// pod without a controller owner is never evicted, and the manager evicts at most
	// --max-recreates-per-namespace-per-minute pods a minute per namespace.
	ExhaustedActionRecreate ExhaustedAction = "Recreate"
)

// Enforcement says whether a policy's decisions take effect.
//
// +kubebuilder:validation:Enum=Enforce;Audit
type Enforcement string

const (
	// EnforcementEnforce: the policy decides, as the API describes. The default.
	EnforcementEnforce Enforcement = "Enforce"
	// EnforcementAudit: the policy decides nothing. At every admission it would have taken
	// part in, the webhook also computes the decision the policy would have made had it
	// been Enforce (on the same CEL cost budget, after the decision in force is final), and
	// counts it in the metric npp_policy_audit_decisions_total by whether it differs from the
	// decision in force. An Audit policy's bounds do not apply, and it does not make a
	// network type Synchronous in the webhook configuration. The name follows Kyverno's
	// Enforce / Audit.
	EnforcementAudit Enforcement = "Audit"
)

// AllPlugins is the wildcard entry of spec.plugins: the policy targets every network plugin.
const AllPlugins = "*"

// MatchCondition is a CEL expression that must evaluate to true for the policy to apply to a
// pod. It has the shape of admissionregistration.k8s.io's MatchCondition.
type MatchCondition struct {
	// name identifies the condition in errors, explanations and metrics. It is unique within
	// spec.matchConditions and is a qualified name: alphanumerics, '-', '_' or '.', starting
	// and ending with an alphanumeric, at most 63 characters (the limit of
	// admissionregistration.k8s.io matchConditions names).
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	Name string `json:"name,omitempty"`

	// expression is a CEL expression of type bool, evaluated with the variables object (the
	// pod), oldObject (the pod before an UPDATE or DELETE, else null), namespaceObject (the
	// pod's Namespace), request (operation, userInfo, dryRun) and plugin (name, alias,
	// synchronous). A bare dynamic field such as object.metadata.labels.x needs an explicit
	// "== 'true'" or "== true". An expression that errors at runtime makes the policy not
	// match, and the error is counted and logged. At most 4096 characters.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Expression string `json:"expression,omitempty"`
}

// NetworkConfRule is one of spec.networkConfRules: a CEL condition on what a pod's
// game.kruise.io/network-conf asks for, shaped like a ValidatingAdmissionPolicy's validation.
type NetworkConfRule struct {
	// name identifies the rule in refusals, explanations and metrics. It is unique within
	// spec.networkConfRules and is a qualified name: alphanumerics, '-', '_' or '.', starting
	// and ending with an alphanumeric, at most 63 characters.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	Name string `json:"name,omitempty"`

	// expression is a CEL expression of type bool that must be true for the pod's network to
	// be made. It sees namespaceObject, request and plugin (not the pod: object and oldObject
	// are its author's) and network, the network-conf as the pod's plugin reads it: loadBalancerIDs (list of string), ports (list of {port: int,
	// protocol: string}), hosts and classes (lists of string), createsCloudResources (bool:
	// the network makes a billable cloud resource, such as an auto-created load balancer or a
	// new EIP) and parameters (the raw network-conf, a list of {name, value}). A plugin
	// without the notion has an empty list (false). An expression that errors or runs out of
	// its cost budget counts as not holding. At most 4096 characters.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Expression string `json:"expression,omitempty"`

	// message says why a pod is refused when the rule does not hold, for the pod's author;
	// unset, "rule <name> does not hold". At most 1024 characters.
	//
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// RetryPolicy is the background retry schedule of an Asynchronous network: the network
// controller re-runs the plugin (by stamping game.kruise.io/network-trigger-time on the pod)
// after interval, doubling the delay up to maxInterval, until the network is Ready or window
// has passed since the first failure.
//
// Unset fields take the built-in defaults: window 60s, interval 5s, maxInterval 60s,
// exhaustedAction Event (never values of another policy). The effective schedule, with the
// defaults filled in, must satisfy interval <= maxInterval and interval < window: for example
// "retry: {interval: 2m}" alone is invalid, because the default maxInterval and window are
// 60s.
//
// +kubebuilder:validation:XValidation:rule="(has(self.interval) ? duration(self.interval) : duration('5s')) <= (has(self.maxInterval) ? duration(self.maxInterval) : duration('60s'))",message="interval must not be longer than maxInterval (unset, maxInterval is 60s and interval 5s)",fieldPath=".interval"
// +kubebuilder:validation:XValidation:rule="(has(self.interval) ? duration(self.interval) : duration('5s')) < (has(self.window) ? duration(self.window) : duration('60s'))",message="interval must be shorter than window (unset, window is 60s and interval 5s)",fieldPath=".interval"
type RetryPolicy struct {
	// window is how long after the first plugin failure the network is retried before the
	// exhaustedAction is taken, as a Go duration string such as "60s" or "5m". Default 60s:
	// OpenKruise Game's global NETWORK_TOTAL_WAITING_TIME.
	//
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="window must be a positive duration such as 60s or 5m"
	Window *metav1.Duration `json:"window,omitempty"`

	// windowExpression is a CEL expression of type duration that computes the window per pod
	// and error, for example "error.type == 'apiCallError' ? duration('10m') : duration('1m')".
	// It sees the variables of matchConditions plus error (type, message, reason). When it
	// errors at runtime, window (or its default) applies. At most 4096 characters.
	//
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	WindowExpression *string `json:"windowExpression,omitempty"`

	// interval is the delay before the first retry, as a Go duration string. Each further
	// retry waits twice as long as the one before, up to maxInterval. Default 5s: OpenKruise
	// Game's NETWORK_PROBE_INTERVAL_TIME.
	//
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="interval must be a positive duration such as 5s"
	Interval *metav1.Duration `json:"interval,omitempty"`

	// maxInterval caps the exponential backoff between retries, as a Go duration string; it
	// must not be shorter than interval. Default 60s.
	//
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="maxInterval must be a positive duration such as 1m"
	MaxInterval *metav1.Duration `json:"maxInterval,omitempty"`

	// exhaustedAction is what happens when the window closes and the network is still not
	// Ready: Event (a NetworkRetryExhausted Warning event and a False readiness-gate
	// condition) or Recreate (the same, then the pod is evicted so its owner recreates it;
	// PodDisruptionBudgets apply, a pod without a controller owner is never evicted, and
	// evictions are rate-limited per namespace). Default Event.
	//
	// +optional
	ExhaustedAction *ExhaustedAction `json:"exhaustedAction,omitempty"`
}

// ReadinessGateBound says whether namespace policies may turn the network readiness gate off.
//
// +kubebuilder:validation:Enum=Required;Optional
type ReadinessGateBound string

const (
	// ReadinessGateRequired: a namespace policy's readinessGate: false is capped to true.
	ReadinessGateRequired ReadinessGateBound = "Required"
	// ReadinessGateOptional: namespace policies may set readinessGate either way (the
	// behaviour without a bound).
	ReadinessGateOptional ReadinessGateBound = "Optional"
)

// PolicyBounds are the platform's guardrails over namespace (tenant) policies: what the
// policies of other namespaces may decide for the pods and plugins the bounding root policy
// selects. The webhook caps a namespace policy's decision at the bounds (and the explanation
// says "capped by root policy <namespace>/<name>@<generation>"); the validating webhook warns
// when a namespace policy is applied that exceeds a bound. Decisions of root policies and
// built-in defaults are not capped. Every field is optional; at least one must be set.
//
// +kubebuilder:validation:MinProperties=1
// +kubebuilder:validation:XValidation:rule="!has(self.minInterval) || !has(self.maxWindow) || duration(self.minInterval) < duration(self.maxWindow)",message="minInterval must be shorter than maxWindow",fieldPath=".minInterval"
type PolicyBounds struct {
	// failureModes are the failure modes a namespace policy may decide (failureMode, or the
	// value of failureModeExpression); any other is capped to the first one listed. For
	// example [Synchronous] keeps Kubernetes-HostPort synchronous. 1 or 2 entries.
	//
	// +optional
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=2
	FailureModes []FailureMode `json:"failureModes,omitempty"`

	// minInterval is the floor of a namespace policy's retry.interval, as a Go duration
	// string: a shorter interval is raised to it (and maxInterval at least to it).
	//
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="minInterval must be a positive duration such as 1s"
	MinInterval *metav1.Duration `json:"minInterval,omitempty"`

	// maxWindow caps a namespace policy's retry window (retry.window, or the value of
	// retry.windowExpression), as a Go duration string.
	//
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="maxWindow must be a positive duration such as 10m"
	MaxWindow *metav1.Duration `json:"maxWindow,omitempty"`

	// exhaustedActions are the exhausted actions a namespace policy may decide; any other is
	// capped to the first one listed. 1 or 2 entries.
	//
	// +optional
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=2
	ExhaustedActions []ExhaustedAction `json:"exhaustedActions,omitempty"`

	// readinessGate Required caps a namespace policy's readinessGate: false to true (the
	// readiness gate may not be turned off); Optional, the default, leaves it alone.
	//
	// +optional
	ReadinessGate *ReadinessGateBound `json:"readinessGate,omitempty"`
}

// NetworkPluginPolicySpec selects pods and network plugins and says how the plugins' failures
// are handled for them. Fields are merged in groups: failure (failureMode and
// failureModeExpression), timeout, readinessGate and retry; each group is taken whole from the
// most specific matching policy that sets it, and groups no policy sets keep their built-in
// defaults.
type NetworkPluginPolicySpec struct {
	// plugins lists the network plugins this policy applies to, each an exact plugin name as
	// used in the game.kruise.io/network-type pod annotation (for example
	// "Kubernetes-HostPort"), a plugin alias (a cross-cloud family such as "NLB-Network"), or
	// "*" for every plugin. A name is more specific than an alias, an alias more than "*".
	// 1 to 32 entries, no duplicates, each at most 63 characters.
	//
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^(\*|[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)$`
	Plugins []string `json:"plugins,omitempty"`

	// podSelector restricts the policy to pods whose labels match. A policy with a
	// podSelector is more specific than one without; an empty podSelector ({}) counts as
	// unset. Unset matches every pod.
	//
	// +optional
	PodSelector *metav1.LabelSelector `json:"podSelector,omitempty"`

	// namespaceSelector restricts the policy to pods in namespaces whose labels match. It is
	// allowed only on policies in the root namespace (the manager's --root-namespace), which
	// are cluster-wide; elsewhere the validating webhook rejects it. Unset matches every
	// namespace the policy reaches.
	//
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// matchConditions are CEL conditions that must all be true for the policy to apply, at
	// most 16, with unique names.
	//
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	MatchConditions []MatchCondition `json:"matchConditions,omitempty"`

	// priority breaks ties between equally specific matching policies: the higher value wins;
	// equal priorities are ordered by namespace and name. Default 0.
	//
	// +optional
	Priority *int32 `json:"priority,omitempty"`

	// failureMode is what a plugin failure does: Synchronous denies the admission request,
	// Asynchronous admits the pod with its network NotReady and retries in the background.
	// Unset, the plugin's built-in mode applies (Kubernetes-HostPort is synchronous,
	// Kubernetes-NodePort and Kubernetes-Ingress asynchronous); upstream OpenKruise Game
	// denies on every error.
	//
	// +optional
	FailureMode *FailureMode `json:"failureMode,omitempty"`

	// failureModeExpression is a CEL expression of type string, evaluating to "Synchronous"
	// or "Asynchronous", that decides the failure mode per error; it sees the variables of
	// matchConditions plus error (type: one of apiCallError, internalError, parameterError,
	// notImplementedError, retryError, timeout, cloudError; message; reason: the failure's
	// class, one of InvalidParameter, NotAllowed, PortsExhausted, QuotaExceeded, CloudRefused,
	// WriteRefused, Unavailable, Other). When it errors at runtime or returns
	// another value, failureMode (or the plugin's built-in mode) applies. At most 4096
	// characters.
	//
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	FailureModeExpression *string `json:"failureModeExpression,omitempty"`

	// timeout is the deadline of one plugin call inside the admission request, as a Go
	// duration string, more than 0s and at most 30s (the apiserver's largest webhook
	// timeoutSeconds). A plugin that runs past it fails with the error type "timeout".
	// Default 8s.
	//
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s') && duration(self) <= duration('30s')",message="timeout must be a duration more than 0s and at most 30s, such as 5s"
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// readinessGate true makes the webhook add the pod readiness gate
	// game.kruise.io/network-ready at CREATE, so the pod is not Ready (and gets no Service
	// traffic) until its network is. Default false.
	//
	// +optional
	ReadinessGate *bool `json:"readinessGate,omitempty"`

	// retry is the background retry schedule of Asynchronous networks.
	//
	// +optional
	Retry *RetryPolicy `json:"retry,omitempty"`

	// enforcement is Enforce (the default: the policy decides) or Audit (the policy decides
	// nothing; the webhook records, per admission it would have decided, whether its
	// decision would have differed from the one in force). Switching an Audit policy to
	// Enforce is this one field.
	//
	// +optional
	Enforcement *Enforcement `json:"enforcement,omitempty"`

	// networkConfRules are conditions on what a pod's network-conf may ask for (which load
	// balancers, ports, hosts, classes, whether it makes cloud resources), allowed only on
	// policies in the root namespace, which then select by plugins and namespaceSelector only
	// (podSelector and matchConditions are refused beside them: the pod's author writes its
	// labels and annotations). Every rule of every root policy that selects the pod must
	// hold; a violation is a parameterError naming the rule, decided by the policies as any
	// parameterError, found before the plugin claims or writes anything. A pod whose network
	// is Ready keeps it through an update that does not change its network-conf, with a
	// warning. With enforcement Audit the rules refuse nothing and their would-be refusals are
	// counted in status.audit. At most 16, with unique names.
	//
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	NetworkConfRules []NetworkConfRule `json:"networkConfRules,omitempty"`

	// bounds caps, on policies in the root namespace only, what the policies of other
	// namespaces decide for the pods and plugins this policy selects (plugins, podSelector,
	// namespaceSelector and matchConditions). Every matching root policy's bounds apply, the
	// most specific last. A policy may set bounds and no group: it then only bounds.
	//
	// +optional
	Bounds *PolicyBounds `json:"bounds,omitzero"`
}

// NetworkPluginPolicyStatus is the observed state of a NetworkPluginPolicy, written by the
// manager's policy status controller.
type NetworkPluginPolicyStatus struct {
	// conditions hold the policy's health. Type Ready is True (reason Accepted) when every
	// expression compiled and the policy is in force, and False (reason InvalidExpression or
	// InvalidSpec, with the error in the message) when the webhook ignores the policy.
	//
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// observedGeneration is the metadata.generation the status describes.
	//
	// +optional
	// +kubebuilder:validation:Minimum=1
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// warnings are legal but suspicious settings, for example Asynchronous on a plugin that is
	// inherently synchronous without exhaustedAction Recreate; at most 16 of at most 1024
	// characters.
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=1024
	Warnings []string `json:"warnings,omitempty"`

	// audit holds, while spec.enforcement is Audit, what the webhook replicas counted of the
	// decisions the policy would have made: one entry per replica, each written by that
	// replica (the counts exist only where the admission was served), as Gatekeeper's
	// constraint status has one entry per pod. It is removed once the policy is Enforce.
	//
	// +optional
	Audit *AuditStatus `json:"audit,omitempty"`
}

// AuditStatus is the audit result of an Audit policy, per webhook replica.
type AuditStatus struct {
	// replicas are the webhook replicas that served admissions the policy would have
	// decided, each with its counts over its current window; at most 16. An entry not
	// updated for two windows (its replica is gone) is removed by the next replica to write.
	//
	// +optional
	// +listType=map
	// +listMapKey=replica
	// +kubebuilder:validation:MaxItems=16
	Replicas []ReplicaAuditStatus `json:"replicas,omitempty"`
}

// ReplicaAuditStatus is what one webhook replica counted of an Audit policy's would-be
// decisions since windowStart, for observedGeneration.
type ReplicaAuditStatus struct {
	// replica is the name of the manager's pod that counted.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Replica string `json:"replica,omitempty"`

	// observedGeneration is the policy generation counted; a new generation starts new
	// counts.
	//
	// +optional
	// +kubebuilder:validation:Minimum=1
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// windowStart is when the counts started: a window lasts the manager's --audit-window
	// (default 1h), then counting starts again.
	//
	// +required
	WindowStart *metav1.Time `json:"windowStart,omitempty"`

	// lastUpdate is when the replica last wrote this entry.
	//
	// +required
	LastUpdate *metav1.Time `json:"lastUpdate,omitempty"`

	// decided is how many admissions the policy would have taken part in (every outcome);
	// absent means none (as for differing and notEvaluated).
	//
	// +optional
	// +kubebuilder:validation:Minimum=1
	Decided int64 `json:"decided,omitempty"`

	// differing is how many of them it would have decided otherwise than the decision in
	// force.
	//
	// +optional
	// +kubebuilder:validation:Minimum=1
	Differing int64 `json:"differing,omitempty"`

	// notEvaluated is how many of them it could not decide because the request's CEL cost
	// budget was spent first.
	//
	// +optional
	// +kubebuilder:validation:Minimum=1
	NotEvaluated int64 `json:"notEvaluated,omitempty"`

	// samples are the latest differing admissions, newest first; at most 5.
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=5
	Samples []AuditSample `json:"samples,omitempty"`
}

// AuditSample is one admission an Audit policy would have decided otherwise.
type AuditSample struct {
	// pod is namespace/name of the pod (namespace/generateName for a pod without a name
	// yet), cut to 317 characters.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	Pod string `json:"pod,omitempty"`

	// operation is the admission operation: CREATE, UPDATE or DELETE.
	//
	// +required
	// +kubebuilder:validation:Enum=CREATE;UPDATE;DELETE
	Operation string `json:"operation,omitempty"`

	// time is when the admission was served.
	//
	// +required
	Time *metav1.Time `json:"time,omitempty"`

	// decision is what the decision in force did, for example "denied (Synchronous); timeout
	// 8s; ...", at most 512 characters.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Decision string `json:"decision,omitempty"`

	// wouldDecide is what the policy would have done, in the same words, at most 512
	// characters.
	//
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	WouldDecide string `json:"wouldDecide,omitempty"`
}

// NetworkPluginPolicy decides how network plugin failures are handled for the pods and
// plugins it selects. A policy in the root namespace is cluster-wide; a policy in any other
// namespace applies only to pods of that namespace.
//
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=npp,categories=okg
// +kubebuilder:printcolumn:name="Plugins",type=string,JSONPath=`.spec.plugins`
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.failureMode`
// +kubebuilder:printcolumn:name="Window",type=string,JSONPath=`.spec.retry.window`
// +kubebuilder:printcolumn:name="Enforcement",type=string,JSONPath=`.spec.enforcement`,priority=1
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NetworkPluginPolicy struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	//
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec selects pods and plugins and sets the failure handling.
	//
	// +required
	Spec NetworkPluginPolicySpec `json:"spec,omitzero"`

	// status is the observed state, written by the manager.
	//
	// +optional
	Status NetworkPluginPolicyStatus `json:"status,omitempty,omitzero"`
}

// NetworkPluginPolicyList is a list of NetworkPluginPolicy objects.
//
// +kubebuilder:object:root=true
type NetworkPluginPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard list metadata.
	//
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// items are the policies.
	Items []NetworkPluginPolicy `json:"items"`
}
