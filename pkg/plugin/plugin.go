package plugin

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Plugin is a network plugin: OKG's cloudprovider.Plugin with ctx as the first
// parameter and typed errors.
//
// Every method that returns an error returns nil or an error for which errors.As finds
// an *Error; Run turns any other error into an InternalError. OnPodAdded and
// OnPodUpdated return the pod to admit (the argument, mutated) even when they return
// an error, so that a policy that admits on error (Asynchronous) can still use the
// NotReady status the plugin wrote; a nil pod means "unchanged".
//
// Implementations must be safe for concurrent use: the webhook calls them from many
// admission requests at once.
type Plugin interface {
	// Name is the exact, case-sensitive value of the pod annotation
	// game.kruise.io/network-type that selects this plugin, e.g. "Kubernetes-HostPort".
	Name() string
	// Alias is a cross-provider family name (e.g. "NLB-Network") that policies may
	// target; empty when the plugin has none. Pods never select a plugin by alias.
	Alias() string
	// Init prepares the plugin once at start-up, before the webhook reports ready,
	// with the parsed provider configuration. It may list cluster objects through c
	// to rebuild in-memory state.
	Init(ctx context.Context, c client.Client, cfg Config) error
	// OnPodAdded runs at pod CREATE admission. The pod has no UID yet and, when it
	// uses generateName, no name.
	OnPodAdded(ctx context.Context, c client.Client, pod *corev1.Pod) (*corev1.Pod, error)
	// OnPodUpdated runs at pod UPDATE admission (including the updates that the
	// network controller causes by stamping game.kruise.io/network-trigger-time).
	OnPodUpdated(ctx context.Context, c client.Client, pod *corev1.Pod) (*corev1.Pod, error)
	// OnPodDeleted is OKG's hook for pod DELETE admission. This manager never calls it:
	// its webhook does not intercept DELETE, because a later admission controller may
	// still refuse the delete; a plugin's per-pod objects must carry an owner reference to
	// the pod so that garbage collection removes them once the pod is gone. The
	// Kubernetes plugins implement it as a no-op.
	OnPodDeleted(ctx context.Context, c client.Client, pod *corev1.Pod) error
	// IsSynchronous is the built-in failure mode, used when no policy sets one: true
	// means the pod must not be admitted without the plugin's changes (deny on error),
	// false means the network converges after admission (admit NotReady and retry).
	IsSynchronous() bool
}

// PodInformerUser is implemented by a plugin whose state derives from the pods of the
// cluster (Kubernetes-HostPort's port usage). Optional: the Plugin interface is OKG's
// and stays unchanged. The manager calls UsePodInformer once at start-up, after Init
// and before it reports ready, with its shared pod informer (the cache strips
// managedFields), and does not report ready before the returned registration's
// HasSynced is true, so that the plugin has seen every existing pod before it serves
// an admission request.
type PodInformerUser interface {
	// UsePodInformer registers the plugin's event handler on informer and returns the
	// registration. An error (the informer refused the handler, a second call) stops
	// the manager's plugin start-up.
	UsePodInformer(ctx context.Context, informer cache.Informer) (toolscache.ResourceEventHandlerRegistration, error)
}

// CachedReader is implemented by a plugin that reads objects through the manager's cached
// client (controller-runtime starts an informer for a kind at its first read, and that read
// waits for the informer's initial list). Optional: the Plugin interface is OKG's and stays
// unchanged. The manager starts an informer for each kind CachedObjects lists, and does not
// report ready before they have synced, so that the first admission requests after a start
// or a rollout do not spend their plugin timeout on a cache sync.
type CachedReader interface {
	// CachedObjects returns one empty object of each kind the plugin reads through the
	// cached client, for example &corev1.Service{} and &corev1.Node{}.
	CachedObjects() []client.Object
}

// ResultObjectsReader is implemented by a plugin whose network is Ready on the answer of
// another controller written in an object of that controller's own, named after the pod in
// its namespace (Alibaba's PodEIP and PodDNAT) or labelled with its GameServerSet (Alibaba's
// NLB and EIP operators' objects: ResultKind.GameServerSetLabel). Optional. The network controller watches
// those kinds through the manager's cache and runs the pod of an object's name again as soon
// as the object is written, so that the network is Ready within a second of the answer
// rather than at the next retry.
type ResultObjectsReader interface {
	// ResultObjects returns each such kind.
	ResultObjects() []ResultKind
}

// ResultKind is a kind in which another controller answers for a pod (ResultObjectsReader).
type ResultKind struct {
	// Object is an empty object of the kind (unstructured, with its apiVersion and kind set).
	Object client.Object
	// Answer are the paths of the fields that hold the answer (["status", "eipAddress"], say):
	// only a change of one of them is a new answer; the controller's other writes (a
	// heartbeat such as Terway's status.podLastSeen) are not.
	Answer [][]string
	// GameServerSetLabel, when set, is the object's label that names a GameServerSet of its
	// namespace: the answer is for every game server of that GameServerSet (label
	// game.kruise.io/owner-gss), not for the pod of the object's name
	// (AlibabaCloud-AutoNLBs-V2's NLB and EIP objects).
	GameServerSetLabel string
	// PodLabel, when set, is the object's label that names the pod of its namespace the
	// answer is for (AmazonWebServices-NLB's TargetGroups, Listeners and
	// TargetGroupBindings, "<pod>-<port>", labelled statefulset.kubernetes.io/pod-name): the
	// pod of that name runs again, not the pod of the object's name. An object without the
	// label is ignored.
	PodLabel string
}

// ConfValidator is a plugin that can check a pod's network-conf as its OnPodAdded would,
// without allocating or writing anything: the GameServerSet validating webhook checks
// spec.network.networkConf at apply time with it, on a pod built from the GameServerSet as
// OKG builds its pods, so that a bad parameter is refused where GitOps applies it rather than
// at every pod. Optional: the Plugin interface is OKG's and stays as it is.
type ConfValidator interface {
	// ValidateConf returns nil; a warning-level error (IsWarning) for what OnPodAdded would
	// only warn about, such as an unknown parameter; or a ParameterError naming the
	// parameter and what was expected. Checks that depend on other objects (an IngressClass,
	// another namespace's hosts, free ports) are not made: GitOps applies objects in any
	// order, and the pods' admission makes them.
	ValidateConf(pod *corev1.Pod) error
}

// ObjectChecker is a plugin whose network depends on other objects of the cluster (an
// IngressClass, another namespace's Ingress hosts): CheckObjects makes those checks of its
// OnPodUpdated for pod, reading c, without writing anything. The GameServerSet validating
// webhook turns what it returns into admission warnings, never a denial: GitOps applies
// objects in any order. Optional.
type ObjectChecker interface {
	// CheckObjects returns nil, or the ParameterError (or warning) OnPodUpdated would return
	// for those objects; an APICallError marked Unknown when c cannot be read.
	CheckObjects(ctx context.Context, c client.Reader, pod *corev1.Pod) error
}

// PodFinalizer is a plugin that adds a finalizer of its own to the pods it admits (OKG's
// AlibabaCloud-AutoNLBs-V2 with RetainNLBOnDelete false). The network controller calls
// Finalize for a terminating pod of the plugin's type that carries Finalizer() and removes
// the finalizer when it returns nil; an error keeps it, and Finalize runs again after a
// back-off. Finalize never leaves a pod terminating on an error that says nothing about what
// it waits for: it returns nil when there is nothing it must do first.
type PodFinalizer interface {
	// Finalizer is the finalizer's name.
	Finalizer() string
	// Finalize does what must happen before the pod goes. Errors: a RetryError while it
	// waits for something, Unknown for a failed read, an APICallError for a refused write.
	Finalize(ctx context.Context, c client.Client, pod *corev1.Pod) error
}
