package cel

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/cel/environment"
)

func testVariables() Variables {
	return Variables{
		Object: &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "lobby-0", Namespace: "game", Labels: map[string]string{"app": "lobby"}},
			Spec:       corev1.PodSpec{HostNetwork: true, Containers: []corev1.Container{{Name: "server", Image: "game:1"}}},
		},
		Namespace: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "game", Labels: map[string]string{"env": "prod"}}},
		Request: Request{
			Operation: "CREATE",
			UserInfo:  authenticationv1.UserInfo{Username: "alice", Groups: []string{"devs"}, Extra: map[string]authenticationv1.ExtraValue{"team": {"red"}}},
		},
		Plugin: Plugin{Name: "Kubernetes-NodePort", Alias: "NodePort-Network"},
		Error:  &PluginError{Type: "apiCallError", Message: "boom"},
	}
}

func TestEval(t *testing.T) {
	manyLabels := map[string]string{}
	for i := range 2000 {
		manyLabels[fmt.Sprintf("l%d", i)] = "v"
	}
	cases := map[string]struct {
		expression string
		kind       Kind
		vars       func(*Variables)
		budget     int64
		ctx        func() context.Context
		want       any
		wantErr    string
		wantBudget bool // error wraps ErrOutOfBudget
	}{
		"labels":                {expression: "object.metadata.labels.app == 'lobby'", want: true},
		"canary absent":         {expression: "!('canary' in object.metadata.labels)", want: true},
		"labels always present": {expression: "!('x' in object.metadata.labels)", vars: func(v *Variables) { v.Object.(*corev1.Pod).Labels = nil }, want: true},
		"name and namespace":    {expression: "object.metadata.name == 'lobby-0' && object.metadata.namespace == 'game'", want: true},
		"spec converted lazily": {expression: "object.spec.hostNetwork == true && object.spec.containers[0].name == 'server'", want: true},
		"other metadata":        {expression: "!has(object.metadata.uid)", want: true},
		"oldObject null":        {expression: "oldObject == null", want: true},
		"namespaceObject":       {expression: "namespaceObject.metadata.labels.env == 'prod'", want: true},
		"request":               {expression: "request.operation == 'CREATE' && request.userInfo.username == 'alice' && 'devs' in request.userInfo.groups && request.userInfo.extra.team == ['red'] && !request.dryRun", want: true},
		"plugin":                {expression: "plugin.name == 'Kubernetes-NodePort' && plugin.alias == 'NodePort-Network' && !plugin.synchronous", want: true},
		"failure mode":          {expression: "error.type == 'apiCallError' ? 'Asynchronous' : 'Synchronous'", kind: KindFailureMode, want: "Asynchronous"},
		"window":                {expression: "error.message == 'boom' ? duration('10m') : duration('1m')", kind: KindWindow, want: 10 * time.Minute},
		"error null":            {expression: "error == null ? 'Synchronous' : 'Asynchronous'", kind: KindFailureMode, vars: func(v *Variables) { v.Error = nil }, want: "Synchronous"},
		"missing key":           {expression: "object.metadata.labels.tier == 'x'", wantErr: "no such key: tier"},
		"missing spec key":      {expression: "object.spec.nodeName == 'x'", wantErr: "no such key: nodeName"},
		"per-call limit at runtime": {
			expression: "object.metadata.labels.all(k, object.metadata.labels.all(l, k != l || k == l))",
			vars:       func(v *Variables) { v.Object.(*corev1.Pod).Labels = manyLabels },
			wantErr:    "per-call limit reached",
			wantBudget: true,
		},
		"request budget": {
			expression: "object.metadata.labels.all(k, k != '')",
			vars:       func(v *Variables) { v.Object.(*corev1.Pod).Labels = manyLabels },
			budget:     100,
			wantErr:    "exceeds the 100 units left of the request's budget of 100",
			wantBudget: true,
		},
		"deadline": {
			expression: "object.metadata.labels.app == 'lobby'",
			ctx: func() context.Context {
				ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
				defer cancel()
				<-ctx.Done()
				return ctx
			},
			wantErr: "deadline exceeded",
		},
	}
	env := testEnv(t)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			prg, _, ferr := env.Compile(field.NewPath("spec"), tc.expression, tc.kind, environment.StoredExpressions)
			if ferr != nil {
				t.Fatalf("Compile(): %v", ferr)
			}
			vars := testVariables()
			if tc.vars != nil {
				tc.vars(&vars)
			}
			act := NewActivation(vars)
			if tc.budget != 0 {
				act.budget = NewBudget(tc.budget)
			}
			ctx := context.Background()
			if tc.ctx != nil {
				ctx = tc.ctx()
			}
			var got any
			var err error
			switch tc.kind {
			case KindMatchCondition:
				got, err = prg.EvalBool(ctx, act)
			case KindFailureMode:
				got, err = prg.EvalString(ctx, act)
			case KindWindow:
				got, err = prg.EvalDuration(ctx, act)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("eval error = %v, want one containing %q", err, tc.wantErr)
				}
				if got := errors.Is(err, ErrOutOfBudget); got != tc.wantBudget {
					t.Errorf("errors.Is(err, ErrOutOfBudget) = %v, want %v", got, tc.wantBudget)
				}
				return
			}
			if err != nil {
				t.Fatalf("eval error: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("eval result (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestActivationSharesBudget(t *testing.T) {
	env := testEnv(t)
	prg, _, ferr := env.Compile(field.NewPath("spec"), "object.metadata.labels.app == 'lobby'", KindMatchCondition, environment.StoredExpressions)
	if ferr != nil {
		t.Fatalf("Compile(): %v", ferr)
	}
	act := NewActivation(testVariables())
	before := act.Budget().Remaining()
	for range 3 {
		if _, err := prg.EvalBool(context.Background(), act); err != nil {
			t.Fatalf("EvalBool(): %v", err)
		}
	}
	if spent := before - act.Budget().Remaining(); spent <= 0 {
		t.Errorf("budget spent = %d after three evaluations, want > 0", spent)
	}
}

// TestBudgetCheckedBeforeEvaluation: once a request's budget is spent, a further expression is
// not evaluated at all (its error wraps ErrNotEvaluated), even a cheap one.
func TestBudgetCheckedBeforeEvaluation(t *testing.T) {
	env := testEnv(t)
	compile := func(expr string) *Program {
		prg, _, ferr := env.Compile(field.NewPath("spec"), expr, KindMatchCondition, environment.StoredExpressions)
		if ferr != nil {
			t.Fatalf("Compile(%q): %v", expr, ferr)
		}
		return prg
	}
	expensive := compile("object.metadata.labels.all(k, k != '')")
	cheap := compile("true")
	vars := testVariables()
	labels := map[string]string{}
	for i := range 200 {
		labels[fmt.Sprintf("l%d", i)] = "v"
	}
	vars.Object.(*corev1.Pod).Labels = labels
	act := NewActivationWithBudget(vars, 100)

	_, err := expensive.EvalBool(context.Background(), act)
	if !errors.Is(err, ErrOutOfBudget) || errors.Is(err, ErrNotEvaluated) {
		t.Fatalf("first evaluation error = %v, want ErrOutOfBudget (evaluated, over the budget)", err)
	}
	if !act.Budget().Spent() {
		t.Fatalf("budget remaining = %d after an evaluation over it, want spent", act.Budget().Remaining())
	}
	_, err = cheap.EvalBool(context.Background(), act)
	if !errors.Is(err, ErrOutOfBudget) || !errors.Is(err, ErrNotEvaluated) {
		t.Fatalf("evaluation after the budget is spent: error = %v, want ErrOutOfBudget and ErrNotEvaluated", err)
	}
}
