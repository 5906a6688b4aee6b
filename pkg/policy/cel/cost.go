package cel

import (
	"errors"
	"fmt"

	"github.com/google/cel-go/checker"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
)

// ErrOutOfBudget is wrapped by evaluation errors caused by a cost limit: the per-call limit
// of one program (celconfig.PerCallLimit) or the per-request Budget.
var ErrOutOfBudget = errors.New("CEL cost budget exceeded")

// ErrNotEvaluated is wrapped, together with ErrOutOfBudget, by the error of an expression that
// was not evaluated at all because the request's Budget was already spent.
var ErrNotEvaluated = errors.New("not evaluated")

// Budget is the runtime cost budget of one admission request, shared by every expression the
// request evaluates, as the apiserver shares celconfig.RuntimeCELCostBudget among the
// expressions of one ValidatingAdmissionPolicyBinding. It is checked before every evaluation:
// once it is spent, no further expression of the request runs. cel-go fixes a program's cost
// limit when the program is built (cel.CostLimit), so one evaluation cannot be stopped at the
// budget's remainder; it stops at the per-call limit, its result is discarded when its cost
// exceeded the remainder, and the budget is then spent. A request's CEL work is therefore at
// most the budget plus one per-call limit. It is not safe for concurrent use.
type Budget struct {
	limit, remaining int64
}

// NewBudget returns a budget of limit cost units; DefaultBudget is the usual limit.
func NewBudget(limit int64) Budget {
	return Budget{limit: limit, remaining: limit}
}

// DefaultBudget is the per-request budget: k8s.io/apiserver/pkg/apis/cel.RuntimeCELCostBudget
// (10,000,000 cost units, the apiserver's budget of one ValidatingAdmissionPolicyBinding's
// expressions per request).
const DefaultBudget = celconfig.RuntimeCELCostBudget

// Remaining returns the cost units left; zero or less means spent.
func (b *Budget) Remaining() int64 { return b.remaining }

// Spent reports whether no cost unit is left, so that no further expression is evaluated.
func (b *Budget) Spent() bool { return b.remaining <= 0 }

// check fails, before an evaluation, when the budget is spent.
func (b *Budget) check() error {
	if b.Spent() {
		return fmt.Errorf("%w (%w): the request's budget of %d cost units is spent", ErrOutOfBudget, ErrNotEvaluated, b.limit)
	}
	return nil
}

// spend charges the actual cost of one evaluation. When cost exceeds what was left, the
// budget is spent and the evaluation's result must be discarded: it fails with
// ErrOutOfBudget.
func (b *Budget) spend(cost uint64) error {
	if cost > uint64(max(b.remaining, 0)) {
		left := b.remaining
		b.remaining = 0
		return fmt.Errorf("%w: cost %d exceeds the %d units left of the request's budget of %d", ErrOutOfBudget, cost, left, b.limit)
	}
	b.remaining -= int64(cost)
	return nil
}

// sizeEstimator bounds the size of values read from the request (strings, lists and maps in
// the pod, the namespace and the request) by the apiserver's largest request,
// celconfig.MaxRequestSizeBytes (3 MiB), as the apiserver does for unbounded CRD fields.
type sizeEstimator struct{}

// EstimateSize implements checker.CostEstimator.
func (sizeEstimator) EstimateSize(element checker.AstNode) *checker.SizeEstimate {
	path := element.Path()
	if len(path) == 0 {
		return nil
	}
	switch path[0] {
	case VarObject, VarOldObject, VarNamespaceObject, VarRequest, VarPlugin, VarError:
		return &checker.SizeEstimate{Min: 0, Max: uint64(celconfig.MaxRequestSizeBytes)}
	case VarNetwork:
		// The network view's lists hold at most maxNetworkListItems entries, and its strings
		// are ids, hosts, classes and parameter values of one network-conf annotation: a
		// bound of the same order, so that a rule over them estimates as what it is.
		return &checker.SizeEstimate{Min: 0, Max: maxNetworkListItems}
	}
	return nil
}

// EstimateCallCost implements checker.CostEstimator; library.CostEstimator prices calls.
func (sizeEstimator) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
}
