package pod

// The MutatingWebhookConfiguration has two entries for Path, both generated from the markers
// below (config/webhook/manifests.yaml); their matchConditions are static in
// config/webhook/mutating_patch.yaml (what is installed before the manager runs) and then
// rewritten by pkg/controller/webhookconfig from the policies in force. The conditions of
// the two entries exclude each other, so that a request reaches the webhook at most once.

// SyncWebhookName is the failurePolicy Fail entry: CREATE of a pod whose network type some
// policy or its plugin's built-in mode may decide Synchronous, and UPDATE of such a pod that
// changes its network-type or network-conf annotation. While no replica answers, these
// requests are refused by the apiserver.
const SyncWebhookName = "sync.mpod.policy.game.kruise.io"

// AsyncWebhookName is the failurePolicy Ignore entry: every other CREATE and UPDATE of a pod
// with a network type. While no replica answers, these requests are admitted unchanged and
// the network controller catches the pods up later.
//
// Neither entry intercepts DELETE: mutating admission runs before validating admission, so
// a DELETE that reaches a mutating webhook may still be refused afterwards (a
// PodDisruptionBudget-style webhook, a ValidatingAdmissionPolicy), and nothing may be torn
// down on its account. A pod's network objects go when the pod object is gone, by garbage
// collection of their owner references (docs/admission.md, "Deletion").
const AsyncWebhookName = "async.mpod.policy.game.kruise.io"

// +kubebuilder:webhook:path=/mutate-v1-pod,mutating=true,failurePolicy=fail,sideEffects=NoneOnDryRun,groups="",resources=pods,verbs=create;update,versions=v1,name=sync.mpod.policy.game.kruise.io,admissionReviewVersions=v1,timeoutSeconds=30,reinvocationPolicy=Never
// +kubebuilder:webhook:path=/mutate-v1-pod,mutating=true,failurePolicy=ignore,sideEffects=NoneOnDryRun,groups="",resources=pods,verbs=create;update,versions=v1,name=async.mpod.policy.game.kruise.io,admissionReviewVersions=v1,timeoutSeconds=30,reinvocationPolicy=Never
