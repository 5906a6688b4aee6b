package pod

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// TestStatusHandler: a pods/status UPDATE by anyone but the manager that changes a
// policy.game.kruise.io/* annotation gets it put back (a patch and a warning); the manager's
// own writes, status writes that touch no owned annotation, and undecodable requests are
// allowed untouched; nothing is ever denied.
func TestStatusHandler(t *testing.T) {
	const manager = "system:serviceaccount:network-plugin-policy-system:network-plugin-policy-manager"
	h := &StatusHandler{Decoder: admission.NewDecoder(runtime.NewScheme()), ManagerUsername: manager}
	raw := func(ann map[string]string) runtime.RawExtension {
		p := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Name: "gs-0", Namespace: "game", Annotations: ann}}
		b, _ := json.Marshal(p)
		return runtime.RawExtension{Raw: b}
	}
	stored := map[string]string{AnnotationDecision: "Asynchronous by built-in default"}
	forged := map[string]string{AnnotationDecision: "forged", "policy.game.kruise.io/network-retry": `{"since":"2099-01-01T00:00:00Z"}`}
	cases := map[string]struct {
		user, sub   string
		object      runtime.RawExtension
		wantPatches int
	}{
		"forged by a node":           {user: "system:node:n1", sub: "status", object: raw(forged), wantPatches: 2},
		"the manager's own write":    {user: manager, sub: "status", object: raw(forged)},
		"status only":                {user: "system:node:n1", sub: "status", object: raw(stored)},
		"not the status subresource": {user: "system:node:n1", sub: "", object: raw(forged)},
		"undecodable":                {user: "system:node:n1", sub: "status", object: runtime.RawExtension{Raw: []byte("{not json")}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			res := h.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				Operation: admissionv1.Update, SubResource: tc.sub, Namespace: "game", Name: "gs-0",
				UserInfo: authenticationv1.UserInfo{Username: tc.user}, Object: tc.object, OldObject: raw(stored),
			}})
			if !res.Allowed {
				t.Fatalf("denied: %v", res.Result)
			}
			if len(res.Patches) != tc.wantPatches {
				t.Errorf("patches %v, want %d", res.Patches, tc.wantPatches)
			}
			if tc.wantPatches > 0 {
				// Only the annotations are touched: nothing else of the status write is.
				want := map[string]string{
					"replace /metadata/annotations/policy.game.kruise.io~1network-decision": "Asynchronous by built-in default",
					"remove /metadata/annotations/policy.game.kruise.io~1network-retry":     "<nil>",
				}
				for _, op := range res.Patches {
					if v, ok := want[op.Operation+" "+op.Path]; !ok || fmt.Sprint(op.Value) != v {
						t.Errorf("patch %s %s %v, want one of %v", op.Operation, op.Path, op.Value, want)
					}
				}
			}
			if tc.wantPatches > 0 && (len(res.Warnings) != 1 || res.Warnings[0] != "annotations policy.game.kruise.io/network-decision, policy.game.kruise.io/network-retry are written by network-plugin-policy only: reverted to the value the manager wrote") {
				t.Errorf("warnings %q, want the reverted keys named", res.Warnings)
			}
		})
	}
}
