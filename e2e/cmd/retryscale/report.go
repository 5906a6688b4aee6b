package main

import (
	"fmt"
	"strings"
	"time"
)

// flatWindow is the tail of the run over which RSS must be flat (the target: the last 20
// minutes of 30); for runs no longer than it, the last half.
const flatWindow = 20 * time.Minute

// Targets of docs/benchmarks.md.
const (
	targetRSSBytes = 200e6
	// flatTolerance is the most RSS may rise over the flat window, as a fraction of its value
	// at the window's start, to count as flat.
	flatTolerance = 0.10
)

// report is the run's result.
type report struct {
	// Command, Date (RFC 3339, UTC, of the start), Revision (git describe), CPUs, GoVersion
	// describe the run.
	Command, Date, Revision, GoVersion string
	CPUs                               int
	// PodsBig, PodsSmall, ReadyPods, Nodes, InFlight, Replicas, Window, Duration and Sample are the set-up.
	PodsBig, PodsSmall, ReadyPods, Nodes, InFlight, Replicas int
	Window, Duration, Sample, ReportEvery                    time.Duration
	// ManagerArgs are the Deployment's container args the replicas ran with (before the
	// local listen addresses and paths were substituted).
	ManagerArgs string
	// Created and CreateErrors count the creates; CreateSeconds is how long they took.
	Created, CreateErrors int
	CreateSeconds         float64
	// Samples are the samplings, in order.
	Samples []sample
	// Final is the tracker's summary at the end; SmallFirst and BigFirst the first-run
	// figures of the namespaces.
	Final                snapshot
	SmallFirst, BigFirst firstRetry
	// Events is the Event count at the end.
	Events eventCount
	// LoadAverageStart and LoadAverageEnd are /proc/loadavg; TotalSeconds the whole run.
	LoadAverageStart, LoadAverageEnd string
	TotalSeconds                     float64

	// Failover is -kill-leader-after's result, nil without it.
	Failover *failoverResult

	// tracker holds every on-schedule retry, for the lateness per period; start is when the
	// first create was sent (sample times count from it).
	tracker *tracker
	start   time.Time
}

// markdown returns the report as markdown: the set-up, a time table, and the figures against
// the targets of docs/benchmarks.md.
func (r *report) markdown() string {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	w("# retryscale report\n\n")
	w("- command: `%s`\n- date: %s, revision %s, %d CPUs, %s\n", r.Command, r.Date, r.Revision, r.CPUs, r.GoVersion)
	w("- pods: %d (big) + %d (small) NodePort pods, quota services.nodeports 0, and %d HostPort game servers whose network works; %d kwok nodes; creates %d in flight: %d created, %d failed, in %.1f s\n",
		r.PodsBig, r.PodsSmall, r.ReadyPods, r.Nodes, r.InFlight, r.Created, r.CreateErrors, r.CreateSeconds)
	w("- policy: root, Kubernetes-NodePort Asynchronous, retry %s..%s, window %s; manager %d replicas, args `%s`\n",
		retryInterval, retryMaxInterval, r.Window, r.Replicas, r.ManagerArgs)
	w("- sampled every %s for %s after the creates; load average %s at the start, %s at the end; whole run %.0f s\n\n",
		r.Sample, r.Duration, r.LoadAverageStart, r.LoadAverageEnd, r.TotalSeconds)

	if len(r.Samples) == 0 {
		w("No samples.\n")
		return b.String()
	}
	names := make([]string, 0, len(r.Samples[0].replicas))
	for _, rs := range r.Samples[0].replicas {
		names = append(names, rs.name)
	}
	w("Time from the first create; RSS in MB (10^6 bytes); CPU in cores (CPU seconds per second since the previous row); `*` the leader; lateness (s) of the on-schedule retries due since the previous row, and the pods among them more than one interval late.\n\n")
	w("| t |")
	for _, n := range names {
		w(" %s RSS | %s CPU |", n, n)
	}
	w(" attempts min/p50/max | retries | late p50/p99/max | pods > 1 interval late | manager writes/s | retries from cache/s | queue | Events | load |\n|---:|")
	for range names {
		w("---:|---:|")
	}
	w("---|---:|---|---:|---:|---:|---:|---:|---|\n")
	prev := -1
	for i, s := range r.Samples {
		if i != 0 && i != len(r.Samples)-1 && int(s.at/r.ReportEvery) == int(r.Samples[max(prev, 0)].at/r.ReportEvery) {
			continue
		}
		w("| %s |", s.at.Round(time.Second))
		for j, rs := range s.replicas {
			star := ""
			if rs.leader {
				star = "*"
			}
			cores := "-"
			if prev >= 0 && j < len(r.Samples[prev].replicas) {
				p := r.Samples[prev]
				cores = fmt.Sprintf("%.2f", (rs.cpu-p.replicas[j].cpu).Seconds()/(s.at-p.at).Seconds())
			}
			w(" %.0f%s | %s |", mb(rs.rss), star, cores)
		}
		var from time.Time
		if prev >= 0 {
			from = r.start.Add(r.Samples[prev].at)
		}
		ls := r.tracker.lateBetween(from, r.start.Add(s.at), retryInterval)
		writes, cached := "-", "-"
		if prev >= 0 {
			p := r.Samples[prev]
			dt := (s.at - p.at).Seconds()
			writes, cached = fmt.Sprintf("%.1f", (s.writes-p.writes)/dt), fmt.Sprintf("%.1f", (s.fromCache-p.fromCache)/dt)
		}
		w(" %d/%d/%d | %d | %.0f/%.0f/%.0f | %d | %s | %s | %.0f | %d | %s |\n", s.snap.attemptsMin, s.snap.attemptsP50, s.snap.attemptsMax,
			ls.n, ls.p50.Seconds(), ls.p99.Seconds(), ls.max.Seconds(), ls.podsOverInterval, writes, cached, s.queueDepth, s.events, s.load)
		prev = i
	}
	w("\n")

	// Memory and CPU per replica.
	first, last := r.Samples[0], r.Samples[len(r.Samples)-1]
	tenMin := r.Samples[len(r.Samples)-1]
	for _, s := range r.Samples {
		if s.at >= 10*time.Minute {
			tenMin = s
			break
		}
	}
	flat := flatWindow
	if span := last.at - first.at; span <= flatWindow {
		flat = span / 2
	}
	w("| replica | RSS start | RSS at %s | RSS end | RSS min-max over the last %s | slope there (MB/min) | flat | CPU cores, whole run | CPU cores, last %s |\n|---|---:|---:|---:|---|---:|---|---:|---:|\n",
		tenMin.at.Round(time.Second), flat.Round(time.Second), flat.Round(time.Second))
	rssOK, flatOK := true, true
	for j, n := range names {
		var xs, ys []float64
		lo, hi := int64(-1), int64(0)
		var tailStart *sample
		for i := range r.Samples {
			s := &r.Samples[i]
			if s.at < last.at-flat || j >= len(s.replicas) || !s.replicas[j].ok {
				continue
			}
			if tailStart == nil {
				tailStart = s
			}
			v := s.replicas[j].rss
			xs, ys = append(xs, s.at.Minutes()), append(ys, mb(v))
			if lo < 0 || v < lo {
				lo = v
			}
			hi = max(hi, v)
		}
		slope := slope(xs, ys)
		isFlat := tailStart != nil && float64(last.replicas[j].rss) <= float64(tailStart.replicas[j].rss)*(1+flatTolerance)
		maxRSS := int64(0)
		for _, s := range r.Samples {
			if j < len(s.replicas) {
				maxRSS = max(maxRSS, s.replicas[j].rss)
			}
		}
		rssOK = rssOK && float64(maxRSS) < targetRSSBytes
		flatOK = flatOK && isFlat
		cpuAll := (last.replicas[j].cpu - first.replicas[j].cpu).Seconds() / (last.at - first.at).Seconds()
		cpuTail := 0.0
		if tailStart != nil && last.at > tailStart.at {
			cpuTail = (last.replicas[j].cpu - tailStart.replicas[j].cpu).Seconds() / (last.at - tailStart.at).Seconds()
		}
		w("| %s | %.0f | %.0f | %.0f | %.0f-%.0f | %+.2f | %s | %.2f | %.2f |\n", n, mb(first.replicas[j].rss), mb(tenMin.replicas[j].rss),
			mb(last.replicas[j].rss), mb(lo), mb(hi), slope, yesNo(isFlat), cpuAll, cpuTail)
	}
	w("\n")

	// The manager's API writes and the lateness of every retry, as the manager counts them.
	var tailStart sample
	for _, s := range r.Samples {
		if s.at >= last.at-flat {
			tailStart = s
			break
		}
	}
	span := (last.at - tailStart.at).Seconds()
	w("| manager, as it counts itself | whole run | last %s |\n|---|---:|---:|\n", flat.Round(time.Second))
	w("| API writes (POST, PUT, PATCH, DELETE) per second | %.1f | %.1f |\n", (last.writes-first.writes)/(last.at-first.at).Seconds(), (last.writes-tailStart.writes)/span)
	w("| retries counted from the caches, without a write, per second | %.1f | %.1f |\n", (last.fromCache-first.fromCache)/(last.at-first.at).Seconds(), (last.fromCache-tailStart.fromCache)/span)
	w("| retry stamps (pod writes) per second | %.1f | %.1f |\n", (last.retries-first.retries)/(last.at-first.at).Seconds(), (last.retries-tailStart.retries)/span)
	w("| retries on schedule observed (npp_network_retry_lateness_seconds) | %.0f | %.0f |\n", last.lateTotal, last.lateTotal-tailStart.lateTotal)
	w("| of them more than 1 s late | %.0f | %.0f |\n\n", last.lateOver1s, last.lateOver1s-tailStart.lateOver1s)

	f := r.Final
	w("Retries (from the pods' %s annotations, every version seen through a watch): %d on-schedule retries measured, %d early (stamped at once when the pod got its node or IP), %d state changes that skipped an attempt (not measured), %d invalid states; attempts min/p50/max %d/%d/%d; scheduled %d, with IP %d, with retry state %d of %d pods.\n\n",
		"policy.game.kruise.io/network-retry", f.retries, f.early, f.skipped, f.invalid, f.attemptsMin, f.attemptsP50, f.attemptsMax, f.scheduled, f.withIP, f.withState, f.pods)
	tail := r.tracker.lateBetween(r.start.Add(last.at-flat), time.Time{}, retryInterval)
	w("| lateness against the schedule (s; RFC 3339 stamps, ±1 s) | whole run | last %s |\n|---|---:|---:|\n", flat.Round(time.Second))
	w("| on-schedule retries | %d | %d |\n", f.retries, tail.n)
	w("| p50 | %.0f | %.0f |\n| p99 | %.0f | %.0f |\n| max | %.0f | %.0f |\n", f.lateP50.Seconds(), tail.p50.Seconds(),
		f.lateP99.Seconds(), tail.p99.Seconds(), f.lateMax.Seconds(), tail.max.Seconds())
	w("| pods with a retry more than one interval (%s) late | %d | %d |\n", retryInterval, f.podsLateOverInterval, tail.podsOverInterval)
	w("| pods with a retry later than the whole backoff it waited for | %d | %d |\n\n", f.podsLateOverBackoff, tail.podsOverBackoff)
	if lastLate := r.tracker.lastOverInterval(retryInterval); !lastLate.IsZero() {
		w("The last retry more than one interval late was due %s after the first create.\n\n", lastLate.Sub(r.start).Round(time.Second))
	}
	w("Max lateness, big namespace / small namespace: %.0f / %.0f s.\n\n", r.BigFirst.maxLate.Seconds(), r.SmallFirst.maxLate.Seconds())

	sf := r.SmallFirst
	w("| first plugin runs (max over the namespace's pods, s) | small (%d pods) | big (%d pods) |\n|---|---:|---:|\n", sf.pods, r.BigFirst.pods)
	w("| creation to first plugin run | %.0f | %.0f |\n", sf.maxCreatedToRun.Seconds(), r.BigFirst.maxCreatedToRun.Seconds())
	w("| scheduling to first plugin run | %.0f | %.0f |\n", sf.maxScheduledToRun.Seconds(), r.BigFirst.maxScheduledToRun.Seconds())
	w("| lateness of the first on-schedule retry | %.0f | %.0f |\n", sf.maxFirstLate.Seconds(), r.BigFirst.maxFirstLate.Seconds())
	w("| pods without a plugin run / with a measured first retry | %d / %d | %d / %d |\n\n", sf.noRun, sf.measured, r.BigFirst.noRun, r.BigFirst.measured)

	e := r.Events
	w("| Events (end of run) | value |\n|---|---:|\n")
	w("| Event objects, core/v1 / events.k8s.io (one storage) | %d / %d |\n", e.coreV1, e.eventsV1)
	w("| about pods / distinct pods | %d / %d |\n", e.aboutPods, e.podsWithEvents)
	w("| occurrences they stand for (series counts) | %d |\n", e.occurrences)
	w("| most Event objects per pod, distinct error and reportingInstance | %d |\n", e.maxPerKey)
	w("| (pod, error, reportingInstance) keys with more than one Event object | %d |\n", e.keysOverOne)
	w("| most Event objects per pod and distinct error, all replicas | %d |\n", e.maxPerError)
	w("| distinct reportingInstances (one per reporting controller and hostname; replicas on one machine share it) | %d |\n\n", e.instances)
	w("Reasons: %s.\n\n", strings.Join(e.reasonList(), ", "))

	w("Targets (docs/benchmarks.md):\n\n")
	w("- RSS under 200 MB: %s; flat over the last %s (end at most %.0f%% above that window's start): %s\n", metMissed(rssOK), flat.Round(time.Second), flatTolerance*100, metMissed(flatOK))
	w("- at most one Event object per pod per distinct error: %s (at most %d per pod and error, over all %d replicas)\n",
		metMissed(e.maxPerError <= 1), e.maxPerError, r.Replicas)
	w("- no pod more than one interval (%s) late: %s (%d pods over the whole run, %d over the last %s)\n", retryInterval,
		metMissed(f.podsLateOverInterval == 0), f.podsLateOverInterval, tail.podsOverInterval, flat.Round(time.Second))
	w("- small namespace's first on-schedule retry at most one interval late: %s (%.0f s)\n", metMissed(sf.measured == sf.pods && sf.maxFirstLate <= retryInterval), sf.maxFirstLate.Seconds())
	if r.Failover != nil {
		b.WriteString(r.Failover.markdown())
	}
	return b.String()
}

// slope returns the least-squares slope of ys over xs, 0 with fewer than two points.
func slope(xs, ys []float64) float64 {
	n := float64(len(xs))
	if n < 2 {
		return 0
	}
	var sx, sy, sxx, sxy float64
	for i := range xs {
		sx, sy, sxx, sxy = sx+xs[i], sy+ys[i], sxx+xs[i]*xs[i], sxy+xs[i]*ys[i]
	}
	d := n*sxx - sx*sx
	if d == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / d
}

// yesNo returns "yes" or "no".
func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// metMissed returns "met" or "**missed**".
func metMissed(b bool) string {
	if b {
		return "met"
	}
	return "**missed**"
}
