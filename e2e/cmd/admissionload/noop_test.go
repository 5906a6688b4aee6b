package main

import (
	"context"
	"encoding/json"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// TestNoopHandler checks that the no-op webhook admits a pod with exactly one JSON patch
// operation that, applied, adds the no-op annotation and changes nothing else, with and
// without an annotations map on the pod, and rejects a body that is not a pod.
func TestNoopHandler(t *testing.T) {
	h := noopHandler{decoder: admission.NewDecoder(clientgoscheme.Scheme)}
	cases := map[string]map[string]string{
		"annotations":    {annotationPhase: "p1"},
		"no annotations": nil,
	}
	for name, annotations := range cases {
		t.Run(name, func(t *testing.T) {
			pod := &corev1.Pod{
				TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
				ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Annotations: annotations},
			}
			raw, err := json.Marshal(pod)
			if err != nil {
				t.Fatal(err)
			}
			resp := h.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw},
			}})
			if !resp.Allowed || resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch {
				t.Fatalf("response: allowed %v, patch type %v; want allowed with a JSON patch", resp.Allowed, resp.PatchType)
			}
			var ops []jsonPatchOp
			if err := json.Unmarshal(resp.Patch, &ops); err != nil || len(ops) != 1 {
				t.Fatalf("patch %s: %d operations (%v), want 1", resp.Patch, len(ops), err)
			}
			p, err := jsonpatch.DecodePatch(resp.Patch)
			if err != nil {
				t.Fatal(err)
			}
			patched, err := p.Apply(raw)
			if err != nil {
				t.Fatalf("apply %s: %v", resp.Patch, err)
			}
			got := &corev1.Pod{}
			if err := json.Unmarshal(patched, got); err != nil {
				t.Fatal(err)
			}
			want := pod.DeepCopy()
			if want.Annotations == nil {
				want.Annotations = map[string]string{}
			}
			want.Annotations[annotationNoop] = "true"
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("patched pod (-want,+got):\n%s", diff)
			}
		})
	}
	t.Run("not a pod", func(t *testing.T) {
		resp := h.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: []byte("{")},
		}})
		if resp.Allowed || resp.Result == nil || resp.Result.Code != 400 {
			t.Errorf("response to a broken body: allowed %v, result %v; want an HTTP 400 error", resp.Allowed, resp.Result)
		}
	})
}
