package jdcloud

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

// EIPName is the network type of the EIP plugin (OKG's name); EIPAlias its family.
const (
	EIPName  = "JdCloud-EIP"
	EIPAlias = "EIP-Network"
)

// Pod annotations of JD Cloud's network controller that JdCloud-EIP writes and reads (OKG's
// keys; the bandwidth key is spelt as OKG spells it).
const (
	AnnotationEIPEnable    = "jdos.jd.com/eip.enable"
	AnnotationEIPName      = "jdos.jd.com/eip-name"
	AnnotationEIPBandwidth = "jdos.jd.com/eip.bandwith"
	AnnotationEIPCharge    = "jdos.jd.com/eip.chargeMode"
	AnnotationEIPStatic    = "jdos.jd.com/eip.static"
	// AnnotationEIPID and AnnotationEIPIP are the controller's answer: the bound EIP's id and
	// address.
	AnnotationEIPID = "jdos.jd.com/eip.id"
	AnnotationEIPIP = "jdos.jd.com/eip.ip"
)

// Network-conf parameters of JdCloud-EIP (OKG's names) and the annotations they become.
const (
	ParamBandwidth  = "Bandwidth"
	ParamChargeType = "ChargeType"
	ParamFixed      = "Fixed"
)

var eipParams = map[string]string{ParamBandwidth: AnnotationEIPBandwidth, ParamChargeType: AnnotationEIPCharge, ParamFixed: AnnotationEIPStatic}

// EIP is the JdCloud-EIP plugin: at CREATE it asks JD Cloud's network controller for an EIP
// through pod annotations; at UPDATE it reports the controller's answer. It writes no object
// and keeps no state.
type EIP struct{}

var _ plugin.Plugin = EIP{}

// NewEIP returns the JdCloud-EIP plugin.
func NewEIP() EIP { return EIP{} }

// Name returns EIPName.
func (EIP) Name() string { return EIPName }

// Alias returns EIPAlias.
func (EIP) Alias() string { return EIPAlias }

// IsSynchronous returns false: the EIP is bound after the pod exists.
func (EIP) IsSynchronous() bool { return false }

// Init does nothing.
func (EIP) Init(context.Context, client.Client, plugin.Config) error { return nil }

// OnPodDeleted does nothing: the controller releases what it bound.
func (EIP) OnPodDeleted(context.Context, client.Client, *corev1.Pod) error { return nil }

// OnPodAdded writes AnnotationEIPEnable "true", AnnotationEIPName "<namespace>/<name>" (OKG's;
// a pod named by generateName has no name yet at CREATE, so "<namespace>/"), and for Bandwidth,
// ChargeType and Fixed their annotations with the parameter's value. Other parameters are a
// warning naming them (OKG ignores them silently). A network-conf that is not JSON is a
// ParameterError naming the annotation.
func (EIP) OnPodAdded(_ context.Context, _ client.Client, pod *corev1.Pod) (*corev1.Pod, error) {
	conf, err := networkstatus.ConfFromPod(pod)
	if err != nil {
		return pod, err
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[AnnotationEIPEnable] = "true"
	pod.Annotations[AnnotationEIPName] = pod.Namespace + "/" + pod.Name
	var ignored []string
	for _, p := range conf {
		if key, ok := eipParams[p.Name]; ok {
			pod.Annotations[key] = p.Value
		} else if !slices.Contains(ignored, p.Name) {
			ignored = append(ignored, p.Name)
		}
	}
	if len(ignored) > 0 {
		return pod, &plugin.Error{Type: plugin.ParameterError, Param: strings.Join(ignored, ","), Warning: true,
			Message: EIPName + " ignores unknown network-conf parameters, expected only Bandwidth, ChargeType, Fixed"}
	}
	return pod, nil
}

// OnPodUpdated writes a Waiting status when the pod has none (OKG's first run). Then, with
// AnnotationEIPEnable no longer "true" (someone removed or changed it), a ParameterError naming
// it (OKG: an internalError "eip plugin is not enabled"); before the controller has written
// both AnnotationEIPID and AnnotationEIPIP the status is left as it is; after, Ready with the
// EIP as the external address and the pod's IP as the internal one. An AnnotationEIPIP that is
// not an IP address is a ParameterError naming it.
func (EIP) OnPodUpdated(_ context.Context, _ client.Client, pod *corev1.Pod) (*corev1.Pod, error) {
	prev, _ := networkstatus.StatusFromPod(pod)
	if prev == nil {
		return pod, networkstatus.PutStatus(pod, networkstatus.NetworkStatus{CurrentNetworkState: networkstatus.NetworkWaiting})
	}
	if v := pod.Annotations[AnnotationEIPEnable]; v != "true" {
		return pod, plugin.ParamErrorf(AnnotationEIPEnable, "%q, expected \"true\": the EIP is not asked for", v)
	}
	_, hasID := pod.Annotations[AnnotationEIPID]
	ip, hasIP := pod.Annotations[AnnotationEIPIP]
	if !hasID || !hasIP {
		return pod, nil
	}
	if net.ParseIP(ip) == nil {
		return pod, plugin.ParamErrorf(AnnotationEIPIP, "%q is not an IP address", ip)
	}
	st := *prev
	st.ExternalAddresses = []networkstatus.NetworkAddress{{IP: ip}}
	st.InternalAddresses = []networkstatus.NetworkAddress{{IP: pod.Status.PodIP}}
	st.CurrentNetworkState = networkstatus.NetworkReady
	return pod, networkstatus.PutStatus(pod, st)
}
