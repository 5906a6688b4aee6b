package kubernetes

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// CachesPod is the rule of the manager's pod cache (the client-side filter of
// cachefilter.ListerWatcher): obj is held when it is a pod that is a game server (it has the
// game.kruise.io/network-type annotation, whatever its value) or that declares a host port
// on one of its containers (spec.containers[].ports[].hostPort, the ports the HostPort
// allocator counts; the scheduler also counts those of sidecar init containers, which the
// allocator does not, and so neither does this rule). Nothing in the manager reads any other
// pod: the network controller, the webhook's precheck and the plugins act on game servers
// only, and the HostPort allocator forgets a pod with neither (TestPodCacheKeepsWhatIsRead,
// TestCachesPod). A pod that carries a finalizer of OKG's (game.kruise.io/...) is held
// too, whatever its annotations: a plugin's finalizer on a pod whose network type was removed
// is let go by the network controller.
// A pod's container ports cannot change after its creation, so a pod leaves the cache only
// by losing its annotation (and OKG's finalizers) or by being deleted. Anything that is not a *corev1.Pod is
// refused. At 50,000 pods of which 5,000 are game servers this is what keeps the manager's
// memory growing with game servers rather than with the cluster (docs/benchmarks.md,
// "Memory against cluster size").
func CachesPod(obj runtime.Object) bool {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return false
	}
	if _, game := pod.Annotations[networkstatus.AnnotationNetworkType]; game {
		return true
	}
	for _, f := range pod.Finalizers {
		if strings.HasPrefix(f, "game.kruise.io/") {
			return true
		}
	}
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.HostPort != 0 {
				return true
			}
		}
	}
	return false
}

// TransformPod is the manager's cache transform for pods (cache.ByObject Transform): it
// keeps what the manager reads of each pod that CachesPod lets into the cache and drops
// the rest before the pod is stored.
//
//   - Every pod loses metadata.managedFields (nothing here reads them; they are most of a
//     pod's bytes).
//   - A game server, a pod with a game.kruise.io/network-type annotation, is otherwise kept
//     whole: the plugins, the network controller and the webhook read it.
//   - Any other pod (one with a host port, since CachesPod refuses the others) keeps only
//     what the HostPort allocator and the network controller read of it (a pod may gain or
//     lose its network type, and its host ports stay bound): its name, generateName,
//     namespace, UID, resourceVersion, creation and deletion timestamps, finalizers (the
//     network controller removes a plugin's with a patch of the whole list), and
//     annotations of game.kruise.io/* and policy.game.kruise.io/* keys; spec.nodeName; for
//     each container with host ports its name and those ports; status.phase. Labels, owner
//     references and the rest go: nothing here lists pods by label.
//
// obj of any other type is returned unchanged. It never fails. Like controller-runtime's
// TransformStripManagedFields it may modify its input, the decoded object of a list or
// watch event that nothing else holds. TestPodCacheKeepsWhatIsRead checks that what it
// drops changes nothing the HostPort allocator decides.
func TransformPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	pod.ManagedFields = nil
	if _, game := pod.Annotations[networkstatus.AnnotationNetworkType]; game {
		return pod, nil
	}
	slim := &corev1.Pod{TypeMeta: pod.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Name: pod.Name, GenerateName: pod.GenerateName, Namespace: pod.Namespace, UID: pod.UID,
		ResourceVersion: pod.ResourceVersion, CreationTimestamp: pod.CreationTimestamp,
		DeletionTimestamp: pod.DeletionTimestamp, DeletionGracePeriodSeconds: pod.DeletionGracePeriodSeconds,
		Finalizers: pod.Finalizers,
	}}
	for k, v := range pod.Annotations {
		if ownAnnotation(k) {
			if slim.Annotations == nil {
				slim.Annotations = map[string]string{}
			}
			slim.Annotations[k] = v
		}
	}
	slim.Spec.NodeName = pod.Spec.NodeName
	slim.Spec.Containers = hostPortsOnly(pod.Spec.Containers)
	slim.Status.Phase = pod.Status.Phase
	return slim, nil
}

// ownAnnotation reports whether key is OKG's (game.kruise.io/...) or this project's
// (policy.game.kruise.io/...).
func ownAnnotation(key string) bool {
	return strings.HasPrefix(key, "game.kruise.io/") || strings.HasPrefix(key, "policy.game.kruise.io/")
}

// hostPortsOnly returns the containers that have ports with a host port, with only their
// names and those ports; nil when none has.
func hostPortsOnly(cs []corev1.Container) []corev1.Container {
	var out []corev1.Container
	for _, c := range cs {
		var ports []corev1.ContainerPort
		for _, p := range c.Ports {
			if p.HostPort != 0 {
				ports = append(ports, p)
			}
		}
		if len(ports) > 0 {
			out = append(out, corev1.Container{Name: c.Name, Ports: ports})
		}
	}
	return out
}

// TransformNode is the manager's cache transform for nodes: it drops
// metadata.managedFields and the status fields nothing here reads and that grow with the
// node's workload: status.images (up to 50 image entries each with all their names),
// status.volumesInUse and status.volumesAttached. The plugins read a node's addresses
// (nodeAddress); labels, taints, conditions and the rest are kept. obj of any other type
// is returned unchanged; it never fails. TestTransformNodeKeepsWhatIsRead checks the
// plugins' results on transformed nodes.
func TransformNode(obj any) (any, error) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	node.ManagedFields = nil
	node.Status.Images = nil
	node.Status.VolumesInUse = nil
	node.Status.VolumesAttached = nil
	return node, nil
}

var (
	_ toolscache.TransformFunc = TransformPod
	_ toolscache.TransformFunc = TransformNode
)
