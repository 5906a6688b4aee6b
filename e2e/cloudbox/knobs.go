package cloudbox

import (
	"sync"
	"time"
)

// Knobs are a stand-in controller's delay and failure switch, set while it runs. Safe for
// concurrent use; the stand-ins that embed them also guard their own state with mu.
type Knobs struct {
	mu    sync.Mutex
	delay time.Duration
	fail  bool
}

// SetDelay makes the stand-in answer d after it first sees what it answers.
func (k *Knobs) SetDelay(d time.Duration) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.delay = d
}

// SetFail makes the stand-in answer nothing (true) or answer again (false); what it did not
// answer is answered at its next change, or within 5 s (a resync).
func (k *Knobs) SetFail(fail bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.fail = fail
}

// knobs returns the delay and the failure switch.
func (k *Knobs) knobs() (time.Duration, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.delay, k.fail
}
