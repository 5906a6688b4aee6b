package cel

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"
)

// Program is a compiled, checked policy expression. It is immutable and safe for concurrent
// use; evaluations of one request share that request's Activation.
type Program struct {
	program    cel.Program
	kind       Kind
	expression string
}

// Kind returns the role the program was compiled for.
func (p *Program) Kind() Kind { return p.kind }

// Expression returns the source text.
func (p *Program) Expression() string { return p.expression }

// eval runs the program under ctx (its deadline interrupts comprehensions every
// celconfig.CheckFrequency iterations), charges the actual cost to the activation's budget and
// returns the result. The budget is checked first: a spent budget fails with ErrOutOfBudget
// and ErrNotEvaluated without running anything. Errors wrap ErrOutOfBudget when the per-call
// limit or the budget ran out (the result is then discarded), and the context's error when
// ctx ended.
func (p *Program) eval(ctx context.Context, act *Activation) (ref.Val, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("evaluate %s: %w", p.kind, err)
	}
	if err := act.budget.check(); err != nil {
		return nil, fmt.Errorf("evaluate %s: %w", p.kind, err)
	}
	val, details, err := p.program.ContextEval(ctx, act)
	if details != nil {
		if cost := details.ActualCost(); cost != nil {
			if budgetErr := act.budget.spend(*cost); budgetErr != nil && err == nil {
				err = budgetErr
			}
		}
	}
	if err != nil {
		var cancelled interpreter.EvalCancelledError
		if errors.As(err, &cancelled) && cancelled.Cause == interpreter.CostLimitExceeded {
			return nil, fmt.Errorf("evaluate %s: %w: per-call limit reached", p.kind, ErrOutOfBudget)
		}
		return nil, fmt.Errorf("evaluate %s: %w", p.kind, err)
	}
	return val, nil
}

// EvalBool evaluates a KindMatchCondition program. Errors: see eval; a non-bool result (only
// possible for a program compiled for another kind) is an error.
func (p *Program) EvalBool(ctx context.Context, act *Activation) (bool, error) {
	val, err := p.eval(ctx, act)
	if err != nil {
		return false, err
	}
	b, ok := val.(types.Bool)
	if !ok {
		return false, fmt.Errorf("evaluate %s: got %s, want bool", p.kind, val.Type().TypeName())
	}
	return bool(b), nil
}

// EvalString evaluates a KindFailureMode program.
func (p *Program) EvalString(ctx context.Context, act *Activation) (string, error) {
	val, err := p.eval(ctx, act)
	if err != nil {
		return "", err
	}
	s, ok := val.(types.String)
	if !ok {
		return "", fmt.Errorf("evaluate %s: got %s, want string", p.kind, val.Type().TypeName())
	}
	return string(s), nil
}

// EvalDuration evaluates a KindWindow program.
func (p *Program) EvalDuration(ctx context.Context, act *Activation) (time.Duration, error) {
	val, err := p.eval(ctx, act)
	if err != nil {
		return 0, err
	}
	d, ok := val.(types.Duration)
	if !ok {
		return 0, fmt.Errorf("evaluate %s: got %s, want duration", p.kind, val.Type().TypeName())
	}
	return d.Duration, nil
}
