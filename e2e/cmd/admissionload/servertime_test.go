package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestServerTimeBetween checks the per-request means between two readings, and zero without
// requests.
func TestServerTimeBetween(t *testing.T) {
	before := serverTotals{noopSum: 1, noopCount: 100, managerSum: 2, managerCount: 100}
	after := serverTotals{noopSum: 1.05, noopCount: 200, managerSum: 2.3, managerCount: 300}
	want := serverTime{NoopRequests: 100, ManagerRequests: 200, NoopMeanMs: 0.5, ManagerMeanMs: 1.5}
	if diff := cmp.Diff(want, serverTimeBetween(before, after)); diff != "" {
		t.Errorf("serverTimeBetween (-want,+got):\n%s", diff)
	}
	if got := serverTimeBetween(after, after); got != (serverTime{}) {
		t.Errorf("serverTimeBetween without requests = %+v, want zero", got)
	}
}
