package network

import (
	"hash/fnv"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// refreshDue returns when the retry state of the pod incarnation uid, last written at
// written, is due for its refresh (a real plugin run that writes it, see quiet.go): the
// first of the pod's refresh slots after written. A pod's slots are every period (the
// Options.StateRefresh) at an offset of its own in the period, the FNV-1a hash of its UID
// modulo the period, counted from the Unix epoch; so the refresh comes at most one period
// after the last write, and every leader, old or new, computes the same slots.
//
// A fixed age after the last write would refresh a fleet that failed together (every
// pod's state written in the same minutes of a creation burst) together again one period
// later, as a burst of writes with the retries behind it late; slots by UID spread the
// refreshes of any number of pods evenly over the period, whenever their states were
// written (TestRefreshSlotsSpread). The price is that a state written just before its slot
// is refreshed just after it: at most one early write per pod, after which it keeps to its
// slot.
func refreshDue(uid types.UID, written time.Time, period time.Duration) time.Time {
	if period <= 0 {
		return written
	}
	h := fnv.New64a()
	h.Write([]byte(uid))
	offset := int64(h.Sum64() % uint64(period))
	p := int64(period)
	// The last slot at or before written, then the one after it.
	n := written.UnixNano() - offset
	slot := n - mod(n, p) + offset
	return time.Unix(0, slot+p)
}

// mod is a modulo b for b > 0, never negative (times before the epoch included).
func mod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}
