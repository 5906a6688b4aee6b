package lb

import (
	"slices"
	"time"
)

// levelHold is what a level's owners hold: the level's index and the ports every one of its
// owners holds on its own load balancer.
type levelHold struct {
	level int
	ports []int32
}

// allocateLevel takes n ports free on every load balancer of one level for that level's
// owners (owners[level][i] holds them on levels[level][i]): the lowest ports free on all of
// them. With balanced the level with the most such ports is taken (the first on a tie),
// otherwise the first level with n of them (OKG's AllocatePolicy). The owners' earlier holds
// are released first and count as free. With until not zero the holds are tentative until
// then. ok is false when no level has n common free ports.
func (a *allocator) allocateLevel(levels [][]string, owners [][]string, n int, balanced bool, now, until time.Time, live func(string) bool) (levelHold, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, os := range owners {
		for _, o := range os {
			a.releaseLocked(o)
		}
	}
	best, bestFree := -1, []int32(nil)
	for l, ids := range levels {
		free := a.commonFreeLocked(ids, now, live)
		if len(free) < n {
			continue
		}
		if !balanced {
			best, bestFree = l, free
			break
		}
		if best < 0 || len(free) > len(bestFree) {
			best, bestFree = l, free
		}
	}
	if best < 0 {
		return levelHold{}, false
	}
	ports := slices.Clone(bestFree[:n])
	for i, id := range levels[best] {
		a.holdLocked(owners[best][i], Allocation{LB: id, Ports: ports})
		a.setTentativeLocked(owners[best][i], until)
	}
	return levelHold{level: best, ports: ports}, true
}

// commonFreeLocked returns, ascending, the range's ports free on every one of ids; the
// ports of an owner whose tentative hold has run out are released and count as free.
func (a *allocator) commonFreeLocked(ids []string, now time.Time, live func(string) bool) []int32 {
	var out []int32
	for p := a.rng.Min; p <= a.rng.Max; p++ {
		if !a.rng.contains(p) {
			continue
		}
		free := true
		for _, id := range ids {
			holder, taken := a.used[id][p]
			if taken && a.expiredLocked(holder, now, live) {
				a.releaseLocked(holder)
				taken = false
			}
			if taken {
				free = false
				break
			}
		}
		if free {
			out = append(out, p)
		}
		if p == a.rng.Max { // p++ would wrap at 65535
			break
		}
	}
	return out
}

// holdLevel records that owners[i] holds ports on ids[i], tentatively until until (an
// owner's firm hold stays firm), unless another owner holds one of them on its load
// balancer; it reports whether it did (nothing is held when not).
func (a *allocator) holdLevel(ids, owners []string, ports []int32, until time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, id := range ids {
		for _, p := range ports {
			if holder, taken := a.used[id][p]; taken && holder != owners[i] {
				return false
			}
		}
	}
	for i, id := range ids {
		al, held := a.byOwner[owners[i]]
		_, tentative := a.tentative[owners[i]]
		if held && !tentative && al.LB == id && slices.Equal(al.Ports, ports) {
			continue // firm already: its Service exists
		}
		a.releaseLocked(owners[i])
		a.holdLocked(owners[i], Allocation{LB: id, Ports: slices.Clone(ports)})
		a.setTentativeLocked(owners[i], until)
	}
	return true
}

// forgetUnclaimed releases the tentative holds on ids whose ports the ledger's claims (as Load
// returns them) no longer give their owner: another replica's claim seen when it took a port
// this replica chose, then given up (a level abandoned because one of its load balancers was
// taken), or gone. Firm holds (Services seen) are kept.
func (a *allocator) forgetUnclaimed(ids []string, claims map[string]map[int32]Claim) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, id := range ids {
		for port, owner := range a.used[id] {
			if _, tentative := a.tentative[owner]; !tentative {
				continue
			}
			if c, ok := claims[id][port]; !ok || c.Owner != owner {
				a.releaseLocked(owner)
			}
		}
	}
}

// forceLevel records that owners[i] holds ports on ids[i], tentatively until until (a firm
// hold stays firm), after the ledger gave them the ports: another owner's tentative hold on
// one of them here is a claim this replica saw that is gone since, and is dropped. It
// reports false, holding nothing, when another owner's firm hold (a Service seen) has one of
// them.
func (a *allocator) forceLevel(ids, owners []string, ports []int32, until time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, id := range ids {
		for _, p := range ports {
			holder, taken := a.used[id][p]
			if !taken || holder == owners[i] {
				continue
			}
			if _, tentative := a.tentative[holder]; !tentative {
				return false
			}
		}
	}
	for i, id := range ids {
		for _, p := range ports {
			if holder, taken := a.used[id][p]; taken && holder != owners[i] {
				a.releaseLocked(holder)
			}
		}
		al, held := a.byOwner[owners[i]]
		_, tentative := a.tentative[owners[i]]
		if held && !tentative && al.LB == id && slices.Equal(al.Ports, ports) {
			continue
		}
		a.releaseLocked(owners[i])
		a.holdLocked(owners[i], Allocation{LB: id, Ports: slices.Clone(ports)})
		a.setTentativeLocked(owners[i], until)
	}
	return true
}
