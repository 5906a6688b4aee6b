package main

import (
	"fmt"
	"strings"
	"time"
)

// mb returns bytes in MB (10^6), as docs/benchmarks.md gives memory.
func mb(b int64) float64 { return float64(b) / 1e6 }

// mbs returns each of bs in MB, rounded.
func mbs(bs []int64) []int {
	out := make([]int, len(bs))
	for i, b := range bs {
		out[i] = int(mb(b) + 0.5)
	}
	return out
}

// report renders the rows as markdown: the run, a table of RSS per step, and the growth per
// 1,000 pods between the empty cluster and the last step.
func report(o options, names []string, rows []row, cpus int, revision string, took time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## Memory against cluster size\n\n")
	fmt.Fprintf(&b, "- command: `%s`\n- revision: %s; machine: %d CPUs; %d kwok nodes; whole run %s\n",
		o.command, revision, cpus, o.nodes, took.Round(time.Second))
	fmt.Fprintf(&b, "- RSS is the maximum over %s of sampling, %s after every pod of the step runs\n\n", o.sample, o.settle)
	n := 0
	if len(rows) > 0 {
		n = len(rows[0].replicas)
	}
	b.WriteString("| pods | game servers |")
	for i := range n {
		fmt.Fprintf(&b, " %s RSS (heap in use) (MB) |", names[i])
	}
	b.WriteString(" baseline cache RSS (MB) | created to Running |\n|---:|---:|")
	for range n {
		b.WriteString("---:|")
	}
	b.WriteString("---:|---:|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %d | %d |", r.pods, r.games)
		for i, v := range r.replicas {
			heap := "-"
			if i < len(r.heap) && r.heap[i] > 0 {
				heap = fmt.Sprintf("%.0f", mb(r.heap[i]))
			}
			fmt.Fprintf(&b, " %.0f (%s) |", mb(v), heap)
		}
		fmt.Fprintf(&b, " %.0f | %s |\n", mb(r.baseline), r.ready.Round(time.Second))
	}
	fmt.Fprintf(&b, "\nCPU time of each replica, seconds: over the step (creating its pods, settling, sampling) / over the %s of sampling:\n\n| pods |", o.sample)
	for i := range n {
		fmt.Fprintf(&b, " %s |", names[i])
	}
	b.WriteString("\n|---:|")
	for range n {
		b.WriteString("---:|")
	}
	b.WriteString("\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %d |", r.pods)
		for i := range r.cpuStep {
			fmt.Fprintf(&b, " %.1f / %.2f |", r.cpuStep[i].Seconds(), r.cpuSample[i].Seconds())
		}
		b.WriteString("\n")
	}
	if len(rows) >= 2 {
		first, last := rows[0], rows[len(rows)-1]
		k := float64(last.pods-first.pods) / 1000
		var grow []string
		for i := range last.replicas {
			grow = append(grow, fmt.Sprintf("%s %.1f MB", names[i], (mb(last.replicas[i])-mb(first.replicas[i]))/k))
		}
		fmt.Fprintf(&b, "\nGrowth per 1,000 pods from %d to %d pods: %s; baseline cache %.1f MB.\n",
			first.pods, last.pods, strings.Join(grow, ", "), (mb(last.baseline)-mb(first.baseline))/k)
	}
	return b.String()
}
