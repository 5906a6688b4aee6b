package kubernetes

import (
	"context"
	"fmt"
	"slices"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
)

// IngressHostIndex is the name of the field index of Ingresses by host that the
// Kubernetes-Ingress plugin lists by (IngressHosts). RegisterIndexes adds it to the
// manager's cache.
const IngressHostIndex = "npp.game.kruise.io/ingress-host"

// IngressHosts returns the hosts an Ingress serves, for IngressHostIndex: every
// spec.rules[].host and spec.tls[].hosts[] entry, lower-cased, without duplicates. A rule
// without host (every host) is not indexed: it is no single host's.
func IngressHosts(obj client.Object) []string {
	ing, ok := obj.(*networkingv1.Ingress)
	if !ok {
		return nil
	}
	var hosts []string
	add := func(h string) {
		if h = strings.ToLower(h); h != "" && !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	for _, r := range ing.Spec.Rules {
		add(r.Host)
	}
	for _, t := range ing.Spec.TLS {
		for _, h := range t.Hosts {
			add(h)
		}
	}
	return hosts
}

// RegisterIndexes adds the field indexes the plugins list by to indexer (the manager's
// cache, before it starts): IngressHostIndex. Errors come from the indexer.
func RegisterIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	if err := indexer.IndexField(ctx, &networkingv1.Ingress{}, IngressHostIndex, IngressHosts); err != nil {
		return fmt.Errorf("index Ingresses by host: %w", err)
	}
	return nil
}

// checkHostsFree returns a ParameterError naming the parameter (Host or TlsHosts), the host
// and the other namespace when an Ingress of a namespace other than ns already serves one
// of the pod's hosts (its rules or TLS hosts, compared without case): a host belongs to the
// namespace that serves it first, so a pod cannot take traffic meant for another
// namespace's game servers. It reads from c's cache through IngressHostIndex; a failed list
// is an APICallError marked Unknown (nothing was seen).
func checkHostsFree(ctx context.Context, c client.Reader, ns string, params ingressParams) error {
	type hostOf struct{ param, host string }
	hosts := []hostOf{{ParamHost, params.host}}
	for _, h := range params.tlsHosts {
		hosts = append(hosts, hostOf{ParamTLSHosts, h})
	}
	for _, h := range hosts {
		if h.host == "" {
			continue
		}
		var list networkingv1.IngressList
		if err := c.List(ctx, &list, client.MatchingFields{IngressHostIndex: strings.ToLower(h.host)}); err != nil {
			return plugin.WrapUnknown(err, "list Ingresses of host %q", h.host)
		}
		for _, other := range list.Items {
			if other.Namespace != ns {
				return plugin.ParamErrorf(h.param, "host %q is already served by an Ingress of namespace %q; a host is served by one namespace only", h.host, other.Namespace)
			}
		}
	}
	return nil
}
