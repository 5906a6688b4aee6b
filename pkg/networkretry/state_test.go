package networkretry

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
)

func TestBackoff(t *testing.T) {
	s := &State{Interval: metav1.Duration{Duration: 5 * time.Second}, MaxInterval: metav1.Duration{Duration: time.Minute}}
	cases := map[int32]time.Duration{
		0: 0, 1: 5 * time.Second, 2: 10 * time.Second, 3: 20 * time.Second, 4: 40 * time.Second,
		5: time.Minute, 6: time.Minute, 1000: time.Minute,
	}
	for n, want := range cases {
		if got := s.Backoff(n); got != want {
			t.Errorf("Backoff(%d) = %s, want %s", n, got, want)
		}
	}
}

func TestRecordKeepsWindowStartAndCounts(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	first := Record(nil, t0, "Kubernetes-NodePort", "game/np", &Error{Type: "apiCallError", Message: "quota"},
		time.Minute, 5*time.Second, time.Minute, policyv1alpha1.ExhaustedActionEvent)
	if first.Attempts != 1 || !first.Since.Time.Equal(t0) {
		t.Fatalf("first record = %+v, want 1 attempt since %s", first, t0)
	}
	if got, want := first.NextAttempt(), t0.Add(5*time.Second); !got.Equal(want) {
		t.Errorf("NextAttempt after 1 = %s, want %s", got, want)
	}
	exhausted := metav1.NewTime(t0.Add(time.Hour))
	first.Exhausted = &exhausted
	second := Record(first, t0.Add(6*time.Second), "Kubernetes-NodePort", "built-in default", nil,
		2*time.Minute, 5*time.Second, time.Minute, policyv1alpha1.ExhaustedActionRecreate)
	want := &State{
		Plugin: "Kubernetes-NodePort", Policy: "built-in default",
		Since: metav1.NewTime(t0), LastAttempt: metav1.NewTime(t0.Add(6 * time.Second)), Attempts: 2,
		Window: metav1.Duration{Duration: 2 * time.Minute}, Interval: metav1.Duration{Duration: 5 * time.Second},
		MaxInterval: metav1.Duration{Duration: time.Minute}, ExhaustedAction: policyv1alpha1.ExhaustedActionRecreate,
		Exhausted: &exhausted,
	}
	if diff := cmp.Diff(want, second); diff != "" {
		t.Errorf("second record (-want,+got):\n%s", diff)
	}
	if got, want := second.Deadline(), t0.Add(2*time.Minute); !got.Equal(want) {
		t.Errorf("Deadline = %s, want %s", got, want)
	}
	if got, want := second.NextAttempt(), t0.Add(16*time.Second); !got.Equal(want) {
		t.Errorf("NextAttempt after 2 = %s, want %s", got, want)
	}
}

func TestRoundTripAndBadInput(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	s := Record(nil, t0, "Kubernetes-HostPort", "game/hp", &Error{Type: "internalError", Message: "no free port"},
		10*time.Second, time.Second, 4*time.Second, policyv1alpha1.ExhaustedActionRecreate)
	v, err := s.Encode()
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{Annotation: v}}}
	got, err := FromPod(pod)
	if err != nil {
		t.Fatalf("FromPod: %v", err)
	}
	if diff := cmp.Diff(s, got); diff != "" {
		t.Errorf("round trip (-want,+got):\n%s", diff)
	}
	if none, err := FromPod(&corev1.Pod{}); none != nil || err != nil {
		t.Errorf("FromPod without annotation = %v, %v; want nil, nil", none, err)
	}

	bad := map[string]struct{ value, want string }{
		"not JSON":         {value: "{", want: "want a JSON retry state"},
		"zero window":      {value: `{"window":"0s","interval":"1s","maxInterval":"1s"}`, want: "window 0s"},
		"max below min":    {value: `{"window":"1m","interval":"10s","maxInterval":"1s"}`, want: "maxInterval >= interval"},
		"bad duration":     {value: `{"window":"1d","interval":"1s","maxInterval":"1s"}`, want: "want a JSON retry state"},
		"missing schedule": {value: `{"plugin":"x"}`, want: "want window > 0"},
	}
	for name, tc := range bad {
		t.Run(name, func(t *testing.T) {
			_, err := Decode(tc.value)
			if err == nil || !strings.Contains(err.Error(), Annotation) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Decode(%q) error = %v, want one naming %s and containing %q", tc.value, err, Annotation, tc.want)
			}
		})
	}
}

// TestDecodeRejectsForgedValues: values the manager never writes are rejected with an error
// naming the field, so that a pod author cannot keep a window open, zero the backoff or
// pre-exhaust a pod.
func TestDecodeRejectsForgedValues(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	valid := func(mutate func(m map[string]any)) string {
		m := map[string]any{
			"plugin": "Kubernetes-NodePort", "policy": "game/np@1",
			"since": "2026-11-30T11:59:00Z", "lastAttempt": "2026-11-30T11:59:30Z", "attempts": 3,
			"window": "5m", "interval": "5s", "maxInterval": "1m", "exhaustedAction": "Event",
		}
		mutate(m)
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if _, err := DecodeAt(valid(func(map[string]any) {}), now); err != nil {
		t.Fatalf("DecodeAt(valid) = %v", err)
	}
	// Within the allowed clock skew: accepted.
	if _, err := DecodeAt(valid(func(m map[string]any) {
		m["since"], m["lastAttempt"] = "2026-11-30T12:00:59Z", "2026-11-30T12:00:59Z"
	}), now); err != nil {
		t.Errorf("DecodeAt(since within the clock skew) = %v, want accepted", err)
	}
	// Written by replicas whose clocks differ a little: a later field a second before since.
	if _, err := DecodeAt(valid(func(m map[string]any) {
		m["lastAttempt"], m["exhausted"], m["exhaustedUID"] = "2026-11-30T11:58:59Z", "2026-11-30T11:58:59Z", "uid-1"
	}), now); err != nil {
		t.Errorf("DecodeAt(lastAttempt and exhausted a second before since) = %v, want accepted", err)
	}
	if _, err := DecodeAt(valid(func(m map[string]any) {
		m["exhausted"], m["exhaustedUID"] = "2026-11-30T11:59:59Z", "uid-1"
	}), now); err != nil {
		t.Errorf("DecodeAt(exhausted with its UID) = %v, want accepted", err)
	}

	bad := map[string]struct {
		mutate func(m map[string]any)
		want   string
	}{
		"since in the future (the issue's forgery)": {
			mutate: func(m map[string]any) { m["since"] = "2099-01-01T00:00:00Z" },
			want:   "since: 2099-01-01T00:00:00Z is in the future",
		},
		"since just beyond the clock skew": {
			mutate: func(m map[string]any) { m["since"], m["lastAttempt"] = "2026-11-30T12:01:01Z", "2026-11-30T12:01:01Z" },
			want:   "since: 2026-11-30T12:01:01Z is in the future",
		},
		"since missing":      {mutate: func(m map[string]any) { delete(m, "since") }, want: "since: want the time"},
		"lastAttempt future": {mutate: func(m map[string]any) { m["lastAttempt"] = "2027-01-01T00:00:00Z" }, want: "lastAttempt: 2027-01-01T00:00:00Z is in the future"},
		"lastAttempt before since": {
			mutate: func(m map[string]any) { m["lastAttempt"] = "2026-11-30T11:00:00Z" },
			want:   "lastAttempt: 2026-11-30T11:00:00Z is before since",
		},
		"lastAttempt missing": {mutate: func(m map[string]any) { delete(m, "lastAttempt") }, want: "lastAttempt: want"},
		"attempts at int32 max (the issue's forgery)": {
			mutate: func(m map[string]any) { m["attempts"] = math.MaxInt32 },
			want:   "attempts: want 1 to 1000000, got 2147483647",
		},
		"attempts wrapped negative": {mutate: func(m map[string]any) { m["attempts"] = -2147483270 }, want: "attempts: want 1 to 1000000, got -2147483270"},
		"attempts zero":             {mutate: func(m map[string]any) { m["attempts"] = 0 }, want: "attempts: want 1 to"},
		"attempts beyond int32":     {mutate: func(m map[string]any) { m["attempts"] = int64(math.MaxInt32) + 1 }, want: "want a JSON retry state"},
		"exhausted without its UID (forged)": {
			mutate: func(m map[string]any) { m["exhausted"] = "2026-11-30T11:59:59Z" },
			want:   "exhausted: set without exhaustedUID",
		},
		"exhausted in the future": {
			mutate: func(m map[string]any) { m["exhausted"], m["exhaustedUID"] = "2099-01-01T00:00:00Z", "uid-1" },
			want:   "exhausted: 2099-01-01T00:00:00Z is in the future",
		},
		"exhausted before since": {
			mutate: func(m map[string]any) { m["exhausted"], m["exhaustedUID"] = "2026-11-30T11:00:00Z", "uid-1" },
			want:   "exhausted: 2026-11-30T11:00:00Z is before since",
		},
		"exhaustedUID without exhausted": {mutate: func(m map[string]any) { m["exhaustedUID"] = "uid-1" }, want: "exhaustedUID: set without exhausted"},
		"exhausted not a time":           {mutate: func(m map[string]any) { m["exhausted"] = true }, want: "want a JSON retry state"},
		"unknown exhaustedAction":        {mutate: func(m map[string]any) { m["exhaustedAction"] = "Reboot" }, want: `exhaustedAction: want Event or Recreate, got "Reboot"`},
		"paused longer than the time since since (a window held open)": {
			mutate: func(m map[string]any) { m["paused"] = "8760h" },
			want:   "paused: want 0 up to the time since since, got 8760h0m0s",
		},
		"paused negative": {mutate: func(m map[string]any) { m["paused"] = "-1m" }, want: "paused: want 0 up to"},
	}
	for name, tc := range bad {
		t.Run(name, func(t *testing.T) {
			v := valid(tc.mutate)
			_, err := DecodeAt(v, now)
			if err == nil || !strings.Contains(err.Error(), Annotation) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("DecodeAt(%s) error = %v, want one naming %s and containing %q", v, err, Annotation, tc.want)
			}
		})
	}
}

// TestRecordSaturatesAttempts: the count never wraps, so the backoff never becomes zero.
func TestRecordSaturatesAttempts(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	prev := Record(nil, t0, "Kubernetes-NodePort", "game/np@1", nil, time.Minute, 5*time.Second, time.Minute, policyv1alpha1.ExhaustedActionEvent)
	for _, attempts := range []int32{MaxAttempts - 1, MaxAttempts, math.MaxInt32, -5} {
		prev.Attempts = attempts
		next := Record(prev, t0.Add(time.Second), "Kubernetes-NodePort", "game/np@1", nil, time.Minute, 5*time.Second, time.Minute, policyv1alpha1.ExhaustedActionEvent)
		want := min(max(attempts, 0)+1, MaxAttempts)
		if attempts >= MaxAttempts {
			want = MaxAttempts
		}
		if next.Attempts != want {
			t.Errorf("Record after %d attempts counts %d, want %d", attempts, next.Attempts, want)
		}
		if b := next.Backoff(next.Attempts); b != time.Minute && next.Attempts > 4 {
			t.Errorf("Backoff(%d) = %s, want maxInterval 1m", next.Attempts, b)
		}
	}
	// The extreme schedule the API allows: a 1ns interval under a 290-year cap.
	s := &State{Interval: metav1.Duration{Duration: 1}, MaxInterval: metav1.Duration{Duration: math.MaxInt64}}
	if b := s.Backoff(MaxAttempts); b <= 0 {
		t.Errorf("Backoff(MaxAttempts) of 1ns..max = %s, want positive", b)
	}
}

func TestExhaustedForAndMinInterval(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	s := Record(nil, t0, "Kubernetes-HostPort", "game/hp@1", nil, time.Minute, 500*time.Millisecond, 800*time.Millisecond, policyv1alpha1.ExhaustedActionRecreate)
	if s.ExhaustedFor("uid-1") {
		t.Errorf("ExhaustedFor on a fresh state = true")
	}
	at := metav1.NewTime(t0.Add(time.Minute))
	s.Exhausted, s.ExhaustedUID = &at, "uid-1"
	if !s.ExhaustedFor("uid-1") || s.ExhaustedFor("uid-2") {
		t.Errorf("ExhaustedFor(uid-1, uid-2) = %t, %t; want true, false", s.ExhaustedFor("uid-1"), s.ExhaustedFor("uid-2"))
	}
	next := Record(s, t0.Add(2*time.Minute), "Kubernetes-HostPort", "game/hp@1", nil, time.Minute, time.Second, time.Minute, policyv1alpha1.ExhaustedActionRecreate)
	if !next.ExhaustedFor("uid-1") {
		t.Errorf("Record dropped the exhausted mark of uid-1: %+v", next)
	}

	floored := s.WithMinInterval(time.Second)
	if floored.Interval.Duration != time.Second || floored.MaxInterval.Duration != time.Second {
		t.Errorf("WithMinInterval(1s) of 500ms..800ms = %s..%s, want 1s..1s", floored.Interval.Duration, floored.MaxInterval.Duration)
	}
	if s.Interval.Duration != 500*time.Millisecond {
		t.Errorf("WithMinInterval changed its receiver: interval %s", s.Interval.Duration)
	}
	if got := s.WithMinInterval(100 * time.Millisecond); got != s {
		t.Errorf("WithMinInterval below the interval returned a copy")
	}
}

func TestWindowStart(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	s := Record(nil, t0.Add(time.Second), "Kubernetes-NodePort", "game/np@1", nil, time.Minute, time.Second, time.Minute, policyv1alpha1.ExhaustedActionEvent)
	pod := func(node string, scheduled *time.Time) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(t0)}, Spec: corev1.PodSpec{NodeName: node}}
		if scheduled != nil {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(*scheduled)}}
		}
		return p
	}
	later := t0.Add(time.Hour)
	cases := map[string]struct {
		pod      *corev1.Pod
		want     time.Time
		wantOpen bool
	}{
		"pending: no window":                      {pod: pod("", nil)},
		"pending with a stale condition":          {pod: pod("", &later)},
		"node set at creation: since":             {pod: pod("node-0", nil), want: t0.Add(time.Second), wantOpen: true},
		"scheduled an hour later: the scheduling": {pod: pod("node-0", &later), want: later, wantOpen: true},
		"scheduled before the failure: the since": {pod: pod("node-0", &t0), want: t0.Add(time.Second), wantOpen: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := s.WindowStart(tc.pod)
			if ok != tc.wantOpen || !got.Equal(tc.want) {
				t.Errorf("WindowStart = %s, %t; want %s, %t", got, ok, tc.want, tc.wantOpen)
			}
			deadline, ok := s.DeadlineFor(tc.pod)
			if ok != tc.wantOpen || (ok && !deadline.Equal(tc.want.Add(time.Minute))) {
				t.Errorf("DeadlineFor = %s, %t; want %s, %t", deadline, ok, tc.want.Add(time.Minute), tc.wantOpen)
			}
		})
	}
	// A state copied onto a pod created after its since: the window starts at the creation.
	copied := pod("node-0", nil)
	copied.CreationTimestamp = metav1.NewTime(later)
	if got, _ := s.WindowStart(copied); !got.Equal(later) {
		t.Errorf("WindowStart of a state older than the pod = %s, want the creation %s", got, later)
	}
}

// TestRecordPauses: the time the schedule asked for a run and none came (beyond PauseSlack),
// and the time before a run whose failure was Unknown, are Paused and move the deadline; a
// run on schedule, or early, pauses nothing. Overdue says when a run is missing.
func TestRecordPauses(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	known := &Error{Type: "apiCallError", Message: "exceeded quota"}
	unknown := &Error{Type: "apiCallError", Message: "get node: the server is currently unable to handle the request", Unknown: true}
	// Attempt 1 at t0: the next is due at t0+5s (interval 5s, maxInterval 1m, window 5m).
	first := Record(nil, t0, "Kubernetes-NodePort", BuiltInDefault, known, 5*time.Minute, 5*time.Second, time.Minute, "Event")
	cases := map[string]struct {
		at         time.Duration
		err        *Error
		wantPaused time.Duration
	}{
		"on schedule":                      {at: 5 * time.Second, err: known},
		"early (a label patch)":            {at: 2 * time.Second, err: known},
		"late within the slack":            {at: 5*time.Second + PauseSlack, err: known},
		"API server away for ten minutes":  {at: 10 * time.Minute, err: known, wantPaused: 10*time.Minute - 5*time.Second},
		"Unknown failure: the whole gap":   {at: 20 * time.Second, err: unknown, wantPaused: 20 * time.Second},
		"plugin ran fine, network pending": {at: 3 * time.Minute, wantPaused: 3*time.Minute - 5*time.Second},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			now := t0.Add(tc.at)
			if got, want := first.Overdue(now), tc.at-5*time.Second > PauseSlack; got != want {
				t.Errorf("Overdue before the run = %t, want %t", got, want)
			}
			s := Record(first, now, first.Plugin, first.Policy, tc.err, 5*time.Minute, 5*time.Second, time.Minute, "Event")
			if s.Paused.Duration != tc.wantPaused {
				t.Errorf("Paused = %s, want %s", s.Paused.Duration, tc.wantPaused)
			}
			if got, want := s.Deadline(), t0.Add(5*time.Minute+tc.wantPaused); !got.Equal(want) {
				t.Errorf("Deadline = %s, want %s", got, want)
			}
			// Paused survives the round trip and later records add to it.
			v, err := s.Encode()
			if err != nil {
				t.Fatal(err)
			}
			back, err := DecodeAt(v, now)
			if err != nil {
				t.Fatal(err)
			}
			if back.Paused != s.Paused {
				t.Errorf("decoded Paused = %s, want %s", back.Paused.Duration, s.Paused.Duration)
			}
		})
	}
}
