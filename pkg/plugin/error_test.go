package plugin_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

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
