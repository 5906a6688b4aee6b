package cel

import (
	"fmt"
	"strings"

	"github.com/google/cel-go/cel"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/apiserver/pkg/cel/library"
)

// Kind is the role of an expression in a policy; it fixes the output type and whether the
// error variable is declared.
type Kind int

const (
	// KindMatchCondition is spec.matchConditions[*].expression: output bool, no error variable.
	KindMatchCondition Kind = iota
	// KindFailureMode is spec.failureModeExpression: output string ("Synchronous" or
	// "Asynchronous", checked at runtime), error variable declared.
	KindFailureMode
	// KindWindow is spec.retry.windowExpression: output duration, error variable declared.
	KindWindow
	// KindNetworkConfRule is spec.networkConfRules[*].expression: output bool, network
	// variable declared, no error variable.
	KindNetworkConfRule
)

// String returns the field name the kind belongs to, for messages.
func (k Kind) String() string {
	switch k {
	case KindMatchCondition:
		return "matchCondition"
	case KindFailureMode:
		return "failureModeExpression"
	case KindWindow:
		return "windowExpression"
	case KindNetworkConfRule:
		return "networkConfRule"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

func (k Kind) outputType() *cel.Type {
	switch k {
	case KindFailureMode:
		return cel.StringType
	case KindWindow:
		return cel.DurationType
	}
	return cel.BoolType
}

func (k Kind) withError() bool { return k == KindFailureMode || k == KindWindow }

// dynHint tells how to turn a dynamic value into the kind's output type.
func (k Kind) dynHint() string {
	switch k {
	case KindFailureMode:
		return "a dynamic field needs an explicit conversion, for example string(object.metadata.labels.mode)"
	case KindWindow:
		return "a dynamic field needs an explicit conversion, for example duration(object.metadata.annotations.window)"
	}
	return "a bare dynamic field needs an explicit comparison, for example object.spec.hostNetwork == true or object.metadata.labels.canary == 'true'"
}

// Compile parses, type-checks and cost-checks expression as an expression of kind in the
// environment type envType (environment.NewExpressions for new or changed policies in the
// validating webhook and the CLI, environment.StoredExpressions for policies already stored)
// and returns its program.
//
// A failure is a *field.Error of type field.ErrorTypeInvalid at path (for example
// spec.matchConditions[1].expression) whose detail says what is wrong: a syntax or type error
// from the CEL checker, an undeclared variable (error outside failure and retry expressions is
// named as such), a wrong output type (with a hint to write "== true" for a bare dynamic bool),
// or an estimated minimum cost above the apiserver's per-call limit
// (k8s.io/apiserver/pkg/apis/cel.PerCallLimit, 1,000,000). Warnings are messages prefixed with
// the path: when the estimated maximum cost, with strings, lists and maps of the request as
// large as celconfig.MaxRequestSizeBytes allows, exceeds celconfig.RuntimeCELCostBudget
// (10,000,000, the value of the static limit apiextensions-apiserver applies to CRD validation
// rules, StaticEstimatedCostLimit). That is a warning, not an error, because pods are untyped
// (dyn) here as in ValidatingAdmissionPolicy, so every comprehension over pod data has an
// unbounded estimate; the per-call limit stops such an evaluation at runtime.
func (e *Env) Compile(path *field.Path, expression string, kind Kind, envType environment.Type) (*Program, []string, *field.Error) {
	prg, warnings, detail, err := e.compile(expression, kind, envType)
	if err != nil {
		return nil, nil, field.InternalError(path, err)
	}
	if detail != "" {
		return nil, nil, field.Invalid(path, expression, detail)
	}
	return prg, prefixWarnings(path, warnings), nil
}

func prefixWarnings(path *field.Path, warnings []string) []string {
	if len(warnings) == 0 {
		return nil
	}
	out := make([]string, len(warnings))
	for i, w := range warnings {
		out[i] = path.String() + ": " + w
	}
	return out
}

// compile returns the program and its unprefixed warnings, or the detail of an invalid
// expression, or an internal error.
func (e *Env) compile(expression string, kind Kind, envType environment.Type) (*Program, []string, string, error) {
	env, err := e.env(envType, kind)
	if err != nil {
		return nil, nil, "", err
	}
	ast, issues := env.Compile(expression)
	if issues.Err() != nil {
		return nil, nil, e.compileIssue(envType, kind, expression, issues), nil
	}
	want := kind.outputType()
	if got := ast.OutputType(); !got.IsExactType(want) {
		msg := fmt.Sprintf("must evaluate to %s but evaluates to %s", want, got)
		if got.IsExactType(cel.DynType) {
			msg += "; " + kind.dynHint()
		}
		return nil, nil, msg, nil
	}
	var warnings []string
	est, err := env.EstimateCost(ast, &library.CostEstimator{SizeEstimator: sizeEstimator{}})
	if err != nil {
		return nil, nil, fmt.Sprintf("estimate cost: %v", err), nil
	}
	if est.Min > celconfig.PerCallLimit {
		return nil, nil, fmt.Sprintf(
			"estimated cost %d exceeds the per-call cost limit %d even for the smallest input; simplify the expression (fewer or smaller nested comprehensions)",
			est.Min, celconfig.PerCallLimit), nil
	}
	if est.Max > celconfig.RuntimeCELCostBudget {
		warnings = append(warnings, fmt.Sprintf(
			"estimated cost %d on the largest admissible pod exceeds %d; evaluation stops with an error at the per-call cost limit %d",
			est.Max, celconfig.RuntimeCELCostBudget, celconfig.PerCallLimit))
	}
	prg, err := env.Program(ast, cel.InterruptCheckFrequency(celconfig.CheckFrequency))
	if err != nil {
		return nil, nil, "", fmt.Errorf("instantiate CEL program: %w", err)
	}
	return &Program{program: prg, kind: kind, expression: expression}, warnings, "", nil
}

// compileIssue renders the checker's issues; when the expression uses the error variable
// where it is not declared, it says so instead of reporting a bare undeclared reference.
func (e *Env) compileIssue(envType environment.Type, kind Kind, expression string, issues *cel.Issues) string {
	msg := "compilation failed: " + strings.TrimSpace(issues.String())
	if kind != KindNetworkConfRule && strings.Contains(msg, "undeclared reference to '"+VarNetwork+"'") {
		return "the variable network is available only in spec.networkConfRules: " + msg
	}
	if kind == KindNetworkConfRule && (strings.Contains(msg, "undeclared reference to '"+VarObject+"'") || strings.Contains(msg, "undeclared reference to '"+VarOldObject+"'")) {
		return "network-conf rules do not see the pod (its author writes its labels and annotations); they see network, namespaceObject, request and plugin: " + msg
	}
	if kind.withError() || !strings.Contains(msg, "undeclared reference to '"+VarError+"'") {
		return msg
	}
	if env, err := e.env(envType, KindFailureMode); err == nil {
		if _, iss := env.Compile(expression); iss.Err() == nil {
			return "the variable error is available only in failureModeExpression and retry.windowExpression, not in matchConditions: " + msg
		}
	}
	return msg
}
