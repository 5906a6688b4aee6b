package policy

import (
	"fmt"
	"time"

	"github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
)

// LintOptions configure Lint.
type LintOptions struct {
	// Plugins are the registered network plugins; empty skips the plugin checks.
	Plugins []Plugin
	// WebhookTimeout is the timeoutSeconds of the mutating pod webhook configuration; zero
	// skips the timeout check.
	WebhookTimeout time.Duration
}

// Lint returns warnings for legal but suspicious settings of spec, each prefixed with its
// field path:
//   - an entry of spec.plugins that is neither "*" nor the name or alias of a registered
//     plugin (see unregisteredEntryWarning);
//   - failureMode Asynchronous for a plugin that is synchronous by design (its changes, such
//     as host ports, must be in the pod at CREATE) without retry.exhaustedAction Recreate;
//   - a timeout above the webhook's own timeout, so the apiserver gives up on the webhook
//     before the plugin's deadline.
func Lint(spec *v1alpha1.NetworkPluginPolicySpec, opts LintOptions) []string {
	var warnings []string
	if len(opts.Plugins) > 0 {
		for i, entry := range spec.Plugins {
			if entry == v1alpha1.AllPlugins {
				continue
			}
			known := false
			for _, p := range opts.Plugins {
				if p.Name == entry || (p.Alias != "" && p.Alias == entry) {
					known = true
					break
				}
			}
			if !known {
				warnings = append(warnings, unregisteredEntryWarning(i, entry, opts.Plugins))
			}
		}
		recreate := spec.Retry != nil && spec.Retry.ExhaustedAction != nil && *spec.Retry.ExhaustedAction == v1alpha1.ExhaustedActionRecreate
		if spec.FailureMode != nil && *spec.FailureMode == v1alpha1.FailureModeAsynchronous && !recreate {
			for _, p := range opts.Plugins {
				if p.Synchronous && pluginsSelect(spec.Plugins, p) {
					warnings = append(warnings, fmt.Sprintf(
						"spec.failureMode: Asynchronous on %s, which is synchronous by design, without spec.retry.exhaustedAction Recreate: a pod admitted without its network stays broken until it is recreated", p.Name))
				}
			}
		}
	}
	if opts.WebhookTimeout > 0 && spec.Timeout != nil && spec.Timeout.Duration > opts.WebhookTimeout {
		warnings = append(warnings, fmt.Sprintf(
			"spec.timeout: %s is above the pod webhook's timeout of %s; the apiserver gives up on the webhook before the plugin's deadline", spec.Timeout.Duration, opts.WebhookTimeout))
	}
	return warnings
}

// pluginsSelect reports whether a spec.plugins list selects plugin p.
func pluginsSelect(entries []string, p Plugin) bool {
	for _, e := range entries {
		if e == v1alpha1.AllPlugins || e == p.Name || (p.Alias != "" && e == p.Alias) {
			return true
		}
	}
	return false
}

// unregisteredEntryWarning is the warning for spec.plugins[i], entry, that names no
// registered plugin or alias. The pod webhook passes a pod of such a network type through
// untouched, so the entry has no effect, unless the type is a near-miss of a registered name
// (plugin.NearMissOf): such a pod is a parameterError, and this entry decides it only for
// pods spelled exactly as the entry is; the warning then suggests the registered name.
func unregisteredEntryWarning(i int, entry string, plugins []Plugin) string {
	names := make([]string, len(plugins))
	for j, p := range plugins {
		names[j] = p.Name
	}
	if name, ok := plugin.NearMissOf(entry, names); ok {
		return fmt.Sprintf("spec.plugins[%d]: no registered network plugin has the name or alias %q; did you mean %s? "+
			"(this entry decides only the parameterError of pods whose network type is spelled %q)", i, entry, name, entry)
	}
	return fmt.Sprintf("spec.plugins[%d]: no registered network plugin has the name or alias %q: "+
		"the pod webhook passes pods of that network type through untouched, so this entry has no effect", i, entry)
}
