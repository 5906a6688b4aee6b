package main

import "testing"

// TestQueueWaitsSince: a phase's waits are the difference of the cumulative buckets, and the
// quantiles are the bounds of the buckets that hold them.
func TestQueueWaitsSince(t *testing.T) {
	//               0.001 0.005 0.01 0.05 0.1 0.25 0.5 1  2.5 5  10 30 +Inf
	before := queueWaits{"urgent": {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, "other": {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}}
	after := queueWaits{"urgent": {51, 91, 101, 101, 101, 101, 101, 101, 101, 101, 101, 101, 101}, "other": {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2}}
	got := after.since(before)
	if w := got["urgent"]; w.n != 100 || w.p50 != "≤ 0.001" || w.p99 != "≤ 0.01" || w.max != "≤ 0.01" {
		t.Errorf("urgent: %+v", w)
	}
	if w := got["other"]; w.n != 2 || w.p50 != "≤ 30" || w.max != "> 30" {
		t.Errorf("other: %+v", w)
	}
}
