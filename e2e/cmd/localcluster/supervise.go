package main

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"
)

// Restart policy of `make run`'s manager replicas, after the kubelet's for a container whose
// restartPolicy is Always (the manager's Deployment): an exited replica is started again after
// a back-off that doubles with each exit that follows its start too soon, and is reset by a
// run that lasted. The kubelet's figures (10 s doubling to 5 minutes, reset after 10 minutes
// of running) are scaled down for a cluster on one machine that someone watches.
const (
	// restartBackoff is the delay before the first restart; it doubles with each
	// consecutive failure at start, up to maxRestartBackoff.
	restartBackoff    = 2 * time.Second
	maxRestartBackoff = time.Minute
	// stableAfter is how long a replica must run for its exit not to count as a failure at
	// start (and to reset the back-off).
	stableAfter = 30 * time.Second
	// maxFailuresAtStart consecutive failures at start (an exit within stableAfter of a
	// start, or a start whose /readyz never answered) stop `make run`: the replica keeps
	// failing, and a restart loop would hide why.
	maxFailuresAtStart = 5
)

// replicaState is what the supervisor knows of one replica.
type replicaState struct {
	name       string
	restarts   int
	failures   int // consecutive failures at start
	startedAt  time.Time
	lastExit   string
	lastExitAt time.Time
	// restarting is true from an exit until the restart that follows it reports.
	restarting bool
}

// supervisor decides when `make run` restarts its manager replicas (restartBackoff and the
// other constants) and keeps their restart counts for the table. It is not safe for
// concurrent use: the run loop owns it.
type supervisor struct {
	replicas []*replicaState
}

func newSupervisor(now time.Time, names ...string) *supervisor {
	s := &supervisor{}
	for _, n := range names {
		s.replicas = append(s.replicas, &replicaState{name: n, startedAt: now})
	}
	return s
}

// exited records that replica i ended (or failed to start) at now with why, and returns the
// delay before its restart; giveUp is true when it failed at start maxFailuresAtStart times
// in a row.
func (s *supervisor) exited(i int, now time.Time, why string) (delay time.Duration, giveUp bool) {
	r := s.replicas[i]
	if !r.restarting && now.Sub(r.startedAt) >= stableAfter {
		// It ran long enough: not a failure at start. A restart that never became ready
		// (restarting still set) is one, however long ago the last good start was.
		r.failures = 0
	}
	r.failures++
	r.lastExit, r.lastExitAt, r.restarting = why, now, true
	if r.failures >= maxFailuresAtStart {
		return 0, true
	}
	delay = restartBackoff
	for n := 1; n < r.failures && delay < maxRestartBackoff; n++ {
		delay *= 2
	}
	return min(delay, maxRestartBackoff), false
}

// started records that replica i was started again at now and answered /readyz.
func (s *supervisor) started(i int, now time.Time) {
	r := s.replicas[i]
	r.restarts++
	r.startedAt, r.restarting = now, false
}

// table renders one line per replica: its state, restarts and last exit.
func (s *supervisor) table() string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "REPLICA\tSTATE\tRESTARTS\tLAST EXIT")
	for _, r := range s.replicas {
		state := "running"
		if r.restarting {
			state = "restarting"
		}
		last := "-"
		if r.lastExit != "" {
			last = r.lastExitAt.Format(time.TimeOnly) + " " + r.lastExit
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\n", r.name, state, r.restarts, last)
	}
	_ = w.Flush()
	return b.String()
}
