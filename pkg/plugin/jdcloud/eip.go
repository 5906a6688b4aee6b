package jdcloud

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/eip"
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

// NewEIP returns the JdCloud-EIP plugin (pkg/plugin/eip): at CREATE it writes
// AnnotationEIPEnable "true", AnnotationEIPName "<namespace>/<name>" (OKG's; a pod named by
// generateName has no name yet at CREATE, so "<namespace>/"), and for Bandwidth, ChargeType and
// Fixed their annotations with the parameter's value (another parameter is a warning naming it;
// OKG ignores it); at UPDATE it reports the controller's answer: Waiting first, Ready once both
// AnnotationEIPID and AnnotationEIPIP are written, with the EIP outside and the pod's IP inside.
// AnnotationEIPEnable no longer "true" (someone removed or changed it) is a ParameterError
// naming it (OKG: an internalError "eip plugin is not enabled"), as is an AnnotationEIPIP that
// is not an IP address. A change of AnnotationEIPID or AnnotationEIPIP is taken only from
// writers ([jdcloud] result_writers, result_writer_groups).
func NewEIP(writers plugin.ResultWriters) *eip.Plugin {
	known := []string{ParamBandwidth, ParamChargeType, ParamFixed}
	// Every JdCloud-EIP pod gets a new EIP from the controller (Creates nil).
	return eip.New(eip.Spec{Name: EIPName, Alias: EIPAlias, Results: []string{AnnotationEIPID, AnnotationEIPIP}, Writers: writers,
		CreatesParams: []string{ParamBandwidth, ParamChargeType, ParamFixed},
		Ask: func(pod *corev1.Pod, conf networkstatus.Conf) error {
			pod.Annotations[AnnotationEIPEnable] = "true"
			pod.Annotations[AnnotationEIPName] = pod.Namespace + "/" + pod.Name
			for _, p := range conf {
				if key, ok := eipParams[p.Name]; ok {
					pod.Annotations[key] = p.Value
				}
			}
			return eip.Unread(EIPName, conf, known)
		},
		Answer: func(pod *corev1.Pod) (internal, external []networkstatus.NetworkAddress, ok bool, err error) {
			if v := pod.Annotations[AnnotationEIPEnable]; v != "true" {
				return nil, nil, false, plugin.ParamErrorf(AnnotationEIPEnable, "%q, expected \"true\": the EIP is not asked for", v)
			}
			if pod.Annotations[AnnotationEIPID] == "" {
				return nil, nil, false, nil
			}
			return eip.Annotated(pod, AnnotationEIPIP)
		}})
}
