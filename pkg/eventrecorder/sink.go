package eventrecorder

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"sync"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	eventsv1client "k8s.io/client-go/kubernetes/typed/events/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/okg-extensions/network-plugin-policy/pkg/slot"
)

// SeriesWritesPerSecond and SeriesWriteBurst bound the rate of StableNameSink's series
// writes (a token bucket; each write is a get and an update). The events library asks for
// every cached series at once every 30 minutes (5,000 in one go with 5,000 retrying pods):
// 20 a second spreads them over about 4 minutes.
const (
	SeriesWritesPerSecond = 20
	SeriesWriteBurst      = 50
)

// SeriesObserveInterval is the period of the slots at which StableNameSink writes one
// Event's series for the occurrences the events library hands to Create: at most once per
// slot, at the first occurrence after the slot (slot.Next with the Event's name, so the
// writes of many Events that were created together are spread over the period, not made
// together). 30 minutes: with occurrences at least every 15 minutes (the default
// --retry-state-refresh) the stored Event is written at most 45 minutes apart, inside the
// API server's default Event TTL (kube-apiserver --event-ttl, 1 hour; an update renews
// it), so the Event of an error that keeps recurring does not expire. The library hands an occurrence to
// Create whenever it comes more than 6 minutes after the one before (the library has
// finished the series by then): a pod stuck on the same error, whose retry state is
// refreshed by a real plugin run every --retry-state-refresh, is such an occurrence at
// every refresh; without this bound each was a create, a read and an update of its Event
// (docs/benchmarks.md, network retries at scale).
const SeriesObserveInterval = 30 * time.Minute

// maxNameLength is the longest Event name the apiserver accepts (a DNS subdomain, 253
// characters: k8s.io/apimachinery/pkg/util/validation.DNS1123SubdomainMaxLength).
const maxNameLength = 253

// hashLength is the number of hex digits of the content hash in an Event name (64 bits of
// SHA-256).
const hashLength = 16

// The sink reads an Event and updates its series when a replica records an event another
// one (or an earlier series) stored already.
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;get;update;patch

// StableNameSink is an events.EventSink (k8s.io/client-go/tools/events) that stores each
// distinct event under a name computed from what it says, so that every process recording
// it writes the same Event object.
//
// client-go's events library aggregates repeats into an EventSeries only within one process
// and only while repeats come less than 6 minutes apart; each replica of the manager, each
// restart, and each repeat after a longer pause used to start an Event object of its own
// (up to 5 per pod and error with two replicas and 5,000 retrying pods: docs/benchmarks.md).
// With this sink the Event of a given content has one name (EventName) in the whole cluster:
//
//   - Create writes the Event under EventName. When it exists already (another replica, an
//     earlier series, a restart), it records one more occurrence on the stored object
//     instead: series.count + 1 (2 when it had no series) and series.lastObservedTime now,
//     but only when the Event's slot (SeriesObserveInterval) came since the stored Event
//     was last observed; otherwise it is left alone and the occurrence counted in memory,
//     to go into the count of the next write. The sink remembers when it wrote or read each Event (for
//     twice SeriesObserveInterval), so a repeat within the interval costs no request at
//     all; without that memory (another replica wrote it, a restart) it costs a create the
//     API server refuses (AlreadyExists) and one read. A new Event costs its create alone:
//     the create comes first, not a read to see whether it exists.
//   - Patch (the library's series updates) is asynchronous: it queues the series and
//     returns at once. The library calls it with its cache locked, for every cached series
//     every 30 minutes and for each series it finishes; a Patch that waited for the API
//     server would hold that lock, and every event recorded meanwhile would wait in a
//     goroutine of its own (with 5,000 retrying pods and a slow API server, the manager
//     grew by 150 MB in 5 minutes: docs/benchmarks.md). Run writes the queued series, one
//     per Event name however often it was queued (the largest count and the latest time),
//     at most SeriesWritesPerSecond: it raises the stored object's series to the queued
//     count and time when those are larger, so that a replica's smaller count does not
//     lower what another replica wrote, and creates the Event when it is gone (its TTL
//     ran out, someone deleted it).
//   - Update writes the Event under EventName.
//
// The stored object keeps the reportingInstance and note of its first writer (both are
// immutable on events.k8s.io/v1). series.count approximates the occurrences over all
// replicas: the library counts repeats in memory and sends its count at the second
// occurrence and then every 30 minutes, so it mostly lags; a create whose response was lost
// and retried, or a second occurrence written before the first, can add one too many. Writes that change the series are read-modify-write
// with the object's resourceVersion, retried on conflict (retry.DefaultRetry).
type StableNameSink struct {
	client  eventsv1client.EventsV1Interface
	now     func() time.Time
	limiter flowcontrol.RateLimiter
	// queue holds the names of Events with a series to write; pending their latest
	// Event (series merged), guarded by mu.
	queue   workqueue.TypedInterface[types.NamespacedName]
	mu      sync.Mutex
	pending map[types.NamespacedName]*eventsv1.Event
	// observed holds, per Event name, when the stored Event was last observed (written by
	// this sink or read from the API server) and the occurrences counted in memory since;
	// guarded by mu.
	observed map[types.NamespacedName]observation
}

// observation is what StableNameSink remembers of one stored Event.
type observation struct {
	// at is the stored Event's last observed time (its series' lastObservedTime, or its
	// eventTime without a series).
	at time.Time
	// occurrences is how many occurrences were counted in memory since at.
	occurrences int32
}

// NewStableNameSink returns a StableNameSink writing through c (a clientset's EventsV1());
// its series writes wait for Run.
func NewStableNameSink(c eventsv1client.EventsV1Interface) *StableNameSink {
	return &StableNameSink{
		client:   c,
		now:      time.Now,
		limiter:  flowcontrol.NewTokenBucketRateLimiter(SeriesWritesPerSecond, SeriesWriteBurst),
		queue:    workqueue.NewTyped[types.NamespacedName](),
		pending:  map[types.NamespacedName]*eventsv1.Event{},
		observed: map[types.NamespacedName]observation{},
	}
}

// Run writes the queued series (see StableNameSink) until ctx ends; series still queued
// then are dropped. Failed writes are logged and dropped: the library asks again at its
// next refresh.
func (s *StableNameSink) Run(ctx context.Context) {
	go func() {
		<-ctx.Done()
		s.queue.ShutDown()
	}()
	go func() {
		t := time.NewTicker(SeriesObserveInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				s.forgetOld()
			}
		}
	}()
	for {
		key, shutdown := s.queue.Get()
		if shutdown {
			return
		}
		s.mu.Lock()
		ev := s.pending[key]
		delete(s.pending, key)
		s.mu.Unlock()
		if ev != nil && s.limiter.Wait(ctx) == nil {
			if err := s.writeSeries(ctx, ev); err != nil {
				klog.FromContext(ctx).Error(err, "Unable to write an event series (dropped until the next occurrence or refresh)", "event", klog.KRef(key.Namespace, key.Name))
			}
		}
		s.queue.Done(key)
	}
}

var _ events.EventSink = (*StableNameSink)(nil)

// EventName returns the name under which StableNameSink stores ev: the regarding object's
// name (cut so the whole fits in 253 characters, without a trailing '.' or '-'), a dot, and
// 16 hex digits of a SHA-256 over the event's identity: the regarding and related
// references (apiVersion, kind, namespace, name, UID), type, reason, action and
// reportingController. That is the key on which the events library folds events into a
// series (its eventKey), less the reportingInstance: replicas of one controller, and one
// replica before and after a restart, name an event alike. The note is left out as the
// library leaves it out: a series keeps its first note (a retry's latest error is in the
// pod's retry state). Times and series are left out; a same-named successor of the
// regarding object has another UID, hence another name.
func EventName(ev *eventsv1.Event) string {
	h := sha256.New()
	for _, s := range []string{
		ev.Regarding.APIVersion, ev.Regarding.Kind, ev.Regarding.Namespace, ev.Regarding.Name, string(ev.Regarding.UID),
		ev.Type, ev.Reason, ev.Action, ev.ReportingController,
	} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	if r := ev.Related; r != nil {
		for _, s := range []string{r.APIVersion, r.Kind, r.Namespace, r.Name, string(r.UID)} {
			h.Write([]byte(s))
			h.Write([]byte{0})
		}
	}
	sum := hex.EncodeToString(h.Sum(nil))[:hashLength]
	prefix := ev.Regarding.Name
	if limit := maxNameLength - hashLength - 1; len(prefix) > limit {
		prefix = prefix[:limit]
	}
	prefix = strings.TrimRight(prefix, ".-")
	if prefix == "" {
		return sum
	}
	return prefix + "." + sum
}

// stable reports whether ev's regarding object has a name and a UID, so that EventName
// identifies it. A pod at its CREATE admission with generateName has neither yet: a
// content name would put the events of every such pod into one Event, so the sink passes
// those through as the library's own sink does.
func stable(ev *eventsv1.Event) bool {
	return ev.Regarding.Name != "" && ev.Regarding.UID != ""
}

// microNow returns now at the precision the API server stores a MicroTime, so that a
// series read back compares equal to the one written.
func (s *StableNameSink) microNow() metav1.MicroTime {
	return metav1.NewMicroTime(s.now().Truncate(time.Microsecond))
}

// Create stores ev under EventName; when that Event exists, it records one more occurrence
// on it (see StableNameSink). An Event about an object without a name or UID (stable) is
// created as the library named it. Errors are the apiserver's.
func (s *StableNameSink) Create(ctx context.Context, ev *eventsv1.Event) (*eventsv1.Event, error) {
	if !stable(ev) {
		return s.client.Events(ev.Namespace).Create(ctx, ev, metav1.CreateOptions{})
	}
	e := ev.DeepCopy()
	e.Name = EventName(e)
	e.ResourceVersion = ""
	key := types.NamespacedName{Namespace: e.Namespace, Name: e.Name}
	now := s.now()
	if s.countIfRecent(key, now) {
		return e, nil
	}
	// Created at once: most Events of this content are new, and a create that finds one
	// stored (another replica's, or from before a restart) costs one request, as the read
	// before it did (a refused create also passes the API server's admission).
	out, err := s.client.Events(e.Namespace).Create(ctx, e, metav1.CreateOptions{})
	if err == nil {
		s.remember(key, lastObserved(out), 0)
	}
	if !apierrors.IsAlreadyExists(err) {
		return out, err
	}
	// Stored already: one more occurrence on it.
	counted := s.takeCounted(key)
	var recent *time.Time
	out, err = s.observe(ctx, e.Namespace, e.Name, func(stored *eventsv1.Event) *eventsv1.EventSeries {
		if last := lastObserved(stored); now.Before(slot.Next(stored.Name, last, SeriesObserveInterval)) {
			recent = &last
			return nil
		}
		count := int32(2)
		if stored.Series != nil {
			count = stored.Series.Count + 1
		}
		return &eventsv1.EventSeries{Count: count + counted, LastObservedTime: s.microNow()}
	})
	switch {
	case err != nil:
		s.addCounted(key, counted)
	case recent != nil:
		// Observed by another replica (or before a restart) less than the interval ago.
		s.remember(key, *recent, counted+1)
	default:
		s.remember(key, lastObserved(out), 0)
	}
	return out, err
}

// lastObserved returns when ev was last observed: its series' lastObservedTime, or its
// eventTime when it has no series.
func lastObserved(ev *eventsv1.Event) time.Time {
	if ev.Series != nil {
		return ev.Series.LastObservedTime.Time
	}
	return ev.EventTime.Time
}

// countIfRecent counts one occurrence of the Event key in memory and reports true when the
// sink observed that Event since its last slot before now; otherwise it reports false and
// counts nothing.
func (s *StableNameSink) countIfRecent(key types.NamespacedName, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.observed[key]
	if !ok || !now.Before(slot.Next(key.Name, o.at, SeriesObserveInterval)) {
		return false
	}
	o.occurrences++
	s.observed[key] = o
	return true
}

// remember records that the Event key was observed at at, with occurrences counted since.
func (s *StableNameSink) remember(key types.NamespacedName, at time.Time, occurrences int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.observed[key] = observation{at: at, occurrences: occurrences}
}

// takeCounted returns the occurrences of the Event key counted in memory and sets them to
// zero.
func (s *StableNameSink) takeCounted(key types.NamespacedName) int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.observed[key]
	n := o.occurrences
	if n > 0 {
		o.occurrences = 0
		s.observed[key] = o
	}
	return n
}

// addCounted gives back n occurrences taken by takeCounted whose write failed.
func (s *StableNameSink) addCounted(key types.NamespacedName, n int32) {
	if n == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.observed[key]
	o.occurrences += n
	s.observed[key] = o
}

// forgetOld drops what the sink remembers of Events it observed twice SeriesObserveInterval
// ago or longer (their occurrences counted in memory since are not written: the error no
// longer recurs, or its pod is gone), so that the memory follows the Events in use.
func (s *StableNameSink) forgetOld() {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for key, o := range s.observed {
		if now.Sub(o.at) >= 2*SeriesObserveInterval {
			delete(s.observed, key)
		}
	}
}

// Patch queues old's series (old is the library's cached Event, with its series; data, the
// library's patch, only sets that series and is not sent) for Run to write to the Event
// named EventName(old), merged with a series queued before for it (the larger count, the
// later time), and returns old at once; it never fails. An Event about an object without a
// name or UID (stable) is patched at once as the library's own sink does.
func (s *StableNameSink) Patch(ctx context.Context, old *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	if !stable(old) {
		return s.client.Events(old.Namespace).Patch(ctx, old.Name, types.StrategicMergePatchType, data, metav1.PatchOptions{})
	}
	e := old.DeepCopy()
	e.Name = EventName(e)
	e.ResourceVersion = ""
	if e.Series == nil {
		e.Series = &eventsv1.EventSeries{Count: 2, LastObservedTime: s.microNow()}
	} else {
		e.Series.LastObservedTime = metav1.NewMicroTime(e.Series.LastObservedTime.Truncate(time.Microsecond))
	}
	key := types.NamespacedName{Namespace: e.Namespace, Name: e.Name}
	s.mu.Lock()
	if prev := s.pending[key]; prev != nil {
		e.Series = mergeSeries(prev.Series, e.Series)
	}
	s.pending[key] = e
	s.mu.Unlock()
	s.queue.Add(key)
	return old, nil
}

// writeSeries raises the series of the stored Event named ev.Name to ev's (mergeSeries), or
// creates ev when no such Event is stored (and merges into it when it was created
// meanwhile). Errors are the API server's.
func (s *StableNameSink) writeSeries(ctx context.Context, ev *eventsv1.Event) error {
	merge := func(stored *eventsv1.Event) *eventsv1.EventSeries { return mergeSeries(stored.Series, ev.Series) }
	out, err := s.observe(ctx, ev.Namespace, ev.Name, merge)
	if apierrors.IsNotFound(err) {
		out, err = s.client.Events(ev.Namespace).Create(ctx, ev, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			// Created meanwhile, by another replica or by this one's Create of the first
			// occurrence, still in flight when the library sent the second: merge into it.
			out, err = s.observe(ctx, ev.Namespace, ev.Name, merge)
		}
	}
	if err == nil && out != nil {
		key := types.NamespacedName{Namespace: ev.Namespace, Name: ev.Name}
		s.remember(key, lastObserved(out), s.takeCounted(key))
	}
	return err
}

// mergeSeries returns a new series with the larger count and the later lastObservedTime
// of a and b; a may be nil.
func mergeSeries(a, b *eventsv1.EventSeries) *eventsv1.EventSeries {
	out := b.DeepCopy()
	if a == nil {
		return out
	}
	out.Count = max(out.Count, a.Count)
	if a.LastObservedTime.After(out.LastObservedTime.Time) {
		out.LastObservedTime = a.LastObservedTime
	}
	return out
}

// Update writes ev under EventName (under its own name when stable is false). Errors are
// the apiserver's.
func (s *StableNameSink) Update(ctx context.Context, ev *eventsv1.Event) (*eventsv1.Event, error) {
	e := ev.DeepCopy()
	if stable(e) {
		e.Name = EventName(e)
	}
	return s.client.Events(e.Namespace).Update(ctx, e, metav1.UpdateOptions{})
}

// observe sets the series of the stored Event namespace/name to next(the stored Event),
// reading and updating it with its resourceVersion, retried on conflict; when next returns
// nil or the series stored already, it writes nothing and returns the stored Event.
func (s *StableNameSink) observe(ctx context.Context, namespace, name string, next func(*eventsv1.Event) *eventsv1.EventSeries) (*eventsv1.Event, error) {
	var out *eventsv1.Event
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		stored, err := s.client.Events(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		series := next(stored)
		if series == nil || stored.Series != nil && series.Count == stored.Series.Count && series.LastObservedTime.Equal(&stored.Series.LastObservedTime) {
			out = stored
			return nil
		}
		stored.Series = series
		out, err = s.client.Events(namespace).Update(ctx, stored, metav1.UpdateOptions{})
		return err
	})
	return out, err
}
