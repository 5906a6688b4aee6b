package main

import (
	"fmt"
	"strings"
	"time"
)

// targetRatio and targetSlack are the time-to-playable target: a game-server phase's network
// Ready p99 at most targetRatio times the baseline's Running p99 plus targetSlack.
const (
	targetRatio = 1.25
	targetSlack = 2 * time.Second
)

// secs formats d in seconds with two decimals.
func secs(d time.Duration) string { return fmt.Sprintf("%.2f", d.Seconds()) }

// report renders the phases as markdown: the run, one row per phase, and the target.
func report(o options, results []phaseResult, cpus int, revision string, took time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## Time to playable\n\n")
	fmt.Fprintf(&b, "- command: `%s`\n- revision: %s; machine: %d CPUs; %d kwok nodes; whole run %s\n", o.command, revision, cpus, o.nodes, took.Round(time.Second))
	fmt.Fprintf(&b, "- each phase: a StatefulSet of %d replicas (Parallel) created at once; seconds from a pod's first watch event (its CREATE)\n\n", o.pods)
	b.WriteString("| phase | Running (of pods) | Running p50 | p99 | max | network Ready (of pods) | Ready p50 | p99 | max | phase took |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	var baseline *phaseResult
	for i := range results {
		r := &results[i]
		if r.name == "baseline" {
			baseline = r
		}
		ready := [4]string{"-", "-", "-", "-"}
		if r.name != "baseline" {
			ready = [4]string{fmt.Sprintf("%d of %d", r.ready.n, r.pods), secs(r.ready.p50), secs(r.ready.p99), secs(r.ready.max)}
		}
		fmt.Fprintf(&b, "| %s | %d of %d | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.name, r.running.n, r.pods,
			secs(r.running.p50), secs(r.running.p99), secs(r.running.max), ready[0], ready[1], ready[2], ready[3], r.took.Round(time.Second))
	}
	b.WriteString("\nThe same from the StatefulSet's create (the scale-up), which includes each pod's admission and the StatefulSet controller's pace:\n\n")
	b.WriteString("| phase | Running p50 | p99 | max | network Ready p50 | p99 | max |\n|---|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range results {
		ready := [3]string{"-", "-", "-"}
		if r.name != "baseline" {
			ready = [3]string{secs(r.readyFromScaleUp.p50), secs(r.readyFromScaleUp.p99), secs(r.readyFromScaleUp.max)}
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", r.name, secs(r.runningFromScaleUp.p50), secs(r.runningFromScaleUp.p99),
			secs(r.runningFromScaleUp.max), ready[0], ready[1], ready[2])
	}
	if baseline != nil {
		limit := time.Duration(float64(baseline.running.p99)*targetRatio) + targetSlack
		fmt.Fprintf(&b, "\nTarget: network Ready p99 at most %.2f × the baseline's Running p99 + %s = %s s.\n", targetRatio, targetSlack, secs(limit))
		for _, r := range results {
			if r.name == "baseline" {
				continue
			}
			verdict := "met"
			if r.ready.n < r.pods || r.ready.p99 > limit {
				verdict = "missed"
			}
			fmt.Fprintf(&b, "- %s: network Ready p99 %s s: %s\n", r.name, secs(r.ready.p99), verdict)
		}
	}
	return b.String()
}
