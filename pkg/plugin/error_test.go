package plugin_test

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
)

func TestError(t *testing.T) {
	cases := map[string]struct {
		err         error
		wantType    plugin.ErrorType
		wantMsg     string
		wantWarning bool
		wantCause   error
	}{
		"parameter error names the parameter": {
			err:      plugin.ParamErrorf("ContainerPorts", "container %q does not exist", "x"),
			wantType: plugin.ParameterError,
			wantMsg:  `parameterError: parameter ContainerPorts: container "x" does not exist`,
		},
		"wrapped in fmt.Errorf still found by errors.As": {
			err:      fmt.Errorf("run plugin: %w", plugin.Errorf(plugin.RetryError, "range exhausted")),
			wantType: plugin.RetryError,
			wantMsg:  "run plugin: retryError: range exhausted",
		},
		"wrap keeps the cause": {
			err:       plugin.Wrap(plugin.APICallError, errBoom, "get node %q", "n1"),
			wantType:  plugin.APICallError,
			wantMsg:   `apiCallError: get node "n1": boom`,
			wantCause: errBoom,
		},
		"plain error is internal": {
			err:       errBoom,
			wantType:  plugin.InternalError,
			wantMsg:   "boom",
			wantCause: errBoom,
		},
		"warning": {
			err:         &plugin.Error{Type: plugin.ParameterError, Param: "Foo", Message: "unknown", Warning: true},
			wantType:    plugin.ParameterError,
			wantMsg:     "parameterError: parameter Foo: unknown",
			wantWarning: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.wantType, plugin.TypeOf(tc.err)); diff != "" {
				t.Errorf("TypeOf (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantMsg, tc.err.Error()); diff != "" {
				t.Errorf("Error() (-want,+got):\n%s", diff)
			}
			if got := plugin.IsWarning(tc.err); got != tc.wantWarning {
				t.Errorf("IsWarning = %t, want %t", got, tc.wantWarning)
			}
			if tc.wantCause != nil && !errors.Is(tc.err, tc.wantCause) {
				t.Errorf("errors.Is(err, cause) = false")
			}
			if plugin.AsError(tc.err).Type != tc.wantType {
				t.Errorf("AsError type = %s, want %s", plugin.AsError(tc.err).Type, tc.wantType)
			}
		})
	}
	if plugin.TypeOf(nil) != "" || plugin.AsError(nil) != nil || plugin.Wrap(plugin.APICallError, nil, "x") != nil {
		t.Errorf("nil error must stay nil")
	}
}

func TestSplit(t *testing.T) {
	warnA := &plugin.Error{Type: plugin.ParameterError, Param: "Fixed", Message: "ignored", Warning: true}
	warnB := &plugin.Error{Type: plugin.ParameterError, Param: "Path", Message: "has no <id>", Warning: true}
	failure := plugin.ParamErrorf("ContainerPorts", "is required")
	other := plugin.Errorf(plugin.APICallError, "second failure")
	cases := map[string]struct {
		err          error
		wantFailure  *plugin.Error
		wantWarnings []*plugin.Error
		wantWarning  bool
	}{
		"nil":                         {},
		"failure":                     {err: failure, wantFailure: failure},
		"one warning (Warning: true)": {err: warnA, wantWarnings: []*plugin.Error{warnA}, wantWarning: true},
		"warnings joined":             {err: errors.Join(warnA, warnB), wantWarnings: []*plugin.Error{warnA, warnB}, wantWarning: true},
		"warning beside a failure, failure last": {
			err: errors.Join(warnA, failure), wantFailure: failure, wantWarnings: []*plugin.Error{warnA},
		},
		"nested joins, first failure wins": {
			err: errors.Join(errors.Join(warnA, failure), errors.Join(other, warnB)), wantFailure: failure,
			wantWarnings: []*plugin.Error{warnA, warnB},
		},
		"warning wrapped by fmt.Errorf": {
			err: fmt.Errorf("parse: %w", warnA), wantWarnings: []*plugin.Error{warnA}, wantWarning: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			gotFailure, gotWarnings := plugin.Split(tc.err)
			if gotFailure != tc.wantFailure {
				t.Errorf("failure = %v, want %v", gotFailure, tc.wantFailure)
			}
			if diff := cmp.Diff(tc.wantWarnings, gotWarnings); diff != "" {
				t.Errorf("warnings (-want,+got):\n%s", diff)
			}
			if got := plugin.IsWarning(tc.err); got != tc.wantWarning {
				t.Errorf("IsWarning = %t, want %t", got, tc.wantWarning)
			}
		})
	}
	t.Run("plain error is an internal failure", func(t *testing.T) {
		gotFailure, gotWarnings := plugin.Split(errors.Join(warnA, errBoom))
		if gotFailure == nil || gotFailure.Type != plugin.InternalError || !errors.Is(gotFailure, errBoom) || len(gotWarnings) != 1 {
			t.Errorf("Split = %v, %v; want an internalError wrapping boom and one warning", gotFailure, gotWarnings)
		}
	})
}

// TestInconclusive: reads that failed and timeouts are Unknown; failures of the API server
// (5xx, 429, cut connections, deadlines) are Transient; definite refusals are neither.
func TestInconclusive(t *testing.T) {
	gr := schema.GroupResource{Resource: "services"}
	cases := map[string]struct {
		err  *plugin.Error
		want bool
	}{
		"failed read":      {err: plugin.AsError(plugin.WrapUnknown(errors.New("boom"), "get node")), want: true},
		"plugin timeout":   {err: plugin.Errorf(plugin.Timeout, "did not finish"), want: true},
		"500 on create":    {err: plugin.AsError(plugin.Wrap(plugin.APICallError, apierrors.NewInternalError(errors.New("etcd")), "create")), want: true},
		"429 on create":    {err: plugin.AsError(plugin.Wrap(plugin.APICallError, apierrors.NewTooManyRequests("slow down", 1), "create")), want: true},
		"503":              {err: plugin.AsError(plugin.Wrap(plugin.APICallError, apierrors.NewServiceUnavailable("down"), "create")), want: true},
		"server timeout":   {err: plugin.AsError(plugin.Wrap(plugin.APICallError, apierrors.NewServerTimeout(gr, "create", 1), "create")), want: true},
		"deadline":         {err: plugin.AsError(plugin.Wrap(plugin.APICallError, fmt.Errorf("post: %w", context.DeadlineExceeded), "create")), want: true},
		"connection reset": {err: plugin.AsError(plugin.Wrap(plugin.APICallError, syscall.ECONNRESET, "create")), want: true},
		"exceeded quota":   {err: plugin.AsError(plugin.Wrap(plugin.APICallError, apierrors.NewForbidden(gr, "gs-0", errors.New("exceeded quota")), "create"))},
		"invalid":          {err: plugin.AsError(plugin.Wrap(plugin.APICallError, apierrors.NewInvalid(schema.GroupKind{Kind: "Service"}, "gs-0", nil), "create"))},
		"parameter error":  {err: plugin.ParamErrorf("PortProtocols", "is required")},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.err.Inconclusive(); got != tc.want {
				t.Errorf("Inconclusive(%v) = %t, want %t", tc.err, got, tc.want)
			}
		})
	}
}
