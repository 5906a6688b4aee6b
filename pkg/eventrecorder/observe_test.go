package eventrecorder

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/okg-extensions/network-plugin-policy/pkg/slot"
)

// TestRepeatsWithinTheIntervalWriteNothing: the events library hands Create one occurrence
// of a pod's error at every refresh of its retry state (more than 6 minutes apart). The
// first creates the Event; the repeats before the Event's next slot (SeriesObserveInterval
// apart) cost no request (this replica) or one create the API server refuses and one read
// (another replica, which wrote nothing itself yet), and are counted in memory; the first repeat after the slot writes the
// series with the occurrences counted in its memory.
func TestRepeatsWithinTheIntervalWriteNothing(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset()
	// The run starts a microsecond after one of the Event's slots (the API server keeps
	// microseconds): the next is SeriesObserveInterval later.
	var start, now time.Time
	start = slot.Next(EventName(&eventsv1.Event{Regarding: corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: "game", Name: "lobby-0", UID: "uid-1"},
		Type: corev1.EventTypeWarning, Reason: "apiCallError", Action: "UPDATE", ReportingController: "network-plugin-policy"}),
		time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), SeriesObserveInterval).Truncate(time.Microsecond).Add(time.Microsecond)
	now = start
	a, b := NewStableNameSink(cs.EventsV1()), NewStableNameSink(cs.EventsV1())
	a.now = func() time.Time { return now }
	b.now = a.now
	occurrence := func() *eventsv1.Event {
		return &eventsv1.Event{
			ObjectMeta: metav1.ObjectMeta{Namespace: "game", Name: "lobby-0.library-name"},
			Regarding:  corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: "game", Name: "lobby-0", UID: "uid-1"},
			Type:       corev1.EventTypeWarning, Reason: "apiCallError", Action: "UPDATE", ReportingController: "network-plugin-policy",
			EventTime: metav1.NewMicroTime(now),
		}
	}
	// A create the API server refuses (the Event is stored: AlreadyExists) changes nothing;
	// it is counted apart from the writes.
	refused := 0
	cs.PrependReactor("create", "events", func(action k8stesting.Action) (bool, runtime.Object, error) {
		ev := action.(k8stesting.CreateAction).GetObject().(*eventsv1.Event)
		if _, err := cs.Tracker().Get(eventsv1.SchemeGroupVersion.WithResource("events"), ev.Namespace, ev.Name); err == nil {
			refused++
		}
		return false, nil, nil
	})
	writes := func() (n int) {
		for _, act := range cs.Actions() {
			if act.GetVerb() != "get" {
				n++
			}
		}
		return n - refused
	}
	reads := func() (n int) {
		for _, act := range cs.Actions() {
			if act.GetVerb() == "get" {
				n++
			}
		}
		return n
	}
	if _, err := a.Create(ctx, occurrence()); err != nil {
		t.Fatal(err)
	}
	if w := writes(); w != 1 {
		t.Fatalf("first occurrence: %d writes, want 1 (the create)", w)
	}
	// Every 10 minutes, alternately on each replica, for 20 minutes.
	for i, s := range []*StableNameSink{a, b} {
		now = now.Add(10 * time.Minute)
		r := reads()
		if _, err := s.Create(ctx, occurrence()); err != nil {
			t.Fatal(err)
		}
		if w := writes(); w != 1 {
			t.Errorf("repeat %d: %d writes in all, want still 1", i+1, w)
		}
		if i == 0 && reads() != r {
			t.Errorf("repeat on the replica that created it: %d reads, want none", reads()-r)
		}
		if i == 1 && (refused != 1 || reads() != r+1) {
			t.Errorf("repeat on the other replica: %d refused creates and %d reads, want 1 and 1", refused, reads()-r)
		}
	}
	// Another repeat on b within the interval costs nothing now that b remembers.
	r := reads()
	if _, err := b.Create(ctx, occurrence()); err != nil {
		t.Fatal(err)
	}
	if reads() != r || writes() != 1 {
		t.Errorf("second repeat on b: %d reads, %d writes in all; want none and 1", reads()-r, writes())
	}
	// At the next slot, 30 minutes after the create: a writes the series, its own counted repeat included.
	now = start.Add(30 * time.Minute)
	if _, err := a.Create(ctx, occurrence()); err != nil {
		t.Fatal(err)
	}
	if w := writes(); w != 2 {
		t.Fatalf("first repeat after the interval: %d writes in all, want 2 (the series update)", w)
	}
	stored, err := cs.EventsV1().Events("game").Get(ctx, EventName(occurrence()), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The create, a's repeat at 10m counted in memory, and this one; b's two repeats are in
	// b's memory until b writes.
	if stored.Series == nil || stored.Series.Count != 3 || !stored.Series.LastObservedTime.Time.Equal(now) {
		t.Errorf("series = %+v, want count 3 observed at %s", stored.Series, now)
	}
	// A forgotten Event (twice the interval) is created, which the API server refuses, and
	// read before its series is written.
	now = now.Add(2 * SeriesObserveInterval)
	a.forgetOld()
	if len(a.observed) != 0 {
		t.Errorf("a remembers %d Events after twice the interval, want 0", len(a.observed))
	}
	cs.ClearActions()
	if _, err := a.Create(ctx, occurrence()); err != nil {
		t.Fatal(err)
	}
	var verbs []string
	for _, act := range cs.Actions() {
		verbs = append(verbs, act.GetVerb())
	}
	if len(verbs) != 3 || verbs[0] != "create" || verbs[1] != "get" || verbs[2] != "update" {
		t.Errorf("after forgetting: requests %v, want create (refused), get, update", verbs)
	}
}

// TestSeriesMergedIntoAnEventCreatedMeanwhile: the library's second occurrence can reach
// the series writer while the create of the first is still in flight; the writer then
// finds no Event, its create finds one, and it merges its series into that one instead of
// dropping it.
func TestSeriesMergedIntoAnEventCreatedMeanwhile(t *testing.T) {
	ctx := context.Background()
	first := &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: "game", Name: "lobby-0.library-name"},
		Regarding:  corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: "game", Name: "lobby-0", UID: "uid-1"},
		Type:       corev1.EventTypeWarning, Reason: "apiCallError", Action: "UPDATE", ReportingController: "network-plugin-policy",
		EventTime: metav1.NewMicroTime(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)),
	}
	stored := first.DeepCopy()
	stored.Name = EventName(first)
	cs := fake.NewClientset(stored)
	missed := false
	cs.PrependReactor("get", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
		if missed {
			return false, nil, nil
		}
		missed = true // the first read does not see the Event being created
		return true, nil, apierrors.NewNotFound(schema.GroupResource{Group: "events.k8s.io", Resource: "events"}, stored.Name)
	})
	s := NewStableNameSink(cs.EventsV1())
	second := stored.DeepCopy()
	second.Series = &eventsv1.EventSeries{Count: 2, LastObservedTime: metav1.NewMicroTime(time.Date(2026, 12, 1, 0, 0, 1, 0, time.UTC))}
	if err := s.writeSeries(ctx, second); err != nil {
		t.Fatalf("writeSeries: %v", err)
	}
	got, err := cs.EventsV1().Events("game").Get(ctx, stored.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Series == nil || got.Series.Count != 2 {
		t.Errorf("series = %+v, want the second occurrence's count 2 merged", got.Series)
	}
}
