package policy

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
	policycel "github.com/okg-extensions/network-plugin-policy/pkg/policy/cel"
)

// StoreOptions configure a Store.
type StoreOptions struct {
	// RootNamespace is the namespace whose policies are cluster-wide (the manager's
	// --root-namespace). Required.
	RootNamespace string
	// Env is the CEL environment; nil means policycel.Default().
	Env *policycel.Env
	// Lint configures the plugin and timeout warnings added to each CompileResult.
	Lint LintOptions
	// Metrics receive the store's and the resolver's metrics; nil means DefaultMetrics().
	Metrics *Metrics
}

// Informer is what Register needs of an informer: controller-runtime's cache.Informer and
// client-go's cache.SharedIndexInformer both have it.
type Informer interface {
	AddEventHandler(handler toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error)
}

// Store holds the compiled NetworkPluginPolicies of the cluster. Informer events (one at a
// time, as informers deliver them) compile a policy when its UID or generation changes
// (identical expressions share one program through a policycel.Cache) and
// publish a new immutable Snapshot through an atomic pointer; readers never lock. A policy
// that does not compile is left out of the snapshot, counted, logged and reported by Result;
// the other policies are unaffected. Bounds fail closed: a root policy with spec.bounds
// whose new generation does not compile keeps its last good generation's bounds and
// selection in the snapshot (CompileResult.KeptGeneration), logged at error level.
type Store struct {
	opts    StoreOptions
	metrics *Metrics
	cache   *policycel.Cache

	mu           sync.Mutex
	entries      map[types.NamespacedName]*entry
	accepted     map[string]map[string]*CompiledPolicy // namespace -> name -> policy
	reasons      map[string]int
	registration toolscache.ResourceEventHandlerRegistration

	snapshot atomic.Pointer[Snapshot]
}

type entry struct {
	result   CompileResult
	compiled *CompiledPolicy
	// kept is, for a root policy with bounds whose generation does not compile, the last
	// generation that did, bounds only (CompiledPolicy.boundsOnly); nil otherwise.
	kept *CompiledPolicy
}

// NewStore returns an empty store (its snapshot has no policies). Errors: a missing
// RootNamespace, or the CEL environment failing to build.
func NewStore(opts StoreOptions) (*Store, error) {
	if opts.RootNamespace == "" {
		return nil, fmt.Errorf("policy store: root namespace is required")
	}
	if opts.Env == nil {
		env, err := policycel.Default()
		if err != nil {
			return nil, fmt.Errorf("policy store: %w", err)
		}
		opts.Env = env
	}
	s := &Store{
		opts:     opts,
		metrics:  opts.Metrics,
		entries:  map[types.NamespacedName]*entry{},
		accepted: map[string]map[string]*CompiledPolicy{},
		reasons:  map[string]int{},
		cache:    policycel.NewCache(opts.Env),
	}
	if s.metrics == nil {
		s.metrics = DefaultMetrics()
	}
	s.snapshot.Store(&Snapshot{rootNamespace: opts.RootNamespace, namespaces: map[string]*namespaceIndex{}, superseded: make(chan struct{})})
	return s, nil
}

// RootNamespace returns the namespace whose policies are cluster-wide.
func (s *Store) RootNamespace() string { return s.opts.RootNamespace }

// Snapshot returns the current snapshot. It never returns nil and takes no lock.
func (s *Store) Snapshot() *Snapshot { return s.snapshot.Load() }

// Register adds the store's event handler to inf, typically the controller-runtime cache's
// informer for NetworkPluginPolicy (mgr.GetCache().GetInformer(ctx, &v1alpha1.NetworkPluginPolicy{})).
// The handler logs with ctrl.LoggerFrom(ctx).
func (s *Store) Register(ctx context.Context, inf Informer) error {
	reg, err := inf.AddEventHandler(s.Handler(ctx))
	if err != nil {
		return fmt.Errorf("add policy store event handler: %w", err)
	}
	s.mu.Lock()
	s.registration = reg
	s.mu.Unlock()
	return nil
}

// HasSynced reports whether the informer registered with Register has delivered, and the
// store compiled and published, its initial list. Use it as a readiness check.
func (s *Store) HasSynced() bool {
	s.mu.Lock()
	reg := s.registration
	s.mu.Unlock()
	return reg != nil && reg.HasSynced()
}

// Handler returns the informer event handler Register adds; tests may call it directly.
func (s *Store) Handler(ctx context.Context) toolscache.ResourceEventHandler {
	log := ctrl.LoggerFrom(ctx).WithName("policy-store")
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.upsert(log, obj) },
		UpdateFunc: func(_, obj any) { s.upsert(log, obj) },
		DeleteFunc: func(obj any) {
			if tombstone, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = tombstone.Obj
			}
			p, ok := obj.(*v1alpha1.NetworkPluginPolicy)
			if !ok {
				log.Error(fmt.Errorf("unexpected object %T", obj), "Ignoring delete event")
				return
			}
			s.remove(log, types.NamespacedName{Namespace: p.Namespace, Name: p.Name})
		},
	}
}

// Result returns the compile result of the stored generation of policy namespace/name, and
// false if the store has not seen the policy (yet). The status controller compares
// CompileResult.Generation with the object's generation.
func (s *Store) Result(namespace, name string) (CompileResult, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[types.NamespacedName{Namespace: namespace, Name: name}]
	if !ok {
		return CompileResult{}, false
	}
	return e.result, true
}

func (s *Store) upsert(log logr.Logger, obj any) {
	p, ok := obj.(*v1alpha1.NetworkPluginPolicy)
	if !ok {
		log.Error(fmt.Errorf("unexpected object %T", obj), "Ignoring policy event")
		return
	}
	key := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.entries[key]; ok && e.result.UID == p.UID && e.result.Generation == p.Generation {
		return
	}
	compiled, result := Compile(p, CompileOptions{Env: s.opts.Env, RootNamespace: s.opts.RootNamespace, Cache: s.cache})
	result.Warnings = append(result.Warnings, Lint(&p.Spec, s.opts.Lint)...)
	var kept *CompiledPolicy
	if old, ok := s.entries[key]; ok {
		s.reasons[old.result.Reason]--
		s.metrics.policies.WithLabelValues(old.result.Reason).Set(float64(s.reasons[old.result.Reason]))
		// Bounds fail closed: a root policy's bounds outlive a generation that does not
		// compile (after an edit, or an upgrade that changes the CEL environment), so that
		// a broken platform policy never lifts its guardrails. Only the same object's
		// (same UID) last good generation is kept.
		if compiled == nil && key.Namespace == s.opts.RootNamespace && old.result.UID == p.UID {
			if old.compiled != nil && (old.compiled.bounds != nil || len(old.compiled.rules) > 0) {
				// Network-conf rules, like bounds, stay in force (boundsOnly keeps them).
				kept = old.compiled.boundsOnly()
			} else {
				kept = old.kept
			}
		}
	}
	if compiled == nil && kept == nil && key.Namespace == s.opts.RootNamespace && p.Spec.Bounds != nil {
		// No good generation seen by this process (it started after the broken one was
		// stored, e.g. an upgrade that changed the CEL environment): the bounds of this
		// generation apply with its selection but without its expressions, to every pod its
		// plugins, podSelector and namespaceSelector select (fail closed: the conditions
		// that would narrow it cannot be evaluated).
		if b := boundsWithoutExpressions(p, s.opts.Env, s.opts.RootNamespace, s.cache); b != nil {
			kept = b
			result.BoundsWithoutConditions = true
		}
	}
	if kept != nil && !result.BoundsWithoutConditions {
		result.KeptGeneration = kept.ref.Generation
	}
	s.entries[key] = &entry{result: result, compiled: compiled, kept: kept}
	s.reasons[result.Reason]++
	s.metrics.policies.WithLabelValues(result.Reason).Set(float64(s.reasons[result.Reason]))
	var compileErr error
	if compiled == nil {
		s.metrics.compileErrors.WithLabelValues(p.Namespace, p.Name).Inc()
		compileErr = result.Errors.ToAggregate()
	}
	switch {
	case compiled != nil:
		log.V(1).Info("Policy compiled", "policy", klog.KObj(p), "generation", p.Generation, "warnings", len(result.Warnings))
	case result.BoundsWithoutConditions:
		log.Error(compileErr, "Root policy does not compile and no good generation was seen; its bounds apply without its expressions until it compiles",
			"policy", klog.KObj(p), "generation", p.Generation, "reason", result.Reason)
	case kept != nil:
		log.Error(compileErr, "Root policy does not compile; the bounds and selection of its last good generation stay in force until it does",
			"policy", klog.KObj(p), "generation", p.Generation, "keptGeneration", kept.ref.Generation, "reason", result.Reason)
	case key.Namespace == s.opts.RootNamespace:
		log.Error(compileErr, "Root policy does not compile; it is ignored until fixed",
			"policy", klog.KObj(p), "generation", p.Generation, "reason", result.Reason)
	default:
		log.Info("Policy does not compile; it is ignored until fixed", "policy", klog.KObj(p),
			"generation", p.Generation, "reason", result.Reason, "errors", compileErr.Error())
	}
	if compiled == nil {
		compiled = kept
	}
	s.setAccepted(key, compiled)
}

func (s *Store) remove(log logr.Logger, key types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.entries[key]
	if !ok {
		return
	}
	delete(s.entries, key)
	s.reasons[old.result.Reason]--
	s.metrics.policies.WithLabelValues(old.result.Reason).Set(float64(s.reasons[old.result.Reason]))
	s.metrics.forget(key.Namespace, key.Name)
	log.V(1).Info("Policy removed", "policy", klog.KRef(key.Namespace, key.Name))
	s.setAccepted(key, nil)
}

// setAccepted records compiled (nil: none) for key and publishes a snapshot in which only
// key's namespace is re-indexed. Callers hold s.mu.
func (s *Store) setAccepted(key types.NamespacedName, compiled *CompiledPolicy) {
	ns := s.accepted[key.Namespace]
	if compiled == nil {
		if _, ok := ns[key.Name]; !ok {
			return
		}
		delete(ns, key.Name)
	} else {
		if ns == nil {
			ns = map[string]*CompiledPolicy{}
			s.accepted[key.Namespace] = ns
		}
		ns[key.Name] = compiled
	}
	var idx *namespaceIndex
	if len(ns) == 0 {
		delete(s.accepted, key.Namespace)
	} else {
		idx = newNamespaceIndex(ns)
	}
	old := s.snapshot.Load()
	s.snapshot.Store(old.with(key.Namespace, idx))
	close(old.superseded)
}

// boundsWithoutExpressions compiles p without its CEL expressions (matchConditions,
// failureModeExpression, retry.windowExpression) and returns its bounds only
// (CompiledPolicy.boundsOnly), nil when even that does not compile (an invalid selector).
func boundsWithoutExpressions(p *v1alpha1.NetworkPluginPolicy, env *policycel.Env, root string, cache *policycel.Cache) *CompiledPolicy {
	q := p.DeepCopy()
	q.Spec.MatchConditions = nil
	q.Spec.FailureModeExpression = nil
	if q.Spec.Retry != nil {
		q.Spec.Retry.WindowExpression = nil
	}
	compiled, _ := Compile(q, CompileOptions{Env: env, RootNamespace: root, Cache: cache})
	if compiled == nil || compiled.bounds == nil {
		return nil
	}
	return compiled.boundsOnly()
}
