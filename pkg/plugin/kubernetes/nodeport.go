package kubernetes

import (
	"context"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// NodePortName is the network-type of the NodePort plugin (OKG's name).
const NodePortName = "Kubernetes-NodePort"

// NodePort is the Kubernetes-NodePort plugin: a Service of type NodePort per pod,
// named like the pod, selecting it by SelectorPodNameLabel. Asynchronous: the Service
// is built at UPDATE (the pod needs a UID to own it) and the node ports are published
// once allocated. It keeps no state.
type NodePort struct {
	// quota records the API server's own exceeded-quota refusals of this plugin's Service
	// creates, which let checkServiceQuota refuse from the cache (nil: never, every create
	// goes to the API server).
	quota *quotaConfirmations
}

var _ plugin.Plugin = (*NodePort)(nil)

// NewNodePort returns a NodePort plugin.
func NewNodePort() *NodePort { return &NodePort{quota: newQuotaConfirmations(time.Now)} }

// Name returns "Kubernetes-NodePort".
func (n *NodePort) Name() string { return NodePortName }

// Alias returns "" (no cross-provider family).
func (n *NodePort) Alias() string { return "" }

// IsSynchronous returns false: the network converges after the pod exists.
func (n *NodePort) IsSynchronous() bool { return false }

// CachedObjects lists the kinds NodePort reads through the cached client: its per-pod
// Services, Nodes (the address it publishes) and ResourceQuotas (the quota check before a
// Service create).
func (n *NodePort) CachedObjects() []client.Object {
	return []client.Object{&corev1.Service{}, &corev1.Node{}, &corev1.ResourceQuota{}}
}

// Init does nothing: the plugin keeps no state.
func (n *NodePort) Init(context.Context, client.Client, plugin.Config) error { return nil }

// OnPodAdded validates the network-conf (so a bad PortProtocols is reported at
// CREATE, where a policy can deny it) and labels the pod for the Service selector. The
// network-status is left as it is: OKG writes none at CREATE.
func (n *NodePort) OnPodAdded(_ context.Context, _ client.Client, pod *corev1.Pod) (*corev1.Pod, error) {
	conf, err := networkstatus.ConfFromPod(pod)
	if err != nil {
		return pod, err
	}
	_, warn := parseNodePortParams(conf)
	if isFatal(warn) {
		return pod, warn
	}
	ensurePodNameLabel(pod)
	return pod, warn
}

// OnPodUpdated creates or updates the pod's Service once the pod is scheduled (before
// that, the pod is left as it is, as OKG leaves it): ports from PortProtocols, owner the
// pod (with Fixed, its GameServerSet when that exists), selector switched off while the
// pod's game.kruise.io/network-disabled label is true, PublishNotReadyAddresses and the
// blocker label following OKG's in-place update lifecycle with AllowNotReadyContainers
// (decideAllowNotReady; a warning when the pod has no GameServerSet). An existing Service whose spec and owners
// already are what the parameters call for is kept untouched, whatever hash annotation
// it carries (one OKG created, for example). An existing Service that is neither owned
// by the pod or its GameServerSet nor carries the hash annotation is someone else's: it
// is not modified and the pod gets a ParameterError naming it ("Service ns/name exists
// and is not managed by network-plugin-policy"). The network is Ready, with one internal
// (pod IP, port) and one external (node address, node port) address per port as in OKG,
// once every node port is allocated and the pod has an IP; NotReady otherwise, and
// (this project only) while the node reports no address at all. A Node that does not
// exist leaves the status as it is. Errors: ParameterError for a bad network-conf or
// network-disabled label or a foreign Service, APICallError for failed API calls and for
// a Service create that the namespace's ResourceQuotas in the cache already show cannot
// fit (the API server's own "exceeded quota" refusal, without calling it:
// checkServiceQuota); both come with a NotReady pod. Writes go through applyOwned
// (controllerutil.CreateOrPatch).
func (n *NodePort) OnPodUpdated(ctx context.Context, c client.Client, pod *corev1.Pod) (*corev1.Pod, error) {
	prev := previousStatus(pod)
	fail := func(err error) (*corev1.Pod, error) {
		if werr := writeNotReady(pod, prev); werr != nil {
			return pod, werr
		}
		return pod, err
	}
	conf, err := networkstatus.ConfFromPod(pod)
	if err != nil {
		return fail(err)
	}
	params, warn := parseNodePortParams(conf)
	if isFatal(warn) {
		return fail(warn)
	}
	disabled, err := networkstatus.NetworkDisabled(pod)
	if err != nil {
		return fail(err)
	}
	ensurePodNameLabel(pod)
	if pod.Spec.NodeName == "" {
		return pod, warn
	}
	owners, err := OwnerReferences(ctx, c, pod, params.fixed)
	if err != nil {
		return fail(err)
	}
	publish := func(bool) bool { return false }
	blocker := ""
	if len(params.allowNotReady) > 0 {
		gss, err := gameServerSetOf(ctx, c, pod)
		if err != nil {
			return fail(err)
		}
		if gss == nil {
			warn = joinWarnings(nonNil(warn, &plugin.Error{Type: plugin.ParameterError, Param: ParamAllowNotReadyContainers, Warning: true,
				Message: "has no effect: the pod has no GameServerSet (label " + networkstatus.LabelOwnerGSS + ") to read the containers and images from"})...)
		} else {
			publish = func(current bool) bool {
				d := decideAllowNotReady(pod, gss, current)
				blocker = d.blocker
				return d.publish
			}
		}
	}
	svc, err := n.ensureService(ctx, c, pod, params, owners, disabled, publish)
	if err != nil {
		return fail(err)
	}
	if blocker != "" {
		setLabel(pod, LabelInplaceUpdateNotReadyBlocker, blocker)
	}
	node, err := podNode(ctx, c, pod)
	if err != nil {
		return fail(err)
	}
	if node == nil {
		return pod, warn
	}
	nodeIP, known := nodeAddress(node)
	allocated := known
	var internal, external []networkstatus.NetworkAddress
	for _, sp := range svc.Spec.Ports {
		if sp.NodePort == 0 {
			allocated = false // not allocated yet
			break
		}
		target := sp.TargetPort.IntVal
		if sp.TargetPort.Type != intstr.Int || target == 0 {
			target = sp.Port
		}
		name := sp.TargetPort.String()
		internal = append(internal, networkstatus.NetworkAddress{IP: pod.Status.PodIP,
			Ports: []networkstatus.NetworkPort{{Name: name, Protocol: sp.Protocol, Port: networkstatus.IntPort(target)}}})
		external = append(external, networkstatus.NetworkAddress{IP: nodeIP,
			Ports: []networkstatus.NetworkPort{{Name: name, Protocol: sp.Protocol, Port: networkstatus.IntPort(sp.NodePort)}}})
	}
	if !allocated || pod.Status.PodIP == "" || len(internal) == 0 {
		ctrl.LoggerFrom(ctx).WithName("nodeport").V(1).Info("Node port network not ready", "pod", klog.KObj(pod),
			"node", pod.Spec.NodeName, "nodeHasAddresses", known, "podIP", pod.Status.PodIP)
		if err := writeStatus(pod, networkstatus.NetworkNotReady, nil, nil); err != nil {
			return pod, err
		}
		return pod, warn
	}
	if err := writeStatus(pod, networkstatus.NetworkReady, internal, external); err != nil {
		return pod, err
	}
	return pod, warn
}

// desiredNodePortService returns the Service the parameters call for.
func desiredNodePortService(pod *corev1.Pod, params nodePortParams, owners []metav1.OwnerReference, disabled bool) *corev1.Service {
	selector := map[string]string{SelectorPodNameLabel: pod.Name}
	if disabled {
		selector = map[string]string{SelectorDisabledLabel: pod.Name}
	}
	ports := make([]corev1.ServicePort, 0, len(params.ports))
	for _, sp := range params.ports {
		ports = append(ports, corev1.ServicePort{
			Name: servicePortName(sp, params.ports), Port: sp.port, Protocol: sp.protocol, TargetPort: intstr.FromInt32(sp.port),
		})
	}
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name: pod.Name, Namespace: pod.Namespace,
			Annotations:     map[string]string{AnnotationServiceHash: configHash(params.canonical())},
			OwnerReferences: owners,
		},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeNodePort,
			Selector: selector,
			Ports:    ports,
		},
	}
}

// ensureService creates the Service, or returns an existing one as it is when its
// type, selector, ports (node ports aside), publishNotReadyAddresses and owners already
// are what want asks for, whatever its hash annotation; otherwise it brings it to want,
// keeping the allocated node ports of unchanged ports, and returns it as stored. An
// existing Service that the plugins do not manage (ManagedFor) is left untouched and is
// a ParameterError naming it. publish gives publishNotReadyAddresses from the Service's
// current value (false when there is no Service yet). Writes go through applyOwned.
// Before a create (never before an update), checkServiceQuota checks the namespace's
// ResourceQuotas in the cache: a create they cannot fit is refused without calling the
// API server, with the API server's own Forbidden error, wrapped as its refusal is (an
// APICallError "create or patch Service <namespace>/<name>: services \"<name>\" is
// forbidden: exceeded quota: ...").
func (n *NodePort) ensureService(ctx context.Context, c client.Client, pod *corev1.Pod, params nodePortParams, owners []metav1.OwnerReference, disabled bool, publish func(current bool) bool) (*corev1.Service, error) {
	want := desiredNodePortService(pod, params, owners, disabled)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: want.Namespace, Name: want.Name}}
	err := applyOwned(ctx, c, pod, svc, "Service", AnnotationServiceHash, func(existing bool) error {
		want.Spec.PublishNotReadyAddresses = publish(existing && svc.Spec.PublishNotReadyAddresses)
		if serviceMatches(want, svc) {
			return nil
		}
		if svc.Annotations == nil {
			svc.Annotations = map[string]string{}
		}
		svc.Annotations[AnnotationServiceHash] = want.Annotations[AnnotationServiceHash]
		svc.Spec.Ports = keepNodePorts(want.Spec.Ports, svc.Spec.Ports)
		svc.OwnerReferences = owners
		svc.Spec.Type = want.Spec.Type
		svc.Spec.Selector = want.Spec.Selector
		svc.Spec.PublishNotReadyAddresses = want.Spec.PublishNotReadyAddresses
		if !existing {
			if !plugin.PredictionAllowed(ctx) {
				return nil // the run that may close a window: the API server answers
			}
			return checkServiceQuota(ctx, c, svc, n.quota.confirmed)
		}
		return nil
	})
	if err != nil {
		n.quota.record(svc.Namespace, err)
		return nil, err
	}
	return svc, nil
}

// keepNodePorts returns want with the node ports of have's ports of the same number
// and protocol, so that an unchanged port keeps its node port across updates.
func keepNodePorts(want, have []corev1.ServicePort) []corev1.ServicePort {
	out := slices.Clone(want)
	for i := range out {
		for _, h := range have {
			if h.Port == out[i].Port && h.Protocol == out[i].Protocol {
				out[i].NodePort = h.NodePort
			}
		}
	}
	return out
}

// OnPodDeleted does nothing and never fails. The pod's Service carries an owner reference
// to it (to its GameServerSet when Fixed), so garbage collection removes it once the pod
// object is gone, and not before: a DELETE that another admission controller refuses, or a
// pod still draining its players, keeps its node port. (OKG's Kubernetes-NodePort deletes
// the Service here, at DELETE admission; docs/okg-compatibility.md says why this differs.)
func (n *NodePort) OnPodDeleted(context.Context, client.Client, *corev1.Pod) error {
	return nil
}
