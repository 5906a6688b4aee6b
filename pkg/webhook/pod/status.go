package pod

import (
	"context"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
)

// StatusPath is the path of the pods/status webhook (StatusHandler).
const StatusPath = "/mutate-v1-pod-status"

// StatusWebhookName is the pods/status entry of the MutatingWebhookConfiguration. Its
// matchConditions (config/webhook/mutating_patch.yaml) send it only the status UPDATEs that
// change a policy.game.kruise.io/* annotation, so the kubelet's status traffic never calls
// it. failurePolicy Ignore: a manager that is down never blocks a status write; what such a
// write leaves behind is checked when the state is read (networkretry.DecodeAt).
const StatusWebhookName = "status.mpod.policy.game.kruise.io"

// +kubebuilder:webhook:path=/mutate-v1-pod-status,mutating=true,failurePolicy=ignore,sideEffects=None,groups="",resources=pods/status,verbs=update,versions=v1,name=status.mpod.policy.game.kruise.io,admissionReviewVersions=v1,timeoutSeconds=10,reinvocationPolicy=Never

// StatusHandler guards the manager's own annotations (OwnedAnnotationPrefix) on the
// pods/status subresource, which the pod webhook does not see: a status UPDATE may carry
// metadata.annotations, and the API server stores them. An UPDATE by anyone but the manager
// (ManagerUsername) that changes one of them gets it put back to the stored pod's value (or
// removed), with a warning naming the keys; anything else is allowed untouched. It never
// denies: an undecodable request is allowed (a status write must not fail on this webhook's
// account).
type StatusHandler struct {
	Decoder admission.Decoder
	// ManagerUsername is the manager's own identity (its ServiceAccount's username); its
	// writes stand.
	ManagerUsername string
}

// Handle implements admission.Handler.
func (h *StatusHandler) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Update || req.SubResource != "status" {
		return admission.Allowed("")
	}
	log := ctrl.LoggerFrom(ctx).WithName("pod-status-webhook").WithValues("pod", klog.KRef(req.Namespace, req.Name))
	pod, old := &corev1.Pod{}, &corev1.Pod{}
	if err := h.Decoder.DecodeRaw(req.Object, pod); err != nil {
		log.Error(err, "Cannot decode the pod of a status update; allowed")
		return admission.Allowed("")
	}
	if err := h.Decoder.DecodeRaw(req.OldObject, old); err != nil {
		log.Error(err, "Cannot decode the stored pod of a status update; allowed")
		return admission.Allowed("")
	}
	_, reverted := protectOwned(pod, old, plugin.OperationUpdate, byManager(h.ManagerUsername, req))
	if len(reverted) == 0 {
		return admission.Allowed("")
	}
	log.Info("Annotations owned by the manager were changed through pods/status; put back", "annotations", reverted, "user", req.UserInfo.Username)
	res := admission.Allowed("")
	res.Patches = revertAnnotations(pod.Annotations, old.Annotations, reverted)
	pt := admissionv1.PatchTypeJSONPatch
	res.PatchType = &pt
	return res.WithWarnings(ownedWarning(plugin.OperationUpdate, reverted))
}

// revertAnnotations returns the JSON patch (RFC 6902) operations that put the keys back in
// the request's annotations (have) to their stored values (was): replace or add the stored
// value, remove a key the stored pod does not have. It touches nothing but those keys, so a
// status field this build does not know is never dropped from the write.
func revertAnnotations(have, was map[string]string, keys []string) []jsonpatch.JsonPatchOperation {
	var ops []jsonpatch.JsonPatchOperation
	if have == nil {
		ops = append(ops, jsonpatch.NewOperation("add", "/metadata/annotations", map[string]string{}))
	}
	for _, k := range keys {
		path := "/metadata/annotations/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(k)
		v, stored := was[k]
		_, present := have[k]
		switch {
		case stored && present:
			ops = append(ops, jsonpatch.NewOperation("replace", path, v))
		case stored:
			ops = append(ops, jsonpatch.NewOperation("add", path, v))
		case present:
			ops = append(ops, jsonpatch.NewOperation("remove", path, nil))
		}
	}
	return ops
}
