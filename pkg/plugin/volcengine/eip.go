package volcengine

import (
	"encoding/json"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/eip"
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

// NewEIP returns the Volcengine-EIP plugin (pkg/plugin/eip): at CREATE it writes the
// annotations with which VKE's network controller binds an EIP to the pod's ENI, an existing one
// (parameter vke.volcengine.com/primary-eip-id: AnnotationEIPID, nothing else) or a new one
// (AnnotationEIPAllocate, and AnnotationEIPAttributes: a JSON object of the other parameters,
// billingType and bandwidth as integers, the rest as strings, a later entry of one name over an
// earlier one; OKG's description when there are none); at UPDATE it reports the controller's
// result (AnnotationAllocatedEIPs): Waiting first, Ready with the EIPs' addresses after. A
// billingType or bandwidth that is not an integer is a ParameterError naming it (OKG: an
// InternalError). A change of AnnotationAllocatedEIPs is taken only from writers ([volcengine]
// result_writers, result_writer_groups).
func NewEIP(writers plugin.ResultWriters) *eip.Plugin {
	return eip.New(eip.Spec{Name: EIPName, Alias: EIPAlias, Ask: askEIP, Answer: allocatedEIPs,
		Results: []string{AnnotationAllocatedEIPs}, Writers: writers,
		// VKE binds the existing EIP AnnotationEIPID names, else allocates one (askEIP: the
		// last entry's value; an empty one names none).
		Creates: func(conf networkstatus.Conf) bool {
			id, _ := conf.Last(AnnotationEIPID)
			return id == ""
		},
		CreatesParams: []string{AnnotationEIPID}})
}

// askEIP writes Volcengine-EIP's annotations at CREATE (NewEIP).
func askEIP(pod *corev1.Pod, conf networkstatus.Conf) error {
	id := ""
	attrs := map[string]any{}
	for _, p := range conf {
		switch p.Name {
		case AnnotationEIPID:
			id = p.Value
		case ParamBillingType, ParamBandwidth:
			n, err := strconv.ParseInt(p.Value, 10, 64)
			if err != nil {
				return plugin.ParamErrorf(p.Name, "%q is not an integer", p.Value)
			}
			attrs[p.Name] = n
		default:
			attrs[p.Name] = p.Value
		}
	}
	if id != "" {
		pod.Annotations[AnnotationEIPID] = id
		return nil
	}
	if len(attrs) == 0 {
		attrs["description"] = eipDescription
	}
	b, err := json.Marshal(attrs)
	if err != nil {
		return plugin.Wrap(plugin.InternalError, err, "encode the EIP attributes")
	}
	pod.Annotations[AnnotationEIPAllocate] = eipAllocate
	pod.Annotations[AnnotationEIPAttributes] = string(b)
	return nil
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

// allocatedEIPs reads the controller's AnnotationAllocatedEIPs: per EIP an internal address
// (the ENI's) and an external one (the EIP's), no ports. No annotation, an empty list or entries
// without an address are no answer yet (OKG indexes the first entry of an empty list and
// crashes); a value that is not such a JSON list is a ParameterError naming it.
func allocatedEIPs(pod *corev1.Pod) (internal, external []networkstatus.NetworkAddress, ok bool, err error) {
	raw, ok := pod.Annotations[AnnotationAllocatedEIPs]
	if !ok {
		return nil, nil, false, nil
	}
	var eips []allocatedEIP
	if err := json.Unmarshal([]byte(raw), &eips); err != nil {
		return nil, nil, false, plugin.ParamErrorf(AnnotationAllocatedEIPs, "not a JSON list of allocated EIPs: %v", err)
	}
	for _, e := range eips {
		if e.EipAddress == "" {
			continue
		}
		in := e.EniIP
		if in == "" {
			in = e.NiIP
		}
		internal = append(internal, networkstatus.NetworkAddress{IP: in})
		external = append(external, networkstatus.NetworkAddress{IP: e.EipAddress})
	}
	return internal, external, len(external) > 0, nil
}
