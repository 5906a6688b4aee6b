package kubernetes

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

var (
	_ plugin.ConfValidator = (*HostPort)(nil)
	_ plugin.ConfValidator = (*NodePort)(nil)
	_ plugin.ConfValidator = (*Ingress)(nil)
)

// ValidateConf checks the pod's network-conf as OnPodAdded does (ContainerPorts against the
// pod's containers), without allocating ports.
func (h *HostPort) ValidateConf(pod *corev1.Pod) error {
	_, err := hostPortParamsOf(pod)
	return err
}

// ValidateConf checks the pod's network-conf as OnPodAdded does.
func (n *NodePort) ValidateConf(pod *corev1.Pod) error {
	conf, err := networkstatus.ConfFromPod(pod)
	if err != nil {
		return err
	}
	_, err = parseNodePortParams(conf)
	return err
}

// ValidateConf checks the pod's network-conf as OnPodAdded does, under the provider
// config's annotation and host guardrails; with a pod name, also the ordinal that <id> in
// Path or Host needs.
func (i *Ingress) ValidateConf(pod *corev1.Pod) error {
	conf, err := networkstatus.ConfFromPod(pod)
	if err != nil {
		return err
	}
	params, warn := parseIngressParams(conf, i.guard)
	if isFatal(warn) {
		return warn
	}
	if pod.Name != "" {
		if _, err := params.expand(pod.Name); err != nil {
			return err
		}
	}
	return warn
}

var _ plugin.ObjectChecker = (*Ingress)(nil)

// CheckObjects makes OnPodUpdated's checks that read other objects, for the pod's network-conf
// (its name expanding <id>): the IngressClassName against the cluster's IngressClasses and
// allowed_ingress_classes (checkIngressClass), and Host and TlsHosts against the hosts
// Ingresses of other namespaces serve (checkHostsFree), both joined (errors.Join). It writes
// nothing; a network-conf that does not parse returns nil (ValidateConf reports it).
func (i *Ingress) CheckObjects(ctx context.Context, c client.Reader, pod *corev1.Pod) error {
	conf, err := networkstatus.ConfFromPod(pod)
	if err != nil {
		return nil
	}
	params, warn := parseIngressParams(conf, i.guard)
	if isFatal(warn) {
		return nil
	}
	if params, err = params.expand(pod.Name); err != nil {
		return nil
	}
	return errors.Join(checkIngressClass(ctx, c, params, i.guard), checkHostsFree(ctx, c, pod.Namespace, params))
}

// DeclaredHostPorts describes the container ports of pod that already declare a host port for
// a port its ContainerPorts asks a host port for: Kubernetes-HostPort replaces that host port
// with the one it allocates (addHostPort), where OKG adds a second entry beside it and the pod
// cannot be scheduled (docs/okg-compatibility.md). nppctl preflight lists them. A
// network-conf that does not parse describes none (ValidateConf reports it).
func DeclaredHostPorts(pod *corev1.Pod) []string {
	params, warn := hostPortParamsOf(pod)
	if isFatal(warn) {
		return nil
	}
	var out []string
	for _, ctr := range pod.Spec.Containers {
		cp, ok := params.forContainer(ctr.Name)
		if !ok {
			continue
		}
		for _, r := range cp.ports {
			protos := []corev1.Protocol{corev1.Protocol(r.protocol)}
			if r.protocol == protocolTCPUDP {
				protos = []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP}
			}
			for _, p := range ctr.Ports {
				proto := cmp.Or(p.Protocol, corev1.ProtocolTCP)
				if p.HostPort != 0 && p.ContainerPort == r.port && slices.Contains(protos, proto) {
					out = append(out, fmt.Sprintf("container %s declares hostPort %d for port %d/%s, which ContainerPorts asks a host port for", ctr.Name, p.HostPort, p.ContainerPort, proto))
				}
			}
		}
	}
	return out
}
