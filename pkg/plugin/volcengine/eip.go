package volcengine

import (
	"context"
	"encoding/json"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// EIPName is the network type of the EIP plugin (OKG's name); EIPAlias its family.
const (
	EIPName  = "Volcengine-EIP"
	EIPAlias = "EIP-Network"
)

// Pod annotations of Volcengine's VKE network controller that Volcengine-EIP writes and reads
// (OKG's keys).
const (
	// AnnotationEIPID binds an existing EIP to the pod (the network-conf parameter of the same
	// name).
	AnnotationEIPID = "vke.volcengine.com/primary-eip-id"
	// AnnotationEIPAllocate asks for a new EIP, with the value eipAllocate.
	AnnotationEIPAllocate = "vke.volcengine.com/primary-eip-allocate"
	// AnnotationEIPAttributes holds the new EIP's attributes, a JSON object of the
	// network-conf's other parameters.
	AnnotationEIPAttributes = "vke.volcengine.com/primary-eip-attributes"
	// AnnotationAllocatedEIPs is the controller's result: a JSON list of
	// {"EipId","EipAddress","EniId","EniIp"}.
	AnnotationAllocatedEIPs = "vke.volcengine.com/allocated-eips"
)

// Network-conf parameters of Volcengine-EIP that are numbers in the attributes (OKG's names);
// every other parameter but AnnotationEIPID goes into the attributes as a string.
const (
	ParamBillingType = "billingType"
	ParamBandwidth   = "bandwidth"
)

// eipAllocate is AnnotationEIPAllocate's value, and eipDescription the attributes of a
// network-conf without any (OKG's bytes).
const (
	eipAllocate    = `{"type": "Elastic"}`
	eipDescription = "Created by the OKG Volcengine EIP plugin. Do not delete or modify."
)

// EIP is the Volcengine-EIP plugin: at CREATE it writes the annotations with which VKE's
// network controller binds an EIP to the pod's ENI (an existing one, or a new one with the
// network-conf's attributes), and at UPDATE it reports the controller's result
// (AnnotationAllocatedEIPs) as the network-status: Waiting before the controller has
// answered, Ready with the EIP's address after. It writes no object. Safe for concurrent use
// (it has no state).
type EIP struct{}

var _ plugin.Plugin = EIP{}

// NewEIP returns the Volcengine-EIP plugin.
func NewEIP() EIP { return EIP{} }

// Name returns EIPName.
func (EIP) Name() string { return EIPName }

// Alias returns EIPAlias.
func (EIP) Alias() string { return EIPAlias }

// IsSynchronous returns false: the EIP is bound after the pod exists.
func (EIP) IsSynchronous() bool { return false }

// Init does nothing: the plugin keeps no state.
func (EIP) Init(context.Context, client.Client, plugin.Config) error { return nil }

// OnPodDeleted does nothing: the controller releases what it bound.
func (EIP) OnPodDeleted(context.Context, client.Client, *corev1.Pod) error { return nil }

// OnPodAdded writes, from the network-conf, AnnotationEIPID (parameter
// vke.volcengine.com/primary-eip-id) or, without it, AnnotationEIPAllocate and
// AnnotationEIPAttributes: a JSON object of the other parameters (billingType and bandwidth
// as integers, the rest as strings, a later entry of one name over an earlier one; OKG's
// description when there are none). A billingType or bandwidth that is not an integer is a
// ParameterError naming it (OKG: an InternalError); a network-conf that is not JSON is a
// ParameterError naming the annotation.
func (EIP) OnPodAdded(_ context.Context, _ client.Client, pod *corev1.Pod) (*corev1.Pod, error) {
	conf, err := networkstatus.ConfFromPod(pod)
	if err != nil {
		return pod, err
	}
	id := ""
	attrs := map[string]any{}
	for _, p := range conf {
		switch p.Name {
		case AnnotationEIPID:
			id = p.Value
		case ParamBillingType, ParamBandwidth:
			n, err := strconv.ParseInt(p.Value, 10, 64)
			if err != nil {
				return pod, plugin.ParamErrorf(p.Name, "%q is not an integer", p.Value)
			}
			attrs[p.Name] = n
		default:
			attrs[p.Name] = p.Value
		}
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	if id != "" {
		pod.Annotations[AnnotationEIPID] = id
		return pod, nil
	}
	if len(attrs) == 0 {
		attrs["description"] = eipDescription
	}
	b, err := json.Marshal(attrs)
	if err != nil {
		return pod, plugin.Wrap(plugin.InternalError, err, "encode the EIP attributes")
	}
	pod.Annotations[AnnotationEIPAllocate] = eipAllocate
	pod.Annotations[AnnotationEIPAttributes] = string(b)
	return pod, nil
}

// allocatedEIP is one entry of AnnotationAllocatedEIPs. OKG reads the ENI's address from the
// key "niIp", a typo the controller does not write, so its internal address is always empty;
// here "EniIp" is read, and "niIp" when it is the only one.
type allocatedEIP struct {
	EipID      string `json:"EipId,omitempty"`
	EipAddress string `json:"EipAddress,omitempty"`
	EniID      string `json:"EniId,omitempty"`
	EniIP      string `json:"EniIp,omitempty"`
	NiIP       string `json:"niIp,omitempty"`
}

// OnPodUpdated writes a Waiting status when the pod has none (OKG's first run); then, once
// the controller has written AnnotationAllocatedEIPs with at least one address, the Ready
// status: per EIP an internal address (the ENI's) and an external one (the EIP's), no ports.
// Before that the status is left as it is. An AnnotationAllocatedEIPs that is not such a JSON
// list is a ParameterError naming it; an empty list, or entries without an address, is not an
// answer yet (OKG indexes the first entry of an empty list and crashes).
func (EIP) OnPodUpdated(_ context.Context, _ client.Client, pod *corev1.Pod) (*corev1.Pod, error) {
	prev, _ := networkstatus.StatusFromPod(pod)
	if prev == nil {
		return pod, networkstatus.PutStatus(pod, networkstatus.NetworkStatus{CurrentNetworkState: networkstatus.NetworkWaiting})
	}
	raw, ok := pod.Annotations[AnnotationAllocatedEIPs]
	if !ok {
		return pod, nil
	}
	var eips []allocatedEIP
	if err := json.Unmarshal([]byte(raw), &eips); err != nil {
		return pod, plugin.ParamErrorf(AnnotationAllocatedEIPs, "not a JSON list of allocated EIPs: %v", err)
	}
	st := *prev
	st.InternalAddresses, st.ExternalAddresses = nil, nil
	for _, e := range eips {
		if e.EipAddress == "" {
			continue
		}
		internal := e.EniIP
		if internal == "" {
			internal = e.NiIP
		}
		st.InternalAddresses = append(st.InternalAddresses, networkstatus.NetworkAddress{IP: internal})
		st.ExternalAddresses = append(st.ExternalAddresses, networkstatus.NetworkAddress{IP: e.EipAddress})
	}
	if len(st.ExternalAddresses) == 0 {
		return pod, nil
	}
	st.CurrentNetworkState = networkstatus.NetworkReady
	return pod, networkstatus.PutStatus(pod, st)
}
