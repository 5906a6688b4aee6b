package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
	podwebhook "github.com/okg-extensions/network-plugin-policy/pkg/webhook/pod"
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

// TestUnexpected checks the per-kind check of a returned pod. A pod the manager admitted at
// CREATE carries its decision, not network-status (written only once the pod is scheduled):
// the cases "nodeport decided, no status" and "hostport decided with its host port" were
// counted unexpected by the check that wanted network-status, and every run reported all
// its hostport and nodeport pods as unexpected.
func TestUnexpected(t *testing.T) {
	decision := podwebhook.AnnotationDecision
	pod := func(hostPort int32, annotations ...string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "game",
				Ports: []corev1.ContainerPort{{Name: "game", ContainerPort: 7777, HostPort: hostPort, Protocol: corev1.ProtocolUDP}}}}}}
		for _, a := range annotations {
			p.Annotations[a] = "x"
		}
		return p
	}
	cases := map[string]struct {
		k    kind
		pod  *corev1.Pod
		want bool
	}{
		"none untouched":                       {k: kindNone, pod: pod(0), want: false},
		"none mutated by noop":                 {k: kindNone, pod: pod(0, annotationNoop), want: true},
		"none decided by the manager":          {k: kindNone, pod: pod(0, decision), want: true},
		"noop mutated":                         {k: kindNoop, pod: pod(0, annotationNoop), want: false},
		"noop not mutated":                     {k: kindNoop, pod: pod(0), want: true},
		"nodeport decided, no status":          {k: kindNodePort, pod: pod(0, decision), want: false},
		"nodeport not decided":                 {k: kindNodePort, pod: pod(0), want: true},
		"nodeport through noop":                {k: kindNodePort, pod: pod(0, decision, annotationNoop), want: true},
		"hostport decided with its host port":  {k: kindHostPort, pod: pod(8001, decision), want: false},
		"hostport decided without a host port": {k: kindHostPort, pod: pod(0, decision), want: true},
		"hostport with a host port, undecided": {k: kindHostPort, pod: pod(8001), want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := unexpected(tc.k, tc.pod); got != tc.want {
				t.Errorf("unexpected(%s) = %v, want %v", tc.k, got, tc.want)
			}
		})
	}
}

// TestCheckFailures: a run whose creates failed, whose pods came back unexpected or whose
// manager decision count differs from the creates sent is invalid; a valid run is not.
func TestCheckFailures(t *testing.T) {
	valid := phaseReport{Name: "sequential", ExpectedDecisions: 10, ManagerCreateDecisions: 10,
		Kinds: []kindStats{{Kind: "hostport", latencyStats: latencyStats{Count: 5}}, {Kind: "nodeport", latencyStats: latencyStats{Count: 5}}}}
	if got := (&report{Phases: []phaseReport{valid}}).checkFailures(); len(got) != 0 {
		t.Errorf("valid run: %v, want no failure", got)
	}
	bad := valid
	bad.ManagerCreateDecisions = 9
	bad.Kinds = []kindStats{{Kind: "hostport", latencyStats: latencyStats{Count: 5, Unexpected: 5}}, {Kind: "nodeport", latencyStats: latencyStats{Count: 4, Errors: 1}}}
	got := strings.Join((&report{Phases: []phaseReport{bad}}).checkFailures(), "\n")
	for _, want := range []string{"5 of 5 hostport pods came back unexpected", "1 nodeport creates failed", "counted 9 CREATE decisions for 10"} {
		if !strings.Contains(got, want) {
			t.Errorf("failures:\n%s\nwant %q", got, want)
		}
	}
}
