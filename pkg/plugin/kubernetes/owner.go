package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
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

// OwnerReferences returns the owner of a per-pod object, as OKG sets it for every per-pod
// object of its plugins (the Kubernetes ones and the cloud load balancers' Services): the pod
// itself, or with fixed the pod's GameServerSet (label game.kruise.io/owner-gss) when
// that exists. A Fixed object of a pod without a GameServerSet (no label, or none of
// that name, or no GameServerSet kind in the cluster) is owned by the pod, as in OKG,
// and goes with it. Errors other than "not found" / "no such kind" are APICallErrors.
func OwnerReferences(ctx context.Context, c client.Client, pod *corev1.Pod, fixed bool) ([]metav1.OwnerReference, error) {
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

// ownedByGameServerSet reports whether obj has an owner reference to the pod's
// GameServerSet: kind GameServerSet of group game.kruise.io, named like the pod's
// game.kruise.io/owner-gss label (the owner OKG and this project give Fixed objects).
func ownedByGameServerSet(obj metav1.Object, pod *corev1.Pod) bool {
	gss := pod.Labels[networkstatus.LabelOwnerGSS]
	if gss == "" {
		return false
	}
	for _, ref := range obj.GetOwnerReferences() {
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err == nil && gv.Group == gameServerSetGVK.Group && ref.Kind == gameServerSetGVK.Kind && ref.Name == gss {
			return true
		}
	}
	return false
}

// ManagedFor reports whether an existing Service or Ingress is the plugins' to update
// for pod: it is owned by the pod (its UID) or by the pod's GameServerSet, or it
// carries hashKey (AnnotationServiceHash or AnnotationIngressHash, the key OKG and this
// project write on every object they create, so objects OKG made are taken over).
// Anything else belongs to someone else and is never modified.
func ManagedFor(obj metav1.Object, pod *corev1.Pod, hashKey string) bool {
	if ownedByPod(obj, pod) || ownedByGameServerSet(obj, pod) {
		return true
	}
	_, ok := obj.GetAnnotations()[hashKey]
	return ok
}

// notManagedError is the ParameterError for an existing object of the pod's name that
// ManagedFor refuses: "<Kind> <namespace>/<name> exists and is not managed by
// network-plugin-policy". The policy's failure mode decides what becomes of the pod.
func notManagedError(kind string, obj metav1.Object) *plugin.Error {
	return plugin.Errorf(plugin.ParameterError, "%s %s/%s exists and is not managed by network-plugin-policy", kind, obj.GetNamespace(), obj.GetName())
}

// applyOwned is the one write path of the NodePort and Ingress plugins for their
// per-pod objects, in the manner of controllerutil.CreateOrPatch but with the
// adoption check and the write bound together. obj is an empty object of the kind
// (Service or Ingress) with only its namespace and name set. When no object of that
// name exists, mutate(false) fills obj in and it is created. When one exists, it is
// read into obj; unless ManagedFor accepts it (hashKey is the kind's hash annotation),
// applyOwned returns notManagedError without writing anything; otherwise mutate(true)
// brings obj to what the pod needs (leaving it as it is when it already matches), and
// the difference, if any, is sent as a JSON merge patch that carries the
// resourceVersion that was checked (client.MergeFromWithOptimisticLock): an object
// changed or replaced since it was read is never patched, the API server refuses the
// patch with a conflict and the next attempt reads it again. An error from mutate stops
// the write and is returned as a failed create or patch would be: a *plugin.Error as it
// is, anything else (an API server refusal that mutate foresees, such as NodePort's
// checkServiceQuota) as the same APICallError. On success obj holds the object as
// stored. Errors: the ParameterError of notManagedError, or an APICallError for a
// failed get, create or patch (a conflict included), with the message "create or patch
// <kind> <namespace>/<name>: <cause>"; a failed get (the object was not seen, mutate
// never ran), a conflict and an AlreadyExists (the object changed or appeared since the
// cache showed it) are marked Unknown; but a create refused as AlreadyExists first waits
// for the cache to show the object (plugin.AwaitCreated, counted) and goes on with it as
// with an existing one, so that two admissions of one pod at the same moment both end with
// the pod's object; a patch of an existing object that was not accepted
// for any other reason is WriteRefused ("patch <kind> <namespace>/<name>: <cause>"): the
// object still stands as it was; a failed create (the object was seen missing) is neither.
func applyOwned(ctx context.Context, c client.Client, pod *corev1.Pod, obj client.Object, kind, hashKey string, mutate func(existing bool) error) error {
	fail := func(err error) error {
		if perr := (*plugin.Error)(nil); errors.As(err, &perr) {
			return perr
		}
		if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
			// The object changed (or appeared) since the cache showed it: nothing says the
			// network is broken, and the next attempt reads it again.
			return plugin.WrapUnknown(err, "create or patch %s %s/%s", kind, obj.GetNamespace(), obj.GetName())
		}
		return plugin.Wrap(plugin.APICallError, err, "create or patch %s %s/%s", kind, obj.GetNamespace(), obj.GetName())
	}
	res := controllerutil.OperationResultNone
	exists, raced := true, false
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		if !apierrors.IsNotFound(err) {
			return plugin.WrapUnknown(err, "create or patch %s %s/%s", kind, obj.GetNamespace(), obj.GetName())
		}
		if err := mutate(false); err != nil {
			return fail(err)
		}
		switch err := c.Create(ctx, obj); {
		case err == nil:
			res, exists = controllerutil.OperationResultCreated, false
		case apierrors.IsAlreadyExists(err):
			// Another admission of this pod (a second UPDATE at the same moment, on this
			// replica or another) created it first: read it and go on as with an existing
			// object, its adoption check included.
			if werr := plugin.AwaitCreated(ctx, c, obj); werr != nil {
				ctrl.LoggerFrom(ctx).V(1).Info("An object created meanwhile did not show in the cache", "kind", kind, "object", klog.KObj(obj), "error", werr.Error())
				return fail(err)
			}
			raced = true
		default:
			return fail(err)
		}
	}
	if exists {
		if !ManagedFor(obj, pod, hashKey) {
			return notManagedError(kind, obj)
		}
		if raced {
			plugin.CreateRaceAdopted(kind)
		}
		before := obj.DeepCopyObject().(client.Object)
		if err := mutate(true); err != nil {
			return fail(err)
		}
		if !equality.Semantic.DeepEqual(before, obj) {
			if err := c.Patch(ctx, obj, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
				if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
					// Changed since it was read (Unknown), or gone (a failed write of a
					// missing object, as a failed create): not an object that still stands.
					return fail(err)
				}
				// The object exists and is this manager's: a patch that was not accepted
				// (throttled, failed, refused by another admission controller) leaves it as it
				// was, which is no evidence that the network broke.
				return plugin.WrapWriteRefused(err, "patch %s %s/%s", kind, obj.GetNamespace(), obj.GetName())
			}
			res = controllerutil.OperationResultUpdated
		}
	}
	if res != controllerutil.OperationResultNone {
		ctrl.LoggerFrom(ctx).Info(fmt.Sprintf("%s %s", kind, res), "object", klog.KObj(obj), "pod", klog.KObj(pod))
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
