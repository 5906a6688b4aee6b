package main

import (
	"context"
	"fmt"
	"maps"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policycel "github.com/okg-extensions/network-plugin-policy/pkg/policy/cel"
	"github.com/okg-extensions/network-plugin-policy/pkg/version"
)

// leaderElectionID is the name of the manager's leader-election Lease.
const leaderElectionID = "network-plugin-policy.policy.game.kruise.io"

// buildInfo is this binary's version.Info with the CEL environment it evaluates policies
// with.
func buildInfo() version.Info {
	i := version.Get()
	i.CELEnvironment = policycel.CompatibilityVersion.String()
	return i
}

// leaseVersion is a leader-only runnable that writes the leader's buildInfo on the
// leader-election Lease as annotations (version.LeaseAnnotationVersion, ...), once when
// this replica becomes leader, so that `nppctl version --live` reads which manager decides.
// It reads the Lease with reader (uncached: the manager caches no Lease) and updates it with
// writer, retried on conflict (the leader renews the Lease every few seconds; its renewals
// keep annotations). A failure is logged and left: the annotations are informational.
type leaseVersion struct {
	reader client.Reader
	writer client.Writer
	lease  types.NamespacedName
	info   version.Info
}

// NeedLeaderElection is true: only the leader writes the Lease's annotations.
func (leaseVersion) NeedLeaderElection() bool { return true }

// Start writes the annotations and returns; it never fails the manager.
func (l leaseVersion) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("lease-version")
	want := l.info.Annotations()
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		lease := &coordinationv1.Lease{}
		if err := l.reader.Get(ctx, l.lease, lease); err != nil {
			return err
		}
		if lease.Annotations == nil {
			lease.Annotations = map[string]string{}
		}
		before := maps.Clone(lease.Annotations)
		maps.Copy(lease.Annotations, want)
		if maps.Equal(before, lease.Annotations) {
			return nil
		}
		return l.writer.Update(ctx, lease)
	})
	if err != nil {
		log.Error(fmt.Errorf("annotate Lease %s: %w", l.lease, err), "Unable to record the leader's version on its Lease (nppctl version --live will not see it)")
		return nil
	}
	log.Info("Recorded the leader's version on its Lease", "lease", l.lease, "version", l.info.String())
	return nil
}
