package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// TestWorkerSequence checks that the workers' sequences together create every pod of every
// kind exactly once, that each worker goes round robin over the kinds, and that the first
// kind of a round rotates.
func TestWorkerSequence(t *testing.T) {
	cases := map[string]struct{ concurrency, n int }{
		"sequential":        {concurrency: 1, n: 9},
		"4 in flight":       {concurrency: 4, n: 10},
		"more workers than": {concurrency: 5, n: 3},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			seen := map[job]int{}
			for w := range tc.concurrency {
				seq := workerSequence(w, tc.concurrency, tc.n)
				for i, j := range seq {
					seen[j]++
					if i > 0 && j.k == seq[i-1].k {
						t.Errorf("worker %d: creates %d and %d are both %s", w, i-1, i, j.k)
					}
				}
				for r := 0; r+int(numKinds) < len(seq); r += int(numKinds) {
					if seq[r].k == seq[r+int(numKinds)].k {
						t.Errorf("worker %d: rounds at %d and %d start with the same kind %s", w, r, r+int(numKinds), seq[r].k)
					}
				}
			}
			if len(seen) != int(numKinds)*tc.n {
				t.Errorf("%d distinct creates, want %d", len(seen), int(numKinds)*tc.n)
			}
			for j, c := range seen {
				if c != 1 || j.i < 0 || j.i >= tc.n {
					t.Errorf("create %v: %d times", j, c)
				}
			}
		})
	}
}

// TestWorkerSequenceSequentialOrder pins the sequential order: the kinds rotate by one each
// round.
func TestWorkerSequenceSequentialOrder(t *testing.T) {
	want := []job{
		{kindNone, 0}, {kindNoop, 0}, {kindHostPort, 0}, {kindNodePort, 0},
		{kindNoop, 1}, {kindHostPort, 1}, {kindNodePort, 1}, {kindNone, 1},
	}
	if diff := cmp.Diff(want, workerSequence(0, 1, 2), cmp.AllowUnexported(job{})); diff != "" {
		t.Errorf("workerSequence(0, 1, 2) (-want,+got):\n%s", diff)
	}
}

// TestPodKinds checks that the kinds differ only in the network annotations and the kind
// label.
func TestPodKinds(t *testing.T) {
	g := podGenerator{namespace: "ns"}
	none := g.pod("p1", kindNone, 3)
	for _, k := range kinds {
		p := g.pod("p1", k, 3)
		if want := "p1-" + k.String() + "-00003"; p.Name != want {
			t.Errorf("%s: name %q, want %q", k, p.Name, want)
		}
		if p.Labels[labelKind] != k.String() {
			t.Errorf("%s: label %s=%q", k, labelKind, p.Labels[labelKind])
		}
		_, typed := p.Annotations[networkstatus.AnnotationNetworkType]
		if typed != k.viaManager() {
			t.Errorf("%s: has network-type %v, want %v", k, typed, k.viaManager())
		}
		p.Name, p.Labels[labelKind] = none.Name, none.Labels[labelKind]
		delete(p.Annotations, networkstatus.AnnotationNetworkType)
		delete(p.Annotations, networkstatus.AnnotationNetworkConf)
		if diff := cmp.Diff(none, p); diff != "" {
			t.Errorf("%s differs from none beyond name, kind label and network annotations (-none,+%s):\n%s", k, k, diff)
		}
	}
}

// TestUnexpected checks the per-kind check of a returned pod.
func TestUnexpected(t *testing.T) {
	pod := func(annotations ...string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{}}}
		for _, a := range annotations {
			p.Annotations[a] = "x"
		}
		return p
	}
	status := networkstatus.AnnotationNetworkStatus
	cases := map[string]struct {
		k    kind
		pod  *corev1.Pod
		want bool
	}{
		"none untouched":         {k: kindNone, pod: pod(), want: false},
		"none mutated by noop":   {k: kindNone, pod: pod(annotationNoop), want: true},
		"noop mutated":           {k: kindNoop, pod: pod(annotationNoop), want: false},
		"noop not mutated":       {k: kindNoop, pod: pod(), want: true},
		"hostport with status":   {k: kindHostPort, pod: pod(status), want: false},
		"nodeport without":       {k: kindNodePort, pod: pod(), want: true},
		"nodeport through noop":  {k: kindNodePort, pod: pod(status, annotationNoop), want: true},
		"none with a status too": {k: kindNone, pod: pod(status), want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := unexpected(tc.k, tc.pod); got != tc.want {
				t.Errorf("unexpected(%s) = %v, want %v", tc.k, got, tc.want)
			}
		})
	}
}
