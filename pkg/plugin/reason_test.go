package plugin

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestReasonOf: every failure has a reason a policy can test: the one its plugin set, else
// the one its type and cause imply.
func TestReasonOf(t *testing.T) {
	quota := apierrors.NewForbidden(schema.GroupResource{Resource: "services"}, "gs-0", errors.New("exceeded quota: q, requested: services.nodeports=1"))
	for _, tc := range []struct {
		name string
		err  *Error
		want Reason
	}{
		{"set by the plugin", &Error{Type: RetryError, Reason: ReasonPortsExhausted}, ReasonPortsExhausted},
		{"not allowed", NotAllowedf("Host", "not allowed"), ReasonNotAllowed},
		{"a parameterError", ParamErrorf("Port", "bad"), ReasonInvalidParameter},
		{"a cloud controller's refusal", Errorf(CloudError, "SyncLoadBalancerFailed"), ReasonCloudRefused},
		{"a timeout", Errorf(Timeout, "ran past 8s"), ReasonUnavailable},
		{"an unknown read", AsError(WrapUnknown(errors.New("cache not synced"), "get service")), ReasonUnavailable},
		{"a transient cause", &Error{Type: APICallError, Err: apierrors.NewServiceUnavailable("x")}, ReasonUnavailable},
		{"a quota", &Error{Type: APICallError, Err: fmt.Errorf("create: %w", quota)}, ReasonQuotaExceeded},
		{"a refused write", AsError(WrapWriteRefused(apierrors.NewInvalid(schema.GroupKind{Kind: "Service"}, "gs-0", nil), "patch")), ReasonWriteRefused},
		{"a throttled write", AsError(WrapWriteRefused(apierrors.NewTooManyRequests("slow down", 1), "patch")), ReasonUnavailable},
		{"a write a quota refused", AsError(WrapWriteRefused(quota, "patch")), ReasonQuotaExceeded},
		{"anything else", Errorf(InternalError, "boom"), ReasonOther},
		{"nil", nil, ""},
	} {
		if got := tc.err.ReasonOf(); got != tc.want {
			t.Errorf("%s: ReasonOf = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestReasonsDocumented: docs/policy.md's table of error reasons lists every Reason, in the
// order of Reasons.
func TestReasonsDocumented(t *testing.T) {
	data, err := os.ReadFile("../../docs/policy.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(data), "| `error.reason` | when | from |")
	if !ok {
		t.Fatal("docs/policy.md has no table of error reasons")
	}
	var got []Reason
	for _, line := range strings.Split(table, "\n")[2:] {
		if !strings.HasPrefix(line, "| `") {
			break
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(line, "| `"), "`")
		got = append(got, Reason(name))
	}
	if !slices.Equal(got, Reasons) {
		t.Errorf("docs/policy.md lists %v, want %v", got, Reasons)
	}
}
