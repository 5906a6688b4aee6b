package kubernetes

import (
	"context"
	"hash/fnv"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/okg-extensions/network-plugin-policy/pkg/networkstatus"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
)

const (
	// SelectorPodNameLabel is the pod label the per-pod Services select on (OKG's
	// SvcSelectorKey, set by StatefulSet-style controllers; the plugins add it to pods
	// that lack it).
	SelectorPodNameLabel = "statefulset.kubernetes.io/pod-name"
	// SelectorDisabledLabel replaces SelectorPodNameLabel in a NodePort Service's
	// selector while the pod's network is disabled, so the Service selects nothing
	// (OKG's SvcSelectorDisabledKey).
	SelectorDisabledLabel = "game.kruise.io/svc-selector-disabled"
	// AnnotationServiceHash holds the hash of the parameters a Service was built from
	// (OKG's ServiceHashKey).
	AnnotationServiceHash = "game.kruise.io/svc-hash"
	// AnnotationIngressHash holds the hash of the parameters an Ingress was built from
	// (OKG's IngressHashKey).
	AnnotationIngressHash = "game.kruise.io/ingress-hash"
)

// gameServerSetGVK is OKG's GameServerSet, the owner of Fixed Services and Ingresses.
var gameServerSetGVK = schema.GroupVersionKind{Group: "game.kruise.io", Version: "v1alpha1", Kind: "GameServerSet"}

// ownerReferences returns the owner of a per-pod object: the pod itself, or with
// fixed, the pod's GameServerSet (label game.kruise.io/owner-gss) when it exists, and
// no owner otherwise, so that the object outlives the pod. Errors other than "not
// found" / "no such kind" are APICallErrors.
func ownerReferences(ctx context.Context, c client.Client, pod *corev1.Pod, fixed bool) ([]metav1.OwnerReference, error) {
	if !fixed {
		return []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID,
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
		}}, nil
	}
	gss := pod.Labels[networkstatus.LabelOwnerGSS]
	if gss == "" {
		return nil, nil
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gameServerSetGVK)
	if err := c.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: gss}, u); err != nil {
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) || runtime.IsNotRegisteredError(err) {
			return nil, nil
		}
		return nil, plugin.Wrap(plugin.APICallError, err, "get GameServerSet %s/%s", pod.Namespace, gss)
	}
	return []metav1.OwnerReference{{
		APIVersion: gameServerSetGVK.GroupVersion().String(), Kind: gameServerSetGVK.Kind, Name: u.GetName(), UID: u.GetUID(),
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}}, nil
}

// ownedByPod reports whether obj has an owner reference to the pod's UID.
func ownedByPod(obj metav1.Object, pod *corev1.Pod) bool {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.UID == pod.UID && ref.Kind == "Pod" {
			return true
		}
	}
	return false
}

// deleteIfOwned deletes obj (already read) when it is owned by the pod, with a UID
// precondition so that a same-named object created meanwhile is left alone. Not found
// and conflicting UIDs are not errors; other failures are APICallErrors.
func deleteIfOwned(ctx context.Context, c client.Client, obj client.Object, pod *corev1.Pod) error {
	if err := c.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: pod.Name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return plugin.Wrap(plugin.APICallError, err, "get %T %s/%s", obj, pod.Namespace, pod.Name)
	}
	if !ownedByPod(obj, pod) {
		return nil
	}
	uid := obj.GetUID()
	if err := c.Delete(ctx, obj, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return plugin.Wrap(plugin.APICallError, err, "delete %T %s/%s", obj, pod.Namespace, pod.Name)
	}
	return nil
}

// ensurePodNameLabel sets the pod's statefulset.kubernetes.io/pod-name label to its
// name when the pod has a name and lacks the label, so the per-pod Service selects it.
func ensurePodNameLabel(pod *corev1.Pod) {
	if pod.Name == "" {
		return
	}
	if _, ok := pod.Labels[SelectorPodNameLabel]; ok {
		return
	}
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[SelectorPodNameLabel] = pod.Name
}

// configHash returns a short, stable hash (FNV-64a, hex) of a canonical parameter
// string, for the hash annotations.
func configHash(canonical string) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(canonical))
	return strconv.FormatUint(h.Sum64(), 16)
}
