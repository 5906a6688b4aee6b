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
