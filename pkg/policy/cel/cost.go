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

// Budget is the runtime cost budget of one admission request, shared by every expression the
// request evaluates, as the apiserver shares celconfig.RuntimeCELCostBudget among the
// expressions of one ValidatingAdmissionPolicyBinding. It is not safe for concurrent use.
type Budget struct {
	remaining int64
}

// NewBudget returns a budget of limit cost units; DefaultBudget is the usual limit.
func NewBudget(limit int64) Budget {
	return Budget{remaining: limit}
}

// DefaultBudget is the per-request budget: k8s.io/apiserver/pkg/apis/cel.RuntimeCELCostBudget
// (10,000,000 cost units, roughly one second of evaluation).
const DefaultBudget = celconfig.RuntimeCELCostBudget

// Remaining returns the cost units left.
func (b *Budget) Remaining() int64 { return b.remaining }

// spend subtracts cost and fails with ErrOutOfBudget once the budget is negative.
func (b *Budget) spend(cost uint64) error {
	b.remaining -= int64(cost)
	if b.remaining < 0 {
		return fmt.Errorf("%w: request budget of %d exhausted", ErrOutOfBudget, DefaultBudget)
	}
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
	}
	return nil
}

// EstimateCallCost implements checker.CostEstimator; library.CostEstimator prices calls.
func (sizeEstimator) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
}
