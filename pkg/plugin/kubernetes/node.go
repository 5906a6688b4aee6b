package kubernetes

import (
	"context"
	"net"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
)

// nodeAddress returns the address players reach a node at: the first ExternalIP, else
// the first ExternalDNS, else the first InternalIP, else the first InternalDNS; ""
// when the node has none.
func nodeAddress(node *corev1.Node) string {
	for _, t := range []corev1.NodeAddressType{corev1.NodeExternalIP, corev1.NodeExternalDNS, corev1.NodeInternalIP, corev1.NodeInternalDNS} {
		for _, a := range node.Status.Addresses {
			if a.Type != t || a.Address == "" {
				continue
			}
			if (t == corev1.NodeExternalIP || t == corev1.NodeInternalIP) && net.ParseIP(a.Address) == nil {
				continue
			}
			return a.Address
		}
	}
	return ""
}

// podNodeAddress returns the address of the pod's node, or "" when the pod is not
// scheduled or its Node does not exist (neither is an error: the network is simply not
// ready). Other API errors are APICallErrors.
func podNodeAddress(ctx context.Context, c client.Client, pod *corev1.Pod) (string, error) {
	if pod.Spec.NodeName == "" {
		return "", nil
	}
	node := &corev1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Name: pod.Spec.NodeName}, node); err != nil {
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		return "", plugin.Wrap(plugin.APICallError, err, "get node %q", pod.Spec.NodeName)
	}
	return nodeAddress(node), nil
}
