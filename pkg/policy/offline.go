package policy

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
)

// NewStoreFromPolicies returns a Store holding policies, for tools that work without an
// informer (nppctl). Each policy goes through the Store's own informer event handler, so it
// is compiled, linted and indexed exactly as the manager does it (StoredExpressions
// environment, shared program cache); Store.Result reports each compile result and a policy
// that does not compile is left out of the snapshot, as in the manager.
//
// opts.Metrics nil means metrics registered in a private registry (nobody scrapes an
// offline store), not DefaultMetrics. The store logs nothing: ctx's logger is replaced by a
// discarding one. Errors: those of NewStore; a policy that is nil, has no namespace or name,
// or has the same namespace and name as an earlier one (the informer would keep only one).
func NewStoreFromPolicies(ctx context.Context, opts StoreOptions, policies []*v1alpha1.NetworkPluginPolicy) (*Store, error) {
	if opts.Metrics == nil {
		m, err := NewMetrics(prometheus.NewRegistry())
		if err != nil {
			return nil, err
		}
		opts.Metrics = m
	}
	s, err := NewStore(opts)
	if err != nil {
		return nil, err
	}
	seen := map[types.NamespacedName]bool{}
	for i, p := range policies {
		if p == nil {
			return nil, fmt.Errorf("policy %d is nil", i)
		}
		key := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
		if key.Namespace == "" || key.Name == "" {
			return nil, fmt.Errorf("policy %d (%s): metadata.namespace and metadata.name are required", i, key)
		}
		if seen[key] {
			return nil, fmt.Errorf("policy %d: duplicate NetworkPluginPolicy %s", i, key)
		}
		seen[key] = true
	}
	h := s.Handler(ctrl.LoggerInto(ctx, logr.Discard()))
	for _, p := range policies {
		h.OnAdd(p, true)
	}
	return s, nil
}
