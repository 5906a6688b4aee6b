// Package policyaudit writes what a webhook replica counted of the Audit policies' would-be
// decisions (policy.Resolution.Audit) into the policies' status.audit, as the replica's own
// entry (v1alpha1.ReplicaAuditStatus).
//
// The pod webhook hands each result to Recorder.Record, which never blocks: a full queue
// drops the result and counts it (npp_policy_audit_dropped_total). Recorder.Start
// aggregates the results per policy in memory and writes the changed entries every
// interval, at most one status update per policy per interval, with the policy's
// resourceVersion (a conflict waits for the next interval). Counts cover a window
// (Options.Window) and start again after it, or when the policy's generation changes; the
// latest 5 differing admissions are kept as samples. Entries of other replicas not updated
// for two windows are removed with the next write. Nothing is written for a policy that is
// no longer Audit (the policy status controller removes status.audit then).
package policyaudit

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
	"github.com/okg-extensions/network-plugin-policy/pkg/policy"
)

// Defaults of Options.
const (
	// DefaultWindow is how long counts accumulate before they start again: 1 hour.
	DefaultWindow = time.Hour
	// DefaultInterval is how often at most a replica writes one policy's entry: 15 seconds.
	DefaultInterval = 15 * time.Second
	// QueueLength is how many results wait for the aggregator before Record drops them.
	QueueLength = 4096
	// MaxSamples is how many differing admissions an entry keeps (the API's MaxItems).
	MaxSamples = 5
	// maxPod and maxText are the API's MaxLength of AuditSample.Pod and of its texts.
	maxPod, maxText = 317, 512
	// maxReplicas is the API's MaxItems of AuditStatus.Replicas.
	maxReplicas = 16
)

// Options configure a Recorder.
type Options struct {
	// Client reads policies (the manager's cached client) and updates their status.
	Client client.Client
	// Replica is this replica's pod name, the key of its entry. Required.
	Replica string
	// Window and Interval: DefaultWindow and DefaultInterval when zero.
	Window, Interval time.Duration
	// Registerer registers npp_policy_audit_dropped_total; nil registers nowhere.
	Registerer prometheus.Registerer
}

// Sample is one admission an Audit policy would have decided otherwise, as Record takes it.
type Sample struct {
	// Pod is namespace/name; Operation CREATE, UPDATE or DELETE.
	Pod, Operation string
	// Decision and WouldDecide describe the two decisions (pkg/webhook/pod
	// AuditOutcomeText).
	Decision, WouldDecide string
}

// result is one Audit result in the queue.
type result struct {
	ref     policy.PolicyRef
	outcome policy.AuditOutcome
	sample  *Sample
	at      time.Time
}

// entry is one policy's counts in memory.
type entry struct {
	status v1alpha1.ReplicaAuditStatus
	dirty  bool
}

// Recorder aggregates Audit results and writes them into the policies' status; see the
// package comment. It is a controller-runtime Runnable of every replica.
type Recorder struct {
	opts    Options
	queue   chan result
	dropped prometheus.Counter
	now     func() time.Time
	entries map[types.NamespacedName]*entry
}

// New returns a Recorder. Errors: Replica is empty, or the metric cannot be registered.
func New(opts Options) (*Recorder, error) {
	if opts.Replica == "" {
		return nil, fmt.Errorf("policy audit recorder: the replica name is required")
	}
	if opts.Window <= 0 {
		opts.Window = DefaultWindow
	}
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	r := &Recorder{
		opts:  opts,
		queue: make(chan result, QueueLength),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "npp_policy_audit_dropped_total",
			Help: "Audit results the webhook could not queue for the policies' status.audit (the queue was full); the metric npp_policy_audit_decisions_total still counts them.",
		}),
		now:     time.Now,
		entries: map[types.NamespacedName]*entry{},
	}
	if opts.Registerer != nil {
		if err := opts.Registerer.Register(r.dropped); err != nil {
			return nil, fmt.Errorf("register npp_policy_audit_dropped_total: %w", err)
		}
	}
	return r, nil
}

// Record queues one Audit result of the policy ref, with sample for an AuditDiffers one
// (nil otherwise); it never blocks. A nil Recorder records nothing.
func (r *Recorder) Record(ref policy.PolicyRef, outcome policy.AuditOutcome, sample *Sample) {
	if r == nil {
		return
	}
	select {
	case r.queue <- result{ref: ref, outcome: outcome, sample: sample, at: r.now()}:
	default:
		r.dropped.Inc()
	}
}

// NeedLeaderElection is false: every replica writes its own entries.
func (*Recorder) NeedLeaderElection() bool { return false }

// Start aggregates and writes until ctx ends.
func (r *Recorder) Start(ctx context.Context) error {
	t := time.NewTicker(r.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case res := <-r.queue:
			r.add(res)
		case <-t.C:
			r.flush(ctx)
		}
	}
}

// add counts res into its policy's entry.
func (r *Recorder) add(res result) {
	key := types.NamespacedName{Namespace: res.ref.Namespace, Name: res.ref.Name}
	e := r.entries[key]
	if e == nil || e.status.ObservedGeneration != res.ref.Generation || res.at.Sub(e.status.WindowStart.Time) >= r.opts.Window {
		e = &entry{status: v1alpha1.ReplicaAuditStatus{Replica: r.opts.Replica, ObservedGeneration: res.ref.Generation,
			WindowStart: ptr.To(metav1.NewTime(res.at.Truncate(time.Second)))}}
		r.entries[key] = e
	}
	s := &e.status
	s.Decided++
	switch res.outcome {
	case policy.AuditDiffers:
		s.Differing++
		if res.sample != nil {
			sample := v1alpha1.AuditSample{Pod: cut(res.sample.Pod, maxPod), Operation: res.sample.Operation,
				Time: ptr.To(metav1.NewTime(res.at.Truncate(time.Second))), Decision: cut(res.sample.Decision, maxText),
				WouldDecide: cut(res.sample.WouldDecide, maxText)}
			s.Samples = append([]v1alpha1.AuditSample{sample}, s.Samples...)
			if len(s.Samples) > MaxSamples {
				s.Samples = s.Samples[:MaxSamples]
			}
		}
	case policy.AuditNotEvaluated:
		s.NotEvaluated++
	}
	e.dirty = true
}

// flush writes every changed entry; an entry whose policy is gone or no longer Audit is
// dropped, one whose write failed stays changed for the next flush.
func (r *Recorder) flush(ctx context.Context) {
	log := ctrl.LoggerFrom(ctx).WithName("policy-audit")
	now := r.now()
	for key, e := range r.entries {
		if !e.dirty {
			if now.Sub(e.status.WindowStart.Time) >= 2*r.opts.Window {
				delete(r.entries, key)
			}
			continue
		}
		var p v1alpha1.NetworkPluginPolicy
		if err := r.opts.Client.Get(ctx, key, &p); err != nil {
			if apierrors.IsNotFound(err) {
				delete(r.entries, key)
			}
			continue
		}
		if p.Spec.Enforcement == nil || *p.Spec.Enforcement != v1alpha1.EnforcementAudit || p.Generation != e.status.ObservedGeneration {
			delete(r.entries, key)
			continue
		}
		e.status.LastUpdate = ptr.To(metav1.NewTime(now.Truncate(time.Second)))
		p.Status.Audit = r.merged(p.Status.Audit, e.status, now)
		if err := r.opts.Client.Status().Update(ctx, &p); err != nil {
			if !apierrors.IsConflict(err) {
				log.Error(err, "Unable to write the audit result into the policy's status (tried again at the next interval)", "policy", key)
			}
			continue
		}
		e.dirty = false
	}
}

// merged returns audit with this replica's entry set to mine and the entries of other
// replicas not updated for two windows left out.
func (r *Recorder) merged(audit *v1alpha1.AuditStatus, mine v1alpha1.ReplicaAuditStatus, now time.Time) *v1alpha1.AuditStatus {
	out := &v1alpha1.AuditStatus{Replicas: []v1alpha1.ReplicaAuditStatus{*mine.DeepCopy()}}
	if audit != nil {
		for _, e := range audit.Replicas {
			if e.Replica != mine.Replica && e.LastUpdate != nil && now.Sub(e.LastUpdate.Time) < 2*r.opts.Window && len(out.Replicas) < maxReplicas {
				out.Replicas = append(out.Replicas, e)
			}
		}
	}
	slices.SortFunc(out.Replicas, func(a, b v1alpha1.ReplicaAuditStatus) int {
		switch {
		case a.Replica < b.Replica:
			return -1
		case a.Replica > b.Replica:
			return 1
		}
		return 0
	})
	return out
}

// cut returns s cut to at most n bytes.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
