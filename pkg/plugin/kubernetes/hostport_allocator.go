package kubernetes

import (
	"slices"
	"strconv"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
)

// allocKey identifies one allocation. uid is empty for an allocation made at CREATE
// admission (the pod has no UID yet) and not yet seen again; such a "pending"
// allocation is what makes CREATE idempotent per namespace/name.
type allocKey struct {
	namespace, name string
	uid             types.UID
}

// hostPortAllocator hands out host ports from [min, min+size): least-used port first,
// lowest number on ties. It is safe for concurrent use; one mutex guards all state
// (this is plugin state, not the policy lookup path).
type hostPortAllocator struct {
	mu         sync.Mutex
	min        int32
	maxPerPort int32   // 0 = no limit
	usage      []int32 // pods per port, index = port - min
	inUse      int     // ports with usage > 0
	allocs     map[allocKey][]int32
	anonymous  uint64 // sequence for allocations of pods without a name
}

// anonymousUIDPrefix marks the uid of an allocation made for a pod without a name.
const anonymousUIDPrefix = "anonymous-"

// keyFor returns the CREATE-time allocation key of a pod: namespace/name, or for a pod
// created with generateName and no name, a fresh anonymous key.
func (a *hostPortAllocator) keyFor(namespace, name, generateName string) allocKey {
	if name != "" {
		return allocKey{namespace: namespace, name: name}
	}
	a.mu.Lock()
	a.anonymous++
	n := a.anonymous
	a.mu.Unlock()
	return allocKey{namespace: namespace, name: anonymousName(generateName), uid: types.UID(anonymousUIDPrefix + strconv.FormatUint(n, 10))}
}

func newHostPortAllocator(cfg plugin.HostPortConfig) *hostPortAllocator {
	return &hostPortAllocator{
		min:        cfg.MinPort,
		maxPerPort: cfg.MaxPodsPerPort,
		usage:      make([]int32, cfg.Size()),
		allocs:     map[allocKey][]int32{},
	}
}

// contains reports whether port is in the range.
func (a *hostPortAllocator) contains(port int32) bool {
	return port >= a.min && int(port-a.min) < len(a.usage)
}

// allocate returns n distinct ports for key. An existing allocation of key with n
// ports is returned unchanged (reused = true). Errors: more ports than the range holds
// (ParameterError naming ContainerPorts), or too few ports below the per-port limit
// (RetryError saying the range size and how many ports are in use).
func (a *hostPortAllocator) allocate(key allocKey, n int) (ports []int32, reused bool, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if prev, ok := a.allocs[key]; ok {
		if len(prev) == n {
			return slices.Clone(prev), true, nil
		}
		a.releaseLocked(key)
	}
	if n > len(a.usage) {
		return nil, false, plugin.ParamErrorf(ParamContainerPorts, "requests %d host ports but the range %d-%d holds %d",
			n, a.min, a.maxPort(), len(a.usage))
	}
	ports = a.selectLocked(n)
	if ports == nil {
		return nil, false, plugin.Errorf(plugin.RetryError, "host port range %d-%d exhausted: %d ports, %d in use, each shared by the limit of %d pods; %d more needed",
			a.min, a.maxPort(), len(a.usage), a.inUse, a.maxPerPort, n)
	}
	a.addLocked(key, ports)
	return slices.Clone(ports), false, nil
}

func (a *hostPortAllocator) maxPort() int32 { return a.min + int32(len(a.usage)) - 1 }

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

// addLocked records ports for key (ports outside the range are kept in the record but
// not counted).
func (a *hostPortAllocator) addLocked(key allocKey, ports []int32) {
	a.allocs[key] = slices.Clone(ports)
	for _, p := range ports {
		if a.contains(p) {
			if a.usage[p-a.min] == 0 {
				a.inUse++
			}
			a.usage[p-a.min]++
		}
	}
}

func (a *hostPortAllocator) releaseLocked(key allocKey) []int32 {
	ports, ok := a.allocs[key]
	if !ok {
		return nil
	}
	delete(a.allocs, key)
	for _, p := range ports {
		if a.contains(p) && a.usage[p-a.min] > 0 {
			a.usage[p-a.min]--
			if a.usage[p-a.min] == 0 {
				a.inUse--
			}
		}
	}
	return ports
}

// record adds an allocation found on an existing pod (Init); an existing record of key
// is replaced.
func (a *hostPortAllocator) record(key allocKey, ports []int32) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.releaseLocked(key)
	a.addLocked(key, ports)
}

// anonymousName is the allocation name of a pod created with generateName and no
// name: such allocations are found again by namespace, generateName and ports.
func anonymousName(generateName string) string { return generateName + "*" }

// findPendingLocked returns the pending allocation that a pod with this
// namespace/name (or generateName) and these ports was given at CREATE.
func (a *hostPortAllocator) findPendingLocked(namespace, name, generateName string, ports []int32) (allocKey, bool) {
	pending := allocKey{namespace: namespace, name: name}
	if prev, ok := a.allocs[pending]; ok && samePorts(prev, ports) {
		return pending, true
	}
	if generateName == "" {
		return allocKey{}, false
	}
	for k, prev := range a.allocs {
		if k.namespace == namespace && k.name == anonymousName(generateName) && strings.HasPrefix(string(k.uid), anonymousUIDPrefix) && samePorts(prev, ports) {
			return k, true
		}
	}
	return allocKey{}, false
}

// bind turns the pending allocation of the pod into the allocation of its UID when its
// ports are exactly ports (the pod now carries a UID). It reports whether it did.
func (a *hostPortAllocator) bind(namespace, name, generateName string, uid types.UID, ports []int32) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	bound := allocKey{namespace: namespace, name: name, uid: uid}
	if uid == "" || name == "" {
		return false
	}
	if _, ok := a.allocs[bound]; ok {
		return false
	}
	pending, ok := a.findPendingLocked(namespace, name, generateName, ports)
	if !ok {
		return false
	}
	a.allocs[bound] = a.allocs[pending]
	delete(a.allocs, pending)
	return true
}

// releasePod frees the allocation of a deleted pod and returns the ports freed: the
// allocation bound to the pod's UID; or, when there is none and this is the first
// DELETE of the pod (not yet terminating), the pending allocation of its
// namespace/name if it holds exactly the pod's ports. A pending allocation is never
// freed by the DELETE of a pod that is already terminating: it then belongs to a new
// same-named pod whose CREATE came after the deletion began.
func (a *hostPortAllocator) releasePod(namespace, name, generateName string, uid types.UID, terminating bool, ports []int32) []int32 {
	a.mu.Lock()
	defer a.mu.Unlock()
	if uid != "" {
		if freed := a.releaseLocked(allocKey{namespace: namespace, name: name, uid: uid}); freed != nil {
			return freed
		}
	}
	if terminating {
		return nil
	}
	if pending, ok := a.findPendingLocked(namespace, name, generateName, ports); ok {
		return a.releaseLocked(pending)
	}
	return nil
}

// stats returns the number of ports in use and of allocations, for tests and logs.
func (a *hostPortAllocator) stats() (portsInUse, allocations int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.inUse, len(a.allocs)
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
