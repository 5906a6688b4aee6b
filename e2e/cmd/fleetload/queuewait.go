package main

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/okg-extensions/network-plugin-policy/e2e/cluster"
)

// queueWaitMetric is the network controller's ready-queue wait histogram, by lane
// (pkg/controller/network: "urgent", "other"), and queueWaitBuckets its upper bounds in
// seconds, as the controller declares them.
const queueWaitMetric = "npp_network_queue_wait_seconds"

var queueWaitBuckets = []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, math.Inf(1)}

// queueWaits are the cumulative bucket counts of each lane, summed over the replicas.
type queueWaits map[string][]float64

// scrapeQueueWaits reads every running replica's histogram.
func scrapeQueueWaits(ctx context.Context, mgr *cluster.Manager) (queueWaits, error) {
	out := queueWaits{}
	for _, lane := range []string{"urgent", "other"} {
		counts := make([]float64, len(queueWaitBuckets))
		for i, le := range queueWaitBuckets {
			bound := strconv.FormatFloat(le, 'g', -1, 64)
			if math.IsInf(le, 1) {
				bound = "+Inf"
			}
			v, err := mgr.Metric(ctx, queueWaitMetric+"_bucket", `lane="`+lane+`"`, `le="`+bound+`"`)
			if err != nil {
				return nil, err
			}
			counts[i] = v
		}
		out[lane] = counts
	}
	return out, nil
}

// laneWait is one lane's waits over a phase: how many, and the bucket bounds that hold the
// median, the 99th percentile and the longest wait ("≤ 0.05": the wait was at most 50 ms).
type laneWait struct {
	n             int
	p50, p99, max string
}

// since returns each lane's waits between before and w (after).
func (w queueWaits) since(before queueWaits) map[string]laneWait {
	out := map[string]laneWait{}
	for lane, after := range w {
		delta := make([]float64, len(after))
		for i := range after {
			delta[i] = after[i] - before[lane][i]
		}
		total := delta[len(delta)-1]
		bound := func(q float64) string {
			for i, c := range delta {
				if c >= math.Ceil(q*total) && total > 0 {
					if math.IsInf(queueWaitBuckets[i], 1) {
						return fmt.Sprintf("> %g", queueWaitBuckets[i-1])
					}
					return fmt.Sprintf("≤ %g", queueWaitBuckets[i])
				}
			}
			return "-"
		}
		out[lane] = laneWait{n: int(total), p50: bound(0.5), p99: bound(0.99), max: bound(1)}
	}
	return out
}

// reportQueueWaits renders each phase's ready-queue waits by lane.
func reportQueueWaits(b *strings.Builder, results []phaseResult) {
	b.WriteString("\nThe network controller's ready queue, per phase (npp_network_queue_wait_seconds over both replicas; seconds, the bucket bound that holds the quantile):\n\n")
	b.WriteString("| phase | lane | waits | p50 | p99 | max |\n|---|---|---:|---:|---:|---:|\n")
	for _, r := range results {
		for _, lane := range []string{"urgent", "other"} {
			w, ok := r.waits[lane]
			if !ok {
				continue
			}
			fmt.Fprintf(b, "| %s | %s | %d | %s | %s | %s |\n", r.name, lane, w.n, w.p50, w.p99, w.max)
		}
	}
}
