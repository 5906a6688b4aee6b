package policyaudit

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
	"github.com/okg-extensions/network-plugin-policy/pkg/policy"
)

var t0 = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)

func auditPolicy(generation int64) *v1alpha1.NetworkPluginPolicy {
	return &v1alpha1.NetworkPluginPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "arena", Name: "canary", Generation: generation},
		Spec:       v1alpha1.NetworkPluginPolicySpec{Plugins: []string{"*"}, Enforcement: ptr.To(v1alpha1.EnforcementAudit)},
	}
}

func newRecorder(t *testing.T, replica string, c client.Client, now *time.Time) *Recorder {
	t.Helper()
	r, err := New(Options{Client: c, Replica: replica})
	if err != nil {
		t.Fatal(err)
	}
	r.now = func() time.Time { return *now }
	return r
}

// drain counts everything queued, as Start does.
func drain(r *Recorder) {
	for {
		select {
		case res := <-r.queue:
			r.add(res)
		default:
			return
		}
	}
}

// TestRecorderWritesOwnEntry: two replicas each write their own entry of counts and the
// latest samples, newest first and at most MaxSamples; a write without a change is not
// made; a new window starts the counts again; an entry left for two windows is removed by
// the other replica's next write.
func TestRecorderWritesOwnEntry(t *testing.T) {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(auditPolicy(1)).WithStatusSubresource(&v1alpha1.NetworkPluginPolicy{}).Build()
	now := t0
	a, b := newRecorder(t, "manager-a", c, &now), newRecorder(t, "manager-b", c, &now)
	ref := policy.PolicyRef{Namespace: "arena", Name: "canary", Generation: 1}
	for i := range 7 {
		a.Record(ref, policy.AuditDiffers, &Sample{Pod: "arena/pod-" + string(rune('0'+i)), Operation: "CREATE", Decision: "denied (Synchronous)", WouldDecide: "admitted NotReady"})
	}
	a.Record(ref, policy.AuditSame, nil)
	a.Record(ref, policy.AuditNotEvaluated, nil)
	b.Record(ref, policy.AuditSame, nil)
	drain(a)
	drain(b)
	a.flush(ctx)
	b.flush(ctx)
	get := func() *v1alpha1.AuditStatus {
		var p v1alpha1.NetworkPluginPolicy
		if err := c.Get(ctx, types.NamespacedName{Namespace: "arena", Name: "canary"}, &p); err != nil {
			t.Fatal(err)
		}
		return p.Status.Audit
	}
	audit := get()
	if audit == nil || len(audit.Replicas) != 2 {
		t.Fatalf("status.audit = %+v, want two replicas' entries", audit)
	}
	ea, eb := audit.Replicas[0], audit.Replicas[1]
	if ea.Replica != "manager-a" || ea.Decided != 9 || ea.Differing != 7 || ea.NotEvaluated != 1 || ea.ObservedGeneration != 1 {
		t.Errorf("manager-a's entry = %+v, want 9 decided, 7 differing, 1 not evaluated", ea)
	}
	var pods []string
	for _, s := range ea.Samples {
		pods = append(pods, s.Pod)
	}
	if diff := cmp.Diff([]string{"arena/pod-6", "arena/pod-5", "arena/pod-4", "arena/pod-3", "arena/pod-2"}, pods); diff != "" {
		t.Errorf("samples (-want,+got):\n%s", diff)
	}
	if eb.Replica != "manager-b" || eb.Decided != 1 || eb.Differing != 0 {
		t.Errorf("manager-b's entry = %+v, want 1 decided", eb)
	}
	// Nothing new: no write (the resourceVersion stays).
	var before v1alpha1.NetworkPluginPolicy
	_ = c.Get(ctx, types.NamespacedName{Namespace: "arena", Name: "canary"}, &before)
	now = now.Add(DefaultInterval)
	a.flush(ctx)
	var after v1alpha1.NetworkPluginPolicy
	_ = c.Get(ctx, types.NamespacedName{Namespace: "arena", Name: "canary"}, &after)
	if before.ResourceVersion != after.ResourceVersion {
		t.Error("a flush without a new result wrote the policy")
	}
	// Two windows later only a counts again: a new window, and b's entry is gone.
	now = t0.Add(2*DefaultWindow + time.Minute)
	a.Record(ref, policy.AuditSame, nil)
	drain(a)
	a.flush(ctx)
	audit = get()
	if len(audit.Replicas) != 1 || audit.Replicas[0].Replica != "manager-a" || audit.Replicas[0].Decided != 1 || len(audit.Replicas[0].Samples) != 0 ||
		!audit.Replicas[0].WindowStart.Time.Equal(now) {
		t.Errorf("status.audit two windows later = %+v, want only manager-a's new window with 1 decided", audit)
	}
}

// TestRecorderLeavesEnforcedPolicies: results for a generation that is no longer the
// policy's, or for a policy that is Enforce now, are dropped, not written.
func TestRecorderLeavesEnforcedPolicies(t *testing.T) {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	enforced := auditPolicy(2)
	enforced.Spec.Enforcement = ptr.To(v1alpha1.EnforcementEnforce)
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(enforced).WithStatusSubresource(&v1alpha1.NetworkPluginPolicy{}).Build()
	now := t0
	r := newRecorder(t, "manager-a", c, &now)
	r.Record(policy.PolicyRef{Namespace: "arena", Name: "canary", Generation: 1}, policy.AuditDiffers, &Sample{Pod: "arena/x", Operation: "CREATE", Decision: "d", WouldDecide: "w"})
	r.Record(policy.PolicyRef{Namespace: "arena", Name: "gone", Generation: 1}, policy.AuditSame, nil)
	drain(r)
	r.flush(ctx)
	var p v1alpha1.NetworkPluginPolicy
	if err := c.Get(ctx, types.NamespacedName{Namespace: "arena", Name: "canary"}, &p); err != nil {
		t.Fatal(err)
	}
	if p.Status.Audit != nil || len(r.entries) != 0 {
		t.Errorf("status.audit = %+v, entries %d; want nothing written and nothing kept", p.Status.Audit, len(r.entries))
	}
}

// TestRecordNeverBlocks: a full queue drops and counts.
func TestRecordNeverBlocks(t *testing.T) {
	now := t0
	r := newRecorder(t, "manager-a", nil, &now)
	for range QueueLength + 3 {
		r.Record(policy.PolicyRef{Namespace: "a", Name: "b", Generation: 1}, policy.AuditSame, nil)
	}
	if got := testutil.ToFloat64(r.dropped); got != 3 {
		t.Errorf("npp_policy_audit_dropped_total = %v, want 3", got)
	}
	var nilRecorder *Recorder
	nilRecorder.Record(policy.PolicyRef{}, policy.AuditSame, nil) // must not panic
	if _, err := New(Options{}); err == nil || !strings.Contains(err.Error(), "replica") {
		t.Errorf("New without a replica: %v, want an error naming the replica", err)
	}
}
