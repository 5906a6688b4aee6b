package main

import (
	"context"
	"testing"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// TestAPIWarnings: the pod webhook's warnings about a plugin's run are logged at V(1), every
// other warning at info as controller-runtime's default logs it; codes other than 299 are
// not logged.
func TestAPIWarnings(t *testing.T) {
	type line struct {
		level int
		text  string
	}
	cases := map[string]struct {
		code int
		text string
		want []line
	}{
		"a plugin's failure": {299, "network plugin Kubernetes-NodePort failed (apiCallError): exceeded quota; admitted with network NotReady",
			[]line{{1, "Warning from the pod webhook"}}},
		"the API server's own": {299, "v1 ComponentStatus is deprecated in v1.19+", []line{{0, "v1 ComponentStatus is deprecated in v1.19+"}}},
		"not a warning code":   {200, "network plugin x failed", nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got []line
			logger := logr.New(&capture{lines: func(level int, msg string) { got = append(got, line{level, msg}) }})
			ctx := log.IntoContext(context.Background(), logger)
			newAPIWarnings().HandleWarningHeaderWithContext(ctx, tc.code, "", tc.text)
			if len(got) != len(tc.want) {
				t.Fatalf("logged %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("line %d = %+v, want %+v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

// capture is a logr.LogSink that reports each Info call's level and message.
type capture struct {
	lines func(level int, msg string)
}

func (c *capture) Init(logr.RuntimeInfo) {}

func (c *capture) Error(error, string, ...any) {}

func (c *capture) Enabled(int) bool { return true }

func (c *capture) Info(level int, msg string, _ ...any) { c.lines(level, msg) }

func (c *capture) WithValues(...any) logr.LogSink { return c }

func (c *capture) WithName(string) logr.LogSink { return c }
