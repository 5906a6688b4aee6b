package ordinal

import (
	"fmt"
	"testing"
)

// TestOf: the number after the last "-", as OKG reads a game server's name.
func TestOf(t *testing.T) {
	for name, want := range map[string]int{"gs-0": 0, "gs-9": 9, "a-b-12": 12} {
		if got, ok := Of(name); !ok || got != want {
			t.Errorf("Of(%q) = %d %v, want %d", name, got, ok, want)
		}
	}
	for _, name := range []string{"gs", "gs-", "gs-x", "gs-+1", "gs-007", "gs-99999999999"} {
		if _, ok := Of(name); ok {
			t.Errorf("Of(%q) ok, want none", name)
		}
	}
}

// TestLayoutNoPortTwice: over every ordinal of three load balancers of ranges with blocked
// ports (inside, at the ends, next to each other, outside the range), no two ordinals of one
// load balancer share a port, no blocked port is used, and every port is in the range.
func TestLayoutNoPortTwice(t *testing.T) {
	for _, tc := range []struct {
		min, max int32
		block    []int32
		perPod   int
	}{
		{1000, 1003, nil, 1},
		{1000, 1005, nil, 2},
		{1000, 1010, []int32{1003}, 2},
		{1000, 1010, []int32{1000, 1010, 1004, 1005}, 3},
		{1000, 1499, []int32{1025, 1434, 1068, 2000}, 5},
	} {
		t.Run(fmt.Sprint(tc), func(t *testing.T) {
			l, err := NewLayout(tc.min, tc.max, tc.block, tc.perPod)
			if err != nil {
				t.Fatal(err)
			}
			seen := map[[2]int]int{} // (load balancer, port) -> ordinal
			for i := range 3 * l.PerService() {
				for _, p := range l.Slot(i) {
					if p < tc.min || p > tc.max {
						t.Fatalf("ordinal %d: port %d outside the range", i, p)
					}
					for _, b := range tc.block {
						if p == b {
							t.Fatalf("ordinal %d: blocked port %d", i, p)
						}
					}
					k := [2]int{l.Service(i), int(p)}
					if other, dup := seen[k]; dup {
						t.Fatalf("port %d of load balancer %d: ordinals %d and %d", p, l.Service(i), other, i)
					}
					seen[k] = i
				}
			}
		})
	}
}

// TestLayoutAsOKG: without blocked ports, the slots are OKG's: ordinal i takes the PerPod
// ports after the (i % PerService())-th slot's start, from the range's first port, and a
// range too small for one game server is an error (OKG divides by zero).
func TestLayoutAsOKG(t *testing.T) {
	l, err := NewLayout(1000, 1005, nil, 2)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(l.PerService(), l.Slot(0), l.Slot(2), l.Slot(3), l.Service(3), l.Services(9, 1)); got != "3 [1000 1001] [1004 1005] [1000 1001] 1 5" {
		t.Errorf("layout %s", got)
	}
	if _, err := NewLayout(1000, 1001, nil, 3); err == nil {
		t.Error("a range of 2 ports for 3 per game server: no error")
	}
	if _, err := NewLayout(1000, 999, nil, 1); err == nil {
		t.Error("min above max: no error")
	}
}
