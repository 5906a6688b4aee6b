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
	// NamespaceUnknown says the pod's Namespace could not be read (an error, or a cache that
	// has not seen it yet): a namespaceSelector is then not matched at all rather than
	// against no labels. A bounding root policy whose podSelector matches applies (bounds
	// fail closed, LostNamespaceUnknown in the explanation, counted in
	// npp_policy_bounds_applied_on_error_total); other policies with a namespaceSelector do
	// not match.
	NamespaceUnknown bool
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
	// budget is the CEL cost budget of one resolution; 0 means policycel.DefaultBudget.
	budget int64
}

// NewResolver returns a resolver over store, reporting to the store's metrics.
func NewResolver(store *Store) *Resolver {
	return &Resolver{store: store, metrics: store.metrics}
}

// ErrNoPod is returned by Resolve for an Input without a Pod.
var ErrNoPod = errors.New("resolve policy: input has no pod")

// Resolve returns the decision for in: Begin, then Resolution.Decision.
func (r *Resolver) Resolve(ctx context.Context, in Input) (Decision, error) {
	res, err := r.Begin(ctx, in)
	if err != nil {
		return Decision{}, err
	}
	return res.Decision(ctx), nil
}

// Begin resolves in on the Store's current snapshot, loaded once, with one CEL cost budget
// (policycel.DefaultBudget) for every expression of the resolution, and returns the
// Resolution from which the decision (Decision) and, once the plugin failed, the decision for
// the failure (Failed) are made, on the same snapshot and budget.
//
// Candidates are the policies of the root namespace and of the pod's namespace whose
// spec.plugins list the plugin's name, alias or "*". They are ordered by precedence: own
// namespace before root; with podSelector before without (an empty podSelector counts as
// unset); listed by name before alias before "*"; higher priority first; then by namespace
// and name. Root policies with spec.bounds are matched first (for a pod outside the root
// namespace), so that namespace policies cannot spend the budget before them. Walking the
// order, a policy whose podSelector, namespaceSelector and matchConditions all match supplies
// each group it sets (failure, timeout, readinessGate, retry) that no earlier policy supplied;
// groups left over keep the built-in defaults. A bounding root policy whose matchConditions
// fail at runtime or are left unevaluated by the budget applies all the same (bounds fail
// closed), noted in the Explanation and counted (npp_policy_bounds_applied_on_error_total).
// matchConditions are evaluated only for
// policies that could still supply a group; one that fails at runtime makes its policy not
// match, and is counted (npp_cel_evaluation_errors_total) and logged. Once the budget is
// spent, no further expression is evaluated and the remaining policies count as not
// matching (LostBudget); that is logged once and counted (npp_cel_request_budget_spent_total,
// npp_cel_not_evaluated_total). The only error is ErrNoPod; CEL errors end up in the
// Explanation.
func (r *Resolver) Begin(ctx context.Context, in Input) (*Resolution, error) {
	start := time.Now()
	defer func() { r.metrics.resolveDuration.Observe(time.Since(start).Seconds()) }()
	return begin(ctx, r.store.Snapshot(), r.metrics, r.budget, in)
}

// begin is Begin on snap with a budget of budget cost units (0: policycel.DefaultBudget).
func begin(ctx context.Context, snap *Snapshot, metrics *Metrics, budget int64, in Input) (*Resolution, error) {
	if in.Pod == nil {
		return nil, ErrNoPod
	}
	if budget == 0 {
		budget = policycel.DefaultBudget
	}
	res := &Resolution{in: in, metrics: metrics, budget: budget, snap: snap}
	res.walk(ctx, snap)
	return res, nil
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
	// matched and loser cache a bounding policy's match, made before the walk.
	evaluated, matched bool
	loser              Loser
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

// Resolution is one resolved plugin call: the policies that supply each group, the root
// policies whose bounds apply, and the request's CEL activation with its cost budget. It is
// made by Resolver.Begin and used by one admission request: it is not safe for concurrent
// use.
type Resolution struct {
	in      Input
	metrics *Metrics
	budget  int64
	act     *policycel.Activation

	winners [4]*CompiledPolicy // by group bit index
	tenant  [4]bool            // the winner is a namespace policy, subject to bounds
	bounds  []*CompiledPolicy  // matching bounding root policies, most specific first
	losers  []Loser
	// boundsOnError are the bounding root policies among bounds whose matchConditions
	// could not be evaluated (LostConditionError, LostBudget): they apply all the same.
	boundsOnError []Loser

	budgetReported bool

	// snap is the snapshot of the walk, kept for Audit.
	snap *Snapshot
	// audits are the Audit policies naming the plugin, in precedence order (main
	// resolution only).
	audits []*CompiledPolicy
	// rules and auditRules are the root policies whose network-conf rules select the pod,
	// Enforce and Audit (main resolution only; collectRules).
	rules, auditRules []*CompiledPolicy
	// auditAs, in a resolution made by Audit, is the Audit policy that counts as Enforce;
	// every other Audit policy is left out. Such a resolution counts nothing in the
	// request's budget metrics (budgetReported is set) and no bound applied on error, and
	// records in notEvaluated whether an expression was left unevaluated for lack of
	// budget.
	auditAs      *CompiledPolicy
	notEvaluated bool
	// matched caches, by policy, the selectors and matchConditions of the policies already
	// matched for this request, shared with Audit's resolutions so that an expression is
	// evaluated once per request; nil when the plugin has no Audit policy.
	matched map[*CompiledPolicy]matchResult
}

// matchResult is a cached match of one policy (Resolution.matched).
type matchResult struct {
	loser Loser
	ok    bool
}

func (res *Resolution) activation() *policycel.Activation {
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
			vars.Error = &policycel.PluginError{Type: in.Error.Type, Message: in.Error.Message, Reason: in.Error.Reason}
		}
		res.act = policycel.NewActivationWithBudget(vars, res.budget)
	}
	return res.act
}

// evalError counts and logs a runtime error of an expression of p. An expression not
// evaluated because the budget was already spent is counted in npp_cel_not_evaluated_total
// only, and the spent budget is logged once per resolution.
func (res *Resolution) evalError(ctx context.Context, p *CompiledPolicy, what string, err error) {
	if errors.Is(err, policycel.ErrNotEvaluated) {
		res.notEvaluated = true
		if res.auditAs == nil { // an Audit policy's is counted as its not_evaluated outcome
			res.metrics.notEvaluated.Inc()
		}
		res.budgetSpent(ctx, p, what)
		return
	}
	res.metrics.evalErrors.WithLabelValues(p.ref.Namespace, p.ref.Name).Inc()
	if errors.Is(err, policycel.ErrOutOfBudget) {
		res.metrics.outOfBudget.WithLabelValues(p.ref.Namespace, p.ref.Name).Inc()
	}
	ctrl.LoggerFrom(ctx).Info("Policy expression failed", "policy", klog.KRef(p.ref.Namespace, p.ref.Name),
		"generation", p.ref.Generation, "expression", what, "pod", klog.KObj(res.in.Pod), "err", err.Error())
}

// budgetSpent logs and counts, once per resolution, that the budget ran out before the
// expression what of p.
func (res *Resolution) budgetSpent(ctx context.Context, p *CompiledPolicy, what string) {
	if res.budgetReported {
		return
	}
	res.budgetReported = true
	res.metrics.budgetSpent.Inc()
	ctrl.LoggerFrom(ctx).Info("CEL cost budget of the request spent; the remaining expressions are not evaluated and their policies do not match",
		"budget", res.budget, "firstNotEvaluated", klog.KRef(p.ref.Namespace, p.ref.Name), "expression", what,
		"pod", klog.KObj(res.in.Pod), "plugin", res.in.Plugin.Name)
}

// matches reports whether c's selectors and matchConditions match, with the reason it lost
// when not.
func (res *Resolution) matches(ctx context.Context, c *candidate, podLabels, nsLabels labels.Set) (Loser, bool) {
	if c.evaluated {
		return c.loser, c.matched
	}
	p := c.policy
	c.evaluated = true
	if m, ok := res.matched[p]; ok {
		c.loser, c.matched = m.loser, m.ok
		return c.loser, c.matched
	}
	if res.matched != nil {
		defer func() { res.matched[p] = matchResult{loser: c.loser, ok: c.matched} }()
	}
	switch {
	case p.podSelector != nil && !p.podSelector.Matches(podLabels):
		c.loser = Loser{Policy: &p.ref, Reason: LostPodSelector}
	case p.namespaceSelector != nil && res.in.NamespaceUnknown:
		c.loser = Loser{Policy: &p.ref, Reason: LostNamespaceUnknown}
	case p.namespaceSelector != nil && !p.namespaceSelector.Matches(nsLabels):
		c.loser = Loser{Policy: &p.ref, Reason: LostNamespaceSelector}
	default:
		c.loser, c.matched = res.conditionsMatch(ctx, p)
	}
	return c.loser, c.matched
}

// walk picks the winners of each group and the matching bounds from snap.
func (res *Resolution) walk(ctx context.Context, snap *Snapshot) {
	in := &res.in
	namespace := in.Pod.Namespace
	var nsLabels labels.Set
	if in.Namespace != nil {
		namespace = in.Namespace.Name
		nsLabels = in.Namespace.Labels
	}
	podLabels := labels.Set(in.Pod.Labels)

	var buf [32]candidate
	cands := collect(buf[:0], snap.namespaces[namespace], true, in.Plugin)
	if namespace != snap.rootNamespace {
		cands = collect(cands, snap.namespaces[snap.rootNamespace], false, in.Plugin)
	}
	slices.SortFunc(cands, compareCandidates)
	res.collectRules(cands, nsLabels)
	if res.matched == nil {
		for i := range cands {
			if cands[i].policy.audit {
				res.matched = make(map[*CompiledPolicy]matchResult, len(cands))
				break
			}
		}
	}

	// Bounds first: the platform's guardrails never wait behind namespace policies' CEL.
	// They fail closed: a bound whose matchConditions cannot be evaluated for the pod (an
	// error, such as a missing key in labels the pod's author controls, or a spent budget),
	// or whose namespaceSelector cannot be matched (the Namespace could not be read),
	// applies, and the explanation says why.
	if namespace != snap.rootNamespace {
		for i := range cands {
			if c := &cands[i]; !c.own && c.policy.bounds != nil && res.enforces(c.policy) {
				l, ok := res.matches(ctx, c, podLabels, nsLabels)
				if !ok && (l.Reason == LostConditionError || l.Reason == LostBudget || l.Reason == LostNamespaceUnknown) {
					ok = true
					res.boundsOnError = append(res.boundsOnError, l)
					if res.auditAs == nil {
						res.metrics.boundsOnError.WithLabelValues(c.policy.ref.Namespace, c.policy.ref.Name).Inc()
					}
				}
				if ok {
					res.bounds = append(res.bounds, c.policy)
				}
			}
		}
	}

	need := allGroups
	lose := func(l Loser) {
		if res.losers == nil {
			res.losers = make([]Loser, 0, len(cands))
		}
		res.losers = append(res.losers, l)
	}
	for i := range cands {
		c := &cands[i]
		p := c.policy
		if !res.enforces(p) {
			// Not a loser either: the decision in force, its explanation included, is
			// the same as without the policy.
			if res.auditAs == nil {
				res.audits = append(res.audits, p)
			}
			continue
		}
		if p.groups() == 0 {
			continue // bounds only
		}
		if p.groups()&need == 0 {
			lose(Loser{Policy: &p.ref, Reason: LostOutranked})
			continue
		}
		if l, ok := res.matches(ctx, c, podLabels, nsLabels); !ok {
			lose(l)
			continue
		}
		supplies := p.groups() & need
		for i := range res.winners {
			if supplies&(1<<i) != 0 {
				res.winners[i] = p
				res.tenant[i] = c.own && namespace != snap.rootNamespace
			}
		}
		need &^= supplies
	}
}

// Decision returns the decision for the resolved call: for the Input's Error when it was
// set, else for a call that has not failed (the static failureMode and retry.window of the
// supplying policies). Values namespace policies decided are capped at the matching root
// policies' bounds.
func (res *Resolution) Decision(ctx context.Context) Decision {
	start := time.Now()
	defer func() { res.metrics.resolveDuration.Observe(time.Since(start).Seconds()) }()
	in := &res.in
	decision := defaultDecision(in.Plugin)
	exp := &decision.Explanation
	exp.Losers = res.losers
	if p := res.winners[0]; p != nil {
		exp.Failure.Policy = &p.ref
		decision.Mode = res.failureMode(ctx, p, exp)
	}
	if p := res.winners[1]; p != nil {
		exp.Timeout.Policy = &p.ref
		decision.Timeout = *p.timeout
	}
	if p := res.winners[2]; p != nil {
		exp.ReadinessGate.Policy = &p.ref
		decision.ReadinessGate = *p.readinessGate
	}
	if p := res.winners[3]; p != nil {
		exp.Retry.Policy = &p.ref
		decision.Retry = p.retry
		if p.windowExpr != nil && in.Error != nil {
			window, err := p.windowExpr.EvalDuration(ctx, res.activation())
			switch {
			case err != nil:
				res.evalError(ctx, p, "retry.windowExpression", err)
				exp.Notes = append(exp.Notes, fmt.Sprintf("retry.windowExpression of %s failed (%v); window %s used", p.ref, err, p.retry.Window))
			case window <= p.retry.Interval:
				res.evalError(ctx, p, "retry.windowExpression", fmt.Errorf("returned %s, not longer than interval %s", window, p.retry.Interval))
				exp.Notes = append(exp.Notes, fmt.Sprintf("retry.windowExpression of %s returned %s, not longer than interval %s; window %s used", p.ref, window, p.retry.Interval, p.retry.Window))
			default:
				decision.Retry.Window = window
			}
		}
	}
	for _, l := range res.boundsOnError {
		why := string(l.Reason)
		if l.Err != nil {
			why = fmt.Sprintf("%s: matchCondition %s: %v", l.Reason, l.Condition, l.Err)
		}
		what := "its matchConditions"
		if l.Reason == LostNamespaceUnknown {
			what = "its namespaceSelector"
		}
		exp.Notes = append(exp.Notes, fmt.Sprintf("bounds of root policy %s applied although %s could not be evaluated (%s): bounds fail closed", l.Policy, what, why))
	}
	if len(res.bounds) > 0 {
		clamp(&decision, res.tenant, res.bounds)
	}
	return decision
}

// Failed returns the decision for the resolved call failing with err, on the snapshot and
// with the budget of Begin: the failureModeExpression and retry.windowExpression of the
// policies that supplied those groups are evaluated with the variable error, and nothing is
// resolved again (matchConditions cannot see the error, so the same policies win).
func (res *Resolution) Failed(ctx context.Context, err *PluginError) Decision {
	res.in.Error = err
	if res.act != nil {
		var pe *policycel.PluginError
		if err != nil {
			pe = &policycel.PluginError{Type: err.Type, Message: err.Message, Reason: err.Reason}
		}
		res.act.SetError(pe)
	}
	return res.Decision(ctx)
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
func (res *Resolution) conditionsMatch(ctx context.Context, p *CompiledPolicy) (Loser, bool) {
	// As admission matchConditions decide: any false condition means no match, whatever the
	// others do; an error (or a spent budget) decides only when no condition is false. So
	// the conditions after an error are still evaluated: a bound that fails closed on an
	// error must not apply to a pod that a later condition excludes.
	var failed *Loser
	for _, c := range p.conditions {
		ok, err := c.program.EvalBool(ctx, res.activation())
		if err != nil {
			res.evalError(ctx, p, "matchCondition "+c.name, err)
			if failed == nil {
				l := Loser{Policy: &p.ref, Reason: LostConditionError, Condition: c.name, Err: err}
				if errors.Is(err, policycel.ErrNotEvaluated) {
					l = Loser{Policy: &p.ref, Reason: LostBudget}
				}
				failed = &l
			}
			continue
		}
		if !ok {
			return Loser{Policy: &p.ref, Reason: LostConditionFalse, Condition: c.name}, false
		}
	}
	if failed != nil {
		return *failed, false
	}
	return Loser{}, true
}

// failureMode returns the failure mode of the failure group supplied by p: the value of
// failureModeExpression when the call failed and it evaluates to a valid mode, else
// failureMode, else the plugin's built-in mode; fallbacks are noted in exp.
func (res *Resolution) failureMode(ctx context.Context, p *CompiledPolicy, exp *Explanation) v1alpha1.FailureMode {
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

// enforces reports whether p decides in this resolution: it is not an Audit policy, or it
// is the Audit policy an Audit resolution counts as Enforce.
func (res *Resolution) enforces(p *CompiledPolicy) bool {
	return !p.audit || p == res.auditAs
}
