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
// with a network type, and every DELETE of one. While no replica answers, these requests
// are admitted unchanged and the network controller catches the pods up later.
const AsyncWebhookName = "async.mpod.policy.game.kruise.io"

// +kubebuilder:webhook:path=/mutate-v1-pod,mutating=true,failurePolicy=fail,sideEffects=NoneOnDryRun,groups="",resources=pods,verbs=create;update,versions=v1,name=sync.mpod.policy.game.kruise.io,admissionReviewVersions=v1,timeoutSeconds=30,reinvocationPolicy=Never
// +kubebuilder:webhook:path=/mutate-v1-pod,mutating=true,failurePolicy=ignore,sideEffects=NoneOnDryRun,groups="",resources=pods,verbs=create;update;delete,versions=v1,name=async.mpod.policy.game.kruise.io,admissionReviewVersions=v1,timeoutSeconds=30,reinvocationPolicy=Never
