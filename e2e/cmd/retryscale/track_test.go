package main

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
	"github.com/okg-extensions/network-plugin-policy/pkg/networkretry"
)

// statePod returns a scheduled pod of namespace ns created at t0 whose retry state has
// attempts n and lastAttempt last (schedule 5s..30s).
func statePod(t *testing.T, ns string, t0, last time.Time, n int32) *corev1.Pod {
	t.Helper()
	s := &networkretry.State{
		Plugin: "Kubernetes-NodePort", Policy: "p", Since: metav1.NewTime(t0), LastAttempt: metav1.NewTime(last), Attempts: n,
		Window: metav1.Duration{Duration: time.Hour}, Interval: metav1.Duration{Duration: 5 * time.Second},
		MaxInterval: metav1.Duration{Duration: 30 * time.Second}, ExhaustedAction: policyv1alpha1.ExhaustedActionEvent,
	}
	v, err := s.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p", CreationTimestamp: metav1.NewTime(t0),
			Annotations: map[string]string{networkretry.Annotation: v}},
		Spec: corev1.PodSpec{NodeName: "n"},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(t0)}}},
	}
}

func TestTrackerLateness(t *testing.T) {
	t0 := time.Now().Add(-10 * time.Minute).Truncate(time.Second)
	tr := newTracker(time.Second)
	now := t0.Add(5 * time.Minute)
	steps := []struct {
		attempts int32
		at       time.Duration // lastAttempt after t0
	}{
		{1, 1 * time.Second},   // first run: not a retry
		{2, 2 * time.Second},   // due 1+5=6, 4s early (node/IP stamp): counted apart
		{2, 2 * time.Second},   // same attempts: no plugin run
		{3, 14 * time.Second},  // due 2+10=12: 2s late
		{4, 34 * time.Second},  // due 14+20=34: on time
		{6, 100 * time.Second}, // skipped an attempt: not measured
		{7, 140 * time.Second}, // due 100+30=130: 10s late, over the 5s interval, within the 30s backoff
	}
	for _, s := range steps {
		tr.observe(statePod(t, "a", t0, t0.Add(s.at), s.attempts), now)
	}
	got := tr.summary(5 * time.Second)
	if got.retries != 3 || got.early != 1 || got.skipped != 1 || got.invalid != 0 {
		t.Errorf("retries/early/skipped/invalid = %d/%d/%d/%d, want 3/1/1/0", got.retries, got.early, got.skipped, got.invalid)
	}
	if got.lateP50 != 2*time.Second || got.lateMax != 10*time.Second {
		t.Errorf("late p50 %s max %s, want 2s and 10s", got.lateP50, got.lateMax)
	}
	if got.podsLateOverInterval != 1 || got.podsLateOverBackoff != 0 {
		t.Errorf("pods late over interval / backoff = %d/%d, want 1/0", got.podsLateOverInterval, got.podsLateOverBackoff)
	}
	f := tr.firstRetries("a")
	if f.pods != 1 || f.measured != 1 || f.maxFirstLate != 2*time.Second || f.maxCreatedToRun != time.Second || f.maxScheduledToRun != time.Second {
		t.Errorf("first retries = %+v, want 1 pod measured, first late 2s, first run 1s after creation and scheduling", f)
	}
}

func TestSlopeAndRank(t *testing.T) {
	if s := slope([]float64{0, 1, 2}, []float64{10, 12, 14}); s != 2 {
		t.Errorf("slope = %v, want 2", s)
	}
	if r := rank(100, 0.99); r != 98 {
		t.Errorf("rank(100, 0.99) = %d, want 98", r)
	}
	if r := rank(1, 0.5); r != 0 {
		t.Errorf("rank(1, 0.5) = %d, want 0", r)
	}
}
