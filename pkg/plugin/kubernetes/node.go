package kubernetes

import (
	"context"
	"net"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
)

// nodeAddress returns the address players reach a node at, chosen as OKG chooses it:
// the last ExternalIP that parses as an IP, replaced by the last ExternalDNS name when
// the node has one; when neither exists, the last InternalIP, replaced by the last
// InternalDNS name. The address is "" when the node has none of these (a node that
// reports only a Hostname); known is false only when the node reports no address at
// all (docs/okg-compatibility.md: such a node is not initialized yet, and the network
// waits instead of publishing "ip":"").
func nodeAddress(node *corev1.Node) (addr string, known bool) {
	pick := func(ipType, dnsType corev1.NodeAddressType) string {
		found := ""
		for _, a := range node.Status.Addresses {
			if a.Type == ipType && net.ParseIP(a.Address) != nil {
				found = a.Address
			}
		}
		for _, a := range node.Status.Addresses {
			if a.Type == dnsType {
				found = a.Address
			}
		}
		return found
	}
	addr = pick(corev1.NodeExternalIP, corev1.NodeExternalDNS)
	if addr == "" {
		addr = pick(corev1.NodeInternalIP, corev1.NodeInternalDNS)
	}
	return addr, len(node.Status.Addresses) > 0
}

// podNode returns the pod's Node, or nil when the pod is not scheduled or its Node does
// not exist (neither is an error: OKG's plugins then leave the pod as it is). Other API
// errors are APICallErrors marked Unknown (plugin.WrapUnknown): the read failed, the
// network was not seen to be wrong.
func podNode(ctx context.Context, c client.Client, pod *corev1.Pod) (*corev1.Node, error) {
	if pod.Spec.NodeName == "" {
		return nil, nil
	}
	node := &corev1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Name: pod.Spec.NodeName}, node); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, plugin.WrapUnknown(err, "get node %q", pod.Spec.NodeName)
	}
	return node, nil
}
