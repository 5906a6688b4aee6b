package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"

	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/okg-extensions/network-plugin-policy/e2e/cluster"
	podwebhook "github.com/okg-extensions/network-plugin-policy/pkg/webhook/pod"
)

// webhookLatency is controller-runtime's histogram of the time a webhook server spends on one
// admission request (read the body, decode the AdmissionReview, the handler, encode and write
// the response), labelled by the webhook's URL path.
const webhookLatency = "controller_runtime_webhook_latency_seconds"

// serverTotals are the sum (seconds) and count of webhookLatency at one moment.
type serverTotals struct {
	noopSum, managerSum     float64
	noopCount, managerCount float64
}

// readServerTotals reads webhookLatency of the no-op webhook (see noopMetrics) and of the
// manager's pod webhook (summed over the running replicas). Errors: a replica or the no-op
// webhook's metrics could not be read.
func readServerTotals(ctx context.Context, mgr *cluster.Manager, noop *noopWebhook) (serverTotals, error) {
	var t serverTotals
	var err error
	if t.noopSum, t.noopCount, err = noopTotals(ctx, noop); err != nil {
		return t, err
	}
	label := fmt.Sprintf(`webhook=%q`, podwebhook.Path)
	if t.managerSum, err = mgr.Metric(ctx, webhookLatency+"_sum", label); err != nil {
		return t, err
	}
	if t.managerCount, err = mgr.Metric(ctx, webhookLatency+"_count", label); err != nil {
		return t, err
	}
	return t, nil
}

// serverTime is the time the webhook servers themselves spent per request during a phase's
// creates, from webhookLatency: what of the admission latency is spent inside each webhook
// process, as opposed to the apiserver, the network and the proxies.
type serverTime struct {
	// NoopRequests and ManagerRequests are the requests each served. The manager's include
	// the UPDATEs of the network controller's retries when they ran during the creates.
	NoopRequests    int `json:"noopRequests"`
	ManagerRequests int `json:"managerRequests"`
	// NoopMeanMs and ManagerMeanMs are the mean server time per request, in ms (to 1 µs).
	NoopMeanMs    float64 `json:"noopMeanMs"`
	ManagerMeanMs float64 `json:"managerMeanMs"`
}

// serverTimeBetween returns the server time per request between two readings.
func serverTimeBetween(before, after serverTotals) serverTime {
	mean := func(sum, count float64) float64 {
		if count <= 0 {
			return 0
		}
		return math.Round(sum/count*1e6) / 1000
	}
	return serverTime{
		NoopRequests: int(after.noopCount - before.noopCount), ManagerRequests: int(after.managerCount - before.managerCount),
		NoopMeanMs:    mean(after.noopSum-before.noopSum, after.noopCount-before.noopCount),
		ManagerMeanMs: mean(after.managerSum-before.managerSum, after.managerCount-before.managerCount),
	}
}

// noopTotals returns the sum (seconds) and count of webhookLatency of the no-op webhook:
// from this process's registry when the server runs here, else scraped from its process's
// /metrics. Errors: the gather, the scrape or a sample that does not parse.
func noopTotals(ctx context.Context, noop *noopWebhook) (sum, count float64, err error) {
	if noop.metricsURL == "" {
		families, err := ctrlmetrics.Registry.Gather()
		if err != nil {
			return 0, 0, fmt.Errorf("gather this process's metrics: %w", err)
		}
		for _, f := range families {
			if f.GetName() != webhookLatency {
				continue
			}
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "webhook" && l.GetValue() == noopPath {
						sum += m.GetHistogram().GetSampleSum()
						count += float64(m.GetHistogram().GetSampleCount())
					}
				}
			}
		}
		return sum, count, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, noop.metricsURL, nil)
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Accept", "text/plain")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, fmt.Errorf("scrape the no-op webhook's metrics: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("scrape the no-op webhook's metrics: %s %v", resp.Status, err)
	}
	label := fmt.Sprintf(`webhook=%q`, noopPath)
	for _, line := range strings.Split(string(body), "\n") {
		var into *float64
		switch {
		case strings.HasPrefix(line, webhookLatency+"_sum{"):
			into = &sum
		case strings.HasPrefix(line, webhookLatency+"_count{"):
			into = &count
		default:
			continue
		}
		if !strings.Contains(line, label) {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return 0, 0, fmt.Errorf("parse metric line %q: %w", line, err)
		}
		*into += v
	}
	return sum, count, nil
}
