package pod

import (
	"context"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/utils/ptr"

	policyv1alpha1 "github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
	"github.com/okg-extensions/network-plugin-policy/pkg/networkretry"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
)

// TestErrorReasonDecides: a policy's failureModeExpression tests error.reason, the failure's
// class the plugin gives (plugin.Reason), without parsing its message: exhausted ports are
// retried, another failure of the same type is denied; the retry state records the reason.
func TestErrorReasonDecides(t *testing.T) {
	byReason := npp(testNS, "by-reason", func(s *policyv1alpha1.NetworkPluginPolicySpec) {
		s.FailureModeExpression = ptr.To("error.reason == 'PortsExhausted' ? 'Asynchronous' : 'Synchronous'")
	})
	for _, tc := range []struct {
		reason  plugin.Reason
		allowed bool
	}{{plugin.ReasonPortsExhausted, true}, {plugin.ReasonOther, false}} {
		e := newEnv(t, byReason)
		e.sync.err = &plugin.Error{Type: plugin.RetryError, Reason: tc.reason, Message: "no room"}
		req := request(t, admissionv1.Create, gamePod(syncName), nil, false)
		resp := e.handler.Handle(context.Background(), req)
		if resp.Allowed != tc.allowed {
			t.Fatalf("reason %s: allowed %v, want %v: %v", tc.reason, resp.Allowed, tc.allowed, resp.Result)
		}
		if !tc.allowed {
			if !strings.Contains(resp.Result.Message, "by-reason") {
				t.Errorf("reason %s: %q, want the policy named", tc.reason, resp.Result.Message)
			}
			continue
		}
		st, err := networkretry.FromPod(admitted(t, req, resp))
		if err != nil || st == nil || st.LastError == nil || st.LastError.Reason != string(tc.reason) {
			t.Errorf("reason %s: retry state %+v (%v), want the reason recorded", tc.reason, st, err)
		}
	}
}
