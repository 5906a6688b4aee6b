package alibabacloud

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"

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

const (
	// AutoNLBsName is the network type of the AutoNLBs plugin (OKG's name); AutoNLBsAlias its
	// family (OKG's AliasAutoNLBs).
	AutoNLBsName  = "AlibabaCloud-AutoNLBs"
	AutoNLBsAlias = "Auto-NLBs-Network"
	// The AutoNLBs network-conf parameters (OKG's names).
	ParamEipIspTypes   = "EipIspTypes"
	ParamZoneMaps      = "ZoneMaps"
	ParamMinPort       = "MinPort"
	ParamMaxPort       = "MaxPort"
	ParamBlockPorts    = "BlockPorts"
	ParamReserveNlbNum = "ReserveNlbNum"
	// AnnotationZoneMaps is the pool Service annotation naming the NLB's zones and vSwitches
	// ("<zone>:<vswitch>,...", the ZoneMaps parameter, verbatim).
	AnnotationZoneMaps = annotationPrefix + "zone-maps"
	// AnnotationAddressType is the pool Service annotation of an intranet NLB ("intranet",
	// for an ISP type containing "intranet", as OKG's).
	AnnotationAddressType = annotationPrefix + "address-type"
	// AutoNLBsMaxServices is the most pool Services a GameServerSet gets per ISP type (its
	// ordinals' load balancers and the spares): each is an NLB the cloud creates and bills,
	// and a game server's ordinal, from its name, is what its pod author wrote.
	AutoNLBsMaxServices = 64
)

// AutoNLBs is AlibabaCloud-AutoNLBs: per GameServerSet and ISP type, pool Services
// "<gss>-<isp>-<k>" of Alibaba's NLB class, owned by the GameServerSet, each of which the
// cloud controller gives an NLB of its own; a game server's listener ports on them follow
// from its ordinal (pkg/plugin/ordinal): nothing is chosen or claimed. plugin.Plugin,
// plugin.CachedReader, plugin.ConfValidator and plugin.NetworkViewer.
type AutoNLBs struct{}

var (
	_ plugin.Plugin        = (*AutoNLBs)(nil)
	_ plugin.CachedReader  = (*AutoNLBs)(nil)
	_ plugin.ConfValidator = (*AutoNLBs)(nil)
	_ plugin.NetworkViewer = (*AutoNLBs)(nil)
)

// NewAutoNLBs returns the AlibabaCloud-AutoNLBs plugin.
func NewAutoNLBs() *AutoNLBs { return &AutoNLBs{} }

// Name returns AutoNLBsName.
func (a *AutoNLBs) Name() string { return AutoNLBsName }

// Alias returns AutoNLBsAlias.
func (a *AutoNLBs) Alias() string { return AutoNLBsAlias }

// IsSynchronous returns false: the network converges when the cloud has made the NLBs.
func (a *AutoNLBs) IsSynchronous() bool { return false }

// CachedObjects returns the Service and the Event (the cloud controller's Warning Events on a
// pool Service).
func (a *AutoNLBs) CachedObjects() []client.Object {
	return []client.Object{&corev1.Service{}, &corev1.Event{}}
}

// Init does nothing: pool Services are made at the CREATE and updates of a GameServerSet's
// game servers (OKG also makes them at its start for every GameServerSet of the type).
func (a *AutoNLBs) Init(context.Context, client.Client, plugin.Config) error { return nil }

// OnPodDeleted does nothing: the pool Services are the GameServerSet's and go with it.
func (a *AutoNLBs) OnPodDeleted(context.Context, client.Client, *corev1.Pod) error { return nil }

// autoParams are a pod's parsed AutoNLBs network-conf.
type autoParams struct {
	ports    []lb.PortProtocol
	isps     []string // lower-cased
	zoneMaps string
	layout   ordinal.Layout
	reserve  int
	conf     networkstatus.Conf
}

// parse reads the network-conf: PortProtocols (required, TCPUDP allowed), ZoneMaps
// (required), EipIspTypes (default BGP; each lower-cased, letters, digits and "-"), MinPort
// and MaxPort (default 1000 and 1499, OKG's), BlockPorts, ReserveNlbNum (default 1),
// ExternalTrafficPolicyType and the NLB health checks. Errors: ParameterErrors naming the
// parameter.
func (a *AutoNLBs) parse(conf networkstatus.Conf) (autoParams, error) {
	out := autoParams{conf: conf, reserve: 1}
	pp := conf.Values(lb.ParamPortProtocols)
	if len(pp) == 0 {
		return autoParams{}, plugin.ParamErrorf(lb.ParamPortProtocols, `is required, expected "<port>[/<PROTOCOL>],..."`)
	}
	var err error
	if out.ports, err = lb.ParsePortProtocols(strings.Join(pp, ","), true); err != nil {
		return autoParams{}, err
	}
	if out.zoneMaps, _ = conf.Last(ParamZoneMaps); strings.TrimSpace(out.zoneMaps) == "" {
		return autoParams{}, plugin.ParamErrorf(ParamZoneMaps, `is required: the NLB's zones and vSwitches, "<zone>:<vswitch>,..."`)
	}
	isps := "BGP"
	if v, ok := conf.Last(ParamEipIspTypes); ok {
		isps = v
	}
	for _, isp := range strings.Split(isps, ",") {
		isp = strings.ToLower(strings.TrimSpace(isp))
		if msgs := validation.IsDNS1035Label(isp); len(msgs) > 0 || slices.Contains(out.isps, isp) {
			return autoParams{}, plugin.ParamErrorf(ParamEipIspTypes, "%q is not an ISP type that can name a Service (lower-case letters, digits and '-', once each): %s", isp, strings.Join(msgs, "; "))
		}
		out.isps = append(out.isps, isp)
	}
	minPort, maxPort := int32(1000), int32(1499)
	for param, p := range map[string]*int32{ParamMinPort: &minPort, ParamMaxPort: &maxPort} {
		if v, ok := conf.Last(param); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
			if err != nil || n < 1 || n > 65535 {
				return autoParams{}, plugin.ParamErrorf(param, "%q is not a port, expected 1-65535", v)
			}
			*p = int32(n)
		}
	}
	var block []int32
	if v, ok := conf.Last(ParamBlockPorts); ok {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s == "" {
				continue
			}
			n, err := strconv.ParseInt(s, 10, 32)
			if err != nil || n < 1 || n > 65535 {
				return autoParams{}, plugin.ParamErrorf(ParamBlockPorts, "%q is not a port, expected ports 1-65535, comma-separated", s)
			}
			block = append(block, int32(n))
		}
	}
	if out.layout, err = ordinal.NewLayout(minPort, maxPort, block, len(out.ports)); err != nil {
		return autoParams{}, plugin.ParamErrorf(ParamMinPort+","+ParamMaxPort, "%v", err)
	}
	if v, ok := conf.Last(ParamReserveNlbNum); ok {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 0 || n >= AutoNLBsMaxServices {
			return autoParams{}, plugin.ParamErrorf(ParamReserveNlbNum, "%q is not a number of spare NLBs, expected 0-%d", v, AutoNLBsMaxServices-1)
		}
		out.reserve = n
	}
	if err := customizeAutoNLBs(conf, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{}}}); err != nil {
		return autoParams{}, err
	}
	return out, nil
}

// customizeAutoNLBs writes OKG's NLB health checks, the external traffic policy (Local unless
// ExternalTrafficPolicyType is Cluster, in any case) and the class on a pool Service.
func customizeAutoNLBs(conf networkstatus.Conf, svc *corev1.Service) error {
	hc, err := parseHealthCheck(conf, true)
	if err != nil {
		return err
	}
	hc.write(svc, true)
	delete(svc.Annotations, annotationPrefix+"force-override-listeners") // the pool's NLB is its own
	svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	if v, ok := conf.Last(ParamExternalTrafficPolicy); ok && strings.EqualFold(v, "Cluster") {
		svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	}
	svc.Spec.LoadBalancerClass = ptr.To(NLBLoadBalancerClass)
	svc.Spec.AllocateLoadBalancerNodePorts = ptr.To(false)
	return nil
}

// known are the parameters AutoNLBs reads.
var autoKnown = []string{lb.ParamPortProtocols, ParamZoneMaps, ParamEipIspTypes, ParamMinPort, ParamMaxPort, ParamBlockPorts, ParamReserveNlbNum,
	ParamExternalTrafficPolicy, ParamHealthCheckFlag, ParamHealthCheckType, ParamHealthCheckConnectPort, ParamHealthCheckConnectTimout,
	ParamHealthCheckInterval, ParamHealthyThreshold, ParamUnhealthyThreshold, ParamHealthCheckURI, ParamHealthCheckDomain, ParamHealthCheckMethod}

// ValidateConf checks the network-conf as the runs do, writing nothing; an unknown parameter
// is a warning.
func (a *AutoNLBs) ValidateConf(pod *corev1.Pod) error {
	conf, err := networkstatus.ConfFromPod(pod)
	if err != nil {
		return err
	}
	if _, err := a.parse(conf); err != nil {
		return err
	}
	return conf.Warn(networkstatus.NotIn(autoKnown...), AutoNLBsName+" ignores unknown network-conf parameters, expected only "+strings.Join(autoKnown, ", "))
}

// NetworkView describes the network-conf for the network-conf rules: the listener ports, and
// createsCloudResources true: each pool Service has the cloud create an NLB.
func (a *AutoNLBs) NetworkView(pod *corev1.Pod) (plugin.NetworkView, error) {
	conf, err := networkstatus.ConfFromPod(pod)
	if err != nil {
		return plugin.NetworkView{}, err
	}
	prm, err := a.parse(conf)
	if err != nil {
		return plugin.NetworkView{}, err
	}
	v := plugin.NetworkView{CreatesCloudResources: true,
		Params: map[string][]string{"ports": {lb.ParamPortProtocols}, "createsCloudResources": {ParamEipIspTypes, ParamReserveNlbNum}}}
	for _, pp := range prm.ports {
		v.Ports = append(v.Ports, plugin.ViewPort{Port: pp.Port, Protocol: string(pp.Protocol)})
	}
	return v, nil
}

// gameServerSetGVK is OKG's GameServerSet.
var gameServerSetGVK = schema.GroupVersionKind{Group: "game.kruise.io", Version: "v1alpha1", Kind: "GameServerSet"}

// server is what a run knows of the game server: its GameServerSet and ordinal.
type server struct {
	gss     *unstructured.Unstructured
	ordinal int
}

// serverOf reads the pod's GameServerSet (label game.kruise.io/owner-gss) and ordinal.
// Errors: a ParameterError for a pod without the label or an ordinal, an APICallError when
// the GameServerSet does not exist (as OKG's), Unknown when it cannot be read.
func serverOf(ctx context.Context, c client.Reader, pod *corev1.Pod) (server, error) {
	name := pod.Labels[networkstatus.LabelOwnerGSS]
	if name == "" {
		return server{}, plugin.ParamErrorf("metadata.labels["+networkstatus.LabelOwnerGSS+"]", "is required: %s serves the game servers of a GameServerSet", AutoNLBsName)
	}
	i, ok := ordinal.Of(pod.Name)
	if !ok {
		return server{}, plugin.ParamErrorf("metadata.name", "%q has no ordinal (<name>-<n>): %s places a game server by it", pod.Name, AutoNLBsName)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gameServerSetGVK)
	if err := c.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: name}, u); err != nil {
		if apierrors.IsNotFound(err) {
			return server{}, plugin.Wrap(plugin.APICallError, err, "get GameServerSet %s/%s", pod.Namespace, name)
		}
		return server{}, plugin.WrapUnknown(err, "get GameServerSet %s/%s", pod.Namespace, name)
	}
	return server{gss: u, ordinal: i}, nil
}

// poolName is the pool Service of a GameServerSet's ISP type isp and index k.
func poolName(gss, isp string, k int) string { return gss + "-" + isp + "-" + strconv.Itoa(k) }

// portName is the name of ordinal i's Service port and container port for a target port and
// protocol: "<protocol>-<ordinal>-<port>" (OKG's).
func portName(proto corev1.Protocol, i int, port int32) string {
	return strings.ToLower(string(proto)) + "-" + strconv.Itoa(i) + "-" + strconv.Itoa(int(port))
}

// protocols returns the Service protocols of a PortProtocols entry: TCP and UDP for TCPUDP.
func protocols(pp lb.PortProtocol) []corev1.Protocol {
	if pp.Protocol == lb.ProtocolTCPUDP {
		return []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP}
	}
	return []corev1.Protocol{pp.Protocol}
}

// ensurePools makes the missing pool Services of the GameServerSet for ordinals up to the
// highest of its replicas and srv's ordinal, plus the spares, per ISP type; existing ones are
// kept as they are. A dry run writes nothing. Errors: a ParameterError when that would pass
// AutoNLBsMaxServices, or when a Service of a pool's name is not the GameServerSet's; the
// API server's refusals (APICallErrors) and read failures (Unknown).
func (a *AutoNLBs) ensurePools(ctx context.Context, c client.Client, pod *corev1.Pod, prm autoParams, srv server) error {
	replicas, _, _ := unstructured.NestedInt64(srv.gss.Object, "spec", "replicas")
	highest := max(int(replicas), srv.ordinal)
	n := prm.layout.Services(highest, prm.reserve)
	if n > AutoNLBsMaxServices {
		return plugin.NotAllowedf("metadata.name", "ordinal %d of GameServerSet %s (%d replicas) with %d spares needs %d NLBs per ISP type; at most %d are made for one GameServerSet (%d game servers each)",
			srv.ordinal, srv.gss.GetName(), replicas, prm.reserve, n, AutoNLBsMaxServices, prm.layout.PerService())
	}
	for _, isp := range prm.isps {
		for k := range n {
			name := poolName(srv.gss.GetName(), isp, k)
			svc := &corev1.Service{}
			switch err := c.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: name}, svc); {
			case err == nil:
				if ref := metav1.GetControllerOf(svc); ref == nil || ref.Kind != gameServerSetGVK.Kind || ref.UID != srv.gss.GetUID() {
					return plugin.Errorf(plugin.ParameterError, "Service %s/%s exists and is not GameServerSet %s's pool Service", svc.Namespace, svc.Name, srv.gss.GetName())
				}
				continue
			case !apierrors.IsNotFound(err):
				return plugin.WrapUnknown(err, "get Service %s/%s", pod.Namespace, name)
			}
			if plugin.IsReadOnly(ctx) {
				continue
			}
			want, err := a.pool(pod.Namespace, srv, isp, k, prm)
			if err != nil {
				return err
			}
			if err := c.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
				return plugin.Wrap(plugin.APICallError, err, "create Service %s/%s", want.Namespace, want.Name)
			}
			ctrl.LoggerFrom(ctx).Info("Pool Service created", "service", want.Namespace+"/"+want.Name, "gameServerSet", srv.gss.GetName())
		}
	}
	return nil
}

// pool builds the pool Service of isp and index k: type LoadBalancer, OKG's NLB annotations
// (zone maps, address type for an intranet ISP, health checks), selecting the GameServerSet's
// pods, one port per ordinal of the index and PortProtocols entry, targeting the container
// port of the same name.
func (a *AutoNLBs) pool(ns string, srv server, isp string, k int, prm autoParams) (*corev1.Service, error) {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: poolName(srv.gss.GetName(), isp, k),
			Annotations: map[string]string{AnnotationZoneMaps: prm.zoneMaps},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: gameServerSetGVK.GroupVersion().String(), Kind: gameServerSetGVK.Kind,
				Name: srv.gss.GetName(), UID: srv.gss.GetUID(), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{networkstatus.LabelOwnerGSS: srv.gss.GetName()}},
	}
	per := prm.layout.PerService()
	for i := k * per; i < (k+1)*per; i++ {
		slot := prm.layout.Slot(i)
		for j, pp := range prm.ports {
			for _, proto := range protocols(pp) {
				name := portName(proto, i, pp.Port)
				svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: name, Port: slot[j], Protocol: proto, TargetPort: intstr.FromString(name)})
			}
		}
	}
	if err := customizeAutoNLBs(prm.conf, svc); err != nil {
		return nil, err
	}
	if strings.Contains(isp, "intranet") {
		svc.Annotations[AnnotationAddressType] = "intranet"
	}
	return svc, nil
}

// OnPodAdded parses the network-conf (a ParameterError refuses the CREATE), reads the pod's
// GameServerSet, makes the pool Services its ordinal and the spares need, names the first
// container's ports for the pool Services to target ("<protocol>-<ordinal>-<port>"), and adds
// one readiness gate per ISP type, for its pool Service. Errors: those of parse, serverOf and
// ensurePools.
func (a *AutoNLBs) OnPodAdded(ctx context.Context, c client.Client, pod *corev1.Pod) (*corev1.Pod, error) {
	conf, err := networkstatus.ConfFromPod(pod)
	if err != nil {
		return pod, err
	}
	prm, err := a.parse(conf)
	if err != nil {
		return pod, err
	}
	srv, err := serverOf(ctx, c, pod)
	if err != nil {
		return pod, err
	}
	if len(pod.Spec.Containers) == 0 {
		return pod, plugin.ParamErrorf("spec.containers", "is empty: %s names the first container's ports", AutoNLBsName)
	}
	for _, isp := range prm.isps {
		if name := poolName(srv.gss.GetName(), isp, prm.layout.Service(srv.ordinal)); len(validation.IsDNS1035Label(name)) > 0 {
			return pod, plugin.ParamErrorf(ParamEipIspTypes, "the pool Service name %q is not a DNS-1035 label: %s", name, strings.Join(validation.IsDNS1035Label(name), "; "))
		}
	}
	if err := a.ensurePools(ctx, c, pod, prm, srv); err != nil {
		return pod, err
	}
	var ports []corev1.ContainerPort
	for _, pp := range prm.ports {
		for _, proto := range protocols(pp) {
			ports = append(ports, corev1.ContainerPort{Name: portName(proto, srv.ordinal, pp.Port), ContainerPort: pp.Port, Protocol: proto})
		}
	}
	pod.Spec.Containers[0].Ports = ports
	for _, isp := range prm.isps {
		gate := corev1.PodConditionType(ServiceReadinessGatePrefix + poolName(srv.gss.GetName(), isp, prm.layout.Service(srv.ordinal)))
		if !slices.ContainsFunc(pod.Spec.ReadinessGates, func(g corev1.PodReadinessGate) bool { return g.ConditionType == gate }) {
			pod.Spec.ReadinessGates = append(pod.Spec.ReadinessGates, corev1.PodReadinessGate{ConditionType: gate})
		}
	}
	return pod, nil
}

// OnPodUpdated runs OKG's lifecycle: a NotReady status first; the pool Services made when
// missing (OKG refuses the update); NotReady until every ISP type's pool Service of the
// game server has an address and the cloud controller has set the pod's readiness gates (or
// the pod is Ready, which needs them); then Ready with one internal address (the pod's IP, a
// port per Service port) and one external address whose endPoint joins "<hostname>/<isp>" over
// the ISP types (OKG's shape). network-disabled is not acted on (a pool Service serves every
// game server of its NLB), as in OKG. Errors: those of parse and serverOf, the pool
// Services' reads (Unknown) and writes, each with the pod's status as the run left it.
func (a *AutoNLBs) OnPodUpdated(ctx context.Context, c client.Client, pod *corev1.Pod) (*corev1.Pod, error) {
	prev, _ := networkstatus.StatusFromPod(pod)
	first := prev == nil
	if first {
		prev = &networkstatus.NetworkStatus{CurrentNetworkState: networkstatus.NetworkNotReady}
	}
	notReady := func(err error) (*corev1.Pod, error) {
		st := *prev
		st.CurrentNetworkState = networkstatus.NetworkNotReady
		if werr := networkstatus.PutStatus(pod, st); werr != nil {
			return pod, werr
		}
		return pod, err
	}
	conf, err := networkstatus.ConfFromPod(pod)
	if err != nil {
		return notReady(err)
	}
	prm, err := a.parse(conf)
	if err != nil || first {
		return notReady(err)
	}
	srv, err := serverOf(ctx, c, pod)
	if err != nil {
		return notReady(err)
	}
	if err := a.ensurePools(ctx, c, pod, prm, srv); err != nil {
		return notReady(err)
	}
	k := prm.layout.Service(srv.ordinal)
	var endPoints []string
	var cloudErrs []error
	var last *corev1.Service
	for _, isp := range prm.isps {
		svc := &corev1.Service{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: poolName(srv.gss.GetName(), isp, k)}, svc); err != nil {
			// Made just now (ensurePools) and not in the cache yet, or unreadable.
			return notReady(plugin.WrapUnknown(err, "get Service %s/%s", pod.Namespace, poolName(srv.gss.GetName(), isp, k)))
		}
		if len(svc.Status.LoadBalancer.Ingress) == 0 {
			cloudErrs = append(cloudErrs, lb.CloudFailure(ctx, c, svc))
			continue
		}
		endPoints = append(endPoints, svc.Status.LoadBalancer.Ingress[0].Hostname+"/"+isp)
		last = svc
	}
	if len(endPoints) < len(prm.isps) {
		return notReady(errors.Join(cloudErrs...))
	}
	if !a.served(pod, srv, prm) {
		return notReady(nil)
	}
	in := networkstatus.NetworkAddress{IP: pod.Status.PodIP}
	out := networkstatus.NetworkAddress{EndPoint: strings.Join(endPoints, ",")}
	for _, pp := range prm.ports {
		for _, proto := range protocols(pp) {
			name := portName(proto, srv.ordinal, pp.Port)
			in.Ports = append(in.Ports, networkstatus.NetworkPort{Name: name, Protocol: proto, Port: networkstatus.IntPort(pp.Port)})
			for _, sp := range last.Spec.Ports {
				if sp.Name == name {
					out.Ports = append(out.Ports, networkstatus.NetworkPort{Name: name, Protocol: proto, Port: networkstatus.IntPort(sp.Port)})
					break
				}
			}
		}
	}
	// OKG writes a new status, without the earlier one's fields.
	st := networkstatus.NetworkStatus{CurrentNetworkState: networkstatus.NetworkReady,
		InternalAddresses: []networkstatus.NetworkAddress{in}, ExternalAddresses: []networkstatus.NetworkAddress{out}}
	if err := networkstatus.PutStatus(pod, st); err != nil {
		return pod, err
	}
	return pod, conf.Warn(networkstatus.NotIn(autoKnown...), AutoNLBsName+" ignores unknown network-conf parameters, expected only "+strings.Join(autoKnown, ", "))
}

// served reports whether the cloud controller serves the game server on every ISP type's
// NLB: its readiness gate's condition is True, or the pod is Ready (which needs every gate
// True: OKG's rule), or the pod has no such gate (not admitted by this plugin).
func (a *AutoNLBs) served(pod *corev1.Pod, srv server, prm autoParams) bool {
	status := map[corev1.PodConditionType]corev1.ConditionStatus{}
	for _, c := range pod.Status.Conditions {
		status[c.Type] = c.Status
	}
	if status[corev1.PodReady] == corev1.ConditionTrue {
		return true
	}
	for _, isp := range prm.isps {
		gate := corev1.PodConditionType(ServiceReadinessGatePrefix + poolName(srv.gss.GetName(), isp, prm.layout.Service(srv.ordinal)))
		gated := slices.ContainsFunc(pod.Spec.ReadinessGates, func(g corev1.PodReadinessGate) bool { return g.ConditionType == gate })
		if gated && status[gate] != corev1.ConditionTrue {
			return false
		}
	}
	return true
}
