package cel

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/cel/environment"
)

func testEnv(t testing.TB) *Env {
	t.Helper()
	env, err := Default()
	if err != nil {
		t.Fatalf("Default(): %v", err)
	}
	return env
}

// largeList returns a CEL list literal of n ints.
func largeList(n int) string {
	items := make([]string, n)
	for i := range items {
		items[i] = fmt.Sprint(i)
	}
	return "[" + strings.Join(items, ",") + "]"
}

func TestCompile(t *testing.T) {
	path := field.NewPath("spec", "matchConditions").Index(1).Child("expression")
	cases := map[string]struct {
		expression  string
		kind        Kind
		envType     environment.Type
		wantErr     []string // substrings of the error detail; empty = success
		wantWarning string
	}{
		"match on labels": {
			expression: "!('canary' in object.metadata.labels)",
			kind:       KindMatchCondition,
		},
		"namespaceObject typed": {
			expression: "namespaceObject.metadata.labels['env'] == 'prod'",
			kind:       KindMatchCondition,
		},
		"request and plugin": {
			expression: "request.operation == 'CREATE' && !request.dryRun && plugin.synchronous && 'system:masters' in request.userInfo.groups",
			kind:       KindMatchCondition,
		},
		"failure mode uses error": {
			expression: "error.type == 'parameterError' ? 'Synchronous' : 'Asynchronous'",
			kind:       KindFailureMode,
		},
		"window uses error": {
			expression: "error.type == 'apiCallError' ? duration('10m') : duration('1m')",
			kind:       KindWindow,
		},
		"kubernetes library from 1.34": {
			expression: "isCIDR('10.0.0.0/8') && quantity('1Gi').isGreaterThan(quantity('1Mi'))",
			kind:       KindMatchCondition,
			envType:    environment.NewExpressions,
		},
		"syntax error": {
			expression: "object.metadata.labels[",
			kind:       KindMatchCondition,
			wantErr:    []string{"compilation failed", "Syntax error"},
		},
		"wrong output type": {
			expression: "'Synchronous'",
			kind:       KindMatchCondition,
			wantErr:    []string{"must evaluate to bool but evaluates to string"},
		},
		"window must be a duration": {
			expression: "'5m'",
			kind:       KindWindow,
			wantErr:    []string{"must evaluate to google.protobuf.Duration"},
		},
		"bare dynamic bool gets a hint": {
			expression: "object.spec.hostNetwork",
			kind:       KindMatchCondition,
			wantErr:    []string{"evaluates to dyn", "== true"},
		},
		"unknown variable": {
			expression: "pod.metadata.name == 'x'",
			kind:       KindMatchCondition,
			wantErr:    []string{"undeclared reference to 'pod'"},
		},
		"error in a matchCondition": {
			expression: "error.type == 'timeout'",
			kind:       KindMatchCondition,
			wantErr:    []string{"only in failureModeExpression and retry.windowExpression", "undeclared reference to 'error'"},
		},
		"nested comprehension over a large list": {
			expression: "size(" + largeList(1000) + ".map(x, " + largeList(1000) + ".map(y, x + y))) > 0",
			kind:       KindMatchCondition,
			wantErr:    []string{"exceeds the per-call cost limit 1000000"},
		},
		"nested comprehension over object data warns": {
			expression:  "object.spec.containers.all(c, object.spec.containers.all(d, c.name != d.name || c == d))",
			kind:        KindMatchCondition,
			wantWarning: "spec.matchConditions[1].expression: estimated cost",
		},
	}
	env := testEnv(t)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			envType := tc.envType
			if envType == "" {
				envType = environment.StoredExpressions
			}
			prg, warnings, err := env.Compile(path, tc.expression, tc.kind, envType)
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("Compile() error: %v", err)
				}
				if prg == nil || prg.Kind() != tc.kind {
					t.Fatalf("Compile() program = %v, want kind %v", prg, tc.kind)
				}
			} else {
				if err == nil {
					t.Fatalf("Compile() succeeded, want error containing %q", tc.wantErr)
				}
				if err.Field != path.String() || err.Type != field.ErrorTypeInvalid {
					t.Errorf("error field/type = %s/%s, want %s/%s", err.Field, err.Type, path, field.ErrorTypeInvalid)
				}
				for _, want := range tc.wantErr {
					if !strings.Contains(err.Detail, want) {
						t.Errorf("error detail %q does not contain %q", err.Detail, want)
					}
				}
			}
			gotWarning := strings.Join(warnings, "\n")
			if tc.wantWarning == "" && gotWarning != "" {
				t.Errorf("unexpected warnings: %s", gotWarning)
			}
			if !strings.Contains(gotWarning, tc.wantWarning) {
				t.Errorf("warnings %q do not contain %q", gotWarning, tc.wantWarning)
			}
		})
	}
}
