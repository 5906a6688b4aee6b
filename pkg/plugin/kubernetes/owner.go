package kubernetes

import (
	"context"
	"hash/fnv"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

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

// ownerReferences returns the owner of a per-pod object, as OKG sets it: the pod
// itself, or with fixed the pod's GameServerSet (label game.kruise.io/owner-gss) when
// that exists. A Fixed object of a pod without a GameServerSet (no label, or none of
// that name, or no GameServerSet kind in the cluster) is owned by the pod, as in OKG,
// and goes with it. Errors other than "not found" / "no such kind" are APICallErrors.
func ownerReferences(ctx context.Context, c client.Client, pod *corev1.Pod, fixed bool) ([]metav1.OwnerReference, error) {
	podOwner := []metav1.OwnerReference{{
		APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}}
	if !fixed {
		return podOwner, nil
	}
	u, err := gameServerSetOf(ctx, c, pod)
	if err != nil || u == nil {
		return podOwner, err
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

// serviceMatches reports whether have (a stored Service) already is what want asks
// for: the same type, selector, publishNotReadyAddresses and owner references, and the
// same ports in the same order (name, port, protocol and target port, the API server's
// defaults TCP and target port = port applied to both; node ports are not compared
// where want leaves them to the API server). Annotations are not compared: an object
// that OKG created carries OKG's hash and is kept as it is.
func serviceMatches(want, have *corev1.Service) bool {
	if want.Spec.Type != have.Spec.Type || want.Spec.PublishNotReadyAddresses != have.Spec.PublishNotReadyAddresses ||
		!equality.Semantic.DeepEqual(want.Spec.Selector, have.Spec.Selector) ||
		!equality.Semantic.DeepEqual(want.OwnerReferences, have.OwnerReferences) ||
		len(want.Spec.Ports) != len(have.Spec.Ports) {
		return false
	}
	for i, w := range want.Spec.Ports {
		h := have.Spec.Ports[i]
		if w.Name != h.Name || w.Port != h.Port || defaultProtocol(w.Protocol) != defaultProtocol(h.Protocol) ||
			targetPortOf(w) != targetPortOf(h) || (w.NodePort != 0 && w.NodePort != h.NodePort) {
			return false
		}
	}
	return true
}

// defaultProtocol returns p, or TCP (the API server's default) when p is empty.
func defaultProtocol(p corev1.Protocol) corev1.Protocol {
	if p == "" {
		return corev1.ProtocolTCP
	}
	return p
}

// targetPortOf returns the port's target port, or the port itself when it has none
// (the API server's default).
func targetPortOf(p corev1.ServicePort) intstr.IntOrString {
	if p.TargetPort.Type == intstr.Int && p.TargetPort.IntVal == 0 {
		return intstr.FromInt32(p.Port)
	}
	return p.TargetPort
}
