package hwcloud

import (
	"context"
	"net"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
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

// CCEEIP is the HwCloud-CCE-EIP plugin: at CREATE it copies the network-conf's Yangtse
// parameters (CCEEIPParams) to the pod's annotations, with which CCE binds an EIP to the pod's
// ENI; at UPDATE it reports Yangtse's answer (AnnotationAllocatedEIP). It writes no object
// and keeps no state.
type CCEEIP struct{}

var _ plugin.Plugin = CCEEIP{}

// NewCCEEIP returns the HwCloud-CCE-EIP plugin.
func NewCCEEIP() CCEEIP { return CCEEIP{} }

// Name returns CCEEIPName.
func (CCEEIP) Name() string { return CCEEIPName }

// Alias returns CCEEIPAlias.
func (CCEEIP) Alias() string { return CCEEIPAlias }

// IsSynchronous returns false: the EIP is bound after the pod exists.
func (CCEEIP) IsSynchronous() bool { return false }

// Init does nothing.
func (CCEEIP) Init(context.Context, client.Client, plugin.Config) error { return nil }

// OnPodDeleted does nothing: CCE releases what it bound.
func (CCEEIP) OnPodDeleted(context.Context, client.Client, *corev1.Pod) error { return nil }

// OnPodAdded copies each network-conf parameter of CCEEIPParams to the pod's annotation of the
// same name (a later entry over an earlier one). Other parameters are not copied, and are a
// warning naming them (OKG: a log line). A network-conf that is not JSON is a ParameterError
// naming the annotation.
func (CCEEIP) OnPodAdded(_ context.Context, _ client.Client, pod *corev1.Pod) (*corev1.Pod, error) {
	conf, err := networkstatus.ConfFromPod(pod)
	if err != nil {
		return pod, err
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	var ignored []string
	for _, p := range conf {
		if slices.Contains(CCEEIPParams, p.Name) {
			pod.Annotations[p.Name] = p.Value
		} else if !slices.Contains(ignored, p.Name) {
			ignored = append(ignored, p.Name)
		}
	}
	if len(ignored) > 0 {
		return pod, &plugin.Error{Type: plugin.ParameterError, Param: strings.Join(ignored, ","), Warning: true,
			Message: CCEEIPName + " does not pass these parameters on, expected only " + strings.Join(CCEEIPParams, ", ")}
	}
	return pod, nil
}

// OnPodUpdated writes a Waiting status when the pod has none (OKG's first run); then, once
// Yangtse has written AnnotationAllocatedEIP, the Ready status: the EIP as the external
// address and the pod's IP as the internal one. Before that the status is left as it is. OKG
// reports Ready at its second run without looking at anything. An AnnotationAllocatedEIP that
// is not an IP address is a ParameterError naming it.
func (CCEEIP) OnPodUpdated(_ context.Context, _ client.Client, pod *corev1.Pod) (*corev1.Pod, error) {
	prev, _ := networkstatus.StatusFromPod(pod)
	if prev == nil {
		return pod, networkstatus.PutStatus(pod, networkstatus.NetworkStatus{CurrentNetworkState: networkstatus.NetworkWaiting})
	}
	eip, ok := pod.Annotations[AnnotationAllocatedEIP]
	if !ok || eip == "" {
		return pod, nil
	}
	if net.ParseIP(eip) == nil {
		return pod, plugin.ParamErrorf(AnnotationAllocatedEIP, "%q is not an IP address", eip)
	}
	st := *prev
	st.InternalAddresses = []networkstatus.NetworkAddress{{IP: pod.Status.PodIP}}
	st.ExternalAddresses = []networkstatus.NetworkAddress{{IP: eip}}
	st.CurrentNetworkState = networkstatus.NetworkReady
	return pod, networkstatus.PutStatus(pod, st)
}
