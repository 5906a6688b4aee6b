// Package plugin defines what a network plugin is to this project: the Plugin
// interface (OKG's cloudprovider.Plugin with ctx first), the typed Error a plugin
// returns, the Registry the webhook looks plugins up in, the Run helper that calls a
// plugin under a deadline and recovers its panics, and the provider configuration
// read from OKG's TOML file.
//
// Plugins know nothing of NetworkPluginPolicy: a plugin reports what went wrong as an
// *Error with a category, and the policy decides what that means for the pod.
package plugin
