// Package kubernetes implements OKG's provider-neutral network plugins:
// Kubernetes-HostPort (synchronous: host ports written into the container spec at
// CREATE), Kubernetes-NodePort and Kubernetes-Ingress (asynchronous: a per-pod Service,
// and Ingress, built after the pod exists). Parameters, annotations and the
// network-status they write are OKG's; docs/plugins.md lists every parameter and the
// deliberate differences from upstream.
package kubernetes

import "github.com/okg-extensions/network-plugin-policy/pkg/plugin"

// Plugins returns new instances of the three plugins for a registry, or none when the
// provider config disables the Kubernetes provider ([kubernetes] enable = false).
// Each call returns fresh plugins with their own state.
func Plugins(cfg plugin.Config) []plugin.Plugin {
	if !cfg.Kubernetes.Enable {
		return nil
	}
	return []plugin.Plugin{NewHostPort(), NewNodePort(), NewIngress()}
}
