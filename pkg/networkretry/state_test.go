package networkretry

import (
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
