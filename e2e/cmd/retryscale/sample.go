package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/okg-extensions/network-plugin-policy/e2e/cluster"
)

// eventsEvery is how many samples apart the Events are counted (a list of every Event).
const eventsEvery = 4

// replicaSample is one manager replica at one sample.
type replicaSample struct {
	// name is the replica's name; leader whether it held the Lease (its network controller
	// stamps the retries).
	name   string
	leader bool
	// ok is false when the replica's /proc could not be read (cpu and rss are then zero).
	ok  bool
	cpu time.Duration
	rss int64
}

// sample is one sampling of the run.
type sample struct {
	// at is the time since the first pod create was sent.
	at time.Duration
	// replicas are the manager replicas, in index order.
	replicas []replicaSample
	// snap is the tracker's summary.
	snap snapshot
	// queueDepth is the leader's workqueue_depth{name="network-retry"}; retries the
	// manager's npp_network_retries_total (stamps), summed over the replicas.
	queueDepth, retries float64
	// writes is the manager's API writes so far (client-go's rest_client_requests_total for
	// POST, PUT, PATCH and DELETE), fromCache its npp_network_retries_from_cache_total, both
	// summed over the replicas; lateTotal and lateOver1s the observations of
	// npp_network_retry_lateness_seconds, all and those over 1 s (summed over the replicas).
	writes, fromCache, lateTotal, lateOver1s float64
	// events counts the events.k8s.io Event objects of both namespaces (counted every
	// eventsEvery samples, carried forward in between).
	events int
	// load is /proc/loadavg.
	load string
}

// sampleLoop samples every o.sample for o.duration from the end of the creates, appending to
// rep.Samples and logging one line per sample to standard error. Errors: ctx ends first.
func sampleLoop(ctx context.Context, cs kubernetes.Interface, mgr *cluster.Manager, tr *tracker, o options, rep *report, start time.Time) error {
	end := time.Now().Add(o.duration)
	tick := time.NewTicker(o.sample)
	defer tick.Stop()
	events := 0
	counters := monotonic{}
	for n := 0; ; n++ {
		s := sample{at: time.Since(start), load: cluster.LoadAverage()}
		leader, _ := mgr.Leader(ctx)
		for _, r := range mgr.Replicas {
			rs := replicaSample{name: r.Name, leader: r == leader}
			if p := r.Process(); p != nil {
				if u, err := cluster.ReadProc(p.Pid()); err == nil {
					rs.ok, rs.cpu, rs.rss = true, u.CPU, u.RSSBytes
				}
			}
			s.replicas = append(s.replicas, rs)
		}
		if leader != nil {
			s.queueDepth, _ = leader.Metric(ctx, "workqueue_depth", `name="network-retry"`)
		}
		s.retries = counters.sum(mgr, "retries", func(r *cluster.Replica) float64 {
			return orUnread(r.Metric(ctx, "npp_network_retries_total"))
		})
		s.writes = counters.sum(mgr, "writes", func(r *cluster.Replica) float64 {
			var sum float64
			for _, method := range []string{"POST", "PUT", "PATCH", "DELETE"} {
				v := orUnread(r.Metric(ctx, "rest_client_requests_total", `method="`+method+`"`))
				if v < 0 {
					return v
				}
				sum += v
			}
			return sum
		})
		s.fromCache = counters.sum(mgr, "fromCache", func(r *cluster.Replica) float64 {
			return orUnread(r.Metric(ctx, "npp_network_retries_from_cache_total"))
		})
		s.lateTotal = counters.sum(mgr, "lateTotal", func(r *cluster.Replica) float64 {
			return orUnread(r.Metric(ctx, "npp_network_retry_lateness_seconds_count"))
		})
		within := counters.sum(mgr, "lateWithin1s", func(r *cluster.Replica) float64 {
			return orUnread(r.Metric(ctx, "npp_network_retry_lateness_seconds_bucket", `le="1"`))
		})
		s.lateOver1s = s.lateTotal - within
		if n%eventsEvery == 0 {
			if ev, err := countEvents(ctx, cs, []string{nsBig, nsSmall}); err == nil {
				events = ev.eventsV1
			}
		}
		s.events = events
		s.snap = tr.summary(retryInterval)
		rep.Samples = append(rep.Samples, s)
		fmt.Fprintf(os.Stderr, "retryscale: t=%s %s attempts %d/%d/%d late p50 %.0fs p99 %.0fs max %.0fs over-interval %d queue %.0f events %d scheduled %d ip %d load %s\n",
			s.at.Round(time.Second), replicaLine(s.replicas), s.snap.attemptsMin, s.snap.attemptsP50, s.snap.attemptsMax,
			s.snap.lateP50.Seconds(), s.snap.lateP99.Seconds(), s.snap.lateMax.Seconds(), s.snap.podsLateOverInterval,
			s.queueDepth, s.events, s.snap.scheduled, s.snap.withIP, s.load)
		if !time.Now().Before(end) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("interrupted while sampling: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// replicaLine formats the replicas' RSS and CPU time for the progress log.
func replicaLine(rs []replicaSample) string {
	out := ""
	for _, r := range rs {
		l := ""
		if r.leader {
			l = "*"
		}
		out += fmt.Sprintf("%s%s rss %.0fMB cpu %.0fs ", r.name, l, mb(r.rss), r.cpu.Seconds())
	}
	return out
}

// mb converts bytes to MB (10^6 bytes).
func mb(b int64) float64 { return float64(b) / 1e6 }

// monotonic keeps the manager's counters whole across replica restarts (-kill-leader-after):
// per counter and replica, the last value read and what the replica's earlier processes
// had counted, added back when its count falls (a new process starts at 0).
type monotonic map[string]struct{ last, carried float64 }

// sum returns the counter name summed over the replicas, read with read (negative: could
// not be read); a replica that is not running or not read adds what it had counted.
func (m monotonic) sum(mgr *cluster.Manager, name string, read func(*cluster.Replica) float64) float64 {
	var total float64
	for _, r := range mgr.Replicas {
		v := -1.0
		if r.Running() {
			v = read(r)
		}
		total += m.observe(name+"/"+r.Name, v)
	}
	return total
}

// observe records v, the value of the counter key read now (negative: not read, or the
// replica not running), and returns the counter's whole count: v plus what earlier
// processes counted.
func (m monotonic) observe(key string, v float64) float64 {
	e := m[key]
	if v >= 0 {
		if v < e.last {
			e.carried += e.last
		}
		e.last = v
		m[key] = e
	}
	return e.carried + e.last
}

// orUnread returns v, or -1 when err is not nil (monotonic.sum's "not read").
func orUnread(v float64, err error) float64 {
	if err != nil {
		return -1
	}
	return v
}
