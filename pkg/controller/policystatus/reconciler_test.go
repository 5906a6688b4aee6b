package policystatus

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
	"github.com/okg-extensions/network-plugin-policy/pkg/policy"
)

const testRoot = "npp-system"

func newPolicy(generation int64, mutate func(*v1alpha1.NetworkPluginPolicySpec)) *v1alpha1.NetworkPluginPolicy {
	p := &v1alpha1.NetworkPluginPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "game", Name: "p", UID: "uid-1", Generation: generation},
		Spec:       v1alpha1.NetworkPluginPolicySpec{Plugins: []string{"Kubernetes-NodePort"}},
	}
	if mutate != nil {
		mutate(&p.Spec)
	}
	return p
}

func brokenSpec(s *v1alpha1.NetworkPluginPolicySpec) {
	s.MatchConditions = []v1alpha1.MatchCondition{{Name: "ok", Expression: "true"}, {Name: "bad", Expression: "object.metadata.labels["}}
}

func asyncOnHostPort(s *v1alpha1.NetworkPluginPolicySpec) {
	m := v1alpha1.FailureModeAsynchronous
	s.Plugins = []string{"Kubernetes-HostPort"}
	s.FailureMode = &m
}

func newStore(t *testing.T) *policy.Store {
	t.Helper()
	m, err := policy.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatalf("NewMetrics(): %v", err)
	}
	s, err := policy.NewStore(policy.StoreOptions{
		RootNamespace: testRoot,
		Metrics:       m,
		Lint:          policy.LintOptions{Plugins: []policy.Plugin{{Name: "Kubernetes-HostPort", Synchronous: true}, {Name: "Kubernetes-NodePort"}}},
	})
	if err != nil {
		t.Fatalf("NewStore(): %v", err)
	}
	return s
}

func newClient(t *testing.T, objs ...client.Object) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatalf("AddToScheme(): %v", err)
	}
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithStatusSubresource(&v1alpha1.NetworkPluginPolicy{}).Build()
}

var key = types.NamespacedName{Namespace: "game", Name: "p"}

func TestReconcile(t *testing.T) {
	cases := map[string]struct {
		policy        *v1alpha1.NetworkPluginPolicy
		stored        *v1alpha1.NetworkPluginPolicy // what the Store has seen; nil: nothing
		wantRequeue   bool
		wantStatus    v1alpha1.NetworkPluginPolicyStatus
		wantInMessage string
	}{
		"accepted": {
			policy: newPolicy(1, nil),
			stored: newPolicy(1, nil),
			wantStatus: v1alpha1.NetworkPluginPolicyStatus{
				ObservedGeneration: 1,
				Conditions:         []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Accepted", ObservedGeneration: 1}},
			},
		},
		"invalid expression": {
			policy: newPolicy(2, brokenSpec),
			stored: newPolicy(2, brokenSpec),
			wantStatus: v1alpha1.NetworkPluginPolicyStatus{
				ObservedGeneration: 2,
				Conditions:         []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "InvalidExpression", ObservedGeneration: 2}},
			},
			wantInMessage: "spec.matchConditions[1].expression",
		},
		"invalid spec": {
			policy: newPolicy(1, func(s *v1alpha1.NetworkPluginPolicySpec) { s.NamespaceSelector = &metav1.LabelSelector{} }),
			stored: newPolicy(1, func(s *v1alpha1.NetworkPluginPolicySpec) { s.NamespaceSelector = &metav1.LabelSelector{} }),
			wantStatus: v1alpha1.NetworkPluginPolicyStatus{
				ObservedGeneration: 1,
				Conditions:         []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "InvalidSpec", ObservedGeneration: 1}},
			},
			wantInMessage: "spec.namespaceSelector",
		},
		"warnings": {
			policy: newPolicy(1, asyncOnHostPort),
			stored: newPolicy(1, asyncOnHostPort),
			wantStatus: v1alpha1.NetworkPluginPolicyStatus{
				ObservedGeneration: 1,
				Conditions:         []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Accepted", ObservedGeneration: 1}},
				Warnings:           []string{"spec.failureMode: Asynchronous on Kubernetes-HostPort, which is synchronous by design, without spec.retry.exhaustedAction Recreate: a pod admitted without its network stays broken until it is recreated"},
			},
		},
		"enforced: status.audit removed": {
			policy: func() *v1alpha1.NetworkPluginPolicy {
				p := newPolicy(2, nil)
				p.Status.Audit = &v1alpha1.AuditStatus{Replicas: []v1alpha1.ReplicaAuditStatus{{Replica: "manager-0", ObservedGeneration: 1, Decided: 3}}}
				return p
			}(),
			stored: newPolicy(2, nil),
			wantStatus: v1alpha1.NetworkPluginPolicyStatus{
				ObservedGeneration: 2,
				Conditions:         []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Accepted", ObservedGeneration: 2}},
			},
		},
		"store behind: requeue, status untouched": {
			policy:      newPolicy(3, nil),
			stored:      newPolicy(2, nil),
			wantRequeue: true,
		},
		"store has not seen the policy": {
			policy:      newPolicy(1, nil),
			wantRequeue: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			store := newStore(t)
			if tc.stored != nil {
				store.Handler(context.Background()).OnAdd(tc.stored, true)
			}
			c := newClient(t, tc.policy)
			r := &Reconciler{Client: c, Results: store}
			got, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key})
			if err != nil {
				t.Fatalf("Reconcile(): %v", err)
			}
			if (got.RequeueAfter > 0) != tc.wantRequeue {
				t.Errorf("Reconcile() = %+v, want requeue %v", got, tc.wantRequeue)
			}
			var p v1alpha1.NetworkPluginPolicy
			if err := c.Get(context.Background(), key, &p); err != nil {
				t.Fatalf("Get(): %v", err)
			}
			if diff := cmp.Diff(tc.wantStatus, p.Status, cmpopts.IgnoreFields(metav1.Condition{}, "LastTransitionTime", "Message")); diff != "" {
				t.Errorf("status (-want,+got):\n%s", diff)
			}
			if tc.wantInMessage != "" && !strings.Contains(p.Status.Conditions[0].Message, tc.wantInMessage) {
				t.Errorf("condition message %q does not contain %q", p.Status.Conditions[0].Message, tc.wantInMessage)
			}
		})
	}
}

// TestReconcileWritesOnlyChanges fixes and breaks a policy and checks that a reconcile
// without a change does not write.
func TestReconcileWritesOnlyChanges(t *testing.T) {
	store := newStore(t)
	h := store.Handler(context.Background())
	c := newClient(t, newPolicy(1, nil))
	r := &Reconciler{Client: c, Results: store, StaleRequeue: time.Millisecond}
	ctx := context.Background()

	get := func() *v1alpha1.NetworkPluginPolicy {
		t.Helper()
		var p v1alpha1.NetworkPluginPolicy
		if err := c.Get(ctx, key, &p); err != nil {
			t.Fatalf("Get(): %v", err)
		}
		return &p
	}
	reconcile := func() {
		t.Helper()
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key}); err != nil {
			t.Fatalf("Reconcile(): %v", err)
		}
	}
	readyStatus := func() string {
		p := get()
		return string(p.Status.Conditions[0].Status) + "/" + p.Status.Conditions[0].Reason
	}

	h.OnAdd(get(), true)
	reconcile()
	if diff := cmp.Diff("True/Accepted", readyStatus()); diff != "" {
		t.Errorf("after create (-want,+got):\n%s", diff)
	}
	rv := get().ResourceVersion
	reconcile()
	if got := get().ResourceVersion; got != rv {
		t.Errorf("unchanged status was written: resourceVersion %s -> %s", rv, got)
	}

	// Break the policy (a new generation).
	broken := get()
	brokenSpec(&broken.Spec)
	broken.Generation = 2
	if err := c.Update(ctx, broken); err != nil {
		t.Fatalf("Update(): %v", err)
	}
	h.OnUpdate(nil, get())
	reconcile()
	if diff := cmp.Diff("False/InvalidExpression", readyStatus()); diff != "" {
		t.Errorf("after breaking (-want,+got):\n%s", diff)
	}

	// Fix it again.
	fixed := get()
	fixed.Spec.MatchConditions = nil
	fixed.Generation = 3
	if err := c.Update(ctx, fixed); err != nil {
		t.Fatalf("Update(): %v", err)
	}
	h.OnUpdate(nil, get())
	reconcile()
	if diff := cmp.Diff("True/Accepted", readyStatus()); diff != "" {
		t.Errorf("after fixing (-want,+got):\n%s", diff)
	}
	if got := get().Status.ObservedGeneration; got != 3 {
		t.Errorf("observedGeneration = %d, want 3", got)
	}
}

func TestBoundedWarnings(t *testing.T) {
	var many []string
	for range 20 {
		many = append(many, strings.Repeat("w", 2000))
	}
	got := boundedWarnings(many)
	if len(got) != maxWarnings {
		t.Fatalf("len = %d, want %d", len(got), maxWarnings)
	}
	if len(got[0]) != maxWarningLength {
		t.Errorf("len(got[0]) = %d, want %d", len(got[0]), maxWarningLength)
	}
	if diff := cmp.Diff("and 5 more warnings", got[maxWarnings-1]); diff != "" {
		t.Errorf("last warning (-want,+got):\n%s", diff)
	}
}
