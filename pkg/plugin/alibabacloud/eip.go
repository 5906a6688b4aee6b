package alibabacloud

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/eip"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// EIPName is the network type of the EIP plugin (OKG's name); EIPAlias its family.
const (
	EIPName  = "AlibabaCloud-EIP"
	EIPAlias = "EIP-Network"
)

// Pod annotations of Alibaba's Terway network plugin that AlibabaCloud-EIP writes (OKG's
// keys): Terway binds an EIP to a pod with AnnotationWithEIP "true" and reports it in the
// PodEIP object of the pod's name.
const (
	AnnotationWithEIP = "k8s.aliyun.com/pod-with-eip"
	// AnnotationEIPName is the EIP's name, "<namespace>/<pod>".
	AnnotationEIPName = "k8s.aliyun.com/eip-name"
)

// Network-conf parameters of AlibabaCloud-EIP (OKG's names), each copied verbatim to the
// Terway annotation eipParams gives it.
const (
	ParamReleaseStrategy    = "ReleaseStrategy"
	ParamPoolID             = "PoolId"
	ParamResourceGroupID    = "ResourceGroupId"
	ParamBandwidth          = "Bandwidth"
	ParamBandwidthPackageID = "BandwidthPackageId"
	ParamChargeType         = "ChargeType"
	ParamDescription        = "Description"
)

// eipParams maps each AlibabaCloud-EIP parameter to its Terway annotation (OKG's keys).
var eipParams = map[string]string{
	ParamReleaseStrategy:    "k8s.aliyun.com/pod-eip-release-strategy",
	ParamPoolID:             "k8s.aliyun.com/eip-public-ip-address-pool-id",
	ParamResourceGroupID:    "k8s.aliyun.com/eip-resource-group-id",
	ParamBandwidth:          "k8s.aliyun.com/eip-bandwidth",
	ParamBandwidthPackageID: "k8s.aliyun.com/eip-common-bandwidth-package-id",
	ParamChargeType:         "k8s.aliyun.com/eip-internet-charge-type",
	ParamDescription:        "k8s.aliyun.com/eip-description",
}

// GroupVersion is the API group and version of Terway's PodEIP and of PodDNAT
// (alibabacloud.com/v1beta1, as OKG's scheme registers them).
var GroupVersion = schema.GroupVersion{Group: "alibabacloud.com", Version: "v1beta1"}

// PodEIPKind and PodDNATKind are the kinds AlibabaCloud-EIP and AlibabaCloud-NATGW read their
// controller's answer from, one object per pod, of the pod's name.
const (
	PodEIPKind  = "PodEIP"
	PodDNATKind = "PodDNAT"
)

// resultObject returns an empty unstructured object of kind in GroupVersion.
func resultObject(kind string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(GroupVersion.WithKind(kind))
	return u
}

// NewEIP returns the AlibabaCloud-EIP plugin (pkg/plugin/eip). At CREATE it writes
// AnnotationWithEIP "true", AnnotationEIPName "<namespace>/<pod>" and one Terway annotation per
// parameter it knows (eipParams), verbatim, over any value the pod had (OKG's behaviour); an
// unknown parameter is a warning. At UPDATE it is Waiting first, then reads the PodEIP of the
// pod's name (Terway's, alibabacloud.com/v1beta1; through the reader of UseResultReader, the
// manager's cache): missing, or without status.eipAddress, is
// no answer yet; else Ready with status.privateIPAddress inside and status.eipAddress outside.
// A PodEIP that Terway kept from an earlier pod of the name (ReleaseStrategy Never or TTL
// keeps the EIP for the StatefulSet's next pod) is that pod's EIP, as in OKG. Every
// network-conf asks Terway for a new EIP (createsCloudResources). A network-conf that is not
// JSON is a parameterError (OKG panics).
func NewEIP() *eip.Plugin {
	known := []string{ParamReleaseStrategy, ParamPoolID, ParamResourceGroupID, ParamBandwidth, ParamBandwidthPackageID, ParamChargeType, ParamDescription}
	return eip.New(eip.Spec{Name: EIPName, Alias: EIPAlias,
		Ask: func(pod *corev1.Pod, conf networkstatus.Conf) error {
			pod.Annotations[AnnotationWithEIP] = "true"
			pod.Annotations[AnnotationEIPName] = pod.Namespace + "/" + pod.Name
			for _, p := range conf {
				if key, ok := eipParams[p.Name]; ok {
					pod.Annotations[key] = p.Value
				}
			}
			return eip.Unread(EIPName, conf, known)
		},
		Read:    readPodEIP,
		Objects: []plugin.ResultKind{{Object: resultObject(PodEIPKind), Answer: [][]string{{"status", "eipAddress"}, {"status", "privateIPAddress"}}}},
	})
}

// readPodEIP is AlibabaCloud-EIP's answer (NewEIP).
func readPodEIP(ctx context.Context, c client.Reader, pod *corev1.Pod) (internal, external []networkstatus.NetworkAddress, ready, ok bool, err error) {
	obj, found, err := readResult(ctx, c, PodEIPKind, pod)
	if err != nil || !found {
		return nil, nil, false, false, err
	}
	ip, _, _ := unstructured.NestedString(obj.Object, "status", "eipAddress")
	if ip == "" {
		return nil, nil, false, false, nil
	}
	private, _, _ := unstructured.NestedString(obj.Object, "status", "privateIPAddress")
	return []networkstatus.NetworkAddress{{IP: private}}, []networkstatus.NetworkAddress{{IP: ip}}, true, true, nil
}

// readResult reads the object of kind named after pod in its namespace through c: found
// false when there is none. Every read error is an Unknown apiCallError (a Ready network
// stays Ready: unknown is not broken): a kind the API server does not serve (its CRD not
// installed, or being reinstalled) with reason Unavailable and a message naming the kind.
func readResult(ctx context.Context, c client.Reader, kind string, pod *corev1.Pod) (*unstructured.Unstructured, bool, error) {
	obj := resultObject(kind)
	err := c.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: pod.Name}, obj)
	switch {
	case err == nil:
		return obj, true, nil
	case apierrors.IsNotFound(err):
		return nil, false, nil
	case meta.IsNoMatchError(err):
		return nil, false, &plugin.Error{Type: plugin.APICallError, Reason: plugin.ReasonUnavailable, Unknown: true,
			Message: fmt.Sprintf("read %s %s/%s: the API server does not serve %s (%s): is its controller installed?", kind, pod.Namespace, pod.Name,
				kind, strings.Join([]string{GroupVersion.String(), kind}, ", ")), Err: err}
	default:
		return nil, false, plugin.WrapUnknown(err, "read %s %s/%s", kind, pod.Namespace, pod.Name)
	}
}
