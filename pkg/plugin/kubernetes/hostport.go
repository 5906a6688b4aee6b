package kubernetes

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/okg-extensions/network-plugin-policy/pkg/networkstatus"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
)

// HostPortName is the network-type of the HostPort plugin (OKG's name).
const HostPortName = "Kubernetes-HostPort"

// HostPort is the Kubernetes-HostPort plugin: at CREATE it allocates host ports from
// the provider config's [kubernetes.hostPort] range and writes them into the
// containers' ports; at UPDATE it publishes pod IP / node address and the ports.
// Synchronous: a pod admitted without its host ports cannot get them later.
type HostPort struct {
	mu    sync.RWMutex // guards alloc (replaced by Init)
	alloc *hostPortAllocator
}

var _ plugin.Plugin = (*HostPort)(nil)

// NewHostPort returns a HostPort plugin with OKG's default range; Init sets the
// configured range and rebuilds the allocations from the cluster.
func NewHostPort() *HostPort {
	return &HostPort{alloc: newHostPortAllocator(plugin.DefaultConfig().Kubernetes.HostPort)}
}

// Name returns "Kubernetes-HostPort".
func (h *HostPort) Name() string { return HostPortName }

// Alias returns "" (no cross-provider family).
func (h *HostPort) Alias() string { return "" }

// IsSynchronous returns true: host ports live in the immutable container spec.
func (h *HostPort) IsSynchronous() bool { return true }

func (h *HostPort) allocator() *hostPortAllocator {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.alloc
}

// Init takes the host-port range from cfg and rebuilds the allocation state from every
// pod in the cluster whose network-type is Kubernetes-HostPort: each such pod's host
// ports inside the range count as allocated to it (by UID). An API error is returned
// wrapped; the webhook must not report ready before Init succeeded.
func (h *HostPort) Init(ctx context.Context, c client.Client, cfg plugin.Config) error {
	alloc := newHostPortAllocator(cfg.Kubernetes.HostPort)
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods); err != nil {
		return fmt.Errorf("list pods to rebuild host port allocations: %w", err)
	}
	for i := range pods.Items {
		pod := &pods.Items[i]
		if pod.Annotations[networkstatus.AnnotationNetworkType] != HostPortName {
			continue
		}
		if ports := podHostPorts(pod, alloc); len(ports) > 0 {
			alloc.record(allocKey{namespace: pod.Namespace, name: pod.Name, uid: pod.UID}, ports)
		}
	}
	h.mu.Lock()
	h.alloc = alloc
	h.mu.Unlock()
	inUse, n := alloc.stats()
	ctrl.LoggerFrom(ctx).WithName("hostport").Info("Rebuilt host port allocations",
		"minPort", cfg.Kubernetes.HostPort.MinPort, "maxPort", cfg.Kubernetes.HostPort.MaxPort,
		"pods", n, "portsInUse", inUse)
	return nil
}

// podHostPorts returns the distinct host ports of the pod's containers that lie in the
// allocator's range, in container order.
func podHostPorts(pod *corev1.Pod, alloc *hostPortAllocator) []int32 {
	var out []int32
	seen := map[int32]bool{}
	for _, ctr := range pod.Spec.Containers {
		for _, p := range ctr.Ports {
			if alloc.contains(p.HostPort) && !seen[p.HostPort] {
				seen[p.HostPort] = true
				out = append(out, p.HostPort)
			}
		}
	}
	return out
}

// OnPodAdded parses ContainerPorts, allocates one host port per requested port
// (least-used first, lowest number on ties; the same ports again when the CREATE of
// the same namespace/name is repeated), writes them into the containers' ports and
// marks the network NotReady. Errors: ParameterError for a bad network-conf (unknown
// container, non-numeric port, lower-case protocol, more ports than the range holds),
// RetryError when the range is exhausted; a warning-level ParameterError for unknown
// parameters, returned with the mutated pod.
func (h *HostPort) OnPodAdded(ctx context.Context, _ client.Client, pod *corev1.Pod) (*corev1.Pod, error) {
	conf, err := networkstatus.ConfFromPod(pod)
	if err != nil {
		return pod, err
	}
	names := make([]string, 0, len(pod.Spec.Containers))
	for _, ctr := range pod.Spec.Containers {
		names = append(names, ctr.Name)
	}
	params, warn := parseHostPortParams(conf, names)
	if isFatal(warn) {
		return pod, warn
	}
	alloc := h.allocator()
	key := alloc.keyFor(pod.Namespace, pod.Name, pod.GenerateName)
	ports, reused, err := alloc.allocate(key, params.count())
	if err != nil {
		return pod, err
	}
	ctrl.LoggerFrom(ctx).WithName("hostport").V(1).Info("Allocated host ports", "pod", klog.KObj(pod), "hostPorts", ports, "reused", reused)

	i := 0
	for _, cp := range params.containers {
		ctr := containerByName(pod, cp.container)
		for _, r := range cp.ports {
			hostPort := ports[i]
			i++
			containerPort := r.port
			if containerPort == 0 {
				containerPort = hostPort
			}
			protos := []corev1.Protocol{corev1.Protocol(r.protocol)}
			if r.protocol == protocolTCPUDP {
				protos = []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP}
			}
			for _, proto := range protos {
				setHostPort(ctr, containerPort, proto, hostPort)
			}
		}
	}
	if err := writeStatus(pod, nil, networkstatus.NetworkNotReady, nil, nil); err != nil {
		return pod, err
	}
	return pod, warn
}

func containerByName(pod *corev1.Pod, name string) *corev1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	return nil
}

// setHostPort sets hostPort on the container's port entry with this container port and
// protocol, appending the entry when there is none (so a repeated CREATE does not add
// duplicates).
func setHostPort(ctr *corev1.Container, containerPort int32, proto corev1.Protocol, hostPort int32) {
	for j := range ctr.Ports {
		p := &ctr.Ports[j]
		pp := p.Protocol
		if pp == "" {
			pp = corev1.ProtocolTCP
		}
		if p.ContainerPort == containerPort && pp == proto {
			p.HostPort = hostPort
			p.Protocol = proto
			return
		}
	}
	ctr.Ports = append(ctr.Ports, corev1.ContainerPort{ContainerPort: containerPort, HostPort: hostPort, Protocol: proto})
}

// OnPodUpdated publishes the network: Ready with the pod IP and container ports as
// internal address and the node address and host ports as external address once the
// pod is scheduled, its Node exists and it has an IP; NotReady otherwise (not an
// error). Port names are "<container>-<containerPort>", as in OKG. Only a failed Node
// lookup other than NotFound is an error (APICallError), returned with a NotReady pod.
func (h *HostPort) OnPodUpdated(ctx context.Context, c client.Client, pod *corev1.Pod) (*corev1.Pod, error) {
	alloc := h.allocator()
	prev := previousStatus(pod)
	alloc.bind(pod.Namespace, pod.Name, pod.GenerateName, pod.UID, podHostPorts(pod, alloc))

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
	nodeIP, err := podNodeAddress(ctx, c, pod)
	if err != nil {
		if werr := writeStatus(pod, prev, networkstatus.NetworkNotReady, nil, nil); werr != nil {
			return pod, werr
		}
		return pod, err
	}
	if nodeIP == "" || pod.Status.PodIP == "" || len(internal) == 0 {
		ctrl.LoggerFrom(ctx).WithName("hostport").V(1).Info("Host port network not ready", "pod", klog.KObj(pod),
			"node", pod.Spec.NodeName, "nodeAddress", nodeIP, "podIP", pod.Status.PodIP, "ports", len(internal))
		return pod, writeStatus(pod, prev, networkstatus.NetworkNotReady, nil, nil)
	}
	return pod, writeStatus(pod, prev, networkstatus.NetworkReady,
		[]networkstatus.NetworkAddress{{IP: pod.Status.PodIP, Ports: internal}},
		[]networkstatus.NetworkAddress{{IP: nodeIP, Ports: external}})
}

// OnPodDeleted frees the pod's host ports: the allocation bound to its UID, or the one
// its CREATE made when this is the first DELETE. A second DELETE of a terminating pod
// never frees the allocation of a new same-named pod created meanwhile. It never fails.
func (h *HostPort) OnPodDeleted(ctx context.Context, _ client.Client, pod *corev1.Pod) error {
	alloc := h.allocator()
	freed := alloc.releasePod(pod.Namespace, pod.Name, pod.GenerateName, pod.UID, pod.DeletionTimestamp != nil, podHostPorts(pod, alloc))
	ctrl.LoggerFrom(ctx).WithName("hostport").V(1).Info("Released host ports", "pod", klog.KObj(pod), "hostPorts", freed)
	return nil
}
