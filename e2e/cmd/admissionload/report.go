package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strings"
	"text/tabwriter"
)

// report is the load test's result, written as text and, with -out *.json, as JSON.
type report struct {
	// Command is the command line as run.
	Command string `json:"command"`
	// Date is when the run started, RFC 3339 in UTC.
	Date string `json:"date"`
	// Revision is `git describe --always --dirty` of the tree the manager was built from.
	Revision string `json:"revision"`
	// CPUs is runtime.NumCPU of the machine; GoVersion the Go that built this program.
	CPUs      int    `json:"cpus"`
	GoVersion string `json:"goVersion"`
	// LoadAverageStart, LoadAverageBefore, LoadAverageAfter and LoadAverageEnd are
	// /proc/loadavg's 1, 5 and 15 minute averages at start (before the cluster), just before
	// and just after the creates, and at the end of the Ready wait.
	LoadAverageStart  string `json:"loadAverageStart"`
	LoadAverageBefore string `json:"loadAverageBefore"`
	LoadAverageAfter  string `json:"loadAverageAfter"`
	LoadAverageEnd    string `json:"loadAverageEnd"`
	// Pods is the number of pods per kind, Nodes the fake nodes, Concurrency the creates in
	// flight at once.
	Pods        int `json:"pods"`
	Nodes       int `json:"nodes"`
	Concurrency int `json:"concurrency"`
	// Plugin and Conf are the network type and network-conf of the webhook pods.
	Plugin string `json:"plugin"`
	Conf   string `json:"conf"`
	// CreateSeconds is the wall-clock time of all 2*Pods creates.
	CreateSeconds float64 `json:"createSeconds"`
	// Admission is the CREATE admission latency with and without the webhook.
	Admission struct {
		// Webhook are the pods the webhook admitted, NoWebhook those it never saw.
		Webhook   latencyStats `json:"webhook"`
		NoWebhook latencyStats `json:"noWebhook"`
		// OverheadP50Ms and OverheadP99Ms are Webhook minus NoWebhook at p50 and p99, ms.
		OverheadP50Ms float64 `json:"overheadP50Ms"`
		OverheadP99Ms float64 `json:"overheadP99Ms"`
	} `json:"admission"`
	// WebhookCreateDecisions is the increase of the manager's
	// npp_admission_decisions_total{operation="CREATE"} over the measured creates: equal to
	// Admission.Webhook.Count plus its errors in a valid run.
	WebhookCreateDecisions int `json:"webhookCreateDecisions"`
	// Errors quotes the first failed creates.
	Errors []string `json:"errors,omitempty"`
	// NetworkReady is the time from CREATE sent to network Ready of the webhook pods.
	NetworkReady readyStats `json:"networkReady"`
	// ReadyWaitSeconds is how long the program waited for network Ready after the creates.
	ReadyWaitSeconds float64 `json:"readyWaitSeconds"`
}

// text renders the report for a terminal.
func (r *report) text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nAdmission load test, %s\n", r.Date)
	fmt.Fprintf(&b, "command:      %s\n", r.Command)
	fmt.Fprintf(&b, "revision:     %s\n", r.Revision)
	fmt.Fprintf(&b, "machine:      %d CPUs, %s; load average at start %s, before creates %s, after creates %s, at end %s\n",
		r.CPUs, r.GoVersion, r.LoadAverageStart, r.LoadAverageBefore, r.LoadAverageAfter, r.LoadAverageEnd)
	fmt.Fprintf(&b, "load:         %d pods per kind (%s, %s) on %d fake nodes, %d creates in flight, all creates in %.1fs\n",
		r.Pods, r.Plugin, r.Conf, r.Nodes, r.Concurrency, r.CreateSeconds)
	fmt.Fprintf(&b, "\nPod CREATE admission latency (ms):\n")
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "kind\tcount\terrors\tunexpected\tp50\tp90\tp99\tmax\tmean\t")
	for _, row := range []struct {
		name string
		s    latencyStats
	}{{"with webhook", r.Admission.Webhook}, {"without webhook", r.Admission.NoWebhook}} {
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t\n", row.name, row.s.Count, row.s.Errors, row.s.Unexpected,
			row.s.P50Ms, row.s.P90Ms, row.s.P99Ms, row.s.MaxMs, row.s.MeanMs)
	}
	_ = w.Flush()
	fmt.Fprintf(&b, "webhook overhead: p50 %+.1f ms, p99 %+.1f ms; manager counted %d CREATE decisions\n",
		r.Admission.OverheadP50Ms, r.Admission.OverheadP99Ms, r.WebhookCreateDecisions)
	for _, e := range r.Errors {
		fmt.Fprintf(&b, "error: %s\n", e)
	}
	n := r.NetworkReady
	fmt.Fprintf(&b, "\nCreation to network Ready (%s): %d of %d Ready (waited %.1fs), p50 %.0f ms, p99 %.0f ms, max %.0f ms\n",
		r.Plugin, n.Ready, n.Pods, r.ReadyWaitSeconds, n.P50Ms, n.P99Ms, n.MaxMs)
	return b.String()
}

// write writes the report to path: JSON when it ends in .json, the text otherwise.
func (r *report) write(path string) error {
	data := []byte(r.text())
	if strings.HasSuffix(path, ".json") {
		var err error
		if data, err = json.MarshalIndent(r, "", "  "); err != nil {
			return fmt.Errorf("encode report: %w", err)
		}
		data = append(data, '\n')
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("write report %s: %w", path, err)
	}
	return nil
}

// round2 rounds x to two decimals (0.01 ms), dropping float noise from differences.
func round2(x float64) float64 { return math.Round(x*100) / 100 }
