// Package slot spreads the periodic work of many objects evenly over a period: each object
// gets a slot of its own in every period, at an offset derived from a key of its (a pod's
// UID, an Event's name), the same in every process.
//
// Work that is due a fixed time after it was last done comes back as a burst when many
// objects did it together (5,000 pods that failed in the same minutes of a creation
// burst); work due at a slot per object comes at the rate of objects / period, whenever
// it was last done.
package slot

import (
	"hash/fnv"
	"time"
)

// Next returns the first slot of key strictly after last: the slots of key are every period
// from the Unix epoch, at an offset of the FNV-1a (64-bit) hash of key modulo the period.
// So Next is at most one period after last, and every process computes the same slots for
// the same key. A period of zero or less returns last.
func Next(key string, last time.Time, period time.Duration) time.Time {
	if period <= 0 {
		return last
	}
	h := fnv.New64a()
	h.Write([]byte(key))
	p := int64(period)
	offset := int64(h.Sum64() % uint64(p))
	// The last slot at or before last, then the one after it.
	n := last.UnixNano() - offset
	return time.Unix(0, n-mod(n, p)+offset+p)
}

// mod is a modulo b for b > 0, never negative (times before the epoch included).
func mod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}
