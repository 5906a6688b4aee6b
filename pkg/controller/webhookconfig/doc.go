// Package webhookconfig keeps the two entries of the mutating pod webhook configuration in
// step with the NetworkPluginPolicies, the way Kyverno generates its webhook configuration
// from its policies: the failurePolicy Fail entry (pod.SyncWebhookName) matches only the
// network types a CREATE may be decided Synchronous for (policy.Snapshot.NetworkTypeModes:
// everywhere, or only in the namespaces whose own policies may decide so),
// the failurePolicy Ignore entry (pod.AsyncWebhookName) every other pod with a network type
// (including every type that is not a registered plugin name, which the webhook passes
// through). Neither entry intercepts DELETE (see pod.AsyncWebhookName). While no replica of the manager answers, only what a Synchronous
// decision could have denied is refused; the rest is admitted and caught up by the network
// controller.
package webhookconfig
