package cel

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/cel/environment"
)

func TestCacheSharesPrograms(t *testing.T) {
	cache := NewCache(testEnv(t))
	expr := "object.spec.containers.all(c, object.spec.containers.all(d, c.name != d.name || c == d))"
	a, warnA, errA := cache.Compile(field.NewPath("spec", "matchConditions").Index(0).Child("expression"), expr, KindMatchCondition, environment.StoredExpressions)
	b, warnB, errB := cache.Compile(field.NewPath("spec", "matchConditions").Index(3).Child("expression"), expr, KindMatchCondition, environment.StoredExpressions)
	if errA != nil || errB != nil {
		t.Fatalf("Compile() errors: %v, %v", errA, errB)
	}
	if a != b {
		t.Errorf("identical expressions compiled to different programs")
	}
	if len(warnA) != 1 || len(warnB) != 1 {
		t.Fatalf("warnings = %q, %q; want one each", warnA, warnB)
	}
	if diff := cmp.Diff(warnA[0][len("spec.matchConditions[0].expression"):], warnB[0][len("spec.matchConditions[3].expression"):]); diff != "" {
		t.Errorf("warnings differ beyond their paths (-first,+second):\n%s", diff)
	}
	other, _, _ := cache.Compile(field.NewPath("spec", "failureModeExpression"), "'Synchronous'", KindFailureMode, environment.StoredExpressions)
	if other == a || cache.Len() != 2 {
		t.Errorf("cache Len() = %d, want 2 distinct programs", cache.Len())
	}
	if _, _, err := cache.Compile(field.NewPath("spec"), "1 +", KindMatchCondition, environment.StoredExpressions); err == nil || cache.Len() != 2 {
		t.Errorf("invalid expression: err = %v, Len() = %d; want an error and no new entry", err, cache.Len())
	}
}
