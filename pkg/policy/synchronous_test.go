package policy

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
)

// TestSnapshotSynchronousTypes lists the types that may be Synchronous: "type" in every
// namespace, "type@ns" only in namespace ns (its own policies).
func TestSnapshotSynchronousTypes(t *testing.T) {
	ingress := Plugin{Name: "Kubernetes-Ingress"}
	registered := []Plugin{nodePort, hostPort, ingress}
	sync, async := v1alpha1.FailureModeSynchronous, v1alpha1.FailureModeAsynchronous
	cases := map[string]struct {
		policies []*v1alpha1.NetworkPluginPolicy
		want     []string
	}{
		"built-in modes only": {
			want: []string{"Kubernetes-HostPort"},
		},
		"namespace policy makes NodePort Synchronous by name": {
			policies: []*v1alpha1.NetworkPluginPolicy{newPolicy("game", "p", plugins("Kubernetes-NodePort"), mode(sync))},
			want:     []string{"Kubernetes-HostPort", "Kubernetes-NodePort@game"},
		},
		"by alias": {
			policies: []*v1alpha1.NetworkPluginPolicy{newPolicy("game", "p", plugins("NodePort-Network"), mode(sync))},
			want:     []string{"Kubernetes-HostPort", "Kubernetes-NodePort@game"},
		},
		"root policy makes NodePort Synchronous everywhere": {
			policies: []*v1alpha1.NetworkPluginPolicy{newPolicy(testRoot, "p", plugins("Kubernetes-NodePort"), mode(sync), namespaceSelector("team", "red"))},
			want:     []string{"Kubernetes-HostPort", "Kubernetes-NodePort"},
		},
		"wildcard Synchronous covers every plugin of its namespace": {
			policies: []*v1alpha1.NetworkPluginPolicy{
				newPolicy("game", "p", plugins("*"), mode(sync), podSelector("a", "b")),
				newPolicy("lobby", "p", plugins("*"), mode(sync)),
			},
			want: []string{"Kubernetes-HostPort", "Kubernetes-Ingress@game", "Kubernetes-Ingress@lobby", "Kubernetes-NodePort@game", "Kubernetes-NodePort@lobby"},
		},
		"selectors and matchConditions do not narrow a Synchronous policy": {
			policies: []*v1alpha1.NetworkPluginPolicy{newPolicy("game", "p", plugins("Kubernetes-Ingress"), mode(sync),
				podSelector("a", "b"), matchCondition("never", "false"))},
			want: []string{"Kubernetes-HostPort", "Kubernetes-Ingress@game"},
		},
		"a failureModeExpression may be Synchronous": {
			policies: []*v1alpha1.NetworkPluginPolicy{newPolicy("game", "p", plugins("Kubernetes-NodePort"), mode(async),
				modeExpr("'Asynchronous'"))},
			want: []string{"Kubernetes-HostPort", "Kubernetes-NodePort@game"},
		},
		"policy without a failure group changes nothing": {
			policies: []*v1alpha1.NetworkPluginPolicy{newPolicy("game", "p", plugins("*"), timeout(5*time.Second))},
			want:     []string{"Kubernetes-HostPort"},
		},
		"root catch-all Asynchronous overrides HostPort's built-in mode": {
			policies: []*v1alpha1.NetworkPluginPolicy{newPolicy(testRoot, "all-async", plugins("*"), mode(async))},
			want:     nil,
		},
		"root catch-all with an empty namespaceSelector": {
			policies: []*v1alpha1.NetworkPluginPolicy{newPolicy(testRoot, "all-async", plugins("Kubernetes-HostPort"), mode(async),
				namespaceSelector())},
			want: nil,
		},
		"root Asynchronous with a namespaceSelector leaves the built-in mode possible": {
			policies: []*v1alpha1.NetworkPluginPolicy{newPolicy(testRoot, "p", plugins("*"), mode(async), namespaceSelector("team", "red"))},
			want:     []string{"Kubernetes-HostPort"},
		},
		"root Asynchronous with a podSelector leaves the built-in mode possible": {
			policies: []*v1alpha1.NetworkPluginPolicy{newPolicy(testRoot, "p", plugins("*"), mode(async), podSelector("a", "b"))},
			want:     []string{"Kubernetes-HostPort"},
		},
		"root Asynchronous with a matchCondition leaves the built-in mode possible": {
			policies: []*v1alpha1.NetworkPluginPolicy{newPolicy(testRoot, "p", plugins("*"), mode(async), matchCondition("c", "true"))},
			want:     []string{"Kubernetes-HostPort"},
		},
		"namespace catch-all Asynchronous leaves other namespaces on the built-in mode": {
			policies: []*v1alpha1.NetworkPluginPolicy{newPolicy("game", "p", plugins("*"), mode(async))},
			want:     []string{"Kubernetes-HostPort"},
		},
		"root catch-all Asynchronous but a namespace policy Synchronous": {
			policies: []*v1alpha1.NetworkPluginPolicy{
				newPolicy(testRoot, "all-async", plugins("*"), mode(async)),
				newPolicy("game", "hp", plugins("Kubernetes-HostPort"), mode(sync), podSelector("a", "b")),
			},
			want: []string{"Kubernetes-HostPort@game"},
		},
		"root bound failureModes [Synchronous]: a namespace policy's Asynchronous is capped, so its namespace is Synchronous": {
			policies: []*v1alpha1.NetworkPluginPolicy{
				newPolicy(testRoot, "bound", plugins("Kubernetes-NodePort"), bound(v1alpha1.PolicyBounds{FailureModes: []v1alpha1.FailureMode{sync}})),
				newPolicy("game", "p", plugins("Kubernetes-NodePort"), mode(async)),
				newPolicy("lobby", "p", plugins("*"), mode(async)),
				newPolicy("other", "p", plugins("Kubernetes-Ingress"), mode(async)),
				newPolicy("quiet", "p", plugins("Kubernetes-NodePort"), timeout(5*time.Second)),
			},
			want: []string{"Kubernetes-HostPort", "Kubernetes-NodePort@game", "Kubernetes-NodePort@lobby"},
		},
		"root bound failureModes [Asynchronous, Synchronous] caps nothing": {
			policies: []*v1alpha1.NetworkPluginPolicy{
				newPolicy(testRoot, "bound", plugins("Kubernetes-NodePort"), bound(v1alpha1.PolicyBounds{FailureModes: []v1alpha1.FailureMode{async, sync}})),
				newPolicy("game", "p", plugins("Kubernetes-NodePort"), mode(async)),
			},
			want: []string{"Kubernetes-HostPort"},
		},
		"a policy that does not compile is not in force": {
			policies: []*v1alpha1.NetworkPluginPolicy{newPolicy("game", "p", plugins("Kubernetes-NodePort"), mode(sync),
				matchCondition("bad", "object.metadata.("))},
			want: []string{"Kubernetes-HostPort"},
		},
		"a policy naming an unregistered type: passed through, never Synchronous": {
			policies: []*v1alpha1.NetworkPluginPolicy{
				newPolicy("game", "p", plugins("AlibabaCloud-SLB"), mode(sync)),
				newPolicy(testRoot, "typo", plugins("kubernetes-nodeport"), mode(sync)),
			},
			want: []string{"Kubernetes-HostPort"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			store := newTestStore(t, tc.policies...)
			modes := store.Snapshot().NetworkTypeModes(registered)
			got := slices.Clone(modes.Synchronous)
			for typ, namespaces := range modes.SynchronousIn {
				for _, ns := range namespaces {
					got = append(got, typ+"@"+ns)
				}
			}
			slices.Sort(got)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("SynchronousTypes() (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestSnapshotNetworkTypeModes(t *testing.T) {
	registered := []Plugin{nodePort, hostPort, {Name: "Kubernetes-Ingress"}}
	sync, async := v1alpha1.FailureModeSynchronous, v1alpha1.FailureModeAsynchronous
	all := []string{"Kubernetes-HostPort", "Kubernetes-Ingress", "Kubernetes-NodePort"}
	cases := map[string]struct {
		policies []*v1alpha1.NetworkPluginPolicy
		want     NetworkTypeModes
	}{
		"built-in modes: only registered types are named": {
			want: NetworkTypeModes{Synchronous: []string{"Kubernetes-HostPort"}, Asynchronous: []string{"Kubernetes-Ingress", "Kubernetes-NodePort"}},
		},
		"root catch-all Asynchronous: nothing Synchronous": {
			policies: []*v1alpha1.NetworkPluginPolicy{newPolicy(testRoot, "all", plugins("*"), mode(async))},
			want:     NetworkTypeModes{Asynchronous: all},
		},
		"root catch-all Asynchronous, an unregistered type Synchronous by name: not named": {
			policies: []*v1alpha1.NetworkPluginPolicy{
				newPolicy(testRoot, "all", plugins("*"), mode(async)),
				newPolicy("game", "slb", plugins("AlibabaCloud-SLB"), mode(sync)),
				newPolicy(testRoot, "slb", plugins("AlibabaCloud-SLB"), mode(sync)),
			},
			want: NetworkTypeModes{Asynchronous: all},
		},
		"root catch-all Asynchronous, a namespace catch-all Synchronous": {
			policies: []*v1alpha1.NetworkPluginPolicy{
				newPolicy(testRoot, "all", plugins("*"), mode(async)),
				newPolicy("game", "all", plugins("*"), mode(sync)),
			},
			want: NetworkTypeModes{Asynchronous: all,
				SynchronousIn: map[string][]string{"Kubernetes-HostPort": {"game"}, "Kubernetes-Ingress": {"game"}, "Kubernetes-NodePort": {"game"}}},
		},
		"namespace catch-all Asynchronous: other namespaces keep the built-in modes": {
			policies: []*v1alpha1.NetworkPluginPolicy{newPolicy("game", "all", plugins("*"), mode(async))},
			want:     NetworkTypeModes{Synchronous: []string{"Kubernetes-HostPort"}, Asynchronous: []string{"Kubernetes-Ingress", "Kubernetes-NodePort"}},
		},
		"an unregistered type made Asynchronous by name: not named": {
			policies: []*v1alpha1.NetworkPluginPolicy{newPolicy(testRoot, "slb", plugins("AlibabaCloud-SLB"), mode(async))},
			want:     NetworkTypeModes{Synchronous: []string{"Kubernetes-HostPort"}, Asynchronous: []string{"Kubernetes-Ingress", "Kubernetes-NodePort"}},
		},
		"a registered alias is not a type of its own": {
			policies: []*v1alpha1.NetworkPluginPolicy{newPolicy("game", "np", plugins("NodePort-Network"), mode(async))},
			want:     NetworkTypeModes{Synchronous: []string{"Kubernetes-HostPort"}, Asynchronous: []string{"Kubernetes-Ingress", "Kubernetes-NodePort"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := newTestStore(t, tc.policies...).Snapshot().NetworkTypeModes(registered)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("NetworkTypeModes() (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestSnapshotSuperseded: every publication closes the previous snapshot's channel, and only
// that one.
func TestSnapshotSuperseded(t *testing.T) {
	store := newTestStore(t)
	first := store.Snapshot()
	select {
	case <-first.Superseded():
		t.Fatalf("a snapshot that is still current is superseded")
	default:
	}
	store.Handler(context.Background()).OnAdd(newPolicy("game", "p", plugins("Kubernetes-NodePort"), mode(v1alpha1.FailureModeSynchronous)), false)
	select {
	case <-first.Superseded():
	default:
		t.Fatalf("the snapshot before a policy was added is not superseded")
	}
	second := store.Snapshot()
	if diff := cmp.Diff(map[string][]string{"Kubernetes-NodePort": {"game"}}, second.NetworkTypeModes([]Plugin{nodePort, hostPort}).SynchronousIn); diff != "" {
		t.Errorf("NetworkTypeModes().SynchronousIn after the add (-want,+got):\n%s", diff)
	}
	select {
	case <-second.Superseded():
		t.Errorf("the current snapshot is superseded")
	default:
	}
}
