package lb

import (
	"slices"
	"strings"
	"sync"
	"time"

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
	// MaxPerPod is the most listener ports one pod may ask for; 0 is no cap
	// (max_ports_per_pod).
	MaxPerPod int
	// MaxReservedPerNamespace is the most listener ports held at once for the CREATEs of one
	// namespace whose pods have not shown up; 0 is no cap (max_reserved_ports_per_namespace).
	MaxReservedPerNamespace int
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
// (observe), the pods whose CREATE chose ports (tryHold), its own allocations and the
// ledger's claims. A hold is firm, or tentative until a time: a claim made at a pod's CREATE
// admission, or another replica's claim read from the ledger, counts only until its claim
// time plus ClaimTTL unless its owner then proves live (a pod or a Service of that name);
// after that its ports are free here. Safe for concurrent use.
type allocator struct {
	rng Range

	mu      sync.Mutex
	used    map[string]map[int32]string // LB id -> port -> owner
	byOwner map[string]Allocation
	// tentative holds the owners whose hold is tentative, and until when it counts.
	tentative map[string]time.Time
}

func newAllocator(rng Range) *allocator {
	return &allocator{rng: rng, used: map[string]map[int32]string{}, byOwner: map[string]Allocation{}, tentative: map[string]time.Time{}}
}

// allocate returns owner's allocation when it holds n ports on one of ids, or takes n free
// ports for it: on the last id with room (the first when firstFit, Volcengine's order), the
// lowest free ports of the range. With until not zero the hold is tentative until then (a
// CREATE's claim; an existing tentative hold is extended), otherwise it is firm. A port
// whose owner's tentative hold has run out by now counts as free unless live (nil: never)
// says the owner exists; live runs under the allocator's lock and must not call it. ok is
// false when no id has n free ports.
func (a *allocator) allocate(owner string, ids []string, n int, firstFit bool, now, until time.Time, live func(owner string) bool) (Allocation, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if al, held := a.byOwner[owner]; held && len(al.Ports) == n && slices.Contains(ids, al.LB) {
		if _, tentative := a.tentative[owner]; tentative || until.IsZero() {
			a.setTentativeLocked(owner, until) // a firm hold (its Service, its pod) stays firm
		}
		return al, true
	}
	a.releaseLocked(owner)
	chosen := ""
	var ports []int32
	for _, id := range ids {
		free := a.freeLocked(id, n, now, live)
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
	a.setTentativeLocked(owner, until)
	return al, true
}

// fits reports whether allocate would find n ports for owner on one of ids at now, without
// holding any (a precheck): owner's own hold counts as room.
func (a *allocator) fits(owner string, ids []string, n int, now time.Time, live func(string) bool) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if al, held := a.byOwner[owner]; held && len(al.Ports) == n && slices.Contains(ids, al.LB) {
		return true
	}
	expired := map[string]bool{} // each holder's liveness read once
	for _, id := range ids {
		free := 0
		for p := a.rng.Min; p <= a.rng.Max && free < n; p++ {
			if !a.rng.contains(p) {
				continue
			}
			holder, taken := a.used[id][p]
			if taken && holder != owner {
				gone, seen := expired[holder]
				if !seen {
					gone = a.expiredLocked(holder, now, live)
					expired[holder] = gone
				}
				taken = !gone
			}
			if !taken || holder == owner {
				free++
			}
		}
		if free >= n {
			return true
		}
	}
	return false
}

// setTentativeLocked makes owner's hold tentative until until (extending a tentative one),
// or firm when until is zero.
func (a *allocator) setTentativeLocked(owner string, until time.Time) {
	if until.IsZero() {
		delete(a.tentative, owner)
		return
	}
	if cur, ok := a.tentative[owner]; !ok || cur.Before(until) {
		a.tentative[owner] = until
	}
}

// expiredLocked reports whether owner's hold is tentative, has run out by now, and live
// (nil: never) does not show the owner; a tentative hold whose owner is live turns firm.
func (a *allocator) expiredLocked(owner string, now time.Time, live func(string) bool) bool {
	until, ok := a.tentative[owner]
	if !ok || now.Before(until) {
		return false
	}
	if live != nil && live(owner) {
		delete(a.tentative, owner)
		return false
	}
	return true
}

// freeLocked returns up to n of id's lowest free ports; the ports of an owner whose
// tentative hold has run out (expiredLocked) are released and count as free.
func (a *allocator) freeLocked(id string, n int, now time.Time, live func(string) bool) []int32 {
	var free []int32
	for p := a.rng.Min; p <= a.rng.Max && len(free) < n; p++ {
		if !a.rng.contains(p) {
			continue
		}
		holder, taken := a.used[id][p]
		if taken && a.expiredLocked(holder, now, live) {
			a.releaseLocked(holder)
			taken = false
		}
		if !taken {
			free = append(free, p)
		}
	}
	return free
}

// observe records that owner holds ports on id (a Service seen in the cache), whatever
// made it, firm; ports outside the range are not the allocator's and are ignored.
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
		delete(a.tentative, owner) // its Service exists: firm
		return
	}
	a.releaseLocked(owner)
	if len(in) > 0 {
		a.holdLocked(owner, Allocation{LB: id, Ports: in})
	}
}

// holdPort records that owner holds port of id, besides what it holds already (a claim
// another replica made, seen in the ledger): tentatively until until, unless owner's hold is
// firm here already.
func (a *allocator) holdPort(owner, id string, port int32, until time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, held := a.byOwner[owner]; !held {
		a.setTentativeLocked(owner, until)
	} else if _, tentative := a.tentative[owner]; tentative {
		a.setTentativeLocked(owner, until)
	}
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

// tryHold records owner's allocation al, firm, unless another owner holds one of its
// ports; it reports whether it did.
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

// pendingIn returns how many ports the tentative holds of namespace ns (owners
// "<ns>/<name>") other than except hold at now: holds that have not run out and whose owner
// live (nil: never) does not show; a live one turns firm.
func (a *allocator) pendingIn(ns, except string, now time.Time, live func(string) bool) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for owner, until := range a.tentative {
		if owner == except || !strings.HasPrefix(owner, ns+"/") || !now.Before(until) {
			continue
		}
		if live != nil && live(owner) {
			delete(a.tentative, owner)
			continue
		}
		n += len(a.byOwner[owner].Ports)
	}
	return n
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

// holdLocked records owner's allocation al, firm.
func (a *allocator) holdLocked(owner string, al Allocation) {
	delete(a.tentative, owner)
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
	delete(a.tentative, owner)
}

// RangeOf returns the Range of a provider table (MaxInclusive is the plugin's rule: each
// provider's constructor sets it).
func RangeOf(t plugin.PortRangeConfig) Range {
	return Range{Min: t.MinPort, Max: t.MaxPort, Block: slices.Clone(t.BlockPorts),
		MaxPerPod: t.PortsPerPod(), MaxReservedPerNamespace: t.ReservedPortsPerNamespace()}
}
