package policy

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
	policycel "github.com/okg-extensions/network-plugin-policy/pkg/policy/cel"
)

// RequestInfo is the part of the admission request policies see (CEL variable request).
type RequestInfo struct {
	// Operation is CREATE, UPDATE or DELETE.
	Operation string
	// UserInfo is the requesting user.
	UserInfo authenticationv1.UserInfo
	// DryRun is true for a dry-run request.
	DryRun bool
}

// Input is one plugin call to decide on.
type Input struct {
	// Pod is the pod (for DELETE, the pod being deleted). Required.
	Pod *corev1.Pod
	// OldPod is the pod before an UPDATE or DELETE; nil on CREATE.
	OldPod *corev1.Pod
	// Namespace is the pod's namespace object; its name is the pod's namespace (Pod.Namespace
	// is used when Namespace is nil, and a namespaceSelector then sees no labels).
	Namespace *corev1.Namespace
	// Request is the admission request.
	Request RequestInfo
	// Plugin is the network plugin. Required.
	Plugin Plugin
	// Error is the plugin's failure, nil before the plugin ran or when it succeeded.
	// failureModeExpression and retry.windowExpression are evaluated only when it is set;
	// otherwise the static failureMode and retry.window of the supplying policy apply.
	Error *PluginError
}

// Resolver decides, for one plugin call, from the Store's current snapshot. It takes no lock
// and compiles nothing; it is safe for concurrent use.
type Resolver struct {
	store   *Store
	metrics *Metrics
}

// NewResolver returns a resolver over store, reporting to the store's metrics.
func NewResolver(store *Store) *Resolver {
	return &Resolver{store: store, metrics: store.metrics}
}

// ErrNoPod is returned by Resolve for an Input without a Pod.
var ErrNoPod = errors.New("resolve policy: input has no pod")

// Resolve returns the decision for in, following DESIGN.md section 4.
//
// Candidates are the policies of the root namespace and of the pod's namespace whose
// spec.plugins list the plugin's name, alias or "*". They are ordered by precedence: own
// namespace before root; with podSelector before without; listed by name before alias
// before "*"; higher priority first; then by namespace and name. Walking that order, a policy
// whose podSelector, namespaceSelector and matchConditions all match supplies each group it
// sets (failure, timeout, readinessGate, retry) that no earlier policy supplied; groups left
// over keep the built-in defaults. matchConditions are evaluated only for policies that could
// still supply a group; one that fails at runtime makes its policy not match, and is counted
// (npp_cel_evaluation_errors_total) and logged. The only error is ErrNoPod; CEL errors end up
// in the Explanation.
func (r *Resolver) Resolve(ctx context.Context, in Input) (Decision, error) {
	start := time.Now()
	d, err := resolve(ctx, r.store.Snapshot(), r.metrics, in)
	r.metrics.resolveDuration.Observe(time.Since(start).Seconds())
	return d, err
}

// matchKind is how a policy's spec.plugins selected the plugin; lower is more specific.
type matchKind uint8

const (
	byName matchKind = iota
	byAlias
	byWildcard
)

type candidate struct {
	policy *CompiledPolicy
	own    bool
	kind   matchKind
}

// compareCandidates orders by precedence, most specific first.
func compareCandidates(a, b candidate) int {
	if a.own != b.own {
		if a.own {
			return -1
		}
		return 1
	}
	if aSel, bSel := a.policy.podSelector != nil, b.policy.podSelector != nil; aSel != bSel {
		if aSel {
			return -1
		}
		return 1
	}
	if c := cmp.Compare(a.kind, b.kind); c != 0 {
		return c
	}
	if c := cmp.Compare(b.policy.priority, a.policy.priority); c != 0 {
		return c
	}
	if c := cmp.Compare(a.policy.ref.Namespace, b.policy.ref.Namespace); c != 0 {
		return c
	}
	return cmp.Compare(a.policy.ref.Name, b.policy.ref.Name)
}

// resolution is the state of one Resolve call.
type resolution struct {
	in      *Input
	metrics *Metrics
	act     *policycel.Activation
}

func (res *resolution) activation() *policycel.Activation {
	if res.act == nil {
		in := res.in
		vars := policycel.Variables{
			Object:  in.Pod,
			Request: policycel.Request{Operation: in.Request.Operation, UserInfo: in.Request.UserInfo, DryRun: in.Request.DryRun},
			Plugin:  policycel.Plugin{Name: in.Plugin.Name, Alias: in.Plugin.Alias, Synchronous: in.Plugin.Synchronous},
		}
		if in.OldPod != nil {
			vars.OldObject = in.OldPod
		}
		if in.Namespace != nil {
			vars.Namespace = in.Namespace
		}
		if in.Error != nil {
			vars.Error = &policycel.PluginError{Type: in.Error.Type, Message: in.Error.Message}
		}
		res.act = policycel.NewActivation(vars)
	}
	return res.act
}

// evalError counts and logs a runtime error of an expression of p.
func (res *resolution) evalError(ctx context.Context, p *CompiledPolicy, what string, err error) {
	res.metrics.evalErrors.WithLabelValues(p.ref.Namespace, p.ref.Name).Inc()
	if errors.Is(err, policycel.ErrOutOfBudget) {
		res.metrics.outOfBudget.WithLabelValues(p.ref.Namespace, p.ref.Name).Inc()
	}
	ctrl.LoggerFrom(ctx).Info("Policy expression failed", "policy", klog.KRef(p.ref.Namespace, p.ref.Name),
		"generation", p.ref.Generation, "expression", what, "pod", klog.KObj(res.in.Pod), "err", err.Error())
}

func resolve(ctx context.Context, snap *Snapshot, metrics *Metrics, in Input) (Decision, error) {
	if in.Pod == nil {
		return Decision{}, ErrNoPod
	}
	res := resolution{in: &in, metrics: metrics}
	decision := defaultDecision(in.Plugin)
	namespace := in.Pod.Namespace
	var nsLabels labels.Set
	if in.Namespace != nil {
		namespace = in.Namespace.Name
		nsLabels = in.Namespace.Labels
	}

	var buf [32]candidate
	cands := collect(buf[:0], snap.namespaces[namespace], true, in.Plugin)
	if namespace != snap.rootNamespace {
		cands = collect(cands, snap.namespaces[snap.rootNamespace], false, in.Plugin)
	}
	slices.SortFunc(cands, compareCandidates)

	var winners [4]*CompiledPolicy // by group bit index
	need := allGroups
	podLabels := labels.Set(in.Pod.Labels)
	var losers []Loser
	lose := func(l Loser) {
		if losers == nil {
			losers = make([]Loser, 0, len(cands))
		}
		losers = append(losers, l)
	}
	for _, c := range cands {
		p := c.policy
		if p.groups()&need == 0 {
			lose(Loser{Policy: &p.ref, Reason: LostOutranked})
			continue
		}
		if p.podSelector != nil && !p.podSelector.Matches(podLabels) {
			lose(Loser{Policy: &p.ref, Reason: LostPodSelector})
			continue
		}
		if p.namespaceSelector != nil && !p.namespaceSelector.Matches(nsLabels) {
			lose(Loser{Policy: &p.ref, Reason: LostNamespaceSelector})
			continue
		}
		if l, ok := res.conditionsMatch(ctx, p); !ok {
			lose(l)
			continue
		}
		supplies := p.groups() & need
		for i := range winners {
			if supplies&(1<<i) != 0 {
				winners[i] = p
			}
		}
		need &^= supplies
	}

	exp := &decision.Explanation
	exp.Losers = losers
	if p := winners[0]; p != nil {
		exp.Failure.Policy = &p.ref
		decision.Mode = res.failureMode(ctx, p, exp)
	}
	if p := winners[1]; p != nil {
		exp.Timeout.Policy = &p.ref
		decision.Timeout = *p.timeout
	}
	if p := winners[2]; p != nil {
		exp.ReadinessGate.Policy = &p.ref
		decision.ReadinessGate = *p.readinessGate
	}
	if p := winners[3]; p != nil {
		exp.Retry.Policy = &p.ref
		decision.Retry = p.retry
		if p.windowExpr != nil && in.Error != nil {
			window, err := p.windowExpr.EvalDuration(ctx, res.activation())
			switch {
			case err != nil:
				res.evalError(ctx, p, "retry.windowExpression", err)
				exp.Notes = append(exp.Notes, fmt.Sprintf("retry.windowExpression of %s failed (%v); window %s used", p.ref, err, p.retry.Window))
			case window <= 0:
				res.evalError(ctx, p, "retry.windowExpression", fmt.Errorf("returned %s, not a positive duration", window))
				exp.Notes = append(exp.Notes, fmt.Sprintf("retry.windowExpression of %s returned %s, not a positive duration; window %s used", p.ref, window, p.retry.Window))
			default:
				decision.Retry.Window = window
			}
		}
	}
	return decision, nil
}

// collect appends the policies of idx that list plugin, each once with its most specific
// match kind.
func collect(cands []candidate, idx *namespaceIndex, own bool, plugin Plugin) []candidate {
	if idx == nil {
		return cands
	}
	for _, p := range idx.byPlugin[plugin.Name] {
		cands = append(cands, candidate{policy: p, own: own, kind: byName})
	}
	if plugin.Alias != "" && plugin.Alias != plugin.Name {
		for _, p := range idx.byPlugin[plugin.Alias] {
			if !p.listsPlugin(plugin.Name) {
				cands = append(cands, candidate{policy: p, own: own, kind: byAlias})
			}
		}
	}
	for _, p := range idx.wildcard {
		if !p.listsPlugin(plugin.Name) && (plugin.Alias == "" || !p.listsPlugin(plugin.Alias)) {
			cands = append(cands, candidate{policy: p, own: own, kind: byWildcard})
		}
	}
	return cands
}

// conditionsMatch evaluates p's matchConditions in order; the first false or failing one
// makes p lose.
func (res *resolution) conditionsMatch(ctx context.Context, p *CompiledPolicy) (Loser, bool) {
	for _, c := range p.conditions {
		ok, err := c.program.EvalBool(ctx, res.activation())
		if err != nil {
			res.evalError(ctx, p, "matchCondition "+c.name, err)
			return Loser{Policy: &p.ref, Reason: LostConditionError, Condition: c.name, Err: err}, false
		}
		if !ok {
			return Loser{Policy: &p.ref, Reason: LostConditionFalse, Condition: c.name}, false
		}
	}
	return Loser{}, true
}

// failureMode returns the failure mode of the failure group supplied by p: the value of
// failureModeExpression when the call failed and it evaluates to a valid mode, else
// failureMode, else the plugin's built-in mode; fallbacks are noted in exp.
func (res *resolution) failureMode(ctx context.Context, p *CompiledPolicy, exp *Explanation) v1alpha1.FailureMode {
	static := defaultMode(res.in.Plugin)
	staticFrom := "the plugin's built-in mode"
	if p.failureMode != nil {
		static = *p.failureMode
		staticFrom = "failureMode"
	}
	if p.failureModeExpr == nil || res.in.Error == nil {
		return static
	}
	mode, err := p.failureModeExpr.EvalString(ctx, res.activation())
	if err == nil {
		switch v1alpha1.FailureMode(mode) {
		case v1alpha1.FailureModeSynchronous, v1alpha1.FailureModeAsynchronous:
			return v1alpha1.FailureMode(mode)
		}
		err = fmt.Errorf("returned %q, want Synchronous or Asynchronous", mode)
	}
	res.evalError(ctx, p, "failureModeExpression", err)
	exp.Notes = append(exp.Notes, fmt.Sprintf("failureModeExpression of %s failed (%v); %s %s used", p.ref, err, staticFrom, static))
	return static
}
