package kubernetes

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

const (
	// LabelInplaceUpdateNotReadyBlocker is OKG's pod label that holds OpenKruise's in-place
	// update in its PreparingUpdate state while "true" (the GameServerSet's preUpdate
	// lifecycle hook waits on it). The NodePort plugin sets it for pods with
	// AllowNotReadyContainers: "false" once the Service publishes the pod although it is
	// not ready, "true" otherwise.
	LabelInplaceUpdateNotReadyBlocker = "game.kruise.io/inplace-update-not-ready-blocker"
	// LabelLifecycleState is OpenKruise's pod lifecycle state label
	// (Normal, PreparingUpdate, Updating, Updated, PreparingDelete, ...).
	LabelLifecycleState = "lifecycle.apps.kruise.io/state"
	// LifecycleStatePreparingUpdate is the lifecycle state before an in-place update, while
	// the preUpdate hook's labels (the blocker) hold it.
	LifecycleStatePreparingUpdate = "PreparingUpdate"
)

// gameServerSetOf returns the pod's GameServerSet (label game.kruise.io/owner-gss), or
// nil when the pod has no such label, the GameServerSet does not exist or the cluster has
// no GameServerSet kind. Other errors are APICallErrors marked Unknown
// (plugin.WrapUnknown): the read failed, the network was not seen to be wrong.
func gameServerSetOf(ctx context.Context, c client.Client, pod *corev1.Pod) (*unstructured.Unstructured, error) {
	name := pod.Labels[networkstatus.LabelOwnerGSS]
	if name == "" {
		return nil, nil
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gameServerSetGVK)
	if err := c.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: name}, u); err != nil {
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) || runtime.IsNotRegisteredError(err) {
			return nil, nil
		}
		return nil, plugin.WrapUnknown(err, "get GameServerSet %s/%s", pod.Namespace, name)
	}
	return u, nil
}

// allowNotReadyFromGSS returns the containers the GameServerSet's network conf
// (spec.network.networkConf) lists in AllowNotReadyContainers, as OKG reads them, and the
// image of each container of its template (spec.gameServerTemplate.spec.containers).
func allowNotReadyFromGSS(gss *unstructured.Unstructured) (allowed []string, images map[string]string) {
	conf, _, _ := unstructured.NestedSlice(gss.Object, "spec", "network", "networkConf")
	for _, e := range conf {
		m, ok := e.(map[string]any)
		if !ok || m["name"] != ParamAllowNotReadyContainers {
			continue
		}
		v, _ := m["value"].(string)
		for _, name := range strings.Split(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				allowed = append(allowed, name)
			}
		}
	}
	images = map[string]string{}
	ctrs, _, _ := unstructured.NestedSlice(gss.Object, "spec", "gameServerTemplate", "spec", "containers")
	for _, e := range ctrs {
		m, ok := e.(map[string]any)
		if !ok {
			continue
		}
		name, _ := m["name"].(string)
		image, _ := m["image"].(string)
		images[name] = image
	}
	return allowed, images
}

// allowNotReadyDecision is what OKG's AllowNotReadyContainers lifecycle asks for: the
// Service's publishNotReadyAddresses and the value of the blocker label.
type allowNotReadyDecision struct {
	publish bool
	blocker string
}

// decideAllowNotReady follows OKG's in-place update lifecycle for a pod with
// AllowNotReadyContainers, given the Service's current publishNotReadyAddresses:
//   - in OpenKruise's PreparingUpdate state, when a container the GameServerSet lists
//     runs an image other than the GameServerSet's template (it is about to be updated in
//     place), the Service publishes the pod although it is not ready; the blocker label is
//     then "false", which lets the in-place update go on (OKG sets it at the next UPDATE,
//     this project in the same one);
//   - in any other state the blocker label is "true", and publishing stops once the pod is
//     Ready again.
func decideAllowNotReady(pod *corev1.Pod, gss *unstructured.Unstructured, current bool) allowNotReadyDecision {
	allowed, images := allowNotReadyFromGSS(gss)
	if pod.Labels[LabelLifecycleState] == LifecycleStatePreparingUpdate {
		updating := false
		for _, cs := range pod.Status.ContainerStatuses {
			if want, ok := images[cs.Name]; ok && want != cs.Image && containsString(allowed, cs.Name) {
				updating = true
			}
		}
		return allowNotReadyDecision{publish: current || updating, blocker: "false"}
	}
	return allowNotReadyDecision{publish: current && !podReady(pod), blocker: "true"}
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// podReady reports whether the pod's Ready condition is True.
func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// setLabel sets a pod label, creating the map when needed.
func setLabel(pod *corev1.Pod, key, value string) {
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[key] = value
}

// nonNil returns the non-nil errors of errs.
func nonNil(errs ...error) []error {
	out := make([]error, 0, len(errs))
	for _, e := range errs {
		if e != nil {
			out = append(out, e)
		}
	}
	return out
}
