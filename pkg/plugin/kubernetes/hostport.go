package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// HostPortName is the network-type of the HostPort plugin (OKG's name).
const HostPortName = "Kubernetes-HostPort"

// HostPort is the Kubernetes-HostPort plugin: at CREATE it allocates host ports from
// the provider config's [kubernetes.hostPort] range and writes them into the
// containers' ports; at UPDATE it publishes pod IP / node address and the ports.
// Synchronous: a pod admitted without its host ports cannot get them later.
//
// Port usage is derived, not counted at admission: the Kubernetes-HostPort pods seen
// through the manager's shared pod informer (UsePodInformer), which every replica
// sees, plus this process's reservations for the CREATEs it admitted and its informer
// has not shown yet (each kept at most ReservationTTL). docs/replicas.md says how far
// two replicas can diverge.
type HostPort struct {
	mu     sync.RWMutex // guards alloc (replaced by Init) and synced
	alloc  *hostPortAllocator
	synced func() bool // nil until UsePodInformer
	clock  clock.PassiveClock
}

var (
	_ plugin.Plugin          = (*HostPort)(nil)
	_ plugin.PodInformerUser = (*HostPort)(nil)
)

// NewHostPort returns a HostPort plugin with OKG's default range; Init sets the
// configured range and UsePodInformer feeds it the cluster's pods.
func NewHostPort() *HostPort {
	return newHostPortWithClock(clock.RealClock{})
}

// newHostPortWithClock returns a HostPort whose reservations expire on clk's time.
func newHostPortWithClock(clk clock.PassiveClock) *HostPort {
	return &HostPort{clock: clk, alloc: newHostPortAllocator(plugin.DefaultConfig().Kubernetes.HostPort, clk, ReservationTTL)}
}

// Name returns "Kubernetes-HostPort".
func (h *HostPort) Name() string { return HostPortName }

// Alias returns "" (no cross-provider family).
func (h *HostPort) Alias() string { return "" }

// IsSynchronous returns true: host ports live in the immutable container spec.
func (h *HostPort) IsSynchronous() bool { return true }

// CachedObjects lists the kinds HostPort reads through the cached client: Nodes (the
// address it publishes).
func (h *HostPort) CachedObjects() []client.Object { return []client.Object{&corev1.Node{}} }

func (h *HostPort) allocator() *hostPortAllocator {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.alloc
}

// Init takes the host-port range and max_pods_per_port from cfg and starts with no
// usage; the pods that exist arrive through UsePodInformer, which must be called after
// Init (the registry does so). It lists nothing and never fails, except when called
// after UsePodInformer (the pods delivered so far would be lost).
func (h *HostPort) Init(ctx context.Context, _ client.Client, cfg plugin.Config) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.synced != nil {
		return errors.New("init after the pod informer was attached: the pods it delivered would be lost")
	}
	h.alloc = newHostPortAllocator(cfg.Kubernetes.HostPort, h.clock, ReservationTTL)
	ctrl.LoggerFrom(ctx).WithName("hostport").Info("Host port range configured",
		"minPort", cfg.Kubernetes.HostPort.MinPort, "maxPort", cfg.Kubernetes.HostPort.MaxPort,
		"maxPodsPerPort", cfg.Kubernetes.HostPort.MaxPodsPerPort, "reservationTTL", ReservationTTL)
	return nil
}

// UsePodInformer registers the plugin's handler on the manager's shared pod informer
// (implements plugin.PodInformerUser): every Kubernetes-HostPort pod the informer
// holds counts its host ports inside the range, including terminating pods, until the
// informer's delete event (or a DeletedFinalStateUnknown tombstone). CREATEs are
// answered with a RetryError until the returned registration has synced. It fails when
// the informer refuses the handler or when called twice.
func (h *HostPort) UsePodInformer(ctx context.Context, informer cache.Informer) (toolscache.ResourceEventHandlerRegistration, error) {
	h.mu.Lock()
	if h.synced != nil {
		h.mu.Unlock()
		return nil, errors.New("pod informer already attached")
	}
	// Not synced until the registration says so; Init is refused from here on, so the
	// handler's allocator stays the plugin's.
	notYet := false
	h.synced = func() bool { return notYet }
	alloc := h.alloc
	h.mu.Unlock()

	// Not under h.mu: an informer may deliver events from within AddEventHandler.
	reg, err := informer.AddEventHandler(hostPortEvents{alloc: alloc})
	if err != nil {
		return nil, fmt.Errorf("add host port handler to the pod informer: %w", err)
	}
	h.mu.Lock()
	h.synced = reg.HasSynced
	h.mu.Unlock()
	ctrl.LoggerFrom(ctx).WithName("hostport").Info("Host port usage follows the pod informer")
	return reg, nil
}

// informerSynced reports whether the usage may be trusted: no informer attached
// (standalone use, tests) or its handler has seen every pod of the initial list.
func (h *HostPort) informerSynced() bool {
	h.mu.RLock()
	synced := h.synced
	h.mu.RUnlock()
	return synced == nil || synced()
}

// OnPodAdded parses ContainerPorts, reserves one host port per requested port
// (least-used first by observed plus reserved usage, lowest number on ties; the same
// reservation, its TTL restarted, when the CREATE of the same namespace/name is
// repeated) and writes them into the containers' ports as OKG does: containers in the
// pod's order, each container's ports in the order written, the first requested port
// getting the highest of the reserved ports and the last the lowest. Each port is a
// new container port entry (an entry the pod already declares without a host port is
// kept as it is), except that an entry already declaring a host port for the same
// container port and protocol gets the reserved one instead (addHostPort). The network-status is left as it is: OKG writes none at CREATE.
// Errors: ParameterError for a bad network-conf (unknown container, non-numeric port,
// lower-case protocol, more ports than the range holds), RetryError when the range is
// exhausted under max_pods_per_port or the pod informer has not synced yet; a
// warning-level ParameterError for unknown parameters, returned with the mutated pod.
func (h *HostPort) OnPodAdded(ctx context.Context, _ client.Client, pod *corev1.Pod) (*corev1.Pod, error) {
	params, warn := hostPortParamsOf(pod)
	if isFatal(warn) {
		return pod, warn
	}
	if !h.informerSynced() {
		e := plugin.Errorf(plugin.RetryError, "host port usage is not known yet: the pod informer has not delivered the existing pods")
		e.Reason = plugin.ReasonUnavailable
		return pod, e
	}
	alloc := h.allocator()
	key := alloc.keyFor(pod.Namespace, pod.Name)
	ports, reused, err := alloc.allocate(key, pod.GenerateName, params.count())
	if err != nil {
		return pod, err
	}
	ctrl.LoggerFrom(ctx).WithName("hostport").V(1).Info("Allocated host ports", "pod", klog.KObj(pod), "hostPorts", ports, "reused", reused)

	slices.Sort(ports)
	next := len(ports) - 1
	for i := range pod.Spec.Containers {
		ctr := &pod.Spec.Containers[i]
		cp, ok := params.forContainer(ctr.Name)
		if !ok {
			continue
		}
		for _, r := range cp.ports {
			hostPort := ports[next]
			next--
			containerPort := r.port
			if containerPort == 0 {
				containerPort = hostPort
			}
			protos := []corev1.Protocol{corev1.Protocol(r.protocol)}
			if r.protocol == protocolTCPUDP {
				protos = []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP}
			}
			for _, proto := range protos {
				addHostPort(ctr, containerPort, proto, hostPort)
			}
		}
	}
	return pod, warn
}

// addHostPort gives the container the host port for this container port and protocol:
// an entry that already declares a host port for them gets this one instead (a template
// that carries the host port an earlier pod was given would otherwise ask for two, and
// the pod could not be scheduled; docs/okg-compatibility.md); otherwise a new entry is
// appended, as OKG does, also beside an entry that declares the port without a host port.
// An entry with exactly this host port is left as it is (a repeated CREATE).
func addHostPort(ctr *corev1.Container, containerPort int32, proto corev1.Protocol, hostPort int32) {
	for j := range ctr.Ports {
		p := &ctr.Ports[j]
		pp := p.Protocol
		if pp == "" {
			pp = corev1.ProtocolTCP
		}
		if p.ContainerPort == containerPort && pp == proto && p.HostPort != 0 {
			p.HostPort = hostPort
			p.Protocol = proto
			return
		}
	}
	ctr.Ports = append(ctr.Ports, corev1.ContainerPort{ContainerPort: containerPort, HostPort: hostPort, Protocol: proto})
}

// OnPodUpdated publishes the network as OKG does: Ready with the pod IP and the
// container ports as internal address and the node address (nodeAddress; "" for a node
// that reports only a Hostname) and the host ports as external address; NotReady when
// the pod has no IP or no host port of the range, or (this project only) when its node
// reports no address at all. Port names are "<container>-<containerPort>". A pod that is
// not scheduled yet, or whose Node does not exist, is left as it is (OKG's plugin
// returns it unchanged). Only a failed Node lookup other than NotFound is an error
// (APICallError), returned with the pod unchanged.
func (h *HostPort) OnPodUpdated(ctx context.Context, c client.Client, pod *corev1.Pod) (*corev1.Pod, error) {
	alloc := h.allocator()
	node, err := podNode(ctx, c, pod)
	if err != nil || node == nil {
		return pod, err
	}
	var internal, external []networkstatus.NetworkPort
	for _, ctr := range pod.Spec.Containers {
		for _, p := range ctr.Ports {
			if !alloc.contains(p.HostPort) {
				continue
			}
			name := ctr.Name + "-" + strconv.Itoa(int(p.ContainerPort))
			internal = append(internal, networkstatus.NetworkPort{Name: name, Protocol: p.Protocol, Port: networkstatus.IntPort(p.ContainerPort)})
			external = append(external, networkstatus.NetworkPort{Name: name, Protocol: p.Protocol, Port: networkstatus.IntPort(p.HostPort)})
		}
	}
	nodeIP, known := nodeAddress(node)
	if !known || pod.Status.PodIP == "" || len(internal) == 0 {
		ctrl.LoggerFrom(ctx).WithName("hostport").V(1).Info("Host port network not ready", "pod", klog.KObj(pod),
			"node", pod.Spec.NodeName, "nodeHasAddresses", known, "podIP", pod.Status.PodIP, "ports", len(internal))
		return pod, writeStatus(pod, networkstatus.NetworkNotReady, nil, nil)
	}
	return pod, writeStatus(pod, networkstatus.NetworkReady,
		[]networkstatus.NetworkAddress{{IP: pod.Status.PodIP, Ports: internal}},
		[]networkstatus.NetworkAddress{{IP: nodeIP, Ports: external}})
}

// OnPodDeleted does nothing and never fails. Host ports are released when the pod
// informer delivers the pod's delete event, on every replica alike: a DELETE admission
// is served by one replica only, happens when graceful deletion starts (the pod still
// holds its ports until the kubelet has stopped it) and may be denied or never come
// (garbage collection, a namespace deletion served by another replica), so it cannot
// tell when the ports are free.
func (h *HostPort) OnPodDeleted(context.Context, client.Client, *corev1.Pod) error {
	return nil
}
