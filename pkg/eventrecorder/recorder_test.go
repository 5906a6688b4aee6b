package eventrecorder

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes/scheme"
)

// capture records what it is given.
type capture struct{ regarding, related []runtime.Object }

func (c *capture) Eventf(regarding, related runtime.Object, _, _, _, _ string, _ ...any) {
	c.regarding = append(c.regarding, regarding)
	c.related = append(c.related, related)
}

// TestWithoutResourceVersion: two versions of one pod give equal references (kind, namespace,
// name, UID; no resourceVersion), so the events library aggregates their events.
func TestWithoutResourceVersion(t *testing.T) {
	c := &capture{}
	r := WithoutResourceVersion(c, scheme.Scheme)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "game", Name: "lobby-0", UID: "uid-1", ResourceVersion: "10"}}
	r.Eventf(pod, nil, corev1.EventTypeWarning, "apiCallError", "UPDATE", "quota")
	pod.ResourceVersion = "11"
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-0", UID: "uid-n", ResourceVersion: "7"}}
	r.Eventf(pod, node, corev1.EventTypeWarning, "apiCallError", "UPDATE", "quota")

	want := &corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: "game", Name: "lobby-0", UID: "uid-1"}
	for i, got := range c.regarding {
		if diff := cmp.Diff(runtime.Object(want), got); diff != "" {
			t.Errorf("regarding %d (-want,+got):\n%s", i, diff)
		}
	}
	if c.related[0] != nil {
		t.Errorf("related = %v, want nil", c.related[0])
	}
	if diff := cmp.Diff(runtime.Object(&corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: "node-0", UID: "uid-n"}), c.related[1]); diff != "" {
		t.Errorf("related (-want,+got):\n%s", diff)
	}
	// A type the scheme does not know is passed through for the inner recorder to report.
	unknown := &metav1.PartialObjectMetadata{}
	r.Eventf(unknown, nil, corev1.EventTypeNormal, "R", "A", "n")
	if c.regarding[2] != runtime.Object(unknown) {
		t.Errorf("regarding = %v, want the object itself", c.regarding[2])
	}
}

// TestEventName: the name depends on what the event says about which object, not on who
// recorded it or when; it fits the apiserver's 253 characters.
func TestEventName(t *testing.T) {
	base := func() *eventsv1.Event {
		return &eventsv1.Event{
			ObjectMeta: metav1.ObjectMeta{Namespace: "game", Name: "lobby-0.18c4d2a1b2c3d4e5"},
			Regarding:  corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: "game", Name: "lobby-0", UID: "uid-1"},
			Type:       corev1.EventTypeWarning, Reason: "apiCallError", Action: "UPDATE",
			Note:                "Network plugin Kubernetes-NodePort failed (apiCallError): exceeded quota",
			ReportingController: "network-plugin-policy", ReportingInstance: "network-plugin-policy-replica-a",
			EventTime: metav1.NewMicroTime(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)),
		}
	}
	name := EventName(base())
	if !strings.HasPrefix(name, "lobby-0.") || len(name) != len("lobby-0.")+16 {
		t.Errorf("EventName = %q, want lobby-0.<16 hex digits>", name)
	}
	same := map[string]func(*eventsv1.Event){
		"another replica":      func(e *eventsv1.Event) { e.ReportingInstance = "network-plugin-policy-replica-b" },
		"another time":         func(e *eventsv1.Event) { e.EventTime = metav1.NewMicroTime(time.Now()) },
		"another library name": func(e *eventsv1.Event) { e.Name = "lobby-0.18c4d2a1ffffffff" },
		"another note (the library's series keep their first)": func(e *eventsv1.Event) { e.Note += ", used: 1" },
		"a series": func(e *eventsv1.Event) {
			e.Series = &eventsv1.EventSeries{Count: 7, LastObservedTime: metav1.NowMicro()}
		},
		"a resourceVersion": func(e *eventsv1.Event) {
			e.ResourceVersion = "42"
			e.Regarding.ResourceVersion = "9"
		},
	}
	for what, change := range same {
		e := base()
		change(e)
		if got := EventName(e); got != name {
			t.Errorf("%s: EventName = %q, want %q", what, got, name)
		}
	}
	differ := map[string]func(*eventsv1.Event){
		"a successor pod (UID)": func(e *eventsv1.Event) { e.Regarding.UID = "uid-2" },
		"another reason":        func(e *eventsv1.Event) { e.Reason = "timeout" },
		"another action":        func(e *eventsv1.Event) { e.Action = "CREATE" },
		"another type":          func(e *eventsv1.Event) { e.Type = corev1.EventTypeNormal },
		"another controller":    func(e *eventsv1.Event) { e.ReportingController = "network-retry" },
		"a related object": func(e *eventsv1.Event) {
			e.Related = &corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: "node-0", UID: "uid-n"}
		},
	}
	for what, change := range differ {
		e := base()
		change(e)
		if got := EventName(e); got == name {
			t.Errorf("%s: EventName = %q, the same as the original's", what, got)
		}
	}
	long := base()
	long.Regarding.Name = strings.Repeat("a", 235) + "-" + strings.Repeat("b", 17)
	got := EventName(long)
	if len(got) > 253 || strings.Contains(got, "-.") || !strings.HasPrefix(got, strings.Repeat("a", 235)+".") {
		t.Errorf("EventName of a 253-character pod name = %q (%d characters), want its first 235 characters, the trailing '-' cut, a dot and the hash", got, len(got))
	}
	if errs := validation.IsDNS1123Subdomain(got); len(errs) > 0 {
		t.Errorf("EventName = %q is not a DNS subdomain: %v", got, errs)
	}
}

// TestPatchQueuesOneSeriesPerEvent: the library's series updates return at once and are
// queued per Event name, the largest count and the latest time kept, for Run to write.
func TestPatchQueuesOneSeriesPerEvent(t *testing.T) {
	s := NewStableNameSink(nil) // Patch does not call the API server
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	ev := func(count int32, at time.Time) *eventsv1.Event {
		return &eventsv1.Event{
			ObjectMeta: metav1.ObjectMeta{Namespace: "game", Name: "lobby-0.library-name"},
			Regarding:  corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: "game", Name: "lobby-0", UID: "uid-1"},
			Type:       corev1.EventTypeWarning, Reason: "apiCallError", Action: "UPDATE", ReportingController: "network-plugin-policy",
			Series: &eventsv1.EventSeries{Count: count, LastObservedTime: metav1.NewMicroTime(at)},
		}
	}
	first := ev(5, t0)
	got, err := s.Patch(context.Background(), first, nil)
	if err != nil || got != first {
		t.Fatalf("Patch = %v, %v; want the library's event back and no error", got, err)
	}
	if _, err := s.Patch(context.Background(), ev(3, t0.Add(time.Minute)), nil); err != nil {
		t.Fatal(err)
	}
	if n := s.queue.Len(); n != 1 {
		t.Errorf("queued names = %d, want 1", n)
	}
	if len(s.pending) != 1 {
		t.Fatalf("pending = %d, want 1", len(s.pending))
	}
	for key, p := range s.pending {
		if key.Name != EventName(first) || p.Name != key.Name || p.ResourceVersion != "" {
			t.Errorf("pending %v: name %q, want %q", key, p.Name, EventName(first))
		}
		want := &eventsv1.EventSeries{Count: 5, LastObservedTime: metav1.NewMicroTime(t0.Add(time.Minute))}
		if diff := cmp.Diff(want, p.Series); diff != "" {
			t.Errorf("queued series (-want,+got):\n%s", diff)
		}
	}
	if first.Name != "lobby-0.library-name" || first.Series.Count != 5 {
		t.Errorf("the library's event was changed: %s, series %v", first.Name, first.Series)
	}
}

// TestUnnamedObjectIsNotMerged: an event about an object without a name or UID (a pod with
// generateName at its CREATE admission) is not stable, so no content name puts the events
// of several such pods together; one with both is.
func TestUnnamedObjectIsNotMerged(t *testing.T) {
	cases := map[string]struct {
		ref  corev1.ObjectReference
		want bool
	}{
		"name and UID":     {corev1.ObjectReference{Kind: "Pod", Namespace: "game", Name: "lobby-0", UID: "uid-1"}, true},
		"generateName pod": {corev1.ObjectReference{Kind: "Pod", Namespace: "game"}, false},
		"no UID":           {corev1.ObjectReference{Kind: "Pod", Namespace: "game", Name: "lobby-0"}, false},
	}
	for name, tc := range cases {
		if got := stable(&eventsv1.Event{Regarding: tc.ref}); got != tc.want {
			t.Errorf("%s: stable = %v, want %v", name, got, tc.want)
		}
	}
}
