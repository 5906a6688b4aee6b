package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/okg-extensions/network-plugin-policy/pkg/controller/network"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/kubernetes"
	"github.com/okg-extensions/network-plugin-policy/pkg/policy"
)

// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// delete on services and ingresses is never used by the code: the API server's
// OwnerReferencesPermissionEnforcement admission plugin requires it of any patch that changes
// an object's ownerReferences (a Service or Ingress made Fixed or no longer Fixed, an owner
// reference someone removed put back), and refuses such a patch without it.
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=resourcequotas,verbs=get;list;watch
// +kubebuilder:rbac:groups=networking.k8s.io,resources=ingresses,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=networking.k8s.io,resources=ingressclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods/finalizers,verbs=update
// +kubebuilder:rbac:groups=game.kruise.io,resources=gameserversets,verbs=get;list;watch
// +kubebuilder:rbac:groups=game.kruise.io,resources=gameserversets/finalizers,verbs=update

// setupPlugins reads the OKG provider configuration at path (a missing file means the
// built-in defaults and a warning), builds the plugin registry, adds the field indexes the
// plugins list by to the manager's cache (kubernetes.RegisterIndexes), registers the HostPort
// usage metrics with controller-runtime's metrics registry, and adds a runnable that,
// once the cache has started, initialises every plugin, hands the manager's shared pod
// informer to the plugins that derive state from pods (HostPort's port usage), starts an
// informer for every kind a plugin reads through the cached client (plugin.CachedReader:
// Services, Ingresses, Nodes, ResourceQuotas; started here, the first admission does not
// wait for their initial lists) and waits until the pod informer's handlers and those
// informers have synced. The returned flag turns true only then: /readyz and the webhook
// registration wait for it, so a replica never allocates host ports before it has seen
// the existing pods.
func setupPlugins(ctx context.Context, mgr ctrl.Manager, path string) (*plugin.Registry, *atomic.Bool, error) {
	cfg, err := plugin.LoadConfig(ctx, path)
	if err != nil {
		return nil, nil, fmt.Errorf("load provider configuration: %w", err)
	}
	registry, err := plugin.NewRegistry(kubernetes.Plugins(cfg)...)
	if err != nil {
		return nil, nil, fmt.Errorf("register network plugins: %w", err)
	}
	if p, ok := registry.Get(kubernetes.HostPortName); ok {
		if hp, ok := p.(*kubernetes.HostPort); ok {
			if err := metrics.Registry.Register(hp.Collector()); err != nil {
				return nil, nil, fmt.Errorf("register host port metrics: %w", err)
			}
		}
	}
	if err := kubernetes.RegisterIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		return nil, nil, err
	}
	ready := &atomic.Bool{}
	init := runnable{name: "plugin-init", fn: func(ctx context.Context) error {
		if err := registry.InitAll(ctx, mgr.GetClient(), cfg); err != nil {
			return fmt.Errorf("initialise network plugins: %w", err)
		}
		informer, err := mgr.GetCache().GetInformer(ctx, &corev1.Pod{})
		if err != nil {
			return fmt.Errorf("get the pod informer for the network plugins: %w", err)
		}
		synced, err := registry.UsePodInformer(ctx, informer)
		if err != nil {
			return fmt.Errorf("initialise network plugins: %w", err)
		}
		// Every kind a plugin reads through the cached client gets its informer now, and so
		// does Namespace, which the pod webhook reads for namespaceSelector and
		// namespaceObject; readiness waits for them: otherwise the first request after a
		// start would start the informer and spend its deadline on the initial list (and a
		// Namespace not read yet makes every bounding root policy apply).
		var cachesSynced []func() bool
		var kinds []string
		for _, obj := range append(registry.CachedObjects(), &corev1.Namespace{}) {
			informer, err := mgr.GetCache().GetInformer(ctx, obj, cache.BlockUntilSynced(false))
			if err != nil {
				return fmt.Errorf("get the %T informer for the network plugins: %w", obj, err)
			}
			cachesSynced = append(cachesSynced, informer.HasSynced)
			kinds = append(kinds, fmt.Sprintf("%T", obj))
		}
		start := time.Now()
		if err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
			if !synced() {
				return false, nil
			}
			for _, s := range cachesSynced {
				if !s() {
					return false, nil
				}
			}
			return true, nil
		}); err != nil {
			return nil // the manager is stopping
		}
		ready.Store(true)
		ctrl.LoggerFrom(ctx).Info("Network plugins initialised", "plugins", registry.Names(), "cachesSynced", kinds, "took", time.Since(start).String())
		<-ctx.Done()
		return nil
	}}
	if err := mgr.Add(init); err != nil {
		return nil, nil, fmt.Errorf("add plugin initialisation: %w", err)
	}
	return registry, ready, nil
}

// pluginDescriptors describes the registered plugins to the policy engine.
func pluginDescriptors(r *plugin.Registry) []policy.Plugin {
	var out []policy.Plugin
	for _, p := range r.List() {
		out = append(out, policy.Plugin{Name: p.Name(), Alias: p.Alias(), Synchronous: p.IsSynchronous()})
	}
	return out
}

// runnable is a manager runnable that runs on every replica (webhooks serve on every
// replica, so what they need must not wait for leader election). The manager starts it
// after the cache has synced.
type runnable struct {
	name string
	fn   func(ctx context.Context) error
}

func (r runnable) Start(ctx context.Context) error {
	return r.fn(ctrl.LoggerInto(ctx, ctrl.Log.WithName(r.name)))
}

// NeedLeaderElection is false: the runnable runs on every replica.
func (runnable) NeedLeaderElection() bool { return false }

// setupStateMetrics registers the game servers' network state gauges
// (network.StateCollector: npp_network_pods and the rest, docs/metrics.md) in the metrics
// registry, read from mgr's pod cache through the network-type index it adds, on every
// replica. topNamespaces is --metrics-top-namespaces. Errors are the indexer's and the
// registry's.
func setupStateMetrics(ctx context.Context, mgr ctrl.Manager, plugins *plugin.Registry, topNamespaces int) error {
	if err := network.RegisterIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		return fmt.Errorf("index pods by network type: %w", err)
	}
	c := network.NewStateCollector(mgr.GetCache(), network.StateCollectorOptions{NetworkTypes: plugins.Names(), TopNamespaces: topNamespaces})
	if err := metrics.Registry.Register(c); err != nil {
		return fmt.Errorf("register the network state metrics: %w", err)
	}
	return nil
}
