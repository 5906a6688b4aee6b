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
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// StatusPath is the path of the pods/status webhook (StatusHandler).
const StatusPath = "/mutate-v1-pod-status"

// StatusWebhookName is the pods/status entry of the MutatingWebhookConfiguration. Its
// matchConditions (config/webhook/mutating_patch.yaml) send it only the status UPDATEs that
// change a policy.game.kruise.io/* annotation or a plugin's result annotation
// (plugin.ResultReader), so the kubelet's status traffic never calls it. failurePolicy
// Ignore: a manager that is down never blocks a status write; what such a write leaves of
// the manager's own annotations is checked when the state is read (networkretry.DecodeAt),
// and a result written then is not checked (docs/security.md).
const StatusWebhookName = "status.mpod.policy.game.kruise.io"

// +kubebuilder:webhook:path=/mutate-v1-pod-status,mutating=true,failurePolicy=ignore,sideEffects=None,groups="",resources=pods/status,verbs=update,versions=v1,name=status.mpod.policy.game.kruise.io,admissionReviewVersions=v1,timeoutSeconds=10,reinvocationPolicy=Never

// StatusHandler guards the manager's own annotations (OwnedAnnotationPrefix) and the result
// annotations of the pod's plugin (plugin.ResultReader) on the pods/status subresource, which
// the pod webhook does not see: a status UPDATE may carry metadata.annotations, and the API
// server stores them. An UPDATE by anyone but the manager (ManagerUsername) that changes one
// of the manager's, or by anyone the plugin does not take results from that changes a result,
// gets it put back to the stored pod's value (or removed), with a warning naming the keys;
// anything else is allowed untouched. It never denies: an undecodable request is allowed (a
// status write must not fail on this webhook's account).
type StatusHandler struct {
	Decoder admission.Decoder
	// ManagerUsername is the manager's own identity (its ServiceAccount's username); its
	// writes stand.
	ManagerUsername string
	// Plugins are the registered network plugins: the pod's network type names the one whose
	// result annotations are guarded. nil guards none.
	Plugins *plugin.Registry
	// StepBack, when set, reports that kruise-game-manager runs the plugins of a type's
	// provider (okgguard.Guard.StepBack): the results of such a pod are OKG's affair.
	StepBack func(networkType string) (bool, string)
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
	var warnings []string
	var ops []jsonpatch.JsonPatchOperation
	if len(reverted) > 0 {
		log.Info("Annotations owned by the manager were changed through pods/status; put back", "annotations", reverted, "user", req.UserInfo.Username)
		warnings = append(warnings, ownedWarning(plugin.OperationUpdate, reverted))
		ops = revertAnnotations(pod.Annotations, old.Annotations, reverted)
	}
	if p := h.plugin(pod); p != nil {
		if guarded, keys := protectResults(pod, old, plugin.OperationUpdate, p, req.UserInfo); len(keys) > 0 {
			log.Info("Result annotations were changed through pods/status by someone the plugin does not take them from; put back", "annotations", keys, "user", req.UserInfo.Username)
			warnings = append(warnings, resultsWarning(p.Name(), plugin.OperationUpdate, keys))
			// The pod has annotations: its network type is one.
			ops = append(ops, revertAnnotations(pod.Annotations, guarded.Annotations, keys)...)
		}
	}
	if len(ops) == 0 {
		return admission.Allowed("")
	}
	res := admission.Allowed("")
	res.Patches = ops
	pt := admissionv1.PatchTypeJSONPatch
	res.PatchType = &pt
	return res.WithWarnings(warnings...)
}

// plugin returns the registered plugin of pod's network type that this manager runs, nil
// when there is none (no type, a type without a plugin, or one left to kruise-game-manager).
func (h *StatusHandler) plugin(pod *corev1.Pod) plugin.Plugin {
	t := pod.Annotations[networkstatus.AnnotationNetworkType]
	if h.Plugins == nil || t == "" {
		return nil
	}
	if h.StepBack != nil {
		if back, _ := h.StepBack(t); back {
			return nil
		}
	}
	p, ok := h.Plugins.Get(t)
	if !ok {
		return nil
	}
	return p
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
