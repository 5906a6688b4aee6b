package kubernetes

import (
	"context"
	"errors"
	"maps"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// IngressName is the network-type of the Ingress plugin (OKG's name).
const IngressName = "Kubernetes-Ingress"

// Ingress is the Kubernetes-Ingress plugin: per pod a ClusterIP Service and an
// Ingress, both named like the pod, routing Host + Path (with <id> = the pod's
// ordinal) to the pod's Port. Asynchronous. It keeps no state but the guardrails of
// the provider config ([kubernetes.ingress]), which Init reads.
type Ingress struct {
	// guard is the provider config's [kubernetes.ingress] table, set by Init; the zero
	// value is the default (no "-snippet" annotation keys, any host).
	guard plugin.IngressConfig
}

var _ plugin.Plugin = (*Ingress)(nil)

// NewIngress returns an Ingress plugin.
func NewIngress() *Ingress { return &Ingress{} }

// Name returns "Kubernetes-Ingress".
func (i *Ingress) Name() string { return IngressName }

// Alias returns "" (no cross-provider family).
func (i *Ingress) Alias() string { return "" }

// IsSynchronous returns false: the network converges after the pod exists.
func (i *Ingress) IsSynchronous() bool { return false }

// CachedObjects lists the kinds Ingress reads through the cached client: its per-pod
// Ingresses and Services, and IngressClasses (checkIngressClass).
func (i *Ingress) CachedObjects() []client.Object {
	return []client.Object{&networkingv1.Ingress{}, &corev1.Service{}, &networkingv1.IngressClass{}}
}

// Init keeps cfg.Kubernetes.Ingress, the annotation and host guardrails that every
// network-conf is parsed under (the config is validated by plugin.ParseConfig). It is
// called once, before the plugin serves.
func (i *Ingress) Init(_ context.Context, _ client.Client, cfg plugin.Config) error {
	i.guard = cfg.Kubernetes.Ingress
	return nil
}

// OnPodAdded validates the network-conf (including the pod's ordinal when Path or
// Host use <id> and the pod has a name, and the provider config's annotation and host
// guardrails) and labels the pod for the Service selector.
// The Service and Ingress are created at UPDATE, when the pod has a UID to own them; the
// network-status is left as it is (OKG writes none at CREATE).
func (i *Ingress) OnPodAdded(_ context.Context, _ client.Client, pod *corev1.Pod) (*corev1.Pod, error) {
	conf, err := networkstatus.ConfFromPod(pod)
	if err != nil {
		return pod, err
	}
	params, warn := parseIngressParams(conf, i.guard)
	if isFatal(warn) {
		return pod, warn
	}
	if pod.Name != "" {
		if _, err := params.expand(pod.Name); err != nil {
			return pod, err
		}
	}
	ensurePodNameLabel(pod)
	return pod, warn
}

// OnPodUpdated creates or updates the pod's Service (ports = the Port values, hash
// annotation game.kruise.io/svc-hash) and Ingress (one rule for Host with one path per
// Path, TLS from TlsHosts/TlsSecretName, the Annotation entries, class
// IngressClassName, hash annotation game.kruise.io/ingress-hash), owned by the pod or
// with Fixed by its GameServerSet. An existing Service or Ingress that already is what
// the parameters call for is kept untouched, whatever hash annotation it carries; one
// that is neither owned by the pod or its GameServerSet nor carries the kind's hash
// annotation is someone else's, is not modified, and is a ParameterError naming it
// ("Ingress ns/name exists and is not managed by network-plugin-policy"). A Host or TlsHosts
// entry that an Ingress of another namespace already serves is a ParameterError naming the
// host and that namespace, before the Ingress is written (checkHostsFree); so is an
// IngressClassName that is neither the cluster's default class nor allowed by the
// provider config (checkIngressClass). Writes go
// through applyOwned (controllerutil.CreateOrPatch), the Service first. The
// network is Ready, as in OKG, once both exist and the pod has an IP: internal address
// the pod IP, external address "ip":"" with the Host as endPoint (none without Host),
// one port per path named by the path; the Ingress's load-balancer status is not read.
// Errors: ParameterError, APICallError, each with a NotReady pod.
func (i *Ingress) OnPodUpdated(ctx context.Context, c client.Client, pod *corev1.Pod) (*corev1.Pod, error) {
	prev := previousStatus(pod)
	fail := func(err error) (*corev1.Pod, error) {
		if werr := writeNotReady(pod, prev); werr != nil {
			return pod, werr
		}
		return pod, err
	}
	conf, err := networkstatus.ConfFromPod(pod)
	if err != nil {
		return fail(err)
	}
	raw, warn := parseIngressParams(conf, i.guard)
	if isFatal(warn) {
		if kept := keepLiveIngress(ctx, c, pod, prev, warn); kept != nil {
			return pod, kept
		}
		return fail(warn)
	}
	params, err := raw.expand(pod.Name)
	if err != nil {
		return fail(err)
	}
	if err := checkIngressClass(ctx, c, params, i.guard); isFatal(err) {
		if kept := keepLiveIngress(ctx, c, pod, prev, err); kept != nil {
			return pod, kept
		}
		return fail(err)
	} else if err != nil {
		warn = errors.Join(warn, err) // a class no IngressClass names yet: written, with a warning
	}
	if err := checkHostsFree(ctx, c, pod.Namespace, params); err != nil {
		if kept := keepLiveIngress(ctx, c, pod, prev, err); kept != nil {
			return pod, kept
		}
		return fail(err)
	}
	ensurePodNameLabel(pod)
	owners, err := OwnerReferences(ctx, c, pod, params.fixed)
	if err != nil {
		return fail(err)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}}
	wantSvc := desiredIngressService(pod, params, owners)
	if err := applyOwned(ctx, c, pod, svc, "Service", AnnotationServiceHash, func(bool) error { mergeService(wantSvc, svc); return nil }); err != nil {
		return fail(err)
	}
	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}}
	wantIng := desiredIngress(pod, params, owners)
	if err := applyOwned(ctx, c, pod, ing, "Ingress", AnnotationIngressHash, func(bool) error { mergeIngress(wantIng, ing); return nil }); err != nil {
		return fail(err)
	}
	if pod.Status.PodIP == "" {
		ctrl.LoggerFrom(ctx).WithName("ingress").V(1).Info("Ingress network not ready: the pod has no IP", "pod", klog.KObj(pod))
		if err := writeStatus(pod, networkstatus.NetworkNotReady, nil, nil); err != nil {
			return pod, err
		}
		return pod, warn
	}
	ports := make([]networkstatus.NetworkPort, 0, len(params.paths))
	for n, path := range params.paths {
		_, port := params.pathAt(n)
		ports = append(ports, networkstatus.NetworkPort{Name: path, Port: networkstatus.IntPort(port)})
	}
	if err := writeStatus(pod, networkstatus.NetworkReady,
		[]networkstatus.NetworkAddress{{IP: pod.Status.PodIP, Ports: ports}},
		[]networkstatus.NetworkAddress{{IP: "", EndPoint: params.host, Ports: ports}}); err != nil {
		return pod, err
	}
	return pod, warn
}

// desiredIngressService returns the ClusterIP Service in front of the pod.
func desiredIngressService(pod *corev1.Pod, params ingressParams, owners []metav1.OwnerReference) *corev1.Service {
	ports := make([]corev1.ServicePort, 0, len(params.ports))
	seen := map[int32]bool{}
	for _, p := range params.ports {
		if seen[p] {
			continue
		}
		seen[p] = true
		ports = append(ports, corev1.ServicePort{Name: strconv.Itoa(int(p)), Port: p, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(p)})
	}
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name: pod.Name, Namespace: pod.Namespace, OwnerReferences: owners,
			Annotations: map[string]string{AnnotationServiceHash: configHash(params.canonicalPorts())},
		},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: map[string]string{SelectorPodNameLabel: pod.Name},
			Ports:    ports,
		},
	}
}

// desiredIngress returns the pod's Ingress.
func desiredIngress(pod *corev1.Pod, params ingressParams, owners []metav1.OwnerReference) *networkingv1.Ingress {
	annotations := maps.Clone(params.annotations)
	annotations[AnnotationIngressHash] = configHash(params.canonical())
	paths := make([]networkingv1.HTTPIngressPath, 0, len(params.paths))
	for n, path := range params.paths {
		pathType, port := params.pathAt(n)
		paths = append(paths, networkingv1.HTTPIngressPath{
			Path: path, PathType: &pathType,
			Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
				Name: pod.Name, Port: networkingv1.ServiceBackendPort{Number: port},
			}},
		})
	}
	ing := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, Annotations: annotations, OwnerReferences: owners},
		Spec: networkingv1.IngressSpec{
			IngressClassName: params.ingressClassName,
			Rules: []networkingv1.IngressRule{{
				Host:             params.host,
				IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: paths}},
			}},
		},
	}
	if len(params.tlsHosts) > 0 || params.tlsSecretName != "" {
		ing.Spec.TLS = []networkingv1.IngressTLS{{Hosts: params.tlsHosts, SecretName: params.tlsSecretName}}
	}
	return ing
}

// mergeService brings have (the stored Service, or an empty one to create) to want
// unless it already matches (serviceMatches): ports, selector, type and owners
// replaced, want's hash annotation set, fields the API server fills in (clusterIP)
// kept. It reports whether have changed.
func mergeService(w, h *corev1.Service) bool {
	if serviceMatches(w, h) {
		return false
	}
	h.OwnerReferences = w.OwnerReferences
	if h.Annotations == nil {
		h.Annotations = map[string]string{}
	}
	h.Annotations[AnnotationServiceHash] = w.Annotations[AnnotationServiceHash]
	h.Spec.Type = w.Spec.Type
	h.Spec.Ports = w.Spec.Ports
	h.Spec.Selector = w.Spec.Selector
	h.Spec.PublishNotReadyAddresses = w.Spec.PublishNotReadyAddresses
	return true
}

// ingressMatches reports whether have (a stored Ingress) already is what want asks
// for: the same spec and owner references, and every annotation of want but the hash
// with the same value. The hash annotation is not compared: an Ingress that OKG created
// carries OKG's hash and is kept as it is.
func ingressMatches(want, have *networkingv1.Ingress) bool {
	if !equality.Semantic.DeepEqual(want.Spec, have.Spec) || !equality.Semantic.DeepEqual(want.OwnerReferences, have.OwnerReferences) {
		return false
	}
	for k, v := range want.Annotations {
		if k == AnnotationIngressHash {
			continue
		}
		if hv, ok := have.Annotations[k]; !ok || hv != v {
			return false
		}
	}
	return true
}

// mergeIngress brings have (the stored Ingress, or an empty one to create) to want
// unless it already matches (ingressMatches): spec and owners replaced, want's
// annotations added (annotations that others set are kept, so an Annotation removed
// from network-conf stays on the Ingress). It reports whether have changed.
func mergeIngress(w, h *networkingv1.Ingress) bool {
	if ingressMatches(w, h) {
		return false
	}
	h.OwnerReferences = w.OwnerReferences
	if h.Annotations == nil {
		h.Annotations = map[string]string{}
	}
	maps.Copy(h.Annotations, w.Annotations)
	h.Spec = w.Spec
	return true
}

// OnPodDeleted does nothing and never fails, as OKG's Kubernetes-Ingress: the pod's Ingress
// and Service carry an owner reference to it (to its GameServerSet when Fixed), so garbage
// collection removes them once the pod object is gone, and not before: a DELETE that
// another admission controller refuses, or a pod still draining its players, keeps them.
func (i *Ingress) OnPodDeleted(context.Context, client.Client, *corev1.Pod) error {
	return nil
}

// keepLiveIngress decides what becomes of a pod whose network-conf the Ingress plugin refuses
// (err, a ParameterError: a guardrail such as a refused annotation, a catch-all or another
// namespace's host) while its network is live: when its previous network-status (prev) is
// Ready and its Ingress exists and is one this manager made (ManagedFor: owned by the pod, by
// its GameServerSet for a Fixed network, or carrying the Ingress hash annotation), nothing is
// written and the network stays Ready, and it returns err as a warning saying so. A guardrail added by an upgrade, or
// a host another namespace claimed since, never takes a working network away from a running
// game server; a changed network-conf is not written either, so nothing refused reaches the
// Ingress, and the refusal applies when the pod is recreated. It returns nil (refuse as
// usual) otherwise, and when the Ingress cannot be read.
func keepLiveIngress(ctx context.Context, c client.Client, pod *corev1.Pod, prev *networkstatus.NetworkStatus, err error) error {
	perr := plugin.AsError(err)
	if perr == nil || perr.Type != plugin.ParameterError || prev == nil || prev.CurrentNetworkState != networkstatus.NetworkReady {
		return nil
	}
	ing := &networkingv1.Ingress{}
	if gerr := c.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: pod.Name}, ing); gerr != nil || !ManagedFor(ing, pod, AnnotationIngressHash) {
		return nil
	}
	ctrl.LoggerFrom(ctx).WithName("ingress").Info("Network-conf refused; the pod's live Ingress is kept as it is", "pod", klog.KObj(pod), "error", perr.Error())
	return &plugin.Error{Type: plugin.ParameterError, Param: perr.Param, Warning: true,
		Message: perr.Message + "; the pod's network is live, so its Ingress is kept as it is and nothing is written until the pod is recreated"}
}
