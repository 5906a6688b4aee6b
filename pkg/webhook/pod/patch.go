package pod

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// patchResponse returns the admission response that turns pod (decoded from raw, the
// request's object) into mutated: the JSON patch operations of directPatch when the pods
// differ only in the fields it covers, and otherwise (or when diff is set) the whole-pod
// diff of admission.PatchResponseFromRaw, so that no change of a plugin is lost. direct
// reports which of the two it is.
func patchResponse(raw []byte, pod, mutated *corev1.Pod, diff bool) (resp admission.Response, direct bool, err error) {
	if !diff {
		if ops, ok := directPatch(pod, mutated); ok {
			resp = admission.Response{Patches: ops, AdmissionResponse: admissionv1.AdmissionResponse{Allowed: true}}
			if len(ops) > 0 {
				resp.PatchType = ptr.To(admissionv1.PatchTypeJSONPatch)
			}
			return resp, true, nil
		}
	}
	b, err := json.Marshal(mutated)
	if err != nil {
		return admission.Response{}, false, fmt.Errorf("encode mutated pod: %w", err)
	}
	resp = admission.PatchResponseFromRaw(raw, b)
	if !resp.Allowed {
		return admission.Response{}, false, fmt.Errorf("diff mutated pod: %s", resp.Result.Message)
	}
	return resp, false, nil
}

// directPatch returns the RFC 6902 operations that turn the JSON of orig into the JSON of
// mutated, built from comparisons of exactly the fields that plugins and this webhook write:
// metadata.annotations and metadata.labels (one add, replace or remove per key; the whole
// map when orig has none or mutated has none left), spec.containers[*].ports and
// spec.readinessGates (the whole list). ok is false when the pods differ anywhere else;
// the caller must then diff the whole pod. The operations are ordered (annotations, labels,
// containers by index, readiness gates; keys sorted), so the same change gives the same
// patch.
func directPatch(orig, mutated *corev1.Pod) (ops []jsonpatch.JsonPatchOperation, ok bool) {
	if !sameOutsidePatchedFields(orig, mutated) {
		return nil, false
	}
	ops = mapOps(ops, "/metadata/annotations", orig.Annotations, mutated.Annotations)
	ops = mapOps(ops, "/metadata/labels", orig.Labels, mutated.Labels)
	for i := range orig.Spec.Containers {
		ops = listOps(ops, "/spec/containers/"+strconv.Itoa(i)+"/ports", orig.Spec.Containers[i].Ports, mutated.Spec.Containers[i].Ports)
	}
	ops = listOps(ops, "/spec/readinessGates", orig.Spec.ReadinessGates, mutated.Spec.ReadinessGates)
	return ops, true
}

// sameOutsidePatchedFields reports whether orig and mutated are equal once the fields that
// directPatch covers are masked out. Equality is reflect.DeepEqual, strict on purpose (nil
// and empty differ, a Quantity's cached string counts): a false "different" only costs the
// whole-pod diff, a false "equal" would lose a change.
func sameOutsidePatchedFields(orig, mutated *corev1.Pod) bool {
	if orig.TypeMeta != mutated.TypeMeta || len(orig.Spec.Containers) != len(mutated.Spec.Containers) {
		return false
	}
	om, mm := orig.ObjectMeta, mutated.ObjectMeta
	om.Annotations, om.Labels, mm.Annotations, mm.Labels = nil, nil, nil, nil
	if !reflect.DeepEqual(&om, &mm) {
		return false
	}
	os, ms := orig.Spec, mutated.Spec
	os.Containers, os.ReadinessGates, ms.Containers, ms.ReadinessGates = nil, nil, nil, nil
	if !reflect.DeepEqual(&os, &ms) {
		return false
	}
	for i := range orig.Spec.Containers {
		oc, mc := orig.Spec.Containers[i], mutated.Spec.Containers[i]
		oc.Ports, mc.Ports = nil, nil
		if !reflect.DeepEqual(&oc, &mc) {
			return false
		}
	}
	return reflect.DeepEqual(&orig.Status, &mutated.Status)
}

// mapOps appends the operations that turn the string map at path (an omitempty field)
// from orig into mutated.
func mapOps(ops []jsonpatch.JsonPatchOperation, path string, orig, mutated map[string]string) []jsonpatch.JsonPatchOperation {
	switch {
	case len(mutated) == 0 && len(orig) == 0:
		return ops
	case len(mutated) == 0:
		return append(ops, jsonpatch.NewOperation("remove", path, nil))
	case len(orig) == 0:
		// orig's JSON has no map, null or {}: add sets (or replaces) the member whole.
		return append(ops, jsonpatch.NewOperation("add", path, mutated))
	}
	keys := make([]string, 0, len(mutated))
	for k, v := range mutated {
		if ov, found := orig[k]; !found || ov != v {
			keys = append(keys, k)
		}
	}
	for k := range orig {
		if _, found := mutated[k]; !found {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		p := path + "/" + escapePointer(k)
		v, inMutated := mutated[k]
		_, inOrig := orig[k]
		switch {
		case !inMutated:
			ops = append(ops, jsonpatch.NewOperation("remove", p, nil))
		case inOrig:
			ops = append(ops, jsonpatch.NewOperation("replace", p, v))
		default:
			ops = append(ops, jsonpatch.NewOperation("add", p, v))
		}
	}
	return ops
}

// listOps appends the operation that turns the list at path (an omitempty field) from orig
// into mutated: add of the whole list (which replaces an existing one), or remove when
// mutated has none left.
func listOps[T any](ops []jsonpatch.JsonPatchOperation, path string, orig, mutated []T) []jsonpatch.JsonPatchOperation {
	switch {
	case len(orig) == 0 && len(mutated) == 0:
		return ops
	case len(mutated) == 0:
		return append(ops, jsonpatch.NewOperation("remove", path, nil))
	case len(orig) == len(mutated) && reflect.DeepEqual(orig, mutated):
		return ops
	}
	return append(ops, jsonpatch.NewOperation("add", path, mutated))
}

// pointerEscaper escapes a JSON Pointer reference token (RFC 6901 section 3): '~' as "~0",
// '/' as "~1".
var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// escapePointer escapes a map key for use in a JSON Pointer.
func escapePointer(key string) string {
	if !strings.ContainsAny(key, "~/") {
		return key
	}
	return pointerEscaper.Replace(key)
}
