package kubernetes

import (
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// CreateDeadline is the API server's deadline for a CREATE request, admission included:
// its create handler runs admission and the storage write under a context of at most
// 34 s (requestTimeoutUpperBound in k8s.io/apiserver/pkg/endpoints/handlers/rest.go,
// applied in create.go; a client's shorter ?timeout= only shortens it). It starts before
// the webhook is called, so when CreateDeadline has passed since a reservation was made,
// the CREATE it was made for has been stored or has failed.
const CreateDeadline = 34 * time.Second

// WatchDeliveryMargin is how long after CreateDeadline a stored pod may still be on its
// way to the pod informer: normally milliseconds, longer while the watch is slow or
// re-connects. 10 s.
const WatchDeliveryMargin = 10 * time.Second

// ReservationTTL is how long a host-port reservation made at CREATE admission counts
// when the pod it was made for never shows up in the pod informer (a CREATE that a
// later admission step or the apiserver rejected: a validating webhook, PodSecurity, a
// quota, AlreadyExists while a same-named pod still terminates): CreateDeadline plus
// WatchDeliveryMargin, 44 s. A repeated CREATE of the same namespace/name restarts the
// TTL; max_reserved_ports_per_namespace caps what one namespace holds meanwhile.
const ReservationTTL = CreateDeadline + WatchDeliveryMargin

// podRef is a pod's namespace/name.
type podRef struct{ namespace, name string }

// reservationKey identifies a reservation: namespace/name for a pod created with a
// name; for a pod created with generateName and no name, the namespace and a
// per-allocator sequence number (anonymous > 0) that no other CREATE shares.
type reservationKey struct {
	namespace, name string
	anonymous       uint64
}

// reservation is host ports handed out at CREATE admission to a pod that the informer
// has not shown yet.
type reservation struct {
	generateName string  // anonymous reservations only: matched with the ports
	ports        []int32 // distinct, inside the range
	expires      time.Time
}

// observedPod is a pod seen through the informer: a Kubernetes-HostPort pod, or a pod of any
// other type (or none) whose spec holds host ports of the range.
type observedPod struct {
	ref   podRef
	ports []int32 // distinct host ports inside the range, possibly none
}

// hostPortAllocator hands out host ports from [min, min+size): least-used port first,
// lowest number on ties. Usage is the sum of the pods observed through the pod informer
// and of this process's unexpired reservations. It is safe for concurrent use; one
// mutex guards all state and is held only for map and slice updates (this is plugin
// state, not the policy lookup path; no API call is made under it).
type hostPortAllocator struct {
	mu         sync.Mutex
	clock      clock.PassiveClock
	ttl        time.Duration
	min        int32
	maxPerPort int32 // 0 = no limit
	// maxPerPod caps the ports one pod may ask for (max_ports_per_pod), 0 = no cap;
	// maxReservedPerNS caps the ports reserved for CREATEs of one namespace not yet seen
	// as pods (max_reserved_ports_per_namespace), 0 = no cap.
	maxPerPod, maxReservedPerNS int32

	usage         []int32 // observed + reserved pods per port, index = port - min
	inUse         int     // ports with usage > 0
	observedUsage []int32 // observed pods per port
	observedInUse int     // ports with observedUsage > 0

	observed      map[types.UID]observedPod
	byName        map[podRef]types.UID // the observed pod holding each namespace/name
	observedPairs int                  // sum of len(ports) over observed

	reservations  map[reservationKey]*reservation
	reservedPairs int            // sum of len(ports) over reservations
	reservedByNS  map[string]int // sum of len(ports) over reservations, by namespace
	anonymousN    int            // anonymous reservations (skip the scan when 0)
	anonymousSeq  uint64         // last anonymous sequence number handed out
	nextExpiry    time.Time      // no reservation expires before; zero when there are none
}

func newHostPortAllocator(cfg plugin.HostPortConfig, clk clock.PassiveClock, ttl time.Duration) *hostPortAllocator {
	return &hostPortAllocator{
		clock:            clk,
		ttl:              ttl,
		min:              cfg.MinPort,
		maxPerPort:       cfg.MaxPodsPerPort,
		maxPerPod:        cfg.MaxPortsPerPod,
		maxReservedPerNS: cfg.MaxReservedPortsPerNamespace,
		reservedByNS:     map[string]int{},
		usage:            make([]int32, cfg.Size()),
		observedUsage:    make([]int32, cfg.Size()),
		observed:         map[types.UID]observedPod{},
		byName:           map[podRef]types.UID{},
		reservations:     map[reservationKey]*reservation{},
	}
}

// contains reports whether port is in the range.
func (a *hostPortAllocator) contains(port int32) bool {
	return port >= a.min && int(port-a.min) < len(a.usage)
}

func (a *hostPortAllocator) maxPort() int32 { return a.min + int32(len(a.usage)) - 1 }

// keyFor returns the reservation key of a pod at CREATE: namespace/name, or for a pod
// created with generateName and no name, a fresh anonymous key.
func (a *hostPortAllocator) keyFor(namespace, name string) reservationKey {
	if name != "" {
		return reservationKey{namespace: namespace, name: name}
	}
	a.mu.Lock()
	a.anonymousSeq++
	n := a.anonymousSeq
	a.mu.Unlock()
	return reservationKey{namespace: namespace, anonymous: n}
}

// allocate reserves n distinct ports for key (generateName: the pod's, kept to match
// an anonymous reservation with its pod) and returns them. An unexpired reservation
// of key with n ports is returned again with its TTL restarted (reused = true).
// Errors: more ports than the range holds (ParameterError naming ContainerPorts), or
// too few ports below the per-port limit (RetryError saying the range size and how
// many ports are in use).
func (a *hostPortAllocator) allocate(key reservationKey, generateName string, n int) (ports []int32, reused bool, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.clock.Now()
	a.expireLocked(now)
	expires := now.Add(a.ttl)
	if prev, ok := a.reservations[key]; ok {
		if len(prev.ports) == n {
			prev.expires = expires
			return slices.Clone(prev.ports), true, nil
		}
		a.unreserveLocked(key)
	}
	if n > len(a.usage) {
		return nil, false, plugin.ParamErrorf(ParamContainerPorts, "requests %d host ports but the range %d-%d holds %d",
			n, a.min, a.maxPort(), len(a.usage))
	}
	if a.maxPerPod > 0 && n > int(a.maxPerPod) {
		return nil, false, plugin.NotAllowedf(ParamContainerPorts, "requests %d host ports, more than the %d a pod may have (kubernetes.hostPort.max_ports_per_pod)",
			n, a.maxPerPod)
	}
	if a.maxReservedPerNS > 0 && a.reservedByNS[key.namespace]+n > int(a.maxReservedPerNS) {
		e := plugin.Errorf(plugin.RetryError, "namespace %s already holds %d host ports reserved for pods not created yet, %d more would pass the limit of %d (kubernetes.hostPort.max_reserved_ports_per_namespace)",
			key.namespace, a.reservedByNS[key.namespace], n, a.maxReservedPerNS)
		e.Reason = plugin.ReasonPortsExhausted
		return nil, false, e
	}
	ports = a.selectLocked(n)
	if ports == nil {
		e := plugin.Errorf(plugin.RetryError, "host port range %d-%d exhausted: %d ports, %d in use, each shared by the limit of %d pods; %d more needed",
			a.min, a.maxPort(), len(a.usage), a.inUse, a.maxPerPort, n)
		e.Reason = plugin.ReasonPortsExhausted
		return nil, false, e
	}
	a.reservations[key] = &reservation{generateName: generateName, ports: ports, expires: expires}
	a.reservedPairs += len(ports)
	a.reservedByNS[key.namespace] += len(ports)
	if key.anonymous != 0 {
		a.anonymousN++
	}
	a.countLocked(ports, 1, false)
	if a.nextExpiry.IsZero() || expires.Before(a.nextExpiry) {
		a.nextExpiry = expires
	}
	return slices.Clone(ports), false, nil
}

// selectLocked picks n distinct ports with the lowest (usage, port) among the ports
// below the per-port limit, or returns nil when there are not enough.
func (a *hostPortAllocator) selectLocked(n int) []int32 {
	out := make([]int32, 0, n)
	level := int32(-1) // ports with usage <= level are already taken into out
	for len(out) < n {
		next := int32(-1)
		for _, u := range a.usage {
			if u > level && (next < 0 || u < next) && (a.maxPerPort == 0 || u < a.maxPerPort) {
				next = u
			}
		}
		if next < 0 {
			return nil
		}
		for i, u := range a.usage {
			if u == next {
				out = append(out, a.min+int32(i))
				if len(out) == n {
					break
				}
			}
		}
		level = next
	}
	return out
}

// countLocked adds delta (+1 or -1) to the usage of each port (all inside the range),
// and to the observed usage too when observed is true.
func (a *hostPortAllocator) countLocked(ports []int32, delta int32, observed bool) {
	for _, p := range ports {
		i := p - a.min
		a.inUse += step(a.usage[i], delta)
		a.usage[i] += delta
		if observed {
			a.observedInUse += step(a.observedUsage[i], delta)
			a.observedUsage[i] += delta
		}
	}
}

// step returns how the number of ports in use changes when a port's usage u changes by
// delta: +1 from 0 to 1, -1 from 1 to 0, 0 otherwise.
func step(u, delta int32) int {
	switch {
	case u == 0 && delta > 0:
		return 1
	case u == 1 && delta < 0:
		return -1
	}
	return 0
}

// unreserveLocked drops the reservation of key, if any.
func (a *hostPortAllocator) unreserveLocked(key reservationKey) {
	r, ok := a.reservations[key]
	if !ok {
		return
	}
	delete(a.reservations, key)
	a.reservedPairs -= len(r.ports)
	if a.reservedByNS[key.namespace] -= len(r.ports); a.reservedByNS[key.namespace] <= 0 {
		delete(a.reservedByNS, key.namespace)
	}
	if key.anonymous != 0 {
		a.anonymousN--
	}
	a.countLocked(r.ports, -1, false)
}

// expireLocked drops the reservations whose TTL has passed at now. It scans only when
// the earliest expiry has passed, so its cost is amortised over the TTL.
func (a *hostPortAllocator) expireLocked(now time.Time) {
	if a.nextExpiry.IsZero() || now.Before(a.nextExpiry) {
		return
	}
	a.nextExpiry = time.Time{}
	for k, r := range a.reservations {
		if !now.Before(r.expires) {
			a.unreserveLocked(k)
			continue
		}
		if a.nextExpiry.IsZero() || r.expires.Before(a.nextExpiry) {
			a.nextExpiry = r.expires
		}
	}
}

// observe records a pod from the informer (add or update). Every pod counts its host ports
// inside the range, whatever its network type (a Kubernetes-HostPort pod, a DaemonSet's pod,
// a pod whose type annotation was removed: the ports stay in its immutable spec and the
// kubelet keeps them bound), terminating or not, until it is Succeeded or Failed (its
// containers are gone, so are its ports); a Kubernetes-HostPort pod is tracked even while it
// holds none. A pod whose UID is new for its namespace/name ends the reservation made for
// it: the named reservation of that namespace/name, or for a pod created with
// generateName, an anonymous reservation of the same namespace, generateName and
// ports. Updates of a pod already observed (e.g. a terminating predecessor of a
// same-named pod being created) never end a reservation. A different UID under an
// observed namespace/name means the informer replaced the old pod (after a re-list),
// which is then forgotten.
func (a *hostPortAllocator) observe(pod *corev1.Pod) {
	hostPort := pod.Annotations[networkstatus.AnnotationNetworkType] == HostPortName
	var ports []int32
	if pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
		ports = podHostPorts(pod, a)
	}
	ref := podRef{namespace: pod.Namespace, name: pod.Name}

	a.mu.Lock()
	defer a.mu.Unlock()
	if prev, ok := a.byName[ref]; ok && prev != pod.UID {
		a.forgetLocked(prev)
	}
	// A pod of any other network type, or none (a DaemonSet, an agent), counts for the host
	// ports of the range its spec holds, as the scheduler counts them: a game server handed
	// such a port could never run on that pod's node. One that holds none is not tracked.
	if !hostPort && len(ports) == 0 {
		a.forgetLocked(pod.UID)
		return
	}
	if prev, known := a.observed[pod.UID]; known {
		if slices.Equal(prev.ports, ports) {
			return
		}
		a.countLocked(prev.ports, -1, true)
		a.observedPairs -= len(prev.ports)
	} else {
		a.endReservationLocked(ref, pod.GenerateName, ports)
	}
	a.observed[pod.UID] = observedPod{ref: ref, ports: ports}
	a.byName[ref] = pod.UID
	a.observedPairs += len(ports)
	a.countLocked(ports, 1, true)
}

// endReservationLocked drops the reservation made for a pod that the informer shows
// for the first time.
func (a *hostPortAllocator) endReservationLocked(ref podRef, generateName string, ports []int32) {
	named := reservationKey{namespace: ref.namespace, name: ref.name}
	if _, ok := a.reservations[named]; ok {
		a.unreserveLocked(named)
		return
	}
	if generateName == "" || a.anonymousN == 0 {
		return
	}
	for k, r := range a.reservations {
		if k.anonymous != 0 && k.namespace == ref.namespace && r.generateName == generateName && samePorts(r.ports, ports) {
			a.unreserveLocked(k)
			return
		}
	}
}

// forget removes a pod that the informer deleted; an unknown UID is ignored.
func (a *hostPortAllocator) forget(uid types.UID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.forgetLocked(uid)
}

// forgetName removes the pod observed under namespace/name, for a delete tombstone
// that carries only the key.
func (a *hostPortAllocator) forgetName(namespace, name string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if uid, ok := a.byName[podRef{namespace: namespace, name: name}]; ok {
		a.forgetLocked(uid)
	}
}

func (a *hostPortAllocator) forgetLocked(uid types.UID) {
	p, ok := a.observed[uid]
	if !ok {
		return
	}
	delete(a.observed, uid)
	if a.byName[p.ref] == uid {
		delete(a.byName, p.ref)
	}
	a.observedPairs -= len(p.ports)
	a.countLocked(p.ports, -1, true)
}

// hostPortUsage is a point-in-time view of an allocator, for metrics, logs and tests.
type hostPortUsage struct {
	// ObservedPairs is the number of (pod, host port) pairs of the pods observed through
	// the informer, ReservedPairs that of the unexpired reservations.
	ObservedPairs, ReservedPairs int
	// ObservedPorts is the number of distinct ports of the range held by at least one
	// observed pod; Ports also counts the ports held only by reservations.
	ObservedPorts, Ports int
	// Pods is the number of pods observed (Kubernetes-HostPort pods, and other pods that
	// hold host ports of the range), Reservations the number of unexpired reservations.
	Pods, Reservations int
}

// usageNow expires the reservations whose TTL has passed and returns the usage.
func (a *hostPortAllocator) usageNow() hostPortUsage {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.expireLocked(a.clock.Now())
	return hostPortUsage{
		ObservedPairs: a.observedPairs, ReservedPairs: a.reservedPairs,
		ObservedPorts: a.observedInUse, Ports: a.inUse,
		Pods: len(a.observed), Reservations: len(a.reservations),
	}
}

// podHostPorts returns the distinct host ports of the pod's containers that lie in the
// allocator's range, in container order.
func podHostPorts(pod *corev1.Pod, alloc *hostPortAllocator) []int32 {
	var out []int32
	for _, ctr := range pod.Spec.Containers {
		for _, p := range ctr.Ports {
			if alloc.contains(p.HostPort) && !slices.Contains(out, p.HostPort) {
				out = append(out, p.HostPort)
			}
		}
	}
	return out
}

func samePorts(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}
