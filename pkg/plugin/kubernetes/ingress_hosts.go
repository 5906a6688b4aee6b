package kubernetes

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

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
// and the other namespace when the host (its rules or TLS hosts, compared without case)
// belongs to another namespace than ns: a host belongs to the namespace whose Ingress has
// served it longest, the oldest claim by creationTimestamp (ties, within the second of its
// precision, go to the namespace and then the name that sort first). So a pod cannot take
// traffic meant for another namespace's game servers, and a tenant who creates an Ingress
// for a host game servers already serve does not take it from them: their Ingresses,
// including a Fixed one that outlives its pods and is their successors' too, are older.
//
// The residual race: two namespaces that claim a free host within the time the manager's
// cache takes to see the first claim (milliseconds, seconds under load) both get their
// Ingress written; from the next plugin run on, the older claim wins and the other pod is
// refused, though a live network is kept until the pod is recreated (keepLiveIngress). A
// claim is an Ingress, whoever wrote it: a host has no record of its own, so a claim goes
// with the last Ingress that serves it.
//
// It reads from c's cache through IngressHostIndex; a failed list is an APICallError marked
// Unknown (nothing was seen).
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
		claims := make([]*networkingv1.Ingress, len(list.Items))
		for i := range list.Items {
			claims[i] = &list.Items[i]
		}
		if first := FirstClaim(claims, h.host); first != nil && first.Namespace != ns {
			return plugin.NotAllowedf(h.param, "host %q is already served by an Ingress of namespace %q; a host is served by one namespace only, the one that served it first (Ingress %s/%s, created %s)",
				h.host, first.Namespace, first.Namespace, first.Name, first.CreationTimestamp.UTC().Format(time.RFC3339))
		}
	}
	return nil
}

// FirstClaim returns the Ingress of ingresses that claimed host first (IngressHosts, compared
// without case): the oldest by creationTimestamp, ties to the namespace and then the name that
// sort first, Ingresses being deleted left out; the host belongs to its namespace
// (checkHostsFree). It returns nil when none serves host.
func FirstClaim(ingresses []*networkingv1.Ingress, host string) *networkingv1.Ingress {
	host = strings.ToLower(host)
	var first *networkingv1.Ingress
	for _, ing := range ingresses {
		if ing.DeletionTimestamp != nil || !slices.Contains(IngressHosts(ing), host) {
			continue // an Ingress on its way out claims nothing
		}
		if first == nil || claimedEarlier(ing, first) {
			first = ing
		}
	}
	return first
}

// claimedEarlier reports whether a's claim on a host is older than b's: an earlier
// creationTimestamp, or the same one and a namespace, then a name, that sorts first.
func claimedEarlier(a, b *networkingv1.Ingress) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	return a.Name < b.Name
}
