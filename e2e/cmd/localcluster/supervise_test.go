package main

import (
	"strings"
	"testing"
	"time"
)

// TestSupervisorRestartsLikeTheKubelet: an exited replica is restarted after a back-off that
// doubles with each exit soon after a start, up to a minute; a run that lasted resets it;
// maxFailuresAtStart failures at start in a row give up. The table shows restarts.
func TestSupervisorRestartsLikeTheKubelet(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	s := newSupervisor(t0, "manager-0", "manager-1")
	// A replica that ran for an hour and then lost its lease: restarted after 2 s.
	now := t0.Add(time.Hour)
	if d, giveUp := s.exited(0, now, "exit status 1"); d != restartBackoff || giveUp {
		t.Fatalf("first exit after a long run: delay %s, give up %t; want %s, false", d, giveUp, restartBackoff)
	}
	if !strings.Contains(s.table(), "restarting") {
		t.Errorf("table while restarting:\n%s", s.table())
	}
	now = now.Add(restartBackoff)
	s.started(0, now)
	// It keeps exiting right after its start: 4 s, 8 s, 16 s, then give up at the fifth.
	want := []time.Duration{4 * time.Second, 8 * time.Second, 16 * time.Second}
	for i, w := range want {
		now = now.Add(time.Second)
		d, giveUp := s.exited(0, now, "exit status 1")
		if d != w || giveUp {
			t.Fatalf("failure %d at start: delay %s, give up %t; want %s, false", i+2, d, giveUp, w)
		}
		now = now.Add(d)
		s.started(0, now)
	}
	now = now.Add(time.Second)
	if _, giveUp := s.exited(0, now, "exit status 1"); !giveUp {
		t.Error("five failures at start in a row: want give up")
	}
	// The other replica: a run that lasted resets its back-off each time.
	for range 10 {
		now = now.Add(stableAfter)
		d, giveUp := s.exited(1, now, "signal: killed")
		if d != restartBackoff || giveUp {
			t.Fatalf("exit after a stable run: delay %s, give up %t; want %s, false", d, giveUp, restartBackoff)
		}
		s.started(1, now)
	}
	var row []string
	for _, line := range strings.Split(s.table(), "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == "manager-1" {
			row = f
		}
	}
	if len(row) < 5 || row[1] != "running" || row[2] != "10" || !strings.Contains(strings.Join(row[3:], " "), "signal: killed") {
		t.Errorf("table:\n%s\nwant manager-1 running with 10 restarts and its last exit", s.table())
	}
}
