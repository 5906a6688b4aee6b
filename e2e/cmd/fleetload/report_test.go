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

// TestOKGRuleAndLBReport: OKG's rule gives the first 5 s re-drive at or after the ingress,
// never one past 60 s; the load-balancer target is judged against the ingress p99.
func TestOKGRuleAndLBReport(t *testing.T) {
	for _, c := range []struct {
		ingress time.Duration
		want    time.Duration
		ok      bool
	}{
		{0, 5 * time.Second, true},
		{4 * time.Second, 5 * time.Second, true},
		{5 * time.Second, 5 * time.Second, true},
		{5*time.Second + time.Millisecond, 10 * time.Second, true},
		{60 * time.Second, 60 * time.Second, true},
		{60*time.Second + time.Millisecond, 0, false},
	} {
		got, ok := okgReady(c.ingress)
		if ok != c.ok || (ok && got != c.want) {
			t.Errorf("okgReady(%s) = %s, %v; want %s, %v", c.ingress, got, ok, c.want, c.ok)
		}
	}
	text := report(options{pods: 10, command: "x"}, []phaseResult{
		{name: "slb (service syncs 1)", pods: 10, ready: stats{n: 10, p99: 3 * time.Second},
			lb: &lbResult{ingress: stats{n: 10, p99: 2500 * time.Millisecond}, okg: stats{n: 4}}},
		{name: "slb (service syncs 10)", pods: 10, ready: stats{n: 10, p99: 3 * time.Second},
			lb: &lbResult{ingress: stats{n: 10, p99: time.Second}}},
	}, 2, "rev", time.Minute)
	for _, want := range []string{"slb (service syncs 1): network Ready p99 3.00 s, ingress p99 2.50 s: met",
		"slb (service syncs 10): network Ready p99 3.00 s, ingress p99 1.00 s: missed", "| 4 of 10 |"} {
		if !strings.Contains(text, want) {
			t.Errorf("report:\n%s\nwant %q", text, want)
		}
	}
}
