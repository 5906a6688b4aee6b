// Package policy turns the NetworkPluginPolicy objects of the cluster into one Decision per
// (pod, plugin, operation): the Store compiles policies as the informer delivers them and
// publishes immutable snapshots, the Resolver picks and merges the matching policies of a
// snapshot without locks and explains the result.
//
// It knows nothing of HTTP or of the plugins' internals: callers describe a plugin with a
// Plugin and its failure with a PluginError.
package policy
