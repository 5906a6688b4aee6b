package alibabacloud

import (
	"context"
	"errors"
	"fmt"
	"regexp"
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

// The AutoNLBs type, its family and its network-conf parameters (OKG's names).
const (
	// AutoNLBsName is the network type of the AutoNLBs plugin.
	AutoNLBsName = "AlibabaCloud-AutoNLBs"
	// AutoNLBsAlias is its family (OKG's AliasAutoNLBs).
	AutoNLBsAlias = "Auto-NLBs-Network"
	// ParamEipIspTypes lists the ISP types, one pool per type: "bgp,intranet" (default BGP).
	ParamEipIspTypes = "EipIspTypes"
	// ParamZoneMaps is the NLBs' zones and vSwitches, "<zone>:<vswitch>,..." (required).
	ParamZoneMaps = "ZoneMaps"
	// ParamMinPort and ParamMaxPort bound every pool's listener ports (default 1000-1499).
	ParamMinPort = "MinPort"
	ParamMaxPort = "MaxPort"
	// ParamBlockPorts lists ports of the range never used, comma-separated.
	ParamBlockPorts = "BlockPorts"
	// ParamReserveNlbNum is how many spare pools a GameServerSet gets (default 1).
	ParamReserveNlbNum = "ReserveNlbNum"
)

// Pool Service annotations and the caps on what a GameServerSet's game servers make.
const (
	// AnnotationZoneMaps is the pool Service annotation naming the NLB's zones and vSwitches
	// ("<zone>:<vswitch>,...", the ZoneMaps parameter, verbatim).
	AnnotationZoneMaps = annotationPrefix + "zone-maps"
	// AnnotationAddressType is the pool Service annotation of an intranet NLB ("intranet",
	// for an ISP type containing "intranet", as OKG's).
	AnnotationAddressType = annotationPrefix + "address-type"
	// AutoNLBsMaxServices is the most pool Services a GameServerSet gets, over all its ISP
	// types (its ordinals' NLBs and the spares): each is an NLB the cloud creates and bills,
	// and how many follows from ordinals, which pod names carry.
	AutoNLBsMaxServices = 64
	// AutoNLBsMaxISPTypes is the most ISP types a network-conf lists.
	AutoNLBsMaxISPTypes = 8
	// AutoNLBsMaxPoolPorts is the most Service ports one pool has (its game servers' ports):
	// a Service object stays far below the API server's size limit; OKG's default range and
	// one port a game server give 500.
	AutoNLBsMaxPoolPorts = 1000
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
// (required), EipIspTypes (default BGP; at most AutoNLBsMaxISPTypes, each lower-cased, letters
// and digits only, so that no two GameServerSets' pools share a name), MinPort
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
		if !lb.LettersAndDigits(isp) || slices.Contains(out.isps, isp) {
			return autoParams{}, plugin.ParamErrorf(ParamEipIspTypes, "%q is not an ISP type that can name a pool Service (letters and digits, once each)", isp)
		}
		if out.isps = append(out.isps, isp); len(out.isps) > AutoNLBsMaxISPTypes {
			return autoParams{}, plugin.ParamErrorf(ParamEipIspTypes, "lists more than %d ISP types", AutoNLBsMaxISPTypes)
		}
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
	servicePorts := 0
	for _, pp := range out.ports {
		servicePorts += len(protocols(pp))
	}
	if n := out.layout.PerService() * servicePorts; n > AutoNLBsMaxPoolPorts {
		return autoParams{}, plugin.ParamErrorf(ParamMinPort+","+ParamMaxPort, "gives each pool Service %d ports (%d game servers of %d); at most %d: narrow the range", n, out.layout.PerService(), servicePorts, AutoNLBsMaxPoolPorts)
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

// autoKnown are the parameters AutoNLBs reads.
var autoKnown = []string{lb.ParamPortProtocols, ParamZoneMaps, ParamEipIspTypes, ParamMinPort, ParamMaxPort, ParamBlockPorts, ParamReserveNlbNum,
	ParamExternalTrafficPolicy, ParamHealthCheckFlag, ParamHealthCheckType, ParamHealthCheckConnectPort, ParamHealthCheckConnectTimout,
	ParamHealthCheckInterval, ParamHealthyThreshold, ParamUnhealthyThreshold, ParamHealthCheckURI, ParamHealthCheckDomain, ParamHealthCheckMethod}

// ValidateConf checks the network-conf as the runs do, writing nothing; an unknown parameter
// is a warning.
func (a *AutoNLBs) ValidateConf(pod *corev1.Pod) error {
	return validateAuto(pod, AutoNLBsName, autoKnown, a.ports)
}

// NetworkView describes the network-conf for the network-conf rules: the listener ports, and
// createsCloudResources true: each pool Service has the cloud create an NLB.
func (a *AutoNLBs) NetworkView(pod *corev1.Pod) (plugin.NetworkView, error) {
	return viewAuto(pod, []string{ParamEipIspTypes, ParamReserveNlbNum}, a.ports)
}

// ports returns parse's ports and errors.
func (a *AutoNLBs) ports(conf networkstatus.Conf) ([]lb.PortProtocol, error) {
	prm, err := a.parse(conf)
	return prm.ports, err
}

// validateAuto is the ValidateConf of both AutoNLBs types: parse's errors, then a warning
// naming the parameters of name's network-conf outside known.
func validateAuto(pod *corev1.Pod, name string, known []string, parse func(networkstatus.Conf) ([]lb.PortProtocol, error)) error {
	conf, err := networkstatus.ConfFromPod(pod)
	if err != nil {
		return err
	}
	if _, err := parse(conf); err != nil {
		return err
	}
	return conf.Warn(networkstatus.NotIn(known...), name+" ignores unknown network-conf parameters, expected only "+strings.Join(known, ", "))
}

// viewAuto is the NetworkView of both AutoNLBs types: the listener ports parse returns, and
// createsCloudResources true, its parameters created.
func viewAuto(pod *corev1.Pod, created []string, parse func(networkstatus.Conf) ([]lb.PortProtocol, error)) (plugin.NetworkView, error) {
	conf, err := networkstatus.ConfFromPod(pod)
	if err != nil {
		return plugin.NetworkView{}, err
	}
	ports, err := parse(conf)
	if err != nil {
		return plugin.NetworkView{}, err
	}
	v := plugin.NetworkView{CreatesCloudResources: true,
		Params: map[string][]string{"ports": {lb.ParamPortProtocols}, "createsCloudResources": created}}
	for _, pp := range ports {
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

// serverOf reads the pod's GameServerSet (label game.kruise.io/owner-gss) live and checks
// the pod against it (serverIn). Errors: those of serverIn; an APICallError when the
// GameServerSet does not exist (as OKG's); Unknown when it cannot be read.
func serverOf(ctx context.Context, c client.Reader, pod *corev1.Pod, conf networkstatus.Conf) (server, error) {
	name := pod.Labels[networkstatus.LabelOwnerGSS]
	if _, err := serverName(pod); err != nil {
		return server{}, err // before the read: a misnamed pod is refused, not retried
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gameServerSetGVK)
	if err := c.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: name}, u); err != nil {
		if apierrors.IsNotFound(err) {
			return server{}, plugin.Wrap(plugin.APICallError, err, "get GameServerSet %s/%s", pod.Namespace, name)
		}
		return server{}, plugin.WrapUnknown(err, "get GameServerSet %s/%s", pod.Namespace, name)
	}
	return serverIn(pod, conf, u)
}

// serverIn checks that the pod is one of the GameServerSet u's game servers as OKG makes
// them: serverName's checks, its network-conf the GameServerSet's (the pools are the
// GameServerSet's: a pod does not choose their shape), the GameServerSet not being deleted.
// u is the GameServerSet the pod's label names, read by the caller; it may be nil only when
// serverName fails. Errors: ParameterErrors naming what is wrong.
func serverIn(pod *corev1.Pod, conf networkstatus.Conf, u *unstructured.Unstructured) (server, error) {
	i, err := serverName(pod)
	if err != nil {
		return server{}, err
	}
	name := u.GetName()
	if u.GetDeletionTimestamp() != nil {
		return server{}, plugin.NotAllowedf("metadata.labels["+networkstatus.LabelOwnerGSS+"]", "GameServerSet %s is being deleted: no NLB is made for it", name)
	}
	raw, _, _ := unstructured.NestedSlice(u.Object, "spec", "network", "networkConf")
	var own networkstatus.Conf
	for _, e := range raw {
		m, _ := e.(map[string]any)
		n, _ := m["name"].(string)
		v, _ := m["value"].(string)
		own = append(own, networkstatus.ConfParam{Name: n, Value: v})
	}
	if !slices.Equal(own, conf) {
		return server{}, plugin.NotAllowedf(networkstatus.AnnotationNetworkConf, "differs from GameServerSet %s's spec.network.networkConf: its pool Services are the GameServerSet's, made from its network-conf", name)
	}
	return server{gss: u, ordinal: i}, nil
}

// serverName checks the pod's label game.kruise.io/owner-gss and its name
// "<GameServerSet>-<ordinal>", and returns the ordinal. Errors: ParameterErrors naming the
// label or the name.
func serverName(pod *corev1.Pod) (int, error) {
	name := pod.Labels[networkstatus.LabelOwnerGSS]
	if name == "" {
		return 0, plugin.ParamErrorf("metadata.labels["+networkstatus.LabelOwnerGSS+"]", "is required: %s serves the game servers of a GameServerSet", pod.Annotations[networkstatus.AnnotationNetworkType])
	}
	i, ok := ordinal.Of(pod.Name)
	if !ok || pod.Name != name+"-"+strconv.Itoa(i) {
		return 0, plugin.ParamErrorf("metadata.name", "%q is not <GameServerSet>-<ordinal> of GameServerSet %s: %s places a game server by its ordinal", pod.Name, name, pod.Annotations[networkstatus.AnnotationNetworkType])
	}
	return i, nil
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
// kept as they are. A dry run writes nothing. Errors: a ParameterError (reason NotAllowed)
// when that would pass AutoNLBsMaxServices over all ISP types, before anything is made; a
// ParameterError when a pool's name is not a DNS-1035 label or a Service of a pool's name is
// not the GameServerSet's (found, or made by someone else in the same moment); the API
// server's refusals (APICallErrors) and read failures (Unknown).
func (a *AutoNLBs) ensurePools(ctx context.Context, c client.Client, pod *corev1.Pod, prm autoParams, srv server) error {
	replicas, _, _ := unstructured.NestedInt64(srv.gss.Object, "spec", "replicas")
	highest := max(int(replicas), srv.ordinal)
	n := prm.layout.Services(highest, prm.reserve)
	if total := n * len(prm.isps); total > AutoNLBsMaxServices {
		return plugin.NotAllowedf("metadata.name", "GameServerSet %s would need %d pool Services (NLBs) for ordinal %d and its %d replicas, %d game servers a pool, %d spares and %d ISP types; at most %d are made for one GameServerSet",
			srv.gss.GetName(), total, srv.ordinal, replicas, prm.layout.PerService(), prm.reserve, len(prm.isps), AutoNLBsMaxServices)
	}
	for _, isp := range prm.isps {
		if name := poolName(srv.gss.GetName(), isp, n-1); len(validation.IsDNS1035Label(name)) > 0 {
			return plugin.ParamErrorf(ParamEipIspTypes, "with GameServerSet %s, ISP type %q makes the pool Service name %q, which is not a DNS-1035 label: %s",
				srv.gss.GetName(), isp, name, strings.Join(validation.IsDNS1035Label(name), "; "))
		}
	}
	isPool := func(svc *corev1.Service) error {
		if ref := metav1.GetControllerOf(svc); ref == nil || ref.Kind != gameServerSetGVK.Kind || ref.UID != srv.gss.GetUID() {
			return plugin.Errorf(plugin.ParameterError, "Service %s/%s exists and is not GameServerSet %s's pool Service", svc.Namespace, svc.Name, srv.gss.GetName())
		}
		return nil
	}
	for _, isp := range prm.isps {
		for k := range n {
			name := poolName(srv.gss.GetName(), isp, k)
			svc := &corev1.Service{}
			switch err := c.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: name}, svc); {
			case err == nil:
				if err := isPool(svc); err != nil {
					return err
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
			if err := c.Create(ctx, want); apierrors.IsAlreadyExists(err) {
				// Made in the same moment: by another replica's run, or by someone else.
				if err := plugin.AwaitCreated(ctx, c, svc); err != nil {
					return plugin.WrapUnknown(err, "get Service %s/%s", pod.Namespace, name)
				}
				if err := isPool(svc); err != nil {
					return err
				}
				continue
			} else if err != nil {
				return plugin.Wrap(plugin.APICallError, err, "create Service %s/%s", want.Namespace, want.Name)
			}
			ctrl.LoggerFrom(ctx).Info("Pool Service created", "service", want.Namespace+"/"+want.Name, "gameServerSet", srv.gss.GetName())
		}
	}
	return nil
}

// portPattern matches the names of the ports a pool Service targets, "<protocol>-<ordinal>-<port>".
var portPattern = regexp.MustCompile(`^(tcp|udp|sctp)-[0-9]+-[0-9]+$`)

// checkPortNames refuses a container port of another container than the first, or an init
// container's, named as the pool Services' ports are: a pool's port targets its name on every
// pod it selects, so another game server could take that ordinal's traffic with it. Errors: a
// ParameterError (reason NotAllowed) naming the port.
func checkPortNames(pod *corev1.Pod) error {
	check := func(path string, cs []corev1.Container, from int) error {
		for i := from; i < len(cs); i++ {
			for j, p := range cs[i].Ports {
				if portPattern.MatchString(p.Name) {
					return plugin.NotAllowedf(fmt.Sprintf("%s[%d].ports[%d].name", path, i, j), "%q is named as the ports %s's pool Services target (<protocol>-<ordinal>-<port>); only the first container's, which it writes, may be", p.Name, AutoNLBsName)
				}
			}
		}
		return nil
	}
	if err := check("spec.containers", pod.Spec.Containers, 1); err != nil {
		return err
	}
	return check("spec.initContainers", pod.Spec.InitContainers, 0)
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

// OnPodAdded parses the network-conf (a ParameterError refuses the CREATE), checks the pod is
// its GameServerSet's (serverOf) and names no other container's port as the pools' ports are
// (checkPortNames), makes the pool Services its ordinal and the spares need, names the first
// container's ports for the pool Services to target ("<protocol>-<ordinal>-<port>"), and adds
// one readiness gate per ISP type, for its pool Service. Errors: those of parse, serverOf,
// checkPortNames and ensurePools.
func (a *AutoNLBs) OnPodAdded(ctx context.Context, c client.Client, pod *corev1.Pod) (*corev1.Pod, error) {
	conf, err := networkstatus.ConfFromPod(pod)
	if err != nil {
		return pod, err
	}
	prm, err := a.parse(conf)
	if err != nil {
		return pod, err
	}
	if len(pod.Spec.Containers) == 0 {
		return pod, plugin.ParamErrorf("spec.containers", "is empty: %s names the first container's ports", AutoNLBsName)
	}
	if err := checkPortNames(pod); err != nil {
		return pod, err
	}
	srv, err := serverOf(ctx, c, pod, conf)
	if err != nil {
		return pod, err
	}
	if err := a.ensurePools(ctx, c, pod, prm, srv); err != nil {
		return pod, err
	}
	pod.Spec.Containers[0].Ports = a.containerPorts(prm, srv.ordinal)
	for _, gate := range a.gates(prm, srv) {
		if !slices.ContainsFunc(pod.Spec.ReadinessGates, func(g corev1.PodReadinessGate) bool { return g.ConditionType == gate }) {
			pod.Spec.ReadinessGates = append(pod.Spec.ReadinessGates, corev1.PodReadinessGate{ConditionType: gate})
		}
	}
	return pod, nil
}

// containerPorts are the first container's ports of the game server of ordinal i.
func (a *AutoNLBs) containerPorts(prm autoParams, i int) []corev1.ContainerPort {
	var ports []corev1.ContainerPort
	for _, pp := range prm.ports {
		for _, proto := range protocols(pp) {
			ports = append(ports, corev1.ContainerPort{Name: portName(proto, i, pp.Port), ContainerPort: pp.Port, Protocol: proto})
		}
	}
	return ports
}

// gates are the readiness gates of srv's game server: one per ISP type, for its pool.
func (a *AutoNLBs) gates(prm autoParams, srv server) []corev1.PodConditionType {
	var out []corev1.PodConditionType
	for _, isp := range prm.isps {
		out = append(out, corev1.PodConditionType(ServiceReadinessGatePrefix+poolName(srv.gss.GetName(), isp, prm.layout.Service(srv.ordinal))))
	}
	return out
}

// OnPodUpdated runs OKG's lifecycle: a NotReady status first; the pool Services made when
// missing (OKG refuses the update); NotReady until every ISP type's pool Service of the
// game server has an address and the cloud controller has set the pod's readiness gates (or
// the pod is Ready, which needs them); then Ready with one internal address (the pod's IP, a
// port per Service port) and one external address whose endPoint joins "<hostname>/<isp>" over
// the ISP types (OKG's shape). network-disabled is not acted on (a pool Service serves every
// game server of its NLB), as in OKG. A pod without the ports and gates its CREATE gives (one
// created while the webhook was unreachable) can never be served: a ParameterError says so.
// Errors: those of parse and serverOf, the pool Services' reads (Unknown) and writes, a pool
// without the game server's ports (made for another network-conf), each with the pod's
// status as the run left it.
func (a *AutoNLBs) OnPodUpdated(ctx context.Context, c client.Client, pod *corev1.Pod) (*corev1.Pod, error) {
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
	if err != nil || first {
		return notReady(err)
	}
	srv, err := serverOf(ctx, c, pod, conf)
	if err != nil {
		return notReady(err)
	}
	if err := a.admitted(pod, prm, srv); err != nil {
		return notReady(err)
	}
	if err := a.ensurePools(ctx, c, pod, prm, srv); err != nil {
		return notReady(err)
	}
	k := prm.layout.Service(srv.ordinal)
	want := a.containerPorts(prm, srv.ordinal)
	var endPoints []string
	var cloudErrs []error
	external := map[string]int32{} // port name -> listener port, the same on every pool
	for _, isp := range prm.isps {
		name := poolName(srv.gss.GetName(), isp, k)
		svc := &corev1.Service{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: name}, svc); err != nil {
			// Made just now (ensurePools) and not in the cache yet, or unreadable.
			return notReady(plugin.WrapUnknown(err, "get Service %s/%s", pod.Namespace, name))
		}
		for _, cp := range want {
			i := slices.IndexFunc(svc.Spec.Ports, func(sp corev1.ServicePort) bool { return sp.Name == cp.Name })
			if i < 0 || (external[cp.Name] != 0 && external[cp.Name] != svc.Spec.Ports[i].Port) {
				return notReady(plugin.Errorf(plugin.ParameterError, "pool Service %s/%s has no port %s as the other pools: it was made for another network-conf of GameServerSet %s",
					svc.Namespace, svc.Name, cp.Name, srv.gss.GetName()))
			}
			external[cp.Name] = svc.Spec.Ports[i].Port
		}
		if len(svc.Status.LoadBalancer.Ingress) == 0 {
			cloudErrs = append(cloudErrs, lb.CloudFailure(ctx, c, svc))
			continue
		}
		endPoints = append(endPoints, svc.Status.LoadBalancer.Ingress[0].Hostname+"/"+isp)
	}
	if len(endPoints) < len(prm.isps) {
		return notReady(errors.Join(cloudErrs...))
	}
	if !a.served(pod, prm, srv) {
		return notReady(nil)
	}
	in := networkstatus.NetworkAddress{IP: pod.Status.PodIP}
	out := networkstatus.NetworkAddress{EndPoint: strings.Join(endPoints, ",")}
	for _, cp := range want {
		in.Ports = append(in.Ports, networkstatus.NetworkPort{Name: cp.Name, Protocol: cp.Protocol, Port: networkstatus.IntPort(cp.ContainerPort)})
		out.Ports = append(out.Ports, networkstatus.NetworkPort{Name: cp.Name, Protocol: cp.Protocol, Port: networkstatus.IntPort(external[cp.Name])})
	}
	// OKG writes a new status, without the earlier one's fields.
	st := networkstatus.NetworkStatus{CurrentNetworkState: networkstatus.NetworkReady,
		InternalAddresses: []networkstatus.NetworkAddress{in}, ExternalAddresses: []networkstatus.NetworkAddress{out}}
	if err := networkstatus.PutStatus(pod, st); err != nil {
		return pod, err
	}
	return pod, conf.Warn(networkstatus.NotIn(autoKnown...), AutoNLBsName+" ignores unknown network-conf parameters, expected only "+strings.Join(autoKnown, ", "))
}

// admitted checks that the pod has what its CREATE gives it: the first container's ports the
// pools target and a readiness gate per ISP type. A pod created without them (while the
// webhook was unreachable) gets no traffic from the pools and cannot be changed: a
// ParameterError names what is missing and says to recreate it.
func (a *AutoNLBs) admitted(pod *corev1.Pod, prm autoParams, srv server) error {
	for _, cp := range a.containerPorts(prm, srv.ordinal) {
		if len(pod.Spec.Containers) == 0 || !slices.ContainsFunc(pod.Spec.Containers[0].Ports, func(p corev1.ContainerPort) bool {
			return p.Name == cp.Name && p.ContainerPort == cp.ContainerPort && p.Protocol == cp.Protocol
		}) {
			return plugin.ParamErrorf("spec.containers[0].ports", "has no port %s (%d/%s), which the pool Services target: the pod was not admitted by %s; delete it to have it made again",
				cp.Name, cp.ContainerPort, cp.Protocol, AutoNLBsName)
		}
	}
	for _, gate := range a.gates(prm, srv) {
		if !slices.ContainsFunc(pod.Spec.ReadinessGates, func(g corev1.PodReadinessGate) bool { return g.ConditionType == gate }) {
			return plugin.ParamErrorf("spec.readinessGates", "has no %s: the pod was not admitted by %s; delete it to have it made again", gate, AutoNLBsName)
		}
	}
	return nil
}

// served reports whether the cloud controller serves the game server on every ISP type's
// NLB: every readiness gate's condition is True, or the pod is Ready (which needs them all:
// OKG's rule).
func (a *AutoNLBs) served(pod *corev1.Pod, prm autoParams, srv server) bool {
	status := map[corev1.PodConditionType]corev1.ConditionStatus{}
	for _, c := range pod.Status.Conditions {
		status[c.Type] = c.Status
	}
	if status[corev1.PodReady] == corev1.ConditionTrue {
		return true
	}
	for _, gate := range a.gates(prm, srv) {
		if status[gate] != corev1.ConditionTrue {
			return false
		}
	}
	return true
}
