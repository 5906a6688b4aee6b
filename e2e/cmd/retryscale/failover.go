package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/okg-extensions/network-plugin-policy/e2e/cluster"
)

// leaseDuration is the manager's leader-election lease (controller-runtime's default, which
// the Deployment keeps): a leader that dies without releasing it is followed no sooner.
const leaseDuration = 15 * time.Second

// failoverSample is the manager at one second of the failover.
type failoverSample struct {
	// at is the time since the kill.
	at time.Duration
	// leader is the index of the replica that leads, -1 when none answers as leader.
	leader int
	// retries are npp_network_retries_total + npp_network_retries_from_cache_total (the
	// retries stamped and those counted without a write) and writes the API writes
	// (rest_client_requests_total of POST, PUT, PATCH and DELETE), per replica; -1 when the
	// replica does not answer.
	retries, writes []float64
}

// failoverResult is what -kill-leader-after measured.
type failoverResult struct {
	// killed is the replica SIGKILLed; after is when, from the end of the creates.
	killed string
	after  time.Duration
	// rateBefore is the old leader's retries per second (stamped and counted) over the
	// rateWindow before the kill.
	rateBefore float64
	// newLeader names the replica that led next, and leadAfter how long after the kill it
	// first answered as leader; resumeAfter is when its retries counter first rose above
	// its value before it led (both at the 1 s sampling). Zero when not within the window.
	newLeader                string
	leadAfter, resumeAfter   time.Duration
	restartedReadyAfter      time.Duration
	restartErr               string
	samples                  []failoverSample
	window                   time.Duration
	lateDue                  lateStats
	earlyInWindow, earlyBase int
}

// rateWindow is how long before the kill the old leader's retry rate is taken over.
const rateWindow = 30 * time.Second

// replicaCounters returns r's retries (stamped and counted) and its API writes; ok is false
// when it does not answer.
func replicaCounters(ctx context.Context, r *cluster.Replica) (retries, writes float64, ok bool) {
	if !r.Running() {
		return 0, 0, false
	}
	body, err := r.Scrape(ctx, "")
	if err != nil {
		return 0, 0, false
	}
	for _, name := range []string{"npp_network_retries_total", "npp_network_retries_from_cache_total"} {
		v, err := cluster.SumMetric(body, name)
		if err != nil {
			return 0, 0, false
		}
		retries += v
	}
	for _, method := range []string{"POST", "PUT", "PATCH", "DELETE"} {
		v, err := cluster.SumMetric(body, "rest_client_requests_total", `method="`+method+`"`)
		if err != nil {
			return 0, 0, false
		}
		writes += v
	}
	return retries, writes, true
}

// runFailover SIGKILLs the leader (no Lease release, as a node failure or an OOM kill does),
// starts it again at once (as the kubelet restarts a crashed container), and samples every
// replica every second for window: who leads, its retries, its API writes. tr gives the
// retries whose written state was due in the window (their lateness) and those that came
// early (a second stamp of one attempt would).
func runFailover(ctx context.Context, mgr *cluster.Manager, tr *tracker, window time.Duration, start time.Time) (*failoverResult, error) {
	old, err := mgr.Leader(ctx)
	if err != nil || old == nil {
		return nil, fmt.Errorf("find the leader to kill: %v", err)
	}
	before, _, ok := replicaCounters(ctx, old)
	if !ok {
		return nil, fmt.Errorf("read the leader's counters")
	}
	time.Sleep(rateWindow)
	retries, _, ok := replicaCounters(ctx, old)
	if !ok {
		return nil, fmt.Errorf("read the leader's counters")
	}
	res := &failoverResult{killed: old.Name, rateBefore: (retries - before) / rateWindow.Seconds(), window: window}
	earlyBefore := tr.earlyCount()
	kill := time.Now()
	res.after = kill.Sub(start)
	old.Kill()
	fmt.Fprintf(os.Stderr, "retryscale: SIGKILLed the leader %s at t=%s\n", old.Name, res.after.Round(time.Second))
	restarted := make(chan struct{})
	go func() {
		defer close(restarted)
		if err := old.Start(ctx); err != nil {
			res.restartErr = err.Error()
			return
		}
		res.restartedReadyAfter = time.Since(kill)
	}()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var resumeBase float64
	for time.Since(kill) < window {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
		s := failoverSample{at: time.Since(kill), leader: -1}
		for i, r := range mgr.Replicas {
			rt, wr, ok := replicaCounters(ctx, r)
			if !ok {
				rt, wr = -1, -1
			}
			s.retries, s.writes = append(s.retries, rt), append(s.writes, wr)
			if v, err := r.Metric(ctx, "leader_election_master_status"); err == nil && v == 1 && r.Running() {
				s.leader = i
			}
		}
		if s.leader >= 0 && res.leadAfter == 0 {
			res.newLeader, res.leadAfter = mgr.Replicas[s.leader].Name, s.at
			// Its count before it led: the previous sample's (a restarted process starts at 0).
			resumeBase = 0
			if n := len(res.samples); n > 0 && res.samples[n-1].retries[s.leader] > 0 {
				resumeBase = res.samples[n-1].retries[s.leader]
			}
		}
		if s.leader >= 0 && res.resumeAfter == 0 && s.retries[s.leader] > resumeBase {
			res.resumeAfter = s.at
		}
		res.samples = append(res.samples, s)
		fmt.Fprintf(os.Stderr, "retryscale: failover t+%s leader %d retries %v writes %v\n", s.at.Round(time.Second), s.leader, s.retries, s.writes)
	}
	<-restarted
	res.lateDue = tr.lateBetween(kill, kill.Add(window), retryInterval)
	earlyAfter := tr.earlyCount()
	res.earlyInWindow, res.earlyBase = earlyAfter-earlyBefore, earlyBefore
	return res, nil
}

// writeRates returns the manager's API writes per second over the failover window, from the
// per-replica counters (a replica's counters restart with its process: a drop counts from 0),
// mean and peak over the one-second samples.
func (f *failoverResult) writeRates() (mean, peak float64) {
	var total float64
	for i := 1; i < len(f.samples); i++ {
		var d float64
		for r := range f.samples[i].writes {
			prev, cur := f.samples[i-1].writes[r], f.samples[i].writes[r]
			switch {
			case cur < 0:
			case prev < 0 || cur < prev:
				d += cur
			default:
				d += cur - prev
			}
		}
		dt := (f.samples[i].at - f.samples[i-1].at).Seconds()
		if dt > 0 {
			peak = max(peak, d/dt)
		}
		total += d
	}
	if n := len(f.samples); n > 1 {
		mean = total / (f.samples[n-1].at - f.samples[0].at).Seconds()
	}
	return mean, peak
}

// markdown renders the failover section.
func (f *failoverResult) markdown() string {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	w("\n## Failover: the leader SIGKILLed\n\n")
	w("- killed %s at t=%s (no Lease release); started again at once, ready after %s s%s\n", f.killed, f.after.Round(time.Second), secs(f.restartedReadyAfter), map[bool]string{true: " (restart failed: " + f.restartErr + ")"}[f.restartErr != ""])
	w("- retries on the old leader before the kill (stamped and counted without a write): %.1f/s over %s\n", f.rateBefore, rateWindow)
	if f.leadAfter == 0 {
		w("- no replica led within %s\n", f.window)
	} else {
		w("- new leader %s: leading %s s after the kill, its first retry %s s after the kill (the lease is %s)\n", f.newLeader, secs(f.leadAfter), secs(f.resumeAfter), leaseDuration)
		gap := f.resumeAfter
		w("- retries due in the gap: about %.0f (the rate before × %s s), each late by at most the gap plus the new leader's first pass\n", f.rateBefore*gap.Seconds(), secs(gap))
	}
	w("- written retries due in the %s after the kill: %d, lateness p50 %s s, p99 %s s, max %s s; pods with a retry more than one interval late: %d\n",
		f.window, f.lateDue.n, secs(f.lateDue.p50), secs(f.lateDue.p99), secs(f.lateDue.max), f.lateDue.podsOverInterval)
	w("- retries that ran more than a second before they were due (a second stamp of one attempt would): %d in the window (%d before it)\n", f.earlyInWindow, f.earlyBase)
	mean, peak := f.writeRates()
	w("- the manager's API writes over the window: mean %.1f/s, peak %.0f/s in one second (budget: under %d/s)\n", mean, peak, writeBudget)
	return b.String()
}

// writeBudget is the quiet-retry budget of docs/benchmarks.md: writes per second for 5,000
// identically stuck pods.
const writeBudget = 10

// secs formats d in seconds with one decimal.
func secs(d time.Duration) string { return fmt.Sprintf("%.1f", d.Seconds()) }
