package main

import (
	"math"
	"slices"
	"time"
)

// latencyStats summarizes the admission latencies of one kind of pod, in milliseconds.
type latencyStats struct {
	// Count is the number of successful creates the figures are over.
	Count int `json:"count"`
	// Errors is the number of failed creates (not in the figures).
	Errors int `json:"errors"`
	// Unexpected counts successful creates whose stored pod contradicts its kind (see
	// loadResult.unexpected); 0 in a valid run.
	Unexpected int `json:"unexpected"`
	// P50Ms, P90Ms and P99Ms are nearest-rank percentiles, MaxMs the largest and MeanMs the
	// arithmetic mean, all in milliseconds; 0 when Count is 0.
	P50Ms  float64 `json:"p50Ms"`
	P90Ms  float64 `json:"p90Ms"`
	P99Ms  float64 `json:"p99Ms"`
	MaxMs  float64 `json:"maxMs"`
	MeanMs float64 `json:"meanMs"`
}

// summarize returns the statistics of ds (which it sorts) with the given error and
// unexpected counts.
func summarize(ds []time.Duration, errors, unexpected int) latencyStats {
	s := latencyStats{Count: len(ds), Errors: errors, Unexpected: unexpected}
	if len(ds) == 0 {
		return s
	}
	slices.Sort(ds)
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	s.P50Ms = ms(percentile(ds, 50))
	s.P90Ms = ms(percentile(ds, 90))
	s.P99Ms = ms(percentile(ds, 99))
	s.MaxMs = ms(ds[len(ds)-1])
	s.MeanMs = ms(sum / time.Duration(len(ds)))
	return s
}

// readyStats summarizes the time from pod creation to network Ready, in milliseconds.
type readyStats struct {
	// Pods is the number of webhook pods created.
	Pods int `json:"pods"`
	// Ready is how many of them were seen network Ready; the figures are over these.
	Ready int `json:"ready"`
	// NotReady is Pods minus Ready: not Ready within -ready-timeout.
	NotReady int `json:"notReady"`
	// P50Ms and P99Ms are nearest-rank percentiles and MaxMs the largest, in milliseconds;
	// 0 when Ready is 0.
	P50Ms float64 `json:"p50Ms"`
	P99Ms float64 `json:"p99Ms"`
	MaxMs float64 `json:"maxMs"`
}

// summarizeReady returns the statistics of readyAt[name] - sent[name] over the pods of sent.
func summarizeReady(sent, readyAt map[string]time.Time) readyStats {
	s := readyStats{Pods: len(sent)}
	var ds []time.Duration
	for name, t0 := range sent {
		if t1, ok := readyAt[name]; ok {
			ds = append(ds, t1.Sub(t0))
		}
	}
	s.Ready, s.NotReady = len(ds), len(sent)-len(ds)
	if len(ds) == 0 {
		return s
	}
	slices.Sort(ds)
	s.P50Ms = ms(percentile(ds, 50))
	s.P99Ms = ms(percentile(ds, 99))
	s.MaxMs = ms(ds[len(ds)-1])
	return s
}

// percentile returns the nearest-rank p-th percentile (0 < p <= 100) of the sorted, non-empty
// sorted: the smallest value with at least p% of the values at or below it.
func percentile(sorted []time.Duration, p float64) time.Duration {
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// ms returns d in milliseconds, rounded to 0.01 ms.
func ms(d time.Duration) float64 {
	return math.Round(float64(d)/float64(time.Millisecond)*100) / 100
}

// Targets of docs/benchmarks.md for this project's webhook against the no-op
// webhook: at most targetP50DiffMs more at p50 and at most targetP99Ratio times at p99.
const (
	targetP50DiffMs = 0.3
	targetP99Ratio  = 1.1
)

// comparison sets one kind's latency against a baseline kind's.
type comparison struct {
	// Kind is the kind compared, Baseline the kind it is compared against.
	Kind     string `json:"kind"`
	Baseline string `json:"baseline"`
	// P50DiffMs and P99DiffMs are Kind minus Baseline at p50 and p99, in ms; P50Ratio and
	// P99Ratio are Kind divided by Baseline (0 when the baseline's figure is 0).
	P50DiffMs float64 `json:"p50DiffMs"`
	P50Ratio  float64 `json:"p50Ratio"`
	P99DiffMs float64 `json:"p99DiffMs"`
	P99Ratio  float64 `json:"p99Ratio"`
	// WithinTarget, set only against the no-op webhook, is P50DiffMs <= targetP50DiffMs and
	// P99Ratio <= targetP99Ratio.
	WithinTarget *bool `json:"withinTarget,omitempty"`
}

// compare returns s (of kind name) against base (of kind baseName), with WithinTarget
// filled in when the baseline is the no-op webhook.
func compare(name string, s latencyStats, baseName string, base latencyStats) comparison {
	ratio := func(a, b float64) float64 {
		if b == 0 {
			return 0
		}
		return math.Round(a/b*1000) / 1000
	}
	c := comparison{
		Kind: name, Baseline: baseName,
		P50DiffMs: math.Round((s.P50Ms-base.P50Ms)*100) / 100, P50Ratio: ratio(s.P50Ms, base.P50Ms),
		P99DiffMs: math.Round((s.P99Ms-base.P99Ms)*100) / 100, P99Ratio: ratio(s.P99Ms, base.P99Ms),
	}
	if baseName == kindNoop.String() {
		ok := c.P50DiffMs <= targetP50DiffMs && c.P99Ratio <= targetP99Ratio
		c.WithinTarget = &ok
	}
	return c
}
