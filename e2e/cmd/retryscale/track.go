package main

import (
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/okg-extensions/network-plugin-policy/pkg/networkretry"
)

// stampPrecision is the precision of the retry state's times (RFC 3339, whole seconds): a
// plugin run recorded up to this much before its due time is on time, not early.
const stampPrecision = time.Second

// podTrack is what the tracker knows of one pod.
type podTrack struct {
	// ns is the pod's namespace.
	ns string
	// created is the pod's creationTimestamp; scheduled the lastTransitionTime of its
	// PodScheduled=True condition (zero until seen); ipSeen when the tracker first saw a
	// status.podIP (its own clock).
	created, scheduled, ipSeen time.Time
	// last is the last retry state seen, nil before the first.
	last *networkretry.State
	// firstRun is the lastAttempt of the first retry state seen (the first plugin run that
	// left the network not Ready).
	firstRun time.Time
	// firstScheduled is the lateness of the pod's first on-schedule retry (attempt 2 or
	// later that was due, not triggered early by the pod getting its node or IP); set
	// when hasFirstScheduled.
	firstScheduled    time.Duration
	hasFirstScheduled bool
	// maxLate is the largest lateness of an on-schedule retry; maxLateOverBackoff the
	// largest lateness minus the backoff the pod waited for it (positive: later than one
	// whole backoff).
	maxLate            time.Duration
	maxLateOverBackoff time.Duration
	// retries counts the on-schedule retries measured; early those run before they were
	// due (a stamp at once when the pod got its node or IP); skipped the state changes that
	// advanced attempts by more than one between two observed versions (not measured).
	retries, early, skipped int
}

// tracker follows the retry state of the load's pods through their watch events and keeps,
// for every on-schedule retry, how late it ran against the schedule of the state before it
// (lastAttempt + backoff(attempts), with the controller's interval floor). It is safe for
// concurrent use.
type tracker struct {
	// floor is the controller's --min-retry-interval.
	floor time.Duration

	mu   sync.Mutex
	pods map[string]*podTrack
	// late holds every on-schedule retry, in the order seen.
	late []lateEntry
	// invalid counts retry states that did not decode.
	invalid int
}

// newTracker returns an empty tracker for a controller with interval floor floor.
func newTracker(floor time.Duration) *tracker {
	return &tracker{floor: floor, pods: map[string]*podTrack{}}
}

// observe records one version of pod, seen at now (the tracker's clock). Versions of one pod
// must be observed in the order the apiserver wrote them, as a watch delivers them.
func (t *tracker) observe(pod *corev1.Pod, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	key := pod.Namespace + "/" + pod.Name
	p := t.pods[key]
	if p == nil {
		p = &podTrack{ns: pod.Namespace, created: pod.CreationTimestamp.Time}
		t.pods[key] = p
	}
	if p.scheduled.IsZero() && pod.Spec.NodeName != "" {
		if at, ok := networkretry.ScheduledAt(pod); ok {
			p.scheduled = at
		}
	}
	if p.ipSeen.IsZero() && pod.Status.PodIP != "" {
		p.ipSeen = now
	}
	if _, ok := pod.Annotations[networkretry.Annotation]; !ok {
		return
	}
	s, err := networkretry.FromPodAt(pod, now)
	if err != nil {
		t.invalid++
		return
	}
	t.step(key, p, s)
}

// step accounts for the change from p.last to s.
func (t *tracker) step(key string, p *podTrack, s *networkretry.State) {
	prev := p.last
	p.last = s
	if prev == nil {
		p.firstRun = s.LastAttempt.Time
		return
	}
	switch {
	case s.Attempts == prev.Attempts:
		return // an update that ran no plugin (a status write, another annotation)
	case s.Attempts != prev.Attempts+1:
		p.skipped++
		return
	}
	sched := prev.WithMinInterval(t.floor)
	backoff := sched.Backoff(prev.Attempts)
	due := sched.NextAttempt()
	late := s.LastAttempt.Sub(due)
	if late < -stampPrecision {
		p.early++
		return
	}
	late = max(late, 0)
	p.retries++
	t.late = append(t.late, lateEntry{pod: key, due: due, late: late, backoff: backoff})
	p.maxLate = max(p.maxLate, late)
	p.maxLateOverBackoff = max(p.maxLateOverBackoff, late-backoff)
	if !p.hasFirstScheduled {
		p.firstScheduled, p.hasFirstScheduled = late, true
	}
}

// lateEntry is one on-schedule retry.
type lateEntry struct {
	// pod is the pod's namespace/name.
	pod string
	// due is when the retry was due; late how much later it ran (0 when on time); backoff
	// the delay the pod waited for it.
	due           time.Time
	late, backoff time.Duration
}

// lateStats summarizes the on-schedule retries due in one period.
type lateStats struct {
	// n counts the retries; p50, p99 and max are nearest-rank percentiles of their lateness.
	n             int
	p50, p99, max time.Duration
	// podsOverInterval counts the pods with a retry later than the policy's interval;
	// podsOverBackoff those with a retry later than the whole backoff it waited for.
	podsOverInterval, podsOverBackoff int
}

// lateBetween returns the statistics of the on-schedule retries due in [from, to); zero
// times leave that side open.
func (t *tracker) lateBetween(from, to time.Time, interval time.Duration) lateStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lateBetweenLocked(from, to, interval)
}

// lateBetweenLocked is lateBetween with t.mu held.
func (t *tracker) lateBetweenLocked(from, to time.Time, interval time.Duration) lateStats {
	var st lateStats
	var late []time.Duration
	overInterval, overBackoff := map[string]bool{}, map[string]bool{}
	for _, e := range t.late {
		if (!from.IsZero() && e.due.Before(from)) || (!to.IsZero() && !e.due.Before(to)) {
			continue
		}
		late = append(late, e.late)
		if e.late > interval {
			overInterval[e.pod] = true
		}
		if e.late > e.backoff {
			overBackoff[e.pod] = true
		}
	}
	st.n, st.podsOverInterval, st.podsOverBackoff = len(late), len(overInterval), len(overBackoff)
	if len(late) > 0 {
		sort.Slice(late, func(i, j int) bool { return late[i] < late[j] })
		st.p50, st.p99, st.max = late[rank(len(late), 0.5)], late[rank(len(late), 0.99)], late[len(late)-1]
	}
	return st
}

// earlyCount returns the retries seen so far that ran more than stampPrecision before they
// were due, over every pod.
func (t *tracker) earlyCount() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, p := range t.pods {
		n += p.early
	}
	return n
}

// lastOverInterval returns the due time of the last on-schedule retry that ran more than
// interval late, zero when none did.
func (t *tracker) lastOverInterval(interval time.Duration) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	var last time.Time
	for _, e := range t.late {
		if e.late > interval && e.due.After(last) {
			last = e.due
		}
	}
	return last
}

// snapshot is a summary of the tracker at one time.
type snapshot struct {
	// pods counts the pods seen; scheduled those with a node, withIP those with an IP,
	// withState those with a retry state.
	pods, scheduled, withIP, withState int
	// attempts are the min, median and max attempts over the pods with a retry state.
	attemptsMin, attemptsP50, attemptsMax int32
	// retries counts the on-schedule retries measured so far; early and skipped as in
	// podTrack, summed; invalid the states that did not decode.
	retries, early, skipped, invalid int
	// lateP50, lateP99 and lateMax are nearest-rank percentiles of the lateness of all
	// on-schedule retries so far.
	lateP50, lateP99, lateMax time.Duration
	// podsLateOverInterval counts pods with a retry later than interval (the policy's
	// first interval); podsLateOverBackoff pods with a retry later than the whole backoff it
	// waited for.
	podsLateOverInterval, podsLateOverBackoff int
}

// summary returns the tracker's snapshot; interval is the policy's retry interval.
func (t *tracker) summary(interval time.Duration) snapshot {
	t.mu.Lock()
	defer t.mu.Unlock()
	var s snapshot
	var attempts []int32
	for _, p := range t.pods {
		s.pods++
		if !p.scheduled.IsZero() {
			s.scheduled++
		}
		if !p.ipSeen.IsZero() {
			s.withIP++
		}
		if p.last != nil {
			s.withState++
			attempts = append(attempts, p.last.Attempts)
		}
		s.retries += p.retries
		s.early += p.early
		s.skipped += p.skipped
		if p.maxLate > interval {
			s.podsLateOverInterval++
		}
		if p.maxLateOverBackoff > 0 {
			s.podsLateOverBackoff++
		}
	}
	s.invalid = t.invalid
	if len(attempts) > 0 {
		sort.Slice(attempts, func(i, j int) bool { return attempts[i] < attempts[j] })
		s.attemptsMin, s.attemptsP50, s.attemptsMax = attempts[0], attempts[rank(len(attempts), 0.5)], attempts[len(attempts)-1]
	}
	all := t.lateBetweenLocked(time.Time{}, time.Time{}, interval)
	s.lateP50, s.lateP99, s.lateMax = all.p50, all.p99, all.max
	return s
}

// firstRetry describes the first plugin runs of one namespace's pods.
type firstRetry struct {
	// pods counts the namespace's pods; measured those with a first on-schedule retry.
	pods, measured int
	// maxCreatedToRun is the longest time from a pod's creation to its first plugin run;
	// maxScheduledToRun from its scheduling to that run (the stamp at once when it got its
	// node); maxFirstLate the largest lateness of a pod's first on-schedule retry.
	maxCreatedToRun, maxScheduledToRun, maxFirstLate time.Duration
	// maxLate is the largest lateness of any on-schedule retry of the namespace's pods.
	maxLate time.Duration
	// noRun counts pods without any plugin run yet.
	noRun int
}

// firstRetries returns the first-run figures of namespace ns.
func (t *tracker) firstRetries(ns string) firstRetry {
	t.mu.Lock()
	defer t.mu.Unlock()
	var f firstRetry
	for _, p := range t.pods {
		if p.ns != ns {
			continue
		}
		f.pods++
		f.maxLate = max(f.maxLate, p.maxLate)
		if p.firstRun.IsZero() {
			f.noRun++
			continue
		}
		f.maxCreatedToRun = max(f.maxCreatedToRun, p.firstRun.Sub(p.created))
		if !p.scheduled.IsZero() {
			f.maxScheduledToRun = max(f.maxScheduledToRun, p.firstRun.Sub(p.scheduled))
		}
		if p.hasFirstScheduled {
			f.measured++
			f.maxFirstLate = max(f.maxFirstLate, p.firstScheduled)
		}
	}
	return f
}

// rank returns the 0-based index of the nearest-rank q-quantile of n sorted values (n > 0).
func rank(n int, q float64) int {
	i := int(q*float64(n)+0.999999) - 1
	return min(max(i, 0), n-1)
}
