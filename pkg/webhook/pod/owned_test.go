package pod

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
)

func TestProtectOwned(t *testing.T) {
	const (
		retry    = "policy.game.kruise.io/network-retry"
		decision = "policy.game.kruise.io/network-decision"
		other    = "policy.game.kruise.io/anything"
		forged   = `{"since":"2099-01-01T00:00:00Z","attempts":2147483647,"exhausted":true,"exhaustedAction":"Recreate"}`
		stored   = `{"since":"2026-12-01T10:00:00Z","attempts":2}`
	)
	pod := func(kv ...string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"game.kruise.io/network-type": "Kubernetes-NodePort"}}}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Annotations[kv[i]] = kv[i+1]
		}
		return p
	}
	cases := map[string]struct {
		op           plugin.Operation
		in, old      *corev1.Pod
		trusted      bool
		want         *corev1.Pod
		wantReverted []string
	}{
		"CREATE: dropped": {op: plugin.OperationCreate, in: pod(retry, forged, decision, "Asynchronous by policy x/y@1", other, "1"),
			want: pod(), wantReverted: []string{other, decision, retry}},
		"CREATE by the manager: dropped too": {op: plugin.OperationCreate, in: pod(retry, forged), trusted: true,
			want: pod(), wantReverted: []string{retry}},
		"CREATE without owned annotations": {op: plugin.OperationCreate, in: pod("a", "b"), want: pod("a", "b")},
		"UPDATE: a forged value reverted": {op: plugin.OperationUpdate, in: pod(retry, forged), old: pod(retry, stored),
			want: pod(retry, stored), wantReverted: []string{retry}},
		"UPDATE: an added one removed": {op: plugin.OperationUpdate, in: pod(retry, forged), old: pod(),
			want: pod(), wantReverted: []string{retry}},
		"UPDATE: a removed one put back": {op: plugin.OperationUpdate, in: pod(), old: pod(retry, stored, decision, "d"),
			want: pod(retry, stored, decision, "d"), wantReverted: []string{decision, retry}},
		"UPDATE: unchanged": {op: plugin.OperationUpdate, in: pod(retry, stored, "a", "b"), old: pod(retry, stored),
			want: pod(retry, stored, "a", "b")},
		"UPDATE by the manager: kept": {op: plugin.OperationUpdate, in: pod(retry, forged), old: pod(retry, stored), trusted: true,
			want: pod(retry, forged)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			before := tc.in.DeepCopy()
			got, reverted := protectOwned(tc.in, tc.old, tc.op, tc.trusted)
			if diff := cmp.Diff(tc.want.Annotations, got.Annotations); diff != "" {
				t.Errorf("annotations (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantReverted, reverted); diff != "" {
				t.Errorf("reverted (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tc.in); diff != "" {
				t.Errorf("the request's pod was modified (-before,+after):\n%s", diff)
			}
		})
	}
}
