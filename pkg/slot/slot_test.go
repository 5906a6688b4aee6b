package slot

import (
	"fmt"
	"testing"
	"time"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// TestNext: the slot comes after last and at most one period later, again one period after
// that, and a time just before a slot gives that slot.
func TestNext(t *testing.T) {
	const period = 10 * time.Minute
	for i := range 200 {
		key := fmt.Sprintf("pod-%d", i)
		last := t0.Add(time.Duration(i) * 7 * time.Second)
		next := Next(key, last, period)
		if !next.After(last) || next.Sub(last) > period {
			t.Fatalf("%s after %s: %s, want within (0, %s] after", key, last, next, period)
		}
		if again := Next(key, next, period); again.Sub(next) != period {
			t.Errorf("%s: from its slot %s, next %s later, want %s", key, next, again.Sub(next), period)
		}
		if just := Next(key, next.Add(-time.Nanosecond), period); !just.Equal(next) {
			t.Errorf("%s: just before its slot, %s, want the slot %s", key, just, next)
		}
	}
	if got := Next("pod", t0, 0); !got.Equal(t0) {
		t.Errorf("no period: %s, want last", got)
	}
	if before := time.Unix(-100, 0); !Next("pod", before, period).After(before) {
		t.Error("a time before the epoch: slot not after it")
	}
}

// TestSlotsSpread: 5,000 keys last done in the same instant (a fleet that failed together)
// come due over the whole period: every 10-second bucket gets some, none more than twice
// the mean.
func TestSlotsSpread(t *testing.T) {
	const (
		keys   = 5000
		period = 10 * time.Minute
		bucket = 10 * time.Second
	)
	counts := make([]int, period/bucket)
	for i := range keys {
		key := fmt.Sprintf("0b6f1d8e-%04d-4c1e-9a57-%012d", i%10000, i*7919)
		counts[(Next(key, t0, period).Sub(t0)-1)/bucket]++
	}
	mean := keys / len(counts)
	for i, c := range counts {
		if c == 0 || c > 2*mean {
			t.Errorf("bucket %d: %d, want between 1 and %d", i, c, 2*mean)
		}
	}
}
