package policy

import (
	"fmt"
	"regexp"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
	policycel "github.com/okg-extensions/network-plugin-policy/pkg/policy/cel"
)

// PolicyRef names one generation of a policy in decisions and explanations.
type PolicyRef struct {
	// Namespace and Name identify the policy.
	Namespace, Name string
	// Generation is the metadata.generation that was compiled.
	Generation int64
}

// String returns namespace/name@generation.
func (r PolicyRef) String() string {
	return fmt.Sprintf("%s/%s@%d", r.Namespace, r.Name, r.Generation)
}

// CompileOptions configure Compile.
type CompileOptions struct {
	// Env is the CEL environment; nil means policycel.Default().
	Env *policycel.Env
	// EnvType is environment.NewExpressions for new or changed policies (validating webhook,
	// CLI) and environment.StoredExpressions for stored ones (Store). Empty means
	// StoredExpressions.
	EnvType environment.Type
	// RootNamespace is the namespace whose policies are cluster-wide and may have a
	// namespaceSelector (the manager's --root-namespace).
	RootNamespace string
	// Cache, when set, shares programs among identical expressions; it must compile with
	// Env. The Store sets it.
	Cache *policycel.Cache
}

// CompileResult is the outcome of compiling one generation of a policy, as the status
// controller reports it.
type CompileResult struct {
	// UID and Generation identify what was compiled.
	UID        types.UID
	Generation int64
	// Reason is v1alpha1.ReasonAccepted, ReasonInvalidExpression or ReasonInvalidSpec
	// (InvalidSpec wins when both kinds of error occur).
	Reason string
	// Errors are the problems, each with its field path, for example
	// spec.matchConditions[1].expression; empty when Reason is Accepted.
	Errors field.ErrorList
	// Warnings are legal but suspicious findings, each prefixed with its field path.
	Warnings []string
	// KeptGeneration is set by the Store when a root policy with spec.bounds stops
	// compiling: the generation, the last that compiled, whose bounds and selection
	// (plugins, podSelector, namespaceSelector, matchConditions) stay in force until one
	// compiles again. 0 otherwise.
	KeptGeneration int64
	// BoundsWithoutConditions is set by the Store when a root policy with spec.bounds does
	// not compile and no good generation of it was seen by this process (it started after
	// the broken generation was stored): this generation's bounds apply, selected by its
	// plugins, podSelector and namespaceSelector, without its CEL expressions.
	BoundsWithoutConditions bool
}

// Accepted reports whether the policy compiled and is in force.
func (r CompileResult) Accepted() bool { return r.Reason == v1alpha1.ReasonAccepted }

// rule is one compiled spec.networkConfRules entry.
type rule struct {
	name, message string
	program       *policycel.Program
	// fields are the network view's fields the expression reads (network.<field>), sorted.
	fields []string
}

// networkField matches a read of a field of the network variable in a rule's source.
var networkField = regexp.MustCompile(`\bnetwork\s*\.\s*([A-Za-z]+)`)

// condition is one compiled matchCondition.
type condition struct {
	name    string
	program *policycel.Program
}

// CompiledPolicy is one policy generation ready for resolution: parsed selectors and CEL
// programs. It is immutable and safe for concurrent use.
type CompiledPolicy struct {
	ref               PolicyRef
	priority          int32
	plugins           []string
	podSelector       labels.Selector // nil: every pod
	namespaceSelector labels.Selector // nil: every namespace
	conditions        []condition

	setsFailure     bool
	failureMode     *v1alpha1.FailureMode
	failureModeExpr *policycel.Program

	timeout       *time.Duration
	readinessGate *bool

	setsRetry  bool
	retry      RetrySchedule // unset fields hold the built-in defaults
	windowExpr *policycel.Program

	bounds *bounds // nil: the policy bounds nothing

	// rules are spec.networkConfRules (root policies only).
	rules []rule

	// audit is spec.enforcement Audit: the policy decides nothing, its would-be decisions
	// are computed by Resolution.Audit.
	audit bool
}

// Audit reports whether the policy is in Audit mode (spec.enforcement: Audit).
func (p *CompiledPolicy) Audit() bool { return p.audit }

// boundsOnly returns a copy of p that keeps its selection, bounds and network-conf rules and
// sets no group: what stays in force of a root policy whose next generation does not compile.
func (p *CompiledPolicy) boundsOnly() *CompiledPolicy {
	c := *p
	c.setsFailure, c.failureMode, c.failureModeExpr = false, nil, nil
	c.timeout, c.readinessGate = nil, nil
	c.setsRetry, c.retry, c.windowExpr = false, RetrySchedule{}, nil
	return &c
}

// Ref returns the policy's namespace, name and compiled generation.
func (p *CompiledPolicy) Ref() PolicyRef { return p.ref }

// groups returns the bit set of groups the policy sets.
func (p *CompiledPolicy) groups() group {
	var g group
	if p.setsFailure {
		g |= groupFailure
	}
	if p.timeout != nil {
		g |= groupTimeout
	}
	if p.readinessGate != nil {
		g |= groupReadinessGate
	}
	if p.setsRetry {
		g |= groupRetry
	}
	return g
}

func (p *CompiledPolicy) listsPlugin(name string) bool {
	for _, n := range p.plugins {
		if n == name {
			return true
		}
	}
	return false
}

// Compile checks and compiles policy. It returns nil and a result with errors when the
// policy cannot be used: a CEL expression does not compile (InvalidExpression), a label
// selector does not parse or a namespaceSelector is set outside opts.RootNamespace
// (InvalidSpec). Compile warnings (CEL cost estimates) are in the result either way; plugin
// related warnings come from Lint.
func Compile(policy *v1alpha1.NetworkPluginPolicy, opts CompileOptions) (*CompiledPolicy, CompileResult) {
	result := CompileResult{UID: policy.UID, Generation: policy.Generation}
	env := opts.Env
	if env == nil {
		var err error
		if env, err = policycel.Default(); err != nil {
			result.Reason = v1alpha1.ReasonInvalidExpression
			result.Errors = field.ErrorList{field.InternalError(field.NewPath("spec"), err)}
			return nil, result
		}
	}
	envType := opts.EnvType
	if envType == "" {
		envType = environment.StoredExpressions
	}
	spec := &policy.Spec
	specPath := field.NewPath("spec")
	var specErrs, exprErrs field.ErrorList

	p := &CompiledPolicy{
		ref:     PolicyRef{Namespace: policy.Namespace, Name: policy.Name, Generation: policy.Generation},
		plugins: spec.Plugins,
	}
	if spec.Priority != nil {
		p.priority = *spec.Priority
	}
	p.audit = spec.Enforcement != nil && *spec.Enforcement == v1alpha1.EnforcementAudit
	// An empty selector ({}) selects everything: it counts as unset, so that it does not make
	// a policy more specific.
	if spec.PodSelector != nil && !isEmptySelector(spec.PodSelector) {
		sel, err := metav1.LabelSelectorAsSelector(spec.PodSelector)
		if err != nil {
			specErrs = append(specErrs, field.Invalid(specPath.Child("podSelector"), spec.PodSelector, err.Error()))
		}
		p.podSelector = sel
	}
	if spec.Bounds != nil {
		if policy.Namespace != opts.RootNamespace {
			specErrs = append(specErrs, field.Forbidden(specPath.Child("bounds"),
				fmt.Sprintf("allowed only on policies in the root namespace %q: bounds cap what the policies of other namespaces decide", opts.RootNamespace)))
		}
		p.bounds = compileBounds(spec.Bounds)
	}
	if spec.NamespaceSelector != nil && isEmptySelector(spec.NamespaceSelector) {
		if policy.Namespace != opts.RootNamespace {
			specErrs = append(specErrs, field.Forbidden(specPath.Child("namespaceSelector"),
				fmt.Sprintf("allowed only on policies in the root namespace %q; a policy in namespace %q applies only to pods of its own namespace", opts.RootNamespace, policy.Namespace)))
		}
	} else if spec.NamespaceSelector != nil {
		if policy.Namespace != opts.RootNamespace {
			specErrs = append(specErrs, field.Forbidden(specPath.Child("namespaceSelector"),
				fmt.Sprintf("allowed only on policies in the root namespace %q; a policy in namespace %q applies only to pods of its own namespace", opts.RootNamespace, policy.Namespace)))
		}
		sel, err := metav1.LabelSelectorAsSelector(spec.NamespaceSelector)
		if err != nil {
			specErrs = append(specErrs, field.Invalid(specPath.Child("namespaceSelector"), spec.NamespaceSelector, err.Error()))
		}
		p.namespaceSelector = sel
	}

	compile := func(path *field.Path, expr string, kind policycel.Kind) *policycel.Program {
		compileFn := env.Compile
		if opts.Cache != nil {
			compileFn = opts.Cache.Compile
		}
		prg, warnings, err := compileFn(path, expr, kind, envType)
		result.Warnings = append(result.Warnings, warnings...)
		if err != nil {
			exprErrs = append(exprErrs, err)
		}
		return prg
	}
	for i, mc := range spec.MatchConditions {
		prg := compile(specPath.Child("matchConditions").Index(i).Child("expression"), mc.Expression, policycel.KindMatchCondition)
		p.conditions = append(p.conditions, condition{name: mc.Name, program: prg})
	}

	if len(spec.NetworkConfRules) > 0 {
		rulesPath := specPath.Child("networkConfRules")
		if policy.Namespace != opts.RootNamespace {
			specErrs = append(specErrs, field.Forbidden(rulesPath,
				fmt.Sprintf("allowed only on policies in the root namespace %q: what a network-conf may ask for is the platform's decision", opts.RootNamespace)))
		}
		// Rules select by what the pod's author does not write: a podSelector or a
		// matchCondition (labels, annotations) would let the author step around them.
		if p.podSelector != nil {
			specErrs = append(specErrs, field.Forbidden(specPath.Child("podSelector"),
				"not allowed beside networkConfRules: they select by plugins and namespaceSelector only (a pod's author writes its labels); put the rules in a policy of their own"))
		}
		if len(spec.MatchConditions) > 0 {
			specErrs = append(specErrs, field.Forbidden(specPath.Child("matchConditions"),
				"not allowed beside networkConfRules: they select by plugins and namespaceSelector only (a pod's author writes what conditions read)"))
		}
		for i, r := range spec.NetworkConfRules {
			path := rulesPath.Index(i).Child("expression")
			c := rule{name: r.Name, message: r.Message, program: compile(path, r.Expression, policycel.KindNetworkConfRule)}
			for _, m := range networkField.FindAllStringSubmatch(r.Expression, -1) {
				if !slices.Contains(c.fields, m[1]) {
					c.fields = append(c.fields, m[1])
				}
			}
			slices.Sort(c.fields)
			p.rules = append(p.rules, c)
		}
	}

	if spec.FailureMode != nil || spec.FailureModeExpression != nil {
		p.setsFailure = true
		p.failureMode = spec.FailureMode
		if spec.FailureModeExpression != nil {
			p.failureModeExpr = compile(specPath.Child("failureModeExpression"), *spec.FailureModeExpression, policycel.KindFailureMode)
		}
	}
	if spec.Timeout != nil {
		d := spec.Timeout.Duration
		p.timeout = &d
	}
	p.readinessGate = spec.ReadinessGate
	if r := spec.Retry; r != nil {
		p.setsRetry = true
		p.retry = defaultDecision(Plugin{}).Retry
		if r.Window != nil {
			p.retry.Window = r.Window.Duration
		}
		if r.Interval != nil {
			p.retry.Interval = r.Interval.Duration
		}
		if r.MaxInterval != nil {
			p.retry.MaxInterval = r.MaxInterval.Duration
		}
		if r.ExhaustedAction != nil {
			p.retry.ExhaustedAction = *r.ExhaustedAction
		}
		if r.WindowExpression != nil {
			p.windowExpr = compile(specPath.Child("retry", "windowExpression"), *r.WindowExpression, policycel.KindWindow)
		}
		specErrs = append(specErrs, validateSchedule(specPath.Child("retry"), r, p.retry)...)
	}

	result.Errors = slices.Concat(specErrs, exprErrs)
	switch {
	case len(specErrs) > 0:
		result.Reason = v1alpha1.ReasonInvalidSpec
	case len(exprErrs) > 0:
		result.Reason = v1alpha1.ReasonInvalidExpression
	default:
		result.Reason = v1alpha1.ReasonAccepted
		return p, result
	}
	return nil, result
}

// validateSchedule checks the effective retry schedule eff of r (its unset fields hold the
// built-in defaults) as pkg/networkretry requires it: interval <= maxInterval and
// interval < window. The CRD checks the same with the defaults written into its rules; this
// check covers policies stored before those rules and the CLI. Errors are at path.interval
// and say which values are defaults.
func validateSchedule(path *field.Path, r *v1alpha1.RetryPolicy, eff RetrySchedule) field.ErrorList {
	var errs field.ErrorList
	describe := func(name string, set bool, d time.Duration) string {
		if set {
			return fmt.Sprintf("%s %s", name, d)
		}
		return fmt.Sprintf("%s %s (the default)", name, d)
	}
	interval := describe("interval", r.Interval != nil, eff.Interval)
	if eff.Interval > eff.MaxInterval {
		errs = append(errs, field.Invalid(path.Child("interval"), eff.Interval.String(),
			fmt.Sprintf("interval must not be longer than maxInterval: %s is longer than %s; set maxInterval too",
				interval, describe("maxInterval", r.MaxInterval != nil, eff.MaxInterval))))
	}
	if eff.Interval >= eff.Window {
		errs = append(errs, field.Invalid(path.Child("interval"), eff.Interval.String(),
			fmt.Sprintf("interval must be shorter than window: %s is not shorter than %s; set window too",
				interval, describe("window", r.Window != nil, eff.Window))))
	}
	return errs
}

// isEmptySelector reports whether sel has no requirement, so that it selects everything.
func isEmptySelector(sel *metav1.LabelSelector) bool {
	return len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0
}
