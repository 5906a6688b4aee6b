package kubernetes

import (
	corev1 "k8s.io/api/core/v1"

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
	conf, err := networkstatus.ConfFromPod(pod)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(pod.Spec.Containers))
	for _, ctr := range pod.Spec.Containers {
		names = append(names, ctr.Name)
	}
	_, err = parseHostPortParams(conf, names)
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
