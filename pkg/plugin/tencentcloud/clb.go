package tencentcloud

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// CLBName is the network type of the plugin (OKG's name); CLBAlias its family.
const (
	CLBName  = "TencentCloud-CLB"
	CLBAlias = "CLB-Network"
)

// ParamPortProtocols is the plugin's one network-conf parameter (OKG's name):
// "<port>[/<PROTOCOL>],..." with TCP as the default protocol. OKG's ClbIds is accepted and
// not read (the CLBs are the port pool's).
const (
	ParamPortProtocols = "PortProtocols"
	ParamClbIDs        = "ClbIds"
)

// Pod annotations of tke-extend-network-controller (OKG's keys). The plugin writes
// AnnotationPortMapping and AnnotationEnablePortMapping; the controller answers in
// AnnotationPortMappingResult and AnnotationPortMappingStatus.
const (
	// AnnotationPortMapping is one line "<port> <protocol> <pool>\n" per PortProtocols
	// entry, the pool named "<namespace>-<GameServerSet>" ("-" when the pod's
	// GameServerSet does not exist).
	AnnotationPortMapping = "networking.cloud.tencent.com/clb-port-mapping"
	// AnnotationEnablePortMapping is "true", or "false" while the pod's network is disabled
	// (label game.kruise.io/network-disabled): the controller unbinds the pod.
	AnnotationEnablePortMapping = "networking.cloud.tencent.com/enable-clb-port-mapping"
	// AnnotationPortMappingResult is the controller's answer: a JSON list of
	// {"port": <pod port>, "protocol": "<protocol>", "address": "<ip>:<port>", ...}.
	AnnotationPortMappingResult = "networking.cloud.tencent.com/clb-port-mapping-result"
	// AnnotationPortMappingStatus is "Ready" once the result is whole.
	AnnotationPortMappingStatus = "networking.cloud.tencent.com/clb-port-mapping-status"
)

// GroupVersion is the API group and version of tke-extend-network-controller's objects
// (networking.cloud.tencent.com/v1alpha1, its api/v1alpha1/groupversion_info.go).
var GroupVersion = schema.GroupVersion{Group: "networking.cloud.tencent.com", Version: "v1alpha1"}

// CLBPodBindingKind is the controller's object for one pod, named after the pod in its
// namespace, whose status.state and status.message say how the binding goes.
const CLBPodBindingKind = "CLBPodBinding"

// failedStates are the CLBPodBinding states (status.state, the controller's
// CLBBindingState) in which the controller has given up on the binding until something
// changes, with the reason each becomes in the retry state. Pending, WaitBackend,
// Allocated, Bound, NoBackend, Disabled and Deleting are not failures: the network waits.
var failedStates = map[string]plugin.Reason{
	"Failed":                 plugin.ReasonCloudRefused,
	"NoPortAvailable":        plugin.ReasonPortsExhausted,
	"PortPoolNotFound":       plugin.ReasonCloudRefused,
	"PortPoolNotAllocatable": plugin.ReasonCloudRefused,
	"NodeTypeNotSupported":   plugin.ReasonCloudRefused,
}

// protocols are the listener protocols the controller maps a pod port with that need
// nothing more than the port (its PortEntry's TCP, UDP and TCPUDP; TCP_SSL and QUIC need a
// certificate that the clb-port-mapping annotation of OKG's form cannot name).
var protocols = []string{"TCP", "UDP", "TCPUDP"}

// CLB is the TencentCloud-CLB plugin: plugin.Plugin with no state (safe for concurrent use).
// Create it with NewCLB.
type CLB struct {
	writers plugin.ResultWriters
	// reader reads CLBPodBindings (UseResultReader: the manager's cache); nil: the
	// client of the run.
	reader client.Reader
}

var (
	_ plugin.Plugin              = (*CLB)(nil)
	_ plugin.ConfValidator       = (*CLB)(nil)
	_ plugin.ResultReader        = (*CLB)(nil)
	_ plugin.NetworkViewer       = (*CLB)(nil)
	_ plugin.CachedReader        = (*CLB)(nil)
	_ plugin.ResultObjectsReader = (*CLB)(nil)
)

// NewCLB returns the TencentCloud-CLB plugin. writers are the [tencentcloud] table's result
// writers: tke-extend-network-controller's identity, from which alone the webhook takes a
// change of AnnotationPortMappingResult and AnnotationPortMappingStatus.
//
// At CREATE and at each UPDATE, as OKG's: a pod without a network-status (or with one that
// is not JSON) gets a Waiting status and nothing else (a mapping its author wrote is
// dropped); otherwise the run writes
// AnnotationPortMapping and AnnotationEnablePortMapping, then, when AnnotationPortMappingStatus
// is "Ready" and the result maps every PortProtocols entry, a Ready status: per entry the
// pod's IP and port inside, the CLB's address and port outside, each port named by the pod
// port's number and with the result's protocol. Deliberately unlike OKG:
//   - a PortProtocols entry whose port is not 1-65535, or whose protocol is not TCP, UDP or
//     TCPUDP, is a ParameterError naming PortProtocols (OKG skips the entry silently or
//     writes the protocol verbatim for the controller to refuse), as is a network-conf that
//     is not JSON (OKG panics) or a network-disabled label that is not a boolean;
//   - a result that leaves out one of the pod's ports is not Ready yet (OKG: Ready with the
//     ports it could read);
//   - a pool name that an older GameServerSet of another namespace also makes ("a"'s "b-c"
//     and "a-b"'s "c" are both pool "a-b-c") is refused with reason NotAllowed until the
//     network is Ready: the CLBs of a pool are the platform's, given to one namespace; and a
//     result entry of another pool does not count;
//   - a port listed twice in PortProtocols is a ParameterError;
//   - while the network is not Ready, the pod's CLBPodBinding in a failed state
//     (failedStates) is the run's CloudError, with the controller's message and a reason;
//   - a result that turns unreadable leaves a Ready network as it is.
func NewCLB(writers plugin.ResultWriters) *CLB { return &CLB{writers: writers} }

// UseResultReader makes the plugin read CLBPodBindings through r, the manager's cache, rather
// than the client a run is given. Call it before the plugin serves.
func (p *CLB) UseResultReader(r client.Reader) { p.reader = r }

// Name returns CLBName.
func (p *CLB) Name() string { return CLBName }

// Alias returns CLBAlias.
func (p *CLB) Alias() string { return CLBAlias }

// IsSynchronous returns false: the controller maps the ports after the pod exists.
func (p *CLB) IsSynchronous() bool { return false }

// Init does nothing: the plugin keeps no state.
func (p *CLB) Init(context.Context, client.Client, plugin.Config) error { return nil }

// OnPodDeleted does nothing: the controller releases the pod's ports.
func (p *CLB) OnPodDeleted(context.Context, client.Client, *corev1.Pod) error { return nil }

// OnPodAdded runs the plugin at CREATE (see NewCLB).
func (p *CLB) OnPodAdded(ctx context.Context, c client.Client, pod *corev1.Pod) (*corev1.Pod, error) {
	return p.run(ctx, c, pod)
}

// OnPodUpdated runs the plugin at UPDATE (see NewCLB).
func (p *CLB) OnPodUpdated(ctx context.Context, c client.Client, pod *corev1.Pod) (*corev1.Pod, error) {
	return p.run(ctx, c, pod)
}

// ResultAnnotations returns AnnotationPortMappingResult and AnnotationPortMappingStatus.
func (p *CLB) ResultAnnotations() []string {
	return []string{AnnotationPortMappingResult, AnnotationPortMappingStatus}
}

// TrustsResultWriter reports whether the [tencentcloud] result writers trust user.
func (p *CLB) TrustsResultWriter(user authenticationv1.UserInfo) bool { return p.writers.Trusts(user) }

// ValidateConf checks the pod's network-conf as a run does, reading and writing nothing:
// a network-conf that is not JSON, or a ParameterError naming PortProtocols.
func (p *CLB) ValidateConf(pod *corev1.Pod) error {
	conf, err := networkstatus.ConfFromPod(pod)
	if err != nil {
		return err
	}
	_, err = parsePorts(conf)
	return err
}

// NetworkView describes the network-conf for the network-conf rules: it asks for no cloud
// resource (the controller maps ports onto the platform's port pool). Errors: ValidateConf's.
func (p *CLB) NetworkView(pod *corev1.Pod) (plugin.NetworkView, error) {
	if err := p.ValidateConf(pod); err != nil {
		return plugin.NetworkView{}, err
	}
	return plugin.NetworkView{}, nil
}

// CachedObjects returns an empty CLBPodBinding (plugin.CachedReader).
func (p *CLB) CachedObjects() []client.Object { return []client.Object{bindingObject()} }

// ResultObjects returns CLBPodBinding, whose state and message are the controller's answer
// while the network is not Ready (plugin.ResultObjectsReader).
func (p *CLB) ResultObjects() []plugin.ResultKind {
	return []plugin.ResultKind{{Object: bindingObject(), Answer: [][]string{{"status", "state"}, {"status", "message"}}}}
}

func bindingObject() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(GroupVersion.WithKind(CLBPodBindingKind))
	return u
}

// portProtocol is one PortProtocols entry: the pod's port and the protocol as written.
type portProtocol struct {
	port     int32
	protocol string
}

// parsePorts parses PortProtocols (see NewCLB). Entries are trimmed of spaces, and empty ones
// skipped. Errors: a ParameterError naming PortProtocols, for an entry that is not a port and
// protocol or one whose port and protocol another entry has (TCPUDP has both of a port's).
func parsePorts(conf networkstatus.Conf) ([]portProtocol, error) {
	expected := `expected "<port>[/<PROTOCOL>],..." with port 1-65535 and PROTOCOL ` + strings.Join(protocols, ", ") + " (TCP by default)"
	var out []portProtocol
	for _, param := range conf {
		if param.Name != ParamPortProtocols {
			continue
		}
		for _, entry := range strings.Split(param.Value, ",") {
			if entry = strings.TrimSpace(entry); entry == "" {
				continue
			}
			parts := strings.Split(entry, "/")
			port, err := strconv.ParseInt(parts[0], 10, 32)
			if err != nil || port < 1 || port > 65535 || len(parts) > 2 {
				return nil, plugin.ParamErrorf(ParamPortProtocols, "%q is not a port, %s", entry, expected)
			}
			pp := portProtocol{port: int32(port), protocol: "TCP"}
			if len(parts) == 2 {
				pp.protocol = parts[1]
				if !slices.Contains(protocols, pp.protocol) {
					return nil, plugin.ParamErrorf(ParamPortProtocols, "%q has protocol %q, %s", entry, pp.protocol, expected)
				}
			}
			for _, seen := range out {
				if seen.port == pp.port && (seen.protocol == pp.protocol || seen.protocol == "TCPUDP" || pp.protocol == "TCPUDP") {
					return nil, plugin.ParamErrorf(ParamPortProtocols, "%q: port %d/%s is listed already, %s", entry, seen.port, seen.protocol, expected)
				}
			}
			out = append(out, pp)
		}
	}
	if len(out) == 0 {
		return nil, plugin.ParamErrorf(ParamPortProtocols, "is required, %s", expected)
	}
	return out, nil
}

// run is one run of the plugin (see NewCLB).
func (p *CLB) run(ctx context.Context, c client.Client, pod *corev1.Pod) (*corev1.Pod, error) {
	prev, err := networkstatus.FirstRun(pod)
	if prev == nil {
		// The mapping is the plugin's to write: one the pod's author wrote would have the
		// controller map the pod onto a pool of the author's choosing before the next run.
		delete(pod.Annotations, AnnotationPortMapping)
		delete(pod.Annotations, AnnotationEnablePortMapping)
		return pod, err
	}
	conf, err := networkstatus.ConfFromPod(pod)
	if err != nil {
		return pod, err
	}
	ports, err := parsePorts(conf)
	if err != nil {
		return pod, err
	}
	disabled, err := networkstatus.NetworkDisabled(pod)
	if err != nil {
		return pod, err
	}
	set, err := gameServerSetOf(ctx, c, pod)
	if err != nil {
		return pod, err
	}
	pool := "-"
	if set != nil {
		pool = pod.Namespace + "-" + set.GetName()
		if prev.CurrentNetworkState != networkstatus.NetworkReady {
			// Until the network is Ready: no older GameServerSet of another namespace makes
			// the same pool name.
			if err := ambiguousPool(ctx, c, set); err != nil {
				return pod, err
			}
		}
	}
	var mapping strings.Builder
	for _, pp := range ports {
		fmt.Fprintf(&mapping, "%d %s %s\n", pp.port, pp.protocol, pool)
	}
	pod.Annotations[AnnotationPortMapping] = mapping.String()
	pod.Annotations[AnnotationEnablePortMapping] = strconv.FormatBool(!disabled)

	if pod.Annotations[AnnotationPortMappingStatus] == "Ready" && pod.Annotations[AnnotationPortMappingResult] != "" {
		internal, external, whole, err := readResult(pod, ports, pool)
		if err != nil {
			if prev.CurrentNetworkState == networkstatus.NetworkReady {
				// The controller's answer became unreadable: the network it made stays as
				// it was (unknown is not broken).
				return pod, nil
			}
			return pod, err
		}
		if whole {
			st := *prev
			st.InternalAddresses, st.ExternalAddresses = internal, external
			st.CurrentNetworkState = networkstatus.NetworkReady
			return pod, networkstatus.PutStatus(pod, st)
		}
	}
	if prev.CurrentNetworkState == networkstatus.NetworkReady {
		return pod, nil
	}
	return pod, p.bindingFailure(ctx, c, pod)
}

var gameServerSetGVK = schema.GroupVersionKind{Group: "game.kruise.io", Version: "v1alpha1", Kind: "GameServerSet"}

// gameServerSetOf returns the GameServerSet of the pod's label game.kruise.io/owner-gss, nil
// when the pod has no such label or it does not exist (the pool is then "-", as OKG names
// it: no object can have that name, so no controller maps such a pod). Errors: Unknown when
// it cannot be read.
func gameServerSetOf(ctx context.Context, c client.Reader, pod *corev1.Pod) (*unstructured.Unstructured, error) {
	name := pod.Labels[networkstatus.LabelOwnerGSS]
	if name == "" {
		return nil, nil
	}
	return getGameServerSet(ctx, c, pod.Namespace, name)
}

// getGameServerSet reads the GameServerSet ns/name: nil when it does not exist, or when the
// API server does not serve the kind. Errors: Unknown when it cannot be read.
func getGameServerSet(ctx context.Context, c client.Reader, ns, name string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gameServerSetGVK)
	switch err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u); {
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		return nil, nil
	case err != nil:
		return nil, plugin.WrapUnknown(err, "get GameServerSet %s/%s", ns, name)
	}
	return u, nil
}

// ambiguousPool refuses set's pool "<namespace>-<name>" when another split of that name at
// one of its dashes names a GameServerSet, older than set, of another namespace (namespace
// "a" with GameServerSet "b-c" and namespace "a-b" with "c"): both would be mapped from one
// pool, and the first to have it keeps it (at the same second, the namespace first in
// order). Splits whose namespace part is no namespace name are not read. Errors: a
// NotAllowed ParameterError naming the label game.kruise.io/owner-gss; Unknown when a
// GameServerSet cannot be read.
func ambiguousPool(ctx context.Context, c client.Reader, set *unstructured.Unstructured) error {
	ns := set.GetNamespace()
	pool := ns + "-" + set.GetName()
	for i := 1; i < len(pool)-1; i++ {
		if pool[i] != '-' || i == len(ns) {
			continue
		}
		otherNS, otherName := pool[:i], pool[i+1:]
		if len(validation.IsDNS1123Label(otherNS)) > 0 {
			continue
		}
		other, err := getGameServerSet(ctx, c, otherNS, otherName)
		if err != nil {
			return err
		}
		if other == nil {
			continue
		}
		mine, theirs := set.GetCreationTimestamp(), other.GetCreationTimestamp()
		if theirs.Before(&mine) || (theirs.Equal(&mine) && otherNS < ns) {
			return plugin.NotAllowedf("metadata.labels["+networkstatus.LabelOwnerGSS+"]",
				"the port pool %q of GameServerSet %s/%s is the pool of GameServerSet %s/%s, which had it first: rename one of them",
				pool, ns, set.GetName(), otherNS, otherName)
		}
	}
	return nil
}

// mappingResult is one entry of AnnotationPortMappingResult (the fields read).
type mappingResult struct {
	Port     int32  `json:"port"`
	Protocol string `json:"protocol"`
	Address  string `json:"address"`
	Pool     string `json:"pool"`
}

// readResult reads AnnotationPortMappingResult: the addresses of its readable entries, as
// OKG makes them, and whole true when every one of ports has one (same port and protocol; a
// TCPUDP port a TCPUDP entry, or a TCP and a UDP one). Entries whose address is not
// "<host>:<port>" with a port 1-65535 are skipped, as OKG skips those it cannot split, and so
// are entries of another pool than pool (the result names the pool it mapped from). Errors:
// an InternalError when the result is not a JSON list (OKG's).
func readResult(pod *corev1.Pod, ports []portProtocol, pool string) (internal, external []networkstatus.NetworkAddress, whole bool, err error) {
	var results []mappingResult
	if err := json.Unmarshal([]byte(pod.Annotations[AnnotationPortMappingResult]), &results); err != nil {
		return nil, nil, false, plugin.Wrap(plugin.InternalError, err, "read %s", AnnotationPortMappingResult)
	}
	mapped := map[portProtocol]bool{}
	for _, r := range results {
		ip, portText, ok := strings.Cut(r.Address, ":")
		if !ok || strings.Contains(portText, ":") {
			continue
		}
		lbPort, err := strconv.Atoi(portText)
		if err != nil || lbPort < 1 || lbPort > 65535 || (r.Pool != "" && r.Pool != pool) {
			continue
		}
		name := strconv.Itoa(int(r.Port))
		proto := corev1.Protocol(r.Protocol)
		internal = append(internal, networkstatus.NetworkAddress{IP: pod.Status.PodIP,
			Ports: []networkstatus.NetworkPort{{Name: name, Port: networkstatus.IntPort(r.Port), Protocol: proto}}})
		external = append(external, networkstatus.NetworkAddress{IP: ip,
			Ports: []networkstatus.NetworkPort{{Name: name, Port: networkstatus.IntPort(int32(lbPort)), Protocol: proto}}})
		mapped[portProtocol{port: r.Port, protocol: r.Protocol}] = true
	}
	whole = len(internal) > 0
	for _, pp := range ports {
		// A TCPUDP port is mapped as one entry of that protocol, or as a TCP and a UDP one.
		both := pp.protocol == "TCPUDP" && mapped[portProtocol{pp.port, "TCP"}] && mapped[portProtocol{pp.port, "UDP"}]
		whole = whole && (mapped[pp] || both)
	}
	return internal, external, whole, nil
}

// bindingFailure reads the pod's CLBPodBinding (through the reader of UseResultReader) and
// returns a CloudError when its state is one of failedStates, naming the state and the
// controller's message, with the state's reason; nil when there is none, it is being
// deleted or is an earlier pod's of the name (a Pod owner of another UID), it is in another
// state, or the API server does not serve the kind (the result annotations are then all
// there is). Errors: Unknown when it cannot be read.
func (p *CLB) bindingFailure(ctx context.Context, c client.Reader, pod *corev1.Pod) error {
	r := c
	if p.reader != nil {
		r = p.reader
	}
	b := bindingObject()
	switch err := r.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: pod.Name}, b); {
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		return nil
	case err != nil:
		return plugin.WrapUnknown(err, "read %s %s/%s", CLBPodBindingKind, pod.Namespace, pod.Name)
	}
	if b.GetDeletionTimestamp() != nil {
		return nil
	}
	for _, o := range b.GetOwnerReferences() {
		if o.Kind == "Pod" && o.UID != pod.UID {
			return nil // an earlier pod's of this name, not yet collected
		}
	}
	state, _, _ := unstructured.NestedString(b.Object, "status", "state")
	reason, failed := failedStates[state]
	if !failed {
		return nil
	}
	e := plugin.Errorf(plugin.CloudError, "tke-extend-network-controller: %s %s/%s is %s", CLBPodBindingKind, pod.Namespace, pod.Name, state)
	if message, _, _ := unstructured.NestedString(b.Object, "status", "message"); message != "" {
		e.Message += ": " + message
	}
	e.Reason = reason
	return e
}
