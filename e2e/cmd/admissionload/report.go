package main

import (
	"encoding/json"
	"fmt"
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
	// LoadAverageStart and LoadAverageEnd are /proc/loadavg's 1, 5 and 15 minute averages
	// at start (before the cluster) and at the end.
	LoadAverageStart string `json:"loadAverageStart"`
	LoadAverageEnd   string `json:"loadAverageEnd"`
	// Pods is the number of pods per kind and phase, Nodes the fake nodes, Warmup the
	// dry-run creates per kind before each phase.
	Pods   int `json:"pods"`
	Nodes  int `json:"nodes"`
	Warmup int `json:"warmup"`
	// Replicas is the number of manager processes.
	Replicas int `json:"replicas"`
	// NoopProcess is -noop-process: the no-op webhook ran in a process of its own.
	NoopProcess bool `json:"noopProcess"`
	// NetworkReady is -network-ready: whether the network controller retried the measured
	// pods while the phases ran (policy interval 5s) and nodeport time to Ready was measured.
	NetworkReady bool `json:"networkReady"`
	// HostPortRange is the provider config's [kubernetes.hostPort] range, "min-max".
	HostPortRange string `json:"hostPortRange"`
	// Policies is the number of NetworkPluginPolicies loaded, PolicyNamespaces how many
	// namespaces they are in, PoliciesWaitSeconds how long it took, after the creates, until
	// both replicas' stores held them all and all were Ready.
	Policies            int     `json:"policies"`
	PolicyNamespaces    int     `json:"policyNamespaces"`
	PoliciesWaitSeconds float64 `json:"policiesWaitSeconds"`
	// SetupSeconds is the time from start to the first phase (cluster, manager, no-op
	// webhook, policies); TotalSeconds the whole run.
	SetupSeconds float64 `json:"setupSeconds"`
	TotalSeconds float64 `json:"totalSeconds"`
	// Phases are the measured phases in the order run.
	Phases []phaseReport `json:"phases"`
}

// phaseReport is one phase: Pods pods of each kind with Concurrency creates in flight.
type phaseReport struct {
	// Name is "sequential" (1 in flight) or "<n> in flight"; Concurrency the creates in flight.
	Name        string `json:"name"`
	Concurrency int    `json:"concurrency"`
	// LoadAverageBefore and LoadAverageAfter are /proc/loadavg just before and just after the
	// creates.
	LoadAverageBefore string `json:"loadAverageBefore"`
	LoadAverageAfter  string `json:"loadAverageAfter"`
	// CreateSeconds is the wall-clock time of all creates of the phase.
	CreateSeconds float64 `json:"createSeconds"`
	// Kinds are the CREATE admission latencies by kind, in the order none, noop, hostport,
	// nodeport.
	Kinds []kindStats `json:"kinds"`
	// Comparisons are hostport and nodeport against noop, and noop against none.
	Comparisons []comparison `json:"comparisons"`
	// ManagerCreateDecisions is the increase of the manager's
	// npp_admission_decisions_total{operation="CREATE"} (summed over replicas) over the
	// phase's creates; ExpectedDecisions the hostport and nodeport creates sent (successful
	// or not). Equal in a valid run.
	ManagerCreateDecisions int `json:"managerCreateDecisions"`
	ExpectedDecisions      int `json:"expectedDecisions"`
	// Errors quotes the first failed creates.
	Errors []string `json:"errors,omitempty"`
	// ServerTime is the time the no-op webhook and the manager's replicas spent per request
	// in their webhook servers during the creates.
	ServerTime serverTime `json:"serverTime"`
	// NetworkReady is the time from CREATE sent to network Ready of the nodeport pods;
	// ReadyWaitSeconds how long the program waited for it after the creates. Both are zero
	// with -network-ready=false.
	NetworkReady     readyStats `json:"networkReady"`
	ReadyWaitSeconds float64    `json:"readyWaitSeconds"`
}

// kindStats are one kind's latency statistics.
type kindStats struct {
	// Kind is none, noop, hostport or nodeport.
	Kind string `json:"kind"`
	// PodBytes is the size of the JSON encoding of the kind's pod 0 as the apiserver
	// returned it: what admission added shows against none.
	PodBytes int `json:"podBytes"`
	latencyStats
}

// stats returns the statistics of kind k.
func (p *phaseReport) stats(k kind) latencyStats {
	for _, s := range p.Kinds {
		if s.Kind == k.String() {
			return s.latencyStats
		}
	}
	return latencyStats{}
}

// fill sets the kinds' statistics, the comparisons and the expected decisions from res.
func (p *phaseReport) fill(res *loadResult) {
	for _, k := range kinds {
		p.Kinds = append(p.Kinds, kindStats{Kind: k.String(), PodBytes: res.podBytes[k],
			latencyStats: summarize(res.latencies[k], res.errors[k], res.unexpected[k])})
		if k.viaManager() {
			p.ExpectedDecisions += len(res.latencies[k]) + res.errors[k]
		}
	}
	noop, none := kindNoop.String(), kindNone.String()
	p.Comparisons = []comparison{
		compare(kindHostPort.String(), p.stats(kindHostPort), noop, p.stats(kindNoop)),
		compare(kindNodePort.String(), p.stats(kindNodePort), noop, p.stats(kindNoop)),
		compare(noop, p.stats(kindNoop), none, p.stats(kindNone)),
	}
	p.CreateSeconds = res.elapsed.Seconds()
	p.Errors = res.firstErrors
}

// phaseName returns "sequential" for 1 in flight and "<n> in flight" otherwise.
func phaseName(concurrency int) string {
	if concurrency == 1 {
		return "sequential"
	}
	return fmt.Sprintf("%d in flight", concurrency)
}

// checkFailures returns what makes the run invalid, one line per phase and check: failed
// creates, returned pods that contradict their kind (unexpected), and a manager decision
// count that differs from the hostport and nodeport creates sent. Empty for a valid run. A
// missed latency target is a finding, not a failure.
func (r *report) checkFailures() []string {
	var failed []string
	for i := range r.Phases {
		p := &r.Phases[i]
		for _, s := range p.Kinds {
			if s.Errors > 0 {
				failed = append(failed, fmt.Sprintf("phase %q: %d %s creates failed", p.Name, s.Errors, s.Kind))
			}
			if s.Unexpected > 0 {
				failed = append(failed, fmt.Sprintf("phase %q: %d of %d %s pods came back unexpected", p.Name, s.Unexpected, s.Count, s.Kind))
			}
		}
		if p.ManagerCreateDecisions != p.ExpectedDecisions {
			failed = append(failed, fmt.Sprintf("phase %q: the manager counted %d CREATE decisions for %d hostport and nodeport creates",
				p.Name, p.ManagerCreateDecisions, p.ExpectedDecisions))
		}
	}
	return failed
}

// text renders the report for a terminal.
func (r *report) text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nAdmission load test, %s\n", r.Date)
	fmt.Fprintf(&b, "command:   %s\n", r.Command)
	fmt.Fprintf(&b, "revision:  %s\n", r.Revision)
	fmt.Fprintf(&b, "machine:   %d CPUs, %s; load average at start %s, at end %s\n", r.CPUs, r.GoVersion, r.LoadAverageStart, r.LoadAverageEnd)
	fmt.Fprintf(&b, "cluster:   %d fake nodes, manager with %d replicas, HostPort range %s, %d policies in %d namespaces (stores and status ready %.1fs after the creates), network retries during the phases: %v\n",
		r.Nodes, r.Replicas, r.HostPortRange, r.Policies, r.PolicyNamespaces, r.PoliciesWaitSeconds, r.NetworkReady)
	where := "in this process"
	if r.NoopProcess {
		where = "in a process of its own"
	}
	fmt.Fprintf(&b, "no-op:     webhook server %s, behind its own loopback proxy\n", where)
	fmt.Fprintf(&b, "load:      %d pods per kind and phase, kinds round robin in every worker, %d dry-run warm-ups per kind; set-up %.0fs, whole run %.0fs\n",
		r.Pods, r.Warmup, r.SetupSeconds, r.TotalSeconds)
	for i := range r.Phases {
		p := &r.Phases[i]
		fmt.Fprintf(&b, "\nPhase %q: pod CREATE admission latency (ms), all creates in %.1fs, load average %s before, %s after\n",
			p.Name, p.CreateSeconds, p.LoadAverageBefore, p.LoadAverageAfter)
		w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(w, "kind\tcount\terrors\tunexpected\tp50\tp90\tp99\tmax\tmean\tpod bytes\t")
		for _, s := range p.Kinds {
			fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%d\t\n", s.Kind, s.Count, s.Errors, s.Unexpected,
				s.P50Ms, s.P90Ms, s.P99Ms, s.MaxMs, s.MeanMs, s.PodBytes)
		}
		_ = w.Flush()
		w = tabwriter.NewWriter(&b, 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(w, "kind\tagainst\tp50 diff\tp50 ratio\tp99 diff\tp99 ratio\ttarget (+0.3 ms p50, 1.1x p99)\t")
		for _, c := range p.Comparisons {
			target := "-"
			if c.WithinTarget != nil {
				target = map[bool]string{true: "met", false: "missed"}[*c.WithinTarget]
			}
			fmt.Fprintf(w, "%s\t%s\t%+.2f\t%.3f\t%+.2f\t%.3f\t%s\t\n", c.Kind, c.Baseline, c.P50DiffMs, c.P50Ratio, c.P99DiffMs, c.P99Ratio, target)
		}
		_ = w.Flush()
		check := "as expected"
		if p.ManagerCreateDecisions != p.ExpectedDecisions {
			check = "MISMATCH"
		}
		fmt.Fprintf(&b, "manager counted %d CREATE decisions for %d hostport and nodeport creates (%s)\n",
			p.ManagerCreateDecisions, p.ExpectedDecisions, check)
		for _, e := range p.Errors {
			fmt.Fprintf(&b, "error: %s\n", e)
		}
		st := p.ServerTime
		fmt.Fprintf(&b, "time inside the webhook servers per request: no-op %.3f ms (%d requests), manager %.3f ms (%d requests)\n",
			st.NoopMeanMs, st.NoopRequests, st.ManagerMeanMs, st.ManagerRequests)
		if !r.NetworkReady {
			fmt.Fprintf(&b, "nodeport creation to network Ready: not measured (-network-ready=false: no retries while the phases ran)\n")
			continue
		}
		n := p.NetworkReady
		fmt.Fprintf(&b, "nodeport creation to network Ready: %d of %d Ready (waited %.1fs), p50 %.0f ms, p99 %.0f ms, max %.0f ms\n",
			n.Ready, n.Pods, p.ReadyWaitSeconds, n.P50Ms, n.P99Ms, n.MaxMs)
	}
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
