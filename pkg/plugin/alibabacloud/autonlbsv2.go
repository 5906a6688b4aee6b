package alibabacloud

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/lb"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/ordinal"
)

// The AutoNLBs-V2 type, its parameter, finalizer and labels (OKG's names, d76ace2).
const (
	// AutoNLBsV2Name is the network type of the AutoNLBs-V2 plugin.
	AutoNLBsV2Name = "AlibabaCloud-AutoNLBs-V2"
	// ParamRetainNLBOnDelete keeps (true, the default) or deletes (false) a GameServerSet's
	// NLB and EIP objects when it is deleted.
	ParamRetainNLBOnDelete = "RetainNLBOnDelete"
	// FinalizerDeleteNLB is the pod finalizer of a game server whose GameServerSet's NLB and
	// EIP objects go with it (RetainNLBOnDelete false).
	FinalizerDeleteNLB = "game.kruise.io/delete-nlb-on-gss-deleted"
	// LabelGSSDeleting marks a game server whose GameServerSet is gone or being deleted
	// ("true"); it is informational: nothing here reads it.
	LabelGSSDeleting = "game.kruise.io/gss-deleting"
	// LabelNLBPool and the other pool labels mark the NLB objects: "true", the ISP type as
	// written in EipIspTypes, the GameServerSet's name and the NLB's index.
	LabelNLBPool        = "game.kruise.io/nlb-pool"
	LabelNLBPoolISPType = "game.kruise.io/nlb-pool-eip-isp-type"
	LabelNLBPoolGSS     = "game.kruise.io/nlb-pool-gss"
	LabelNLBPoolIndex   = "game.kruise.io/nlb-pool-index"
	// LabelEIPPool and the other EIP labels mark the EIP objects likewise; the index is
	// "<NLB index>-z<zone index>".
	LabelEIPPool        = "game.kruise.io/eip-pool"
	LabelEIPPoolISPType = "game.kruise.io/eip-pool-eip-isp-type"
	LabelEIPPoolGSS     = "game.kruise.io/eip-pool-gss"
	LabelEIPPoolIndex   = "game.kruise.io/eip-pool-index"
)

// The operators' kinds, as their CRDs serve them (the NLB operator's nlboperator.alibabacloud.com
// v1 NLB, the EIP operator's eip.alibabacloud.com v1alpha1 EIP); their modules are not imported:
// the fields read and written are those autonlbsv2.go names.
var (
	NLBGVK = schema.GroupVersionKind{Group: "nlboperator.alibabacloud.com", Version: "v1", Kind: "NLB"}
	EIPGVK = schema.GroupVersionKind{Group: "eip.alibabacloud.com", Version: "v1alpha1", Kind: "EIP"}
)

// Caps on what one namespace's game servers make the operators create.
const (
	// AutoNLBsV2MaxZones is the most zones ZoneMaps lists: each NLB gets one EIP per zone.
	AutoNLBsV2MaxZones = 8
	// AutoNLBsV2MaxNLBsPerNamespace is the most NLB objects of this plugin (label
	// game.kruise.io/nlb-pool) a namespace holds: each is an NLB and an EIP per zone that the
	// cloud bills, and none has an owner. 64 NLBs of OKG's default range serve 32,000 game
	// servers of one port.
	AutoNLBsV2MaxNLBsPerNamespace = 64
	// FinalizeMaxWait is the longest a terminating game server is held for its
	// GameServerSet's Services to go before its NLB and EIP objects are deleted: past it, the
	// finalizer is let go and the objects are kept. The garbage collector deletes a deleted
	// GameServerSet's Services within seconds; 10 minutes covers a busy one.
	FinalizeMaxWait = 10 * time.Minute
)

// AutoNLBsV2 is AlibabaCloud-AutoNLBs-V2: per GameServerSet, ISP type and NLB index, EIP
// objects "<gss>-eip-<isp>-<k>-z<zone>" for Alibaba's EIP operator, then, once each has its
// allocation id, an NLB object "<gss>-<isp>-<k>" for Alibaba's NLB operator (neither has an
// owner), then, once the NLB has its id, the game server's Service "<pod>-<isp>" on it,
// owned by the GameServerSet; the listener ports follow from the ordinal (pkg/plugin/ordinal).
// plugin.Plugin, plugin.ConfValidator, plugin.NetworkViewer, plugin.PodFinalizer and
// plugin.ResultObjectsReader.
type AutoNLBsV2 struct{}

var (
	_ plugin.Plugin              = (*AutoNLBsV2)(nil)
	_ plugin.ConfValidator       = (*AutoNLBsV2)(nil)
	_ plugin.NetworkViewer       = (*AutoNLBsV2)(nil)
	_ plugin.PodFinalizer        = (*AutoNLBsV2)(nil)
	_ plugin.ResultObjectsReader = (*AutoNLBsV2)(nil)
)

// ResultObjects returns the operators' kinds: an EIP object's allocation id (the NLB object
// can be made) and an NLB object's id (the game server's Service can be made) run the game
// servers of the GameServerSet the object's pool label names.
func (a *AutoNLBsV2) ResultObjects() []plugin.ResultKind {
	eip, nlb := &unstructured.Unstructured{}, &unstructured.Unstructured{}
	eip.SetGroupVersionKind(EIPGVK)
	nlb.SetGroupVersionKind(NLBGVK)
	return []plugin.ResultKind{
		{Object: eip, Answer: [][]string{{"status", "allocationID"}}, GameServerSetLabel: LabelEIPPoolGSS},
		{Object: nlb, Answer: [][]string{{"status", "loadBalancerId"}}, GameServerSetLabel: LabelNLBPoolGSS},
	}
}

// NewAutoNLBsV2 returns the AlibabaCloud-AutoNLBs-V2 plugin.
func NewAutoNLBsV2() *AutoNLBsV2 { return &AutoNLBsV2{} }

// Name returns AutoNLBsV2Name.
func (a *AutoNLBsV2) Name() string { return AutoNLBsV2Name }

// Alias returns AutoNLBsAlias, OKG's alias of both AutoNLBs types.
func (a *AutoNLBsV2) Alias() string { return AutoNLBsAlias }

// IsSynchronous returns false: the network converges when the operators and the cloud have
// made the EIPs, the NLB and its listeners.
func (a *AutoNLBsV2) IsSynchronous() bool { return false }

// Init does nothing: the objects are made at the updates of a GameServerSet's game servers
// (OKG also makes EIP objects at its start for every GameServerSet of the type).
func (a *AutoNLBsV2) Init(context.Context, client.Client, plugin.Config) error { return nil }

// OnPodDeleted does nothing: the finalizer is handled by Finalize.
func (a *AutoNLBsV2) OnPodDeleted(context.Context, client.Client, *corev1.Pod) error { return nil }

// v2Zone is one zone of ZoneMaps.
type v2Zone struct{ zone, vSwitch string }

// v2Params are a pod's parsed AutoNLBs-V2 network-conf.
type v2Params struct {
	ports   []lb.PortProtocol
	isps    []string // as written: labels, endPoints and the EIP's isp
	vpc     string
	zones   []v2Zone
	layout  ordinal.Layout
	reserve int
	retain  bool
	conf    networkstatus.Conf
}

// v2Known are the parameters AutoNLBs-V2 reads.
var v2Known = []string{lb.ParamPortProtocols, ParamZoneMaps, ParamEipIspTypes, ParamMinPort, ParamMaxPort, ParamBlockPorts, ParamReserveNlbNum,
	ParamRetainNLBOnDelete, ParamExternalTrafficPolicy, ParamHealthCheckFlag, ParamHealthCheckType, ParamHealthCheckConnectPort, ParamHealthCheckConnectTimout,
	ParamHealthCheckInterval, ParamHealthyThreshold, ParamUnhealthyThreshold, ParamHealthCheckURI, ParamHealthCheckDomain, ParamHealthCheckMethod}

// parse reads the network-conf as AutoNLBs' parse does (PortProtocols without TCPUDP, the ISP
// types, the range, BlockPorts, ReserveNlbNum, health checks), and ZoneMaps as
// "<vpc>@<zone>:<vswitch>,<zone>:<vswitch>[,...]" (2 to AutoNLBsV2MaxZones zones) and
// RetainNLBOnDelete (true or false, default true). An ISP type containing "intranet" is
// refused: OKG's intranet NLBs are not recorded. Errors: ParameterErrors naming the
// parameter.
func (a *AutoNLBsV2) parse(conf networkstatus.Conf) (v2Params, error) {
	v1, err := (&AutoNLBs{}).parse(conf)
	if err != nil {
		return v2Params{}, err
	}
	out := v2Params{ports: v1.ports, layout: v1.layout, reserve: v1.reserve, retain: true, conf: conf}
	seen := map[int32]bool{}
	for _, pp := range out.ports {
		if pp.Protocol == lb.ProtocolTCPUDP {
			return v2Params{}, plugin.ParamErrorf(lb.ParamPortProtocols, "%d/TCPUDP: %s takes TCP, UDP or SCTP, one per port", pp.Port, AutoNLBsV2Name)
		}
		if seen[pp.Port] {
			return v2Params{}, plugin.ParamErrorf(lb.ParamPortProtocols, "lists port %d twice: %s names a Service port by its number", pp.Port, AutoNLBsV2Name)
		}
		seen[pp.Port] = true
	}
	isps := "BGP"
	if v, ok := conf.Last(ParamEipIspTypes); ok {
		isps = v
	}
	for _, isp := range strings.Split(isps, ",") {
		isp = strings.TrimSpace(isp)
		if strings.Contains(strings.ToLower(isp), "intranet") {
			return v2Params{}, plugin.ParamErrorf(ParamEipIspTypes, "%q: %s makes Internet NLBs with EIPs only", isp, AutoNLBsV2Name)
		}
		out.isps = append(out.isps, isp)
	}
	zm, _ := conf.Last(ParamZoneMaps)
	vpc, zones, ok := strings.Cut(strings.TrimSpace(zm), "@")
	if !ok || strings.TrimSpace(vpc) == "" {
		return v2Params{}, plugin.ParamErrorf(ParamZoneMaps, `%q has no VPC, expected "<vpc>@<zone>:<vswitch>,<zone>:<vswitch>"`, zm)
	}
	out.vpc = strings.TrimSpace(vpc)
	for _, z := range strings.Split(zones, ",") {
		zone, vsw, ok := strings.Cut(strings.TrimSpace(z), ":")
		if !ok || strings.TrimSpace(zone) == "" || strings.TrimSpace(vsw) == "" {
			return v2Params{}, plugin.ParamErrorf(ParamZoneMaps, `%q is not "<zone>:<vswitch>"`, z)
		}
		out.zones = append(out.zones, v2Zone{zone: strings.TrimSpace(zone), vSwitch: strings.TrimSpace(vsw)})
	}
	if len(out.zones) < 2 || len(out.zones) > AutoNLBsV2MaxZones {
		return v2Params{}, plugin.ParamErrorf(ParamZoneMaps, "lists %d zones; an NLB takes 2 to %d", len(out.zones), AutoNLBsV2MaxZones)
	}
	if v, ok := conf.Last(ParamRetainNLBOnDelete); ok {
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return v2Params{}, plugin.ParamErrorf(ParamRetainNLBOnDelete, "%q is not true or false", v)
		}
		out.retain = b
	}
	return out, nil
}

// ValidateConf checks the network-conf as the runs do, writing nothing; an unknown parameter
// is a warning.
func (a *AutoNLBsV2) ValidateConf(pod *corev1.Pod) error {
	return validateAuto(pod, AutoNLBsV2Name, v2Known, a.ports)
}

// NetworkView describes the network-conf for the network-conf rules: the listener ports, and
// createsCloudResources true: the operators create EIPs and NLBs that no object owns.
func (a *AutoNLBsV2) NetworkView(pod *corev1.Pod) (plugin.NetworkView, error) {
	return viewAuto(pod, []string{ParamEipIspTypes, ParamZoneMaps, ParamReserveNlbNum}, a.ports)
}

// ports returns parse's ports and errors.
func (a *AutoNLBsV2) ports(conf networkstatus.Conf) ([]lb.PortProtocol, error) {
	prm, err := a.parse(conf)
	return prm.ports, err
}

// nlbName, eipName and v2ServiceName are the objects' names (OKG's): the ISP type
// lower-cased.
func nlbName(gss, isp string, k int) string {
	return gss + "-" + strings.ToLower(isp) + "-" + strconv.Itoa(k)
}
func eipName(gss, isp string, k, z int) string {
	return gss + "-eip-" + strings.ToLower(isp) + "-" + strconv.Itoa(k) + "-z" + strconv.Itoa(z)
}
func v2ServiceName(pod, isp string) string { return pod + "-" + strings.ToLower(isp) }

// checkNames refuses ISP types that make names the API server refuses: each EIP name of the
// last NLB and the pod's Service names must be DNS-1123 subdomains (objects) and DNS-1035
// labels (Services). Errors: a ParameterError naming EipIspTypes.
func (a *AutoNLBsV2) checkNames(pod *corev1.Pod, gss string, prm v2Params, n int) error {
	for _, isp := range prm.isps {
		bad := validation.IsDNS1035Label(v2ServiceName(pod.Name, isp))
		for _, name := range []string{nlbName(gss, isp, n-1), eipName(gss, isp, n-1, len(prm.zones)-1)} {
			bad = append(bad, validation.IsDNS1123Subdomain(name)...)
		}
		if len(bad) > 0 {
			return plugin.ParamErrorf(ParamEipIspTypes, "with GameServerSet %s, ISP type %q makes object names the API server refuses: %s", gss, isp, strings.Join(bad, "; "))
		}
	}
	return nil
}

// OnPodAdded parses the network-conf (a ParameterError refuses the CREATE), checks the pod is
// its GameServerSet's (serverOf, read live) and, with RetainNLBOnDelete false, adds
// FinalizerDeleteNLB (OKG's). Nothing is created: the objects are made at the updates.
func (a *AutoNLBsV2) OnPodAdded(ctx context.Context, c client.Client, pod *corev1.Pod) (*corev1.Pod, error) {
	conf, err := networkstatus.ConfFromPod(pod)
	if err != nil {
		return pod, err
	}
	prm, err := a.parse(conf)
	if err != nil {
		return pod, err
	}
	srv, err := serverOf(ctx, c, pod, conf)
	if err != nil {
		return pod, err
	}
	if err := a.checkNames(pod, srv.gss.GetName(), prm, a.nlbCount(prm, srv)); err != nil {
		return pod, err
	}
	if !prm.retain && !slices.Contains(pod.Finalizers, FinalizerDeleteNLB) {
		pod.Finalizers = append(pod.Finalizers, FinalizerDeleteNLB)
	}
	return pod, nil
}

// nlbCount is how many NLBs per ISP type the GameServerSet gets: for the highest of its
// replicas and srv's ordinal, plus the spares (OKG's count).
func (a *AutoNLBsV2) nlbCount(prm v2Params, srv server) int {
	replicas, _, _ := unstructured.NestedInt64(srv.gss.Object, "spec", "replicas")
	return prm.layout.Services(max(int(replicas), srv.ordinal), prm.reserve)
}

// OnPodUpdated runs OKG's lifecycle: a NotReady status first; a game server whose
// GameServerSet is gone or being deleted is labelled LabelGSSDeleting and stays as it is;
// otherwise the missing EIP objects of every NLB the GameServerSet needs, the NLB objects
// whose EIPs all have allocation ids, and the game server's Services on its NLBs that have
// ids are made (ensureObjects); NotReady until every ISP type's Service has an address, then
// Ready with, per ISP type and port, an internal address (the pod's IP, the target port) and
// an external one (the Service's ingress IP, its listener port, endPoint
// "<ingress hostname>/<ISP type>"), OKG's shape. network-disabled makes the Services
// ClusterIP and the network NotReady at once. Errors: those of parse, serverOf and
// ensureObjects, each with the pod's status as the run left it.
func (a *AutoNLBsV2) OnPodUpdated(ctx context.Context, c client.Client, pod *corev1.Pod) (*corev1.Pod, error) {
	prev, _ := networkstatus.StatusFromPod(pod)
	first := prev == nil
	if first {
		prev = &networkstatus.NetworkStatus{CurrentNetworkState: networkstatus.NetworkNotReady}
	}
	notReady := networkstatus.NotReadyFrom(pod, *prev)
	conf, err := networkstatus.ConfFromPod(pod)
	if err != nil {
		return notReady(err)
	}
	prm, err := a.parse(conf)
	if err != nil {
		return notReady(err)
	}
	set, gone, err := readGSS(ctx, c, pod)
	switch {
	case err != nil:
		return notReady(err)
	case gone:
		// The GameServerSet is gone or going: nothing is made for it (OKG's label), and a
		// game server still serving players keeps its network as it is.
		if pod.Labels == nil {
			pod.Labels = map[string]string{}
		}
		pod.Labels[LabelGSSDeleting] = "true"
		if err := networkstatus.PutStatus(pod, *prev); err != nil {
			return pod, err
		}
		return pod, nil
	}
	srv, err := serverIn(pod, conf, set)
	if err != nil {
		return notReady(err)
	}
	if first {
		if err := a.ensureObjects(ctx, c, pod, prm, srv, false); err != nil {
			ctrl.LoggerFrom(ctx).Info("Objects not made yet", "error", err.Error())
		}
		return notReady(nil)
	}
	disabled, err := networkstatus.NetworkDisabled(pod)
	if err != nil {
		return notReady(err)
	}
	if err := a.ensureObjects(ctx, c, pod, prm, srv, disabled); err != nil {
		return notReady(err)
	}
	if disabled {
		return notReady(nil)
	}
	var in, out []networkstatus.NetworkAddress
	var cloudErrs []error
	for _, isp := range prm.isps {
		svc := &corev1.Service{}
		name := v2ServiceName(pod.Name, isp)
		if err := c.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: name}, svc); err != nil {
			if apierrors.IsNotFound(err) {
				cloudErrs = append(cloudErrs, nil) // its NLB has no id yet
				continue
			}
			return notReady(plugin.WrapUnknown(err, "get Service %s/%s", pod.Namespace, name))
		}
		if len(svc.Status.LoadBalancer.Ingress) == 0 {
			cloudErrs = append(cloudErrs, lb.CloudFailure(ctx, c, svc))
			continue
		}
		ing := svc.Status.LoadBalancer.Ingress[0]
		for _, sp := range svc.Spec.Ports {
			in = append(in, networkstatus.NetworkAddress{IP: pod.Status.PodIP, Ports: []networkstatus.NetworkPort{
				{Name: sp.TargetPort.String(), Protocol: sp.Protocol, Port: networkstatus.IntPort(sp.TargetPort.IntVal)}}})
			out = append(out, networkstatus.NetworkAddress{IP: ing.IP, EndPoint: ing.Hostname + "/" + isp, Ports: []networkstatus.NetworkPort{
				{Name: sp.TargetPort.String(), Protocol: sp.Protocol, Port: networkstatus.IntPort(sp.Port)}}})
		}
	}
	if len(cloudErrs) > 0 {
		return notReady(errors.Join(cloudErrs...))
	}
	st := *prev
	st.CurrentNetworkState = networkstatus.NetworkReady
	st.InternalAddresses, st.ExternalAddresses = in, out
	if err := networkstatus.PutStatus(pod, st); err != nil {
		return pod, err
	}
	return pod, conf.Warn(networkstatus.NotIn(v2Known...), AutoNLBsV2Name+" ignores unknown network-conf parameters, expected only "+strings.Join(v2Known, ", "))
}

// gssGone reports whether a live read says the pod's GameServerSet (label
// game.kruise.io/owner-gss) does not exist or is being deleted. Errors: Unknown for a failed
// read; a pod without the label is not gone (serverIn names the label).
func gssGone(ctx context.Context, c client.Reader, pod *corev1.Pod) (bool, error) {
	_, gone, err := readGSS(ctx, c, pod)
	return gone, err
}

// readGSS reads the pod's GameServerSet as gssGone says and returns it too (nil when it is
// gone or the pod has no label), for serverIn to check the pod against without a second read.
func readGSS(ctx context.Context, c client.Reader, pod *corev1.Pod) (*unstructured.Unstructured, bool, error) {
	name := pod.Labels[networkstatus.LabelOwnerGSS]
	if name == "" {
		return nil, false, nil
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gameServerSetGVK)
	switch err := c.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: name}, u); {
	case apierrors.IsNotFound(err):
		return nil, true, nil
	case err != nil:
		return nil, false, plugin.WrapUnknown(err, "get GameServerSet %s/%s", pod.Namespace, name)
	}
	return u, u.GetDeletionTimestamp() != nil, nil
}

// listPool lists the GameServerSet's objects of kind gvk (label gssLabel), by name.
func listPool(ctx context.Context, c client.Reader, gvk schema.GroupVersionKind, ns string, labels client.MatchingLabels) (map[string]*unstructured.Unstructured, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := c.List(ctx, list, client.InNamespace(ns), labels); err != nil {
		return nil, err
	}
	out := map[string]*unstructured.Unstructured{}
	for i := range list.Items {
		out[list.Items[i].GetName()] = &list.Items[i]
	}
	return out, nil
}

// ensureObjects makes what is missing, in OKG's order, for the GameServerSet's NLBs of every
// ISP type (nlbCount): each NLB's EIP objects, one per zone; the NLB object once all of them
// have status.allocationID; and srv's game server's Service once its NLB has
// status.loadBalancerId (then kept as it should be: the NLB id, the ports of its slot, ClusterIP
// while disabled). An object of a name that exists is used only when it carries the
// GameServerSet's pool labels (the Service: the GameServerSet as controller).
//
// Caps: at most AutoNLBsMaxServices NLBs for the GameServerSet over its ISP types, and at most
// AutoNLBsV2MaxNLBsPerNamespace NLB pools (an NLB object, or EIP objects of an NLB not made
// yet) in the namespace. srv's own NLBs (one per ISP type) come first: when the namespace has
// no room for all of them, nothing is made; spares and other ordinals' NLBs past a cap are not
// made (logged). The room is what the run listed: runs in flight at once each see the same
// room, so the namespace can pass its cap by what they make together, at most the cap again
// in the worst case (the next runs then make nothing until NLBs are deleted).
//
// Only srv's own NLB decides the run: what fails on another NLB (spares, other ordinals') is
// logged and fails the game servers on that NLB, not this one, so a Ready game server is not
// made NotReady by its neighbours' NLBs. Errors, for srv's own NLBs: a ParameterError
// (NotAllowed) when a cap leaves no room for them, before anything is made; a
// ParameterError for a name that is someone else's object; the API server's refusals
// (APICallErrors; a read-only run's plugin.ErrWouldWrite among them) and failed reads
// (Unknown).
func (a *AutoNLBsV2) ensureObjects(ctx context.Context, c client.Client, pod *corev1.Pod, prm v2Params, srv server, disabled bool) error {
	gss := srv.gss.GetName()
	own := prm.layout.Service(srv.ordinal)
	n := a.nlbCount(prm, srv)
	if perISP := AutoNLBsMaxServices / len(prm.isps); own >= perISP {
		return plugin.NotAllowedf("metadata.name", "GameServerSet %s would need NLB %d for ordinal %d (%d game servers an NLB, %d ISP types); at most %d NLBs are made for one GameServerSet",
			gss, own, srv.ordinal, prm.layout.PerService(), len(prm.isps), AutoNLBsMaxServices)
	} else if n > perISP {
		ctrl.LoggerFrom(ctx).Info("NLBs past the GameServerSet's cap are not made", "gameServerSet", gss, "needed", n*len(prm.isps), "cap", AutoNLBsMaxServices)
		n = perISP
	}
	if err := a.checkNames(pod, gss, prm, n); err != nil {
		return err
	}
	allEIPs, err := listPool(ctx, c, EIPGVK, pod.Namespace, client.MatchingLabels{LabelEIPPool: "true"})
	if err != nil {
		return plugin.WrapUnknown(err, "list EIP objects in namespace %s", pod.Namespace)
	}
	nlbs, err := listPool(ctx, c, NLBGVK, pod.Namespace, client.MatchingLabels{LabelNLBPool: "true"})
	if err != nil {
		return plugin.WrapUnknown(err, "list NLB objects in namespace %s", pod.Namespace)
	}
	// The namespace's pools: its NLB objects and the NLBs its EIP objects are for.
	pools := map[string]bool{}
	for name := range nlbs {
		pools[name] = true
	}
	eips := map[string]*unstructured.Unstructured{}
	for name, eip := range allEIPs {
		l := eip.GetLabels()
		if k, _, ok := strings.Cut(l[LabelEIPPoolIndex], "-z"); ok && l[LabelEIPPoolGSS] != "" {
			pools[l[LabelEIPPoolGSS]+"-"+strings.ToLower(l[LabelEIPPoolISPType])+"-"+k] = true
		}
		if l[LabelEIPPoolGSS] == gss {
			eips[name] = eip
		}
	}
	room := AutoNLBsV2MaxNLBsPerNamespace - len(pools)
	// The game server's own NLBs, one per ISP type, then the spares and other ordinals'.
	type slot struct {
		isp string
		k   int
	}
	var order []slot
	ownMissing := 0
	for _, isp := range prm.isps {
		order = append(order, slot{isp, own})
		if !pools[nlbName(gss, isp, own)] {
			ownMissing++
		}
	}
	for _, isp := range prm.isps {
		for k := range n {
			if k != own {
				order = append(order, slot{isp, k})
			}
		}
	}
	if ownMissing > room {
		return plugin.NotAllowedf("metadata.labels["+networkstatus.LabelOwnerGSS+"]", "namespace %s holds %d NLBs of %s (NLB objects and EIP objects of NLBs not made yet); at most %d are made for one namespace, and game server %s needs %d more",
			pod.Namespace, len(pools), AutoNLBsV2Name, AutoNLBsV2MaxNLBsPerNamespace, pod.Name, ownMissing)
	}
	var ownErrs []error
	for _, sl := range order {
		isp, k := sl.isp, sl.k
		if !pools[nlbName(gss, isp, k)] {
			if room <= 0 {
				ctrl.LoggerFrom(ctx).Info("NLB not made: the namespace is at its cap", "nlb", nlbName(gss, isp, k), "cap", AutoNLBsV2MaxNLBsPerNamespace)
				continue
			}
			room--
			pools[nlbName(gss, isp, k)] = true
		}
		err := a.ensureNLB(ctx, c, pod, prm, srv, isp, k, eips, nlbs, k == own, disabled)
		switch {
		case err == nil:
		case k == own:
			ownErrs = append(ownErrs, err)
		default:
			ctrl.LoggerFrom(ctx).Info("Another NLB of the GameServerSet is not made yet", "nlb", nlbName(gss, isp, k), "error", err.Error())
		}
	}
	return errors.Join(ownErrs...)
}

// ensureNLB makes what is missing of the GameServerSet's NLB k of isp, as ensureObjects says,
// and, when own, srv's Service on it. eips are the GameServerSet's EIP objects and nlbs the
// namespace's NLB objects, by name.
func (a *AutoNLBsV2) ensureNLB(ctx context.Context, c client.Client, pod *corev1.Pod, prm v2Params, srv server, isp string, k int,
	eips, nlbs map[string]*unstructured.Unstructured, own, disabled bool) error {
	gss := srv.gss.GetName()
	name := nlbName(gss, isp, k)
	nlb, ok := nlbs[name]
	if ok {
		// Before any EIP is made for it: an NLB of the name that is not the GameServerSet's
		// would leave them billed for nothing.
		if err := poolLabelled(nlb, LabelNLBPoolGSS, gss, LabelNLBPoolISPType, isp); err != nil {
			return err
		}
	}
	ids := make([]string, len(prm.zones))
	for z := range prm.zones {
		name := eipName(gss, isp, k, z)
		eip, ok := eips[name]
		if ok {
			if err := poolLabelled(eip, LabelEIPPoolGSS, gss, LabelEIPPoolISPType, isp); err != nil {
				return err
			}
			ids[z], _, _ = unstructured.NestedString(eip.Object, "status", "allocationID")
			continue
		}
		if err := createPoolObject(ctx, c, a.eip(pod.Namespace, gss, isp, k, z)); err != nil {
			return err
		}
	}
	if !ok {
		if slices.Contains(ids, "") {
			return nil // the EIP operator has not allocated them all yet
		}
		return createPoolObject(ctx, c, a.nlb(pod.Namespace, gss, isp, k, prm, ids))
	}
	id, _, _ := unstructured.NestedString(nlb.Object, "status", "loadBalancerId")
	if !own || id == "" {
		return nil
	}
	return a.ensureService(ctx, c, pod, prm, srv, isp, id, disabled)
}

// poolLabelled checks that an object of a pool's name carries the GameServerSet's and the ISP
// type's labels: one made for another GameServerSet, or by someone else, is not used.
func poolLabelled(u *unstructured.Unstructured, gssLabel, gss, ispLabel, isp string) error {
	if l := u.GetLabels(); l[gssLabel] != gss || l[ispLabel] != isp {
		return plugin.Errorf(plugin.ParameterError, "%s %s/%s exists without the labels %s=%s and %s=%s: it is not GameServerSet %s's",
			u.GetKind(), u.GetNamespace(), u.GetName(), gssLabel, gss, ispLabel, isp, gss)
	}
	return nil
}

// createPoolObject creates an EIP or NLB object; one made in the same moment (another
// replica's run) is fine, once a read shows it carries u's labels. Errors: an APICallError
// for a refusal; a ParameterError when an object of the name without u's labels is there
// (one the pool lists leave out: not the GameServerSet's); Unknown when it cannot be read.
func createPoolObject(ctx context.Context, c client.Client, u *unstructured.Unstructured) error {
	err := c.Create(ctx, u)
	switch {
	case err == nil:
		ctrl.LoggerFrom(ctx).Info("Operator object created", "kind", u.GetKind(), "object", u.GetNamespace()+"/"+u.GetName())
		return nil
	case !apierrors.IsAlreadyExists(err):
		return plugin.Wrap(plugin.APICallError, err, "create %s %s/%s", u.GetKind(), u.GetNamespace(), u.GetName())
	}
	have := &unstructured.Unstructured{}
	have.SetGroupVersionKind(u.GroupVersionKind())
	if err := c.Get(ctx, client.ObjectKeyFromObject(u), have); err != nil {
		return plugin.WrapUnknown(err, "get %s %s/%s", u.GetKind(), u.GetNamespace(), u.GetName())
	}
	for k, v := range u.GetLabels() {
		if have.GetLabels()[k] != v {
			return plugin.Errorf(plugin.ParameterError, "%s %s/%s exists without the label %s=%s: it is not this GameServerSet's", u.GetKind(), u.GetNamespace(), u.GetName(), k, v)
		}
	}
	return nil
}

// eipPayByBandwidth are the single-ISP lines whose EIPs are billed by bandwidth (OKG's list).
var eipPayByBandwidth = []string{"ChinaTelecom", "ChinaMobile", "ChinaUnicom"}

// eip is the EIP object of isp, NLB k and zone z (OKG's: 5 Mbit/s, released with the object).
func (a *AutoNLBsV2) eip(ns, gss, isp string, k, z int) *unstructured.Unstructured {
	name := eipName(gss, isp, k, z)
	charge := "PayByTraffic"
	if slices.Contains(eipPayByBandwidth, isp) {
		charge = "PayByBandwidth"
	}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"bandwidth": "5", "description": fmt.Sprintf("EIP for GameServerSet %s, NLB index %d, zone %d", gss, k, z),
		"internetChargeType": charge, "isp": isp, "name": name, "releaseStrategy": "OnDelete"}}}
	u.SetGroupVersionKind(EIPGVK)
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetLabels(map[string]string{LabelEIPPool: "true", LabelEIPPoolISPType: isp, LabelEIPPoolGSS: gss, LabelEIPPoolIndex: strconv.Itoa(k) + "-z" + strconv.Itoa(z)})
	return u
}

// nlb is the NLB object of isp and index k, one zone mapping per zone with its EIP's
// allocation id.
func (a *AutoNLBsV2) nlb(ns, gss, isp string, k int, prm v2Params, ids []string) *unstructured.Unstructured {
	var zm []any
	for z, zone := range prm.zones {
		zm = append(zm, map[string]any{"allocationId": ids[z], "vSwitchId": zone.vSwitch, "zoneId": zone.zone})
	}
	name := nlbName(gss, isp, k)
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"addressIpVersion": "ipv4", "addressType": "Internet", "loadBalancerName": ns + "-" + name, "vpcId": prm.vpc, "zoneMappings": zm}}}
	u.SetGroupVersionKind(NLBGVK)
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetLabels(map[string]string{LabelNLBPool: "true", LabelNLBPoolISPType: isp, LabelNLBPoolGSS: gss, LabelNLBPoolIndex: strconv.Itoa(k)})
	return u
}

// service is the game server's Service of isp on NLB id: OKG's NLB annotations and labels, the
// GameServerSet as controller, selecting the pod by its StatefulSet name label, one port per
// PortProtocols entry (its listener port from the ordinal's slot, named by the target port);
// ClusterIP while disabled.
func (a *AutoNLBsV2) service(pod *corev1.Pod, prm v2Params, srv server, isp, id string, disabled bool) (*corev1.Service, error) {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: v2ServiceName(pod.Name, isp),
			Annotations: map[string]string{AnnotationLBID: id, lb.AnnotationConfigHash: lb.ConfHash(prm.conf)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: gameServerSetGVK.GroupVersion().String(), Kind: gameServerSetGVK.Kind,
				Name: srv.gss.GetName(), UID: srv.gss.GetUID(), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{labelStatefulSetPodName: pod.Name}},
	}
	slot := prm.layout.Slot(srv.ordinal)
	for j, pp := range prm.ports {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: strconv.Itoa(int(pp.Port)), Port: slot[j], Protocol: pp.Protocol, TargetPort: intstr.FromInt32(pp.Port)})
	}
	hc, err := parseHealthCheck(prm.conf, true)
	if err != nil {
		return nil, err
	}
	hc.write(svc, true)
	svc.Labels[networkstatus.LabelOwnerGSS] = srv.gss.GetName()
	svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	if v, ok := prm.conf.Last(ParamExternalTrafficPolicy); ok && strings.EqualFold(v, "Cluster") {
		svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	}
	svc.Spec.LoadBalancerClass = ptr.To(NLBLoadBalancerClass)
	svc.Spec.AllocateLoadBalancerNodePorts = ptr.To(false)
	if disabled {
		svc.Spec.Type = corev1.ServiceTypeClusterIP
		svc.Spec.ExternalTrafficPolicy, svc.Spec.LoadBalancerClass, svc.Spec.AllocateLoadBalancerNodePorts = "", nil, nil
	}
	return svc, nil
}

// labelStatefulSetPodName is the label the StatefulSet controller (OKG's Advanced StatefulSet
// too) gives each pod: its name.
const labelStatefulSetPodName = "statefulset.kubernetes.io/pod-name"

// ensureService makes the game server's Service of isp, or brings the existing one (the
// GameServerSet's, as controller) to what it should be: the NLB id, its annotations and
// labels, the ports and the type. A Service of the name that is not the GameServerSet's is a
// ParameterError; writes refused are APICallErrors, reads failed Unknown.
func (a *AutoNLBsV2) ensureService(ctx context.Context, c client.Client, pod *corev1.Pod, prm v2Params, srv server, isp, id string, disabled bool) error {
	want, err := a.service(pod, prm, srv, isp, id, disabled)
	if err != nil {
		return err
	}
	have := &corev1.Service{}
	switch err := c.Get(ctx, client.ObjectKeyFromObject(want), have); {
	case apierrors.IsNotFound(err):
		if err := c.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
			return plugin.Wrap(plugin.APICallError, err, "create Service %s/%s", want.Namespace, want.Name)
		} else if err == nil {
			return nil
		}
		if err := plugin.AwaitCreated(ctx, c, have); err != nil {
			return plugin.WrapUnknown(err, "get Service %s/%s", want.Namespace, want.Name)
		}
	case err != nil:
		return plugin.WrapUnknown(err, "get Service %s/%s", want.Namespace, want.Name)
	}
	if ref := metav1.GetControllerOf(have); ref == nil || ref.Kind != gameServerSetGVK.Kind || ref.UID != srv.gss.GetUID() {
		return plugin.Errorf(plugin.ParameterError, "Service %s/%s exists and is not GameServerSet %s's", have.Namespace, have.Name, srv.gss.GetName())
	}
	next := have.DeepCopy()
	for k, v := range want.Annotations {
		if k != lb.AnnotationConfigHash || next.Annotations[k] == "" {
			if next.Annotations == nil {
				next.Annotations = map[string]string{}
			}
			next.Annotations[k] = v
		}
	}
	if next.Labels == nil {
		next.Labels = map[string]string{}
	}
	for k, v := range want.Labels {
		next.Labels[k] = v
	}
	next.Spec.Selector, next.Spec.Type = want.Spec.Selector, want.Spec.Type
	next.Spec.ExternalTrafficPolicy, next.Spec.LoadBalancerClass, next.Spec.AllocateLoadBalancerNodePorts = want.Spec.ExternalTrafficPolicy, want.Spec.LoadBalancerClass, want.Spec.AllocateLoadBalancerNodePorts
	if disabled {
		next.Spec.HealthCheckNodePort = 0
	} else if have.Spec.Type == corev1.ServiceTypeClusterIP {
		next.Spec.LoadBalancerClass = want.Spec.LoadBalancerClass
	}
	ports := slices.Clone(want.Spec.Ports)
	for i := range ports {
		for _, hp := range have.Spec.Ports {
			if hp.Name == ports[i].Name && !disabled {
				ports[i].NodePort = hp.NodePort
			}
		}
	}
	next.Spec.Ports = ports
	if have.Spec.Type == corev1.ServiceTypeClusterIP && !disabled && have.Spec.LoadBalancerClass == nil {
		// A class is set once: an enabled Service gets it back with its type.
		next.Spec.LoadBalancerClass = want.Spec.LoadBalancerClass
	}
	if equalService(have, next) {
		return nil
	}
	if err := c.Update(ctx, next); err != nil {
		return plugin.WrapWriteRefused(err, "update Service %s/%s", next.Namespace, next.Name)
	}
	return nil
}

// equalService reports whether a and b agree on what ensureService writes.
func equalService(a, b *corev1.Service) bool {
	return a.Spec.Type == b.Spec.Type && slices.Equal(a.Spec.Ports, b.Spec.Ports) && fmt.Sprint(a.Spec.Selector) == fmt.Sprint(b.Spec.Selector) &&
		fmt.Sprint(a.Annotations) == fmt.Sprint(b.Annotations) && fmt.Sprint(a.Labels) == fmt.Sprint(b.Labels) &&
		a.Spec.ExternalTrafficPolicy == b.Spec.ExternalTrafficPolicy && ptr.Deref(a.Spec.LoadBalancerClass, "") == ptr.Deref(b.Spec.LoadBalancerClass, "") &&
		ptr.Deref(a.Spec.AllocateLoadBalancerNodePorts, true) == ptr.Deref(b.Spec.AllocateLoadBalancerNodePorts, true)
}

// Finalizer returns FinalizerDeleteNLB.
func (a *AutoNLBsV2) Finalizer() string { return FinalizerDeleteNLB }

// Finalize runs for a terminating game server that carries FinalizerDeleteNLB; the caller
// removes the finalizer when it returns nil. Only a live read of the GameServerSet decides:
//   - the GameServerSet exists and is not being deleted (a scale-down, a recreate), or the
//     network-conf says RetainNLBOnDelete true or cannot be read: nil, nothing deleted (a
//     pod is never left terminating by a finalizer it should not have);
//   - the GameServerSet is gone or being deleted and RetainNLBOnDelete is false: while any
//     Service the GameServerSet controls (label game.kruise.io/owner-gss, its owner reference)
//     remains, a RetryError (the NLB must outlive its listeners: OKG's order), for at most
//     FinalizeMaxWait from the pod's deletion, after which nil with nothing deleted; once they
//     are gone, the GameServerSet's NLB and EIP objects of the namespace (by their pool
//     labels) are deleted, each with its UID and resourceVersion as listed as preconditions
//     (one changed since is read again: a RetryError, within FinalizeMaxWait), and nil. The GameServerSet is the one
//     the pod's name says ("<GameServerSet>-<ordinal>", immutable): a label naming another
//     deletes nothing. RetainNLBOnDelete is the pod's network-conf, which the runs hold
//     equal to the GameServerSet's (serverIn): what it can reach is the pod's own
//     GameServerSet's objects, in its namespace.
//
// Errors: RetryError as above; Unknown for a read that fails (nothing is deleted on it);
// APICallError for a delete refused.
func (a *AutoNLBsV2) Finalize(ctx context.Context, c client.Client, pod *corev1.Pod) error {
	conf, err := networkstatus.ConfFromPod(pod)
	if err != nil {
		return nil
	}
	prm, err := a.parse(conf)
	if err != nil || prm.retain {
		return nil
	}
	name := pod.Labels[networkstatus.LabelOwnerGSS]
	if i, ok := ordinal.Of(pod.Name); !ok || name == "" || pod.Name != name+"-"+strconv.Itoa(i) {
		// The label is not the GameServerSet the pod's (immutable) name says: nothing is
		// deleted on it.
		return nil
	}
	if gone, err := gssGone(ctx, c, pod); err != nil || !gone {
		return err
	}
	var svcs corev1.ServiceList
	if err := c.List(ctx, &svcs, client.InNamespace(pod.Namespace), client.MatchingLabels{networkstatus.LabelOwnerGSS: name}); err != nil {
		return plugin.WrapUnknown(err, "list Services of GameServerSet %s/%s", pod.Namespace, name)
	}
	remain := slices.DeleteFunc(svcs.Items, func(s corev1.Service) bool {
		ref := metav1.GetControllerOf(&s)
		return ref == nil || ref.Kind != gameServerSetGVK.Kind || ref.Name != name
	})
	expired := pod.DeletionTimestamp != nil && time.Since(pod.DeletionTimestamp.Time) > FinalizeMaxWait
	if len(remain) > 0 {
		if expired {
			// Whatever holds the Services, the pod is not held longer: the NLB and EIP
			// objects are kept (deleting nothing is the safe way).
			ctrl.LoggerFrom(ctx).Info("Gave up waiting for the GameServerSet's Services: its NLB and EIP objects are kept", "gameServerSet", pod.Namespace+"/"+name, "services", len(remain), "waited", FinalizeMaxWait)
			return nil
		}
		return plugin.Errorf(plugin.RetryError, "GameServerSet %s/%s is deleted and %d of its Services remain (%s, ...): its NLBs and EIPs are deleted after them", pod.Namespace, name, len(remain), remain[0].Name)
	}
	for _, del := range []struct {
		gvk    schema.GroupVersionKind
		labels client.MatchingLabels
	}{{NLBGVK, client.MatchingLabels{LabelNLBPool: "true", LabelNLBPoolGSS: name}}, {EIPGVK, client.MatchingLabels{LabelEIPPool: "true", LabelEIPPoolGSS: name}}} {
		objs, err := listPool(ctx, c, del.gvk, pod.Namespace, del.labels)
		if err != nil {
			return plugin.WrapUnknown(err, "list %s objects of GameServerSet %s/%s", del.gvk.Kind, pod.Namespace, name)
		}
		for _, o := range objs {
			// The object listed, not one made since under its name.
			if err := c.Delete(ctx, o, client.Preconditions{UID: ptr.To(o.GetUID()), ResourceVersion: ptr.To(o.GetResourceVersion())}); apierrors.IsConflict(err) {
				if expired {
					ctrl.LoggerFrom(ctx).Info("Gave up deleting the GameServerSet's objects: one keeps changing; the rest are kept", "object", o.GetNamespace()+"/"+o.GetName(), "waited", FinalizeMaxWait)
					return nil
				}
				return plugin.Errorf(plugin.RetryError, "%s %s/%s changed since it was listed: read again before it is deleted", del.gvk.Kind, o.GetNamespace(), o.GetName())
			} else if err != nil && !apierrors.IsNotFound(err) {
				return plugin.Wrap(plugin.APICallError, err, "delete %s %s/%s", del.gvk.Kind, o.GetNamespace(), o.GetName())
			}
			ctrl.LoggerFrom(ctx).Info("Operator object deleted with its GameServerSet", "kind", del.gvk.Kind, "object", o.GetNamespace()+"/"+o.GetName())
		}
	}
	return nil
}
