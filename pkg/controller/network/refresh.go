package network

import (
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/okg-extensions/network-plugin-policy/pkg/slot"
)

// refreshDue returns when the retry state of the pod incarnation uid, last written at
// written, is due for its refresh (a real plugin run that writes it, see quiet.go): the
// first of the pod's refresh slots after written, every period (the Options.StateRefresh)
// at an offset from its UID (slot.Next). So the refresh comes at most one period after the
// last write, every leader, old or new, computes the same slots, and a fleet that failed
// together (every pod's state written in the same minutes of a creation burst) is
// refreshed evenly over the period instead of again as a burst one period later, with the
// retries behind it late (TestSlotsSpread in pkg/slot). The price: a state written just before
// its slot is refreshed just after it, at most one early write per pod.
func refreshDue(uid types.UID, written time.Time, period time.Duration) time.Time {
	return slot.Next(string(uid), written, period)
}
