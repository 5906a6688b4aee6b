package main

import (
	"strings"
	"testing"
	"time"
)

// TestSummarizeAndReport: nearest-rank percentiles, and the target judged against the
// baseline's Running p99 (a phase whose pods did not all get their network misses it).
func TestSummarizeAndReport(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i)*100*time.Millisecond)
	}
	s := summarize(ds)
	if s.n != 100 || s.p50 != 5*time.Second || s.p99 != 9900*time.Millisecond || s.max != 10*time.Second {
		t.Errorf("summarize = %+v", s)
	}
	text := report(options{pods: 100, command: "x"}, []phaseResult{
		{name: "baseline", pods: 100, running: stats{n: 100, p99: 4 * time.Second}},
		{name: "nodeport", pods: 100, running: stats{n: 100}, ready: stats{n: 100, p99: 6 * time.Second}},
		{name: "hostport", pods: 100, running: stats{n: 100}, ready: stats{n: 99, p99: time.Second}},
	}, 2, "rev", time.Minute)
	for _, want := range []string{"= 7.00 s", "nodeport: network Ready p99 6.00 s: met", "hostport: network Ready p99 1.00 s: missed"} {
		if !strings.Contains(text, want) {
			t.Errorf("report:\n%s\nwant %q", text, want)
		}
	}
}
