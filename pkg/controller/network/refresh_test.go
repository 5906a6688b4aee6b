package network

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// uidWithRefresh returns a pod UID whose state, written at written, is due for its refresh
// (refreshDue with period) between from and to after written.
func uidWithRefresh(t *testing.T, written time.Time, period, from, to time.Duration) types.UID {
	t.Helper()
	for i := range 10000 {
		uid := types.UID(fmt.Sprintf("uid-lobby-0-%d", i))
		if d := refreshDue(uid, written, period).Sub(written); d >= from && d < to {
			return uid
		}
	}
	t.Fatalf("no UID refreshed between %s and %s", from, to)
	return ""
}

// TestRefreshSlotsSpread: 5,000 pods whose states were written in the same second (a fleet
// that failed together) are refreshed over the whole period: every 10-second bucket of the
// period gets some, none more than twice the mean, so the writes come at about 5,000 / the
// period a second instead of in one burst.
func TestRefreshSlotsSpread(t *testing.T) {
	const (
		pods   = 5000
		period = 10 * time.Minute
		bucket = 10 * time.Second
	)
	counts := make([]int, period/bucket)
	for i := range pods {
		uid := types.UID(fmt.Sprintf("0b6f1d8e-%04d-4c1e-9a57-%012d", i%10000, i*7919))
		d := refreshDue(uid, t0, period).Sub(t0)
		counts[(d-1)/bucket]++
	}
	mean := pods / len(counts)
	for i, c := range counts {
		if c == 0 || c > 2*mean {
			t.Errorf("bucket %d (%s-%s after the write): %d refreshes, want between 1 and %d", i, time.Duration(i)*bucket, time.Duration(i+1)*bucket, c, 2*mean)
		}
	}
}
