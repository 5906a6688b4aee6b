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
			if r.name == "baseline" || r.lb != nil {
				continue
			}
			verdict := "met"
			if r.ready.n < r.pods || r.ready.p99 > limit {
				verdict = "missed"
			}
			fmt.Fprintf(&b, "- %s: network Ready p99 %s s: %s\n", r.name, secs(r.ready.p99), verdict)
		}
	}
	reportLB(&b, results)
	reportQueueWaits(&b, results)
	reportAPICalls(&b, results)
	reportAudit(&b, results)
	return b.String()
}

// lbTargetSlack is the load-balancer phases' target: network Ready p99 at most this long
// after the Services' ingress p99 (what the cloud could do).
const lbTargetSlack = time.Second

// reportLB renders the load-balancer phases: CREATE to the Service's ingress, to network
// Ready, Ready after ingress per pod, OKG's rule on the same ingress times, and the target.
func reportLB(b *strings.Builder, results []phaseResult) {
	var lbs []phaseResult
	for _, r := range results {
		if r.lb != nil {
			lbs = append(lbs, r)
		}
	}
	if len(lbs) == 0 {
		return
	}
	fmt.Fprintf(b, "\nLoad-balancer and EIP phases, seconds from each pod's CREATE: to its Service's ingress (the cloud's part; in the EIP phases, the EIP controller's answer on the pod), to network Ready (with the manager's), Ready minus ingress per pod, and OKG's rule on the same ingress times (a re-drive every %s, none after %s: the first re-drive at or after the ingress, or never):\n\n", okgInterval, okgWindow)
	b.WriteString("| phase | cloud call | ingress (of pods) | ingress p50 | p99 | max | network Ready p50 | p99 | max | Ready − ingress p50 | p99 | max | OKG's rule Ready (of pods) | p50 | p99 |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range lbs {
		fmt.Fprintf(b, "| %s | %s | %d of %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d of %d | %s | %s |\n", r.name, r.lb.latency,
			r.lb.ingress.n, r.pods, secs(r.lb.ingress.p50), secs(r.lb.ingress.p99), secs(r.lb.ingress.max),
			secs(r.ready.p50), secs(r.ready.p99), secs(r.ready.max),
			secs(r.lb.readyAfterIngress.p50), secs(r.lb.readyAfterIngress.p99), secs(r.lb.readyAfterIngress.max),
			r.lb.okg.n, r.pods, secs(r.lb.okg.p50), secs(r.lb.okg.p99))
	}
	fmt.Fprintf(b, "\nTarget: network Ready p99 at most the ingress p99 + %s.\n", lbTargetSlack)
	for _, r := range lbs {
		verdict := "met"
		if r.ready.n < r.pods || r.ready.p99 > r.lb.ingress.p99+lbTargetSlack {
			verdict = "missed"
		}
		fmt.Fprintf(b, "- %s: network Ready p99 %s s, ingress p99 %s s: %s\n", r.name, secs(r.ready.p99), secs(r.lb.ingress.p99), verdict)
	}
}
