package hwcloud

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/eip"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// CCEEIPName is the network type of the CCE EIP plugin (OKG's name); CCEEIPAlias its family.
const (
	CCEEIPName  = "HwCloud-CCE-EIP"
	CCEEIPAlias = "CCE-EIP-Network"
)

// AnnotationAllocatedEIP is where CCE's container network controller (Yangtse) reports the
// EIP it bound to the pod, once the pod has its IP: the EIP's IPv4 address.
const AnnotationAllocatedEIP = "yangtse.io/allocated-ipv4-eip"

// CCEEIPParams are the network-conf parameters HwCloud-CCE-EIP copies to the pod as
// annotations of the same name, for Yangtse (OKG's allow-list).
var CCEEIPParams = []string{
	"yangtse.io/pod-with-eip", "yangtse.io/eip-bandwidth-size", "yangtse.io/eip-network-type",
	"yangtse.io/eip-charge-mode", "yangtse.io/eip-bandwidth-name", "yangtse.io/eip-bandwidth-id",
	"yangtse.io/eip-id", "yangtse.io/security-group-ids", "yangtse.io/additional-security-group-ids",
}

// NewCCEEIP returns the HwCloud-CCE-EIP plugin (pkg/plugin/eip): at CREATE it copies each
// network-conf parameter of CCEEIPParams to the pod's annotation of the same name (a later
// entry over an earlier one; another parameter is a warning naming it, OKG logs it), with which
// CCE binds an EIP to the pod's ENI; at UPDATE it reports Yangtse's answer: Waiting first,
// Ready once AnnotationAllocatedEIP holds the EIP, with it outside and the pod's IP inside (OKG
// reports Ready at its second run without looking at anything). An AnnotationAllocatedEIP that
// is not an IP address is a ParameterError naming it. A change of AnnotationAllocatedEIP is
// taken only from writers ([hwcloud] result_writers, result_writer_groups).
func NewCCEEIP(writers plugin.ResultWriters) *eip.Plugin {
	return eip.New(eip.Spec{Name: CCEEIPName, Alias: CCEEIPAlias, Results: []string{AnnotationAllocatedEIP}, Writers: writers,
		// Yangtse creates an EIP for a pod with pod-with-eip "true", unless eip-id names an
		// existing one to bind.
		Creates: func(conf networkstatus.Conf) bool {
			with, _ := conf.Last("yangtse.io/pod-with-eip")
			id, _ := conf.Last("yangtse.io/eip-id")
			return strings.EqualFold(strings.TrimSpace(with), "true") && strings.TrimSpace(id) == ""
		},
		CreatesParams: []string{"yangtse.io/pod-with-eip", "yangtse.io/eip-id"},
		Ask: func(pod *corev1.Pod, conf networkstatus.Conf) error {
			for _, p := range conf {
				if slices.Contains(CCEEIPParams, p.Name) {
					pod.Annotations[p.Name] = p.Value
				}
			}
			return eip.Unread(CCEEIPName, conf, CCEEIPParams)
		},
		Answer: func(pod *corev1.Pod) (internal, external []networkstatus.NetworkAddress, ok bool, err error) {
			return eip.Annotated(pod, AnnotationAllocatedEIP)
		}})
}
