package main

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"
)

// TestPercentile checks the nearest-rank percentile on small and 100-value inputs.
func TestPercentile(t *testing.T) {
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i+1) * time.Millisecond
	}
	cases := map[string]struct {
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		"one value":             {sorted: []time.Duration{7}, p: 99, want: 7},
		"p50 of 1..100 ms":      {sorted: hundred, p: 50, want: 50 * time.Millisecond},
		"p99 of 1..100 ms":      {sorted: hundred, p: 99, want: 99 * time.Millisecond},
		"p100 is the max":       {sorted: hundred, p: 100, want: 100 * time.Millisecond},
		"p50 of four rounds up": {sorted: []time.Duration{1, 2, 3, 4}, p: 50, want: 2},
		"p90 of four":           {sorted: []time.Duration{1, 2, 3, 4}, p: 90, want: 4},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := percentile(tc.sorted, tc.p); got != tc.want {
				t.Errorf("percentile(%v) = %v, want %v", tc.p, got, tc.want)
			}
		})
	}
}

// TestSummarizeReady checks that pods never seen Ready are counted apart and that Ready
// times are measured from when the CREATE was sent.
func TestSummarizeReady(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	sent := map[string]time.Time{"a": t0, "b": t0, "c": t0}
	ready := map[string]time.Time{"a": t0.Add(time.Second), "b": t0.Add(3 * time.Second), "other": t0}
	want := readyStats{Pods: 3, Ready: 2, NotReady: 1, P50Ms: 1000, P99Ms: 3000, MaxMs: 3000}
	if diff := cmp.Diff(want, summarizeReady(sent, ready)); diff != "" {
		t.Errorf("summarizeReady (-want,+got):\n%s", diff)
	}
}

// TestSummarize checks the latency statistics and that errors are counted, not measured.
func TestSummarize(t *testing.T) {
	ds := []time.Duration{3 * time.Millisecond, time.Millisecond, 2 * time.Millisecond}
	want := latencyStats{Count: 3, Errors: 1, Unexpected: 0, P50Ms: 2, P90Ms: 3, P99Ms: 3, MaxMs: 3, MeanMs: 2}
	if diff := cmp.Diff(want, summarize(ds, 1, 0)); diff != "" {
		t.Errorf("summarize (-want,+got):\n%s", diff)
	}
}

// TestCompare checks differences, ratios and the target against the no-op webhook.
func TestCompare(t *testing.T) {
	noop := latencyStats{P50Ms: 4, P99Ms: 10}
	cases := map[string]struct {
		s        latencyStats
		baseline string
		want     comparison
	}{
		"within target": {
			s: latencyStats{P50Ms: 4.3, P99Ms: 11}, baseline: "noop",
			want: comparison{Kind: "hostport", Baseline: "noop", P50DiffMs: 0.3, P50Ratio: 1.075, P99DiffMs: 1, P99Ratio: 1.1, WithinTarget: ptr.To(true)},
		},
		"p50 missed": {
			s: latencyStats{P50Ms: 4.31, P99Ms: 10}, baseline: "noop",
			want: comparison{Kind: "hostport", Baseline: "noop", P50DiffMs: 0.31, P50Ratio: 1.078, P99DiffMs: 0, P99Ratio: 1, WithinTarget: ptr.To(false)},
		},
		"p99 missed": {
			s: latencyStats{P50Ms: 4, P99Ms: 11.5}, baseline: "noop",
			want: comparison{Kind: "hostport", Baseline: "noop", P50DiffMs: 0, P50Ratio: 1, P99DiffMs: 1.5, P99Ratio: 1.15, WithinTarget: ptr.To(false)},
		},
		"against none: no target": {
			s: latencyStats{P50Ms: 4.3, P99Ms: 11}, baseline: "none",
			want: comparison{Kind: "hostport", Baseline: "none", P50DiffMs: 0.3, P50Ratio: 1.075, P99DiffMs: 1, P99Ratio: 1.1},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, compare("hostport", tc.s, tc.baseline, noop)); diff != "" {
				t.Errorf("compare (-want,+got):\n%s", diff)
			}
		})
	}
	if got := compare("noop", noop, "none", latencyStats{}); got.P50Ratio != 0 || got.P99Ratio != 0 {
		t.Errorf("ratios against a zero baseline: %v, %v; want 0", got.P50Ratio, got.P99Ratio)
	}
}
