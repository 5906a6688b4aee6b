package lb

import (
	"slices"
	"sync"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
)

// Range is a provider table's listener port range: Min to Max (Max included when
// MaxInclusive, as Alibaba's and HwCloud's tables; excluded for Volcengine's and JdCloud's),
// without the Block ports.
type Range struct {
	// Min is the lowest port, at least 1.
	Min int32
	// Max is the highest port (or one past it when MaxInclusive is false), at most 65535.
	Max int32
	// MaxInclusive tells whether Max itself is handed out.
	MaxInclusive bool
	// Block lists ports never handed out.
	Block []int32
}

// contains reports whether p is a port of the range that may be handed out.
func (r Range) contains(p int32) bool {
	if p < r.Min || p > r.Max || (p == r.Max && !r.MaxInclusive) {
		return false
	}
	return !slices.Contains(r.Block, p)
}

// first returns the range's n lowest ports that may be handed out (fewer when it has fewer).
func (r Range) first(n int) []int32 {
	var out []int32
	for p := r.Min; len(out) < n && (p < r.Max || (p == r.Max && r.MaxInclusive)); p++ {
		if !slices.Contains(r.Block, p) {
			out = append(out, p)
		}
	}
	return out
}

// Allocation is the listener ports of one owner (a Service, "<namespace>/<name>") on one
// load balancer.
type Allocation struct {
	// LB is the load balancer id.
	LB string
	// Ports are the listener ports, in the order of the pod's PortProtocols.
	Ports []int32
}

// allocator hands out listener ports per load balancer id, lowest free first, and records
// who holds them. Its state is what this replica has seen: the Services of its cache
// (observe) and its own allocations. Safe for concurrent use.
type allocator struct {
	rng Range

	mu      sync.Mutex
	used    map[string]map[int32]string // LB id -> port -> owner
	byOwner map[string]Allocation
}

func newAllocator(rng Range) *allocator {
	return &allocator{rng: rng, used: map[string]map[int32]string{}, byOwner: map[string]Allocation{}}
}

// allocate returns owner's allocation when it holds n ports on one of ids, or takes n free
// ports for it: on the last id with room (the first when firstFit, Volcengine's order), the
// lowest free ports of the range. ok is false when no id has n free ports.
func (a *allocator) allocate(owner string, ids []string, n int, firstFit bool) (Allocation, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if al, held := a.byOwner[owner]; held && len(al.Ports) == n && slices.Contains(ids, al.LB) {
		return al, true
	}
	a.releaseLocked(owner)
	chosen := ""
	var ports []int32
	for _, id := range ids {
		free := a.freeLocked(id, n)
		if len(free) < n {
			continue
		}
		chosen, ports = id, free
		if firstFit {
			break
		}
	}
	if ports == nil {
		return Allocation{}, false
	}
	al := Allocation{LB: chosen, Ports: ports}
	a.holdLocked(owner, al)
	return al, true
}

// freeLocked returns up to n of id's lowest free ports.
func (a *allocator) freeLocked(id string, n int) []int32 {
	var free []int32
	for p := a.rng.Min; p <= a.rng.Max && len(free) < n; p++ {
		if a.rng.contains(p) {
			if _, taken := a.used[id][p]; !taken {
				free = append(free, p)
			}
		}
	}
	return free
}

// observe records that owner holds ports on id (a Service seen in the cache), whatever
// made it; ports outside the range are not the allocator's and are ignored.
func (a *allocator) observe(owner, id string, ports []int32) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var in []int32
	for _, p := range ports {
		if a.rng.contains(p) && !slices.Contains(in, p) {
			in = append(in, p)
		}
	}
	if al, ok := a.byOwner[owner]; ok && al.LB == id && slices.Equal(al.Ports, in) {
		return
	}
	a.releaseLocked(owner)
	if len(in) > 0 {
		a.holdLocked(owner, Allocation{LB: id, Ports: in})
	}
}

// holdPort records that owner holds port of id, besides what it holds already (a claim
// another replica made, seen in the ledger).
func (a *allocator) holdPort(owner, id string, port int32) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.used[id] == nil {
		a.used[id] = map[int32]string{}
	}
	a.used[id][port] = owner
	al := a.byOwner[owner]
	if al.LB == "" || al.LB == id {
		al.LB = id
		if !slices.Contains(al.Ports, port) {
			al.Ports = append(al.Ports, port)
		}
		a.byOwner[owner] = al
	}
}

// tryHold records owner's allocation al unless another owner holds one of its ports;
// it reports whether it did.
func (a *allocator) tryHold(owner string, al Allocation) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, p := range al.Ports {
		if holder, taken := a.used[al.LB][p]; taken && holder != owner {
			return false
		}
	}
	a.releaseLocked(owner)
	a.holdLocked(owner, al)
	return true
}

// allocation returns owner's allocation, if any.
func (a *allocator) allocation(owner string) (Allocation, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	al, ok := a.byOwner[owner]
	return al, ok
}

// release frees owner's ports (its Service is gone).
func (a *allocator) release(owner string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.releaseLocked(owner)
}

func (a *allocator) holdLocked(owner string, al Allocation) {
	if a.used[al.LB] == nil {
		a.used[al.LB] = map[int32]string{}
	}
	for _, p := range al.Ports {
		a.used[al.LB][p] = owner
	}
	a.byOwner[owner] = al
}

func (a *allocator) releaseLocked(owner string) {
	al, ok := a.byOwner[owner]
	if !ok {
		return
	}
	for _, p := range al.Ports {
		if a.used[al.LB][p] == owner {
			delete(a.used[al.LB], p)
		}
	}
	delete(a.byOwner, owner)
}

// RangeOf returns the Range of a provider table (MaxInclusive is the plugin's rule: each
// provider's constructor sets it).
func RangeOf(t plugin.PortRangeConfig) Range {
	return Range{Min: t.MinPort, Max: t.MaxPort, Block: slices.Clone(t.BlockPorts)}
}
