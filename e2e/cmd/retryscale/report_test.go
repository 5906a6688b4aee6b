package main

import (
	"strings"
	"testing"
	"time"
)

func TestReportMarkdown(t *testing.T) {
	start := time.Now().Add(-30 * time.Minute)
	tr := newTracker(time.Second)
	t0 := start.Truncate(time.Second)
	tr.observe(statePod(t, nsSmall, t0, t0.Add(time.Second), 1), start.Add(time.Minute))
	tr.observe(statePod(t, nsSmall, t0, t0.Add(6*time.Second), 2), start.Add(time.Minute))
	r := &report{Replicas: 2, ReportEvery: 2 * time.Minute, tracker: tr, start: start, Events: eventCount{maxPerError: 2}}
	for i, at := range []time.Duration{time.Minute, 10 * time.Minute, 20 * time.Minute, 30 * time.Minute} {
		r.Samples = append(r.Samples, sample{at: at, replicas: []replicaSample{
			{name: "manager-0", leader: true, ok: true, cpu: time.Duration(i) * time.Minute, rss: 150e6},
			{name: "manager-1", ok: true, cpu: time.Duration(i) * time.Second, rss: int64(120e6 + i*1e6)},
		}})
	}
	r.Final = tr.summary(retryInterval)
	r.SmallFirst = tr.firstRetries(nsSmall)
	md := r.markdown()
	for _, want := range []string{
		"| manager-0 | 150 | 150 | 150 | 150-150 |",
		"RSS under 200 MB: met; flat over the last 20m0s",
		"at most one Event object per pod per distinct error: **missed** (at most 2 per pod and error, over all 2 replicas)",
		"no pod more than one interval (5s) late: met",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	if md := (&report{}).markdown(); !strings.Contains(md, "No samples.") {
		t.Errorf("empty report = %q, want it to say there are no samples", md)
	}
}

// TestMonotonicCarriesARestart: a replica's counter that falls (a new process) keeps what
// the old one counted; an unread value changes nothing.
func TestMonotonicCarriesARestart(t *testing.T) {
	m := monotonic{}
	for _, c := range []struct{ raw, want float64 }{{10, 10}, {15, 15}, {3, 18}, {-1, 18}, {5, 20}} {
		if got := m.observe("x/manager-0", c.raw); got != c.want {
			t.Errorf("after %v: %v, want %v", c.raw, got, c.want)
		}
	}
}
