package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/okg-extensions/network-plugin-policy/pkg/controller/network"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/kubernetes"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/lb"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/providers"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/sharedport"
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
// The answers of Alibaba's Terway (PodEIP) and DNAT controller (PodDNAT) that AlibabaCloud-EIP
// and AlibabaCloud-NATGW read; never written.
// +kubebuilder:rbac:groups=alibabacloud.com,resources=podeips;poddnats,verbs=get;list;watch
// The CLBPodBindings of tke-extend-network-controller whose state TencentCloud-CLB reads while
// a network is not Ready; never written.
// +kubebuilder:rbac:groups=networking.cloud.tencent.com,resources=clbpodbindings,verbs=get;list;watch
// The TargetGroups and Listeners (ACK's elbv2 controller) and TargetGroupBindings (the AWS
// Load Balancer Controller) AmazonWebServices-NLB writes per port of a pod, reads (their
// answers) and deletes (a port the network-conf no longer has; the bindings while the
// network is disabled).
// +kubebuilder:rbac:groups=elbv2.services.k8s.aws,resources=targetgroups;listeners,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=elbv2.k8s.aws,resources=targetgroupbindings,verbs=get;list;watch;create;patch;delete
// The NLB and EIP objects of Alibaba's NLB and EIP operators that AlibabaCloud-AutoNLBs-V2
// creates for a GameServerSet, reads (their ids) and deletes with it (RetainNLBOnDelete
// false); never updated.
// +kubebuilder:rbac:groups=nlboperator.alibabacloud.com,resources=nlbs,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=eip.alibabacloud.com,resources=eips,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=pods/finalizers,verbs=update
// The load-balancer plugins' port ledger (lb.ConfigMapLedger): its fixed ConfigMaps of the
// manager's own namespace (config/manager/ledger.yaml creates them), read and written by name
// straight at the API server; no other ConfigMap there, and no create.
// +kubebuilder:rbac:groups="",namespace=system,resources=configmaps,resourceNames=lb-ledger-0;lb-ledger-1;lb-ledger-2;lb-ledger-3;lb-ledger-4;lb-ledger-5;lb-ledger-6;lb-ledger-7,verbs=get;update
// The cloud controllers' Warning Events on Services (lb.EventSelector), read by the
// load-balancer plugins.
// +kubebuilder:rbac:groups="",resources=events,verbs=get;list;watch
// +kubebuilder:rbac:groups=game.kruise.io,resources=gameserversets,verbs=get;list;watch
// +kubebuilder:rbac:groups=game.kruise.io,resources=gameserversets/finalizers,verbs=update

// providerPlugins returns new instances of every plugin of every provider cfg enables
// (providers.Plugins, which nppctl uses too). cfg must have passed Config.Validate.
func providerPlugins(cfg plugin.Config) []plugin.Plugin { return providers.Plugins(cfg) }

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
//
// The load-balancer plugins of the cloud providers cfg enables (pkg/plugin/lb) record every
// listener port they hand out in a ledger of ConfigMaps in namespace, the manager's own
// (lb.LedgerConfigMapNames of ledgerName), so that no two replicas hand out one port twice; they count the Services the Service informer
// shows and free a Service's ports once it is gone (setupLoadBalancers). The plugins that
// read another controller's answer from an object of its own (plugin.ResultObjectsReader)
// read it through the manager's cache.
func setupPlugins(ctx context.Context, mgr ctrl.Manager, path, namespace, ledgerName string) (*plugin.Registry, plugin.Config, *atomic.Bool, error) {
	cfg, err := plugin.LoadConfig(ctx, path)
	if err != nil {
		return nil, cfg, nil, fmt.Errorf("load provider configuration: %w", err)
	}
	all := providerPlugins(cfg)
	var lbs []*lb.Plugin
	var shared []ledgerUser
	for _, p := range all {
		if l, ok := p.(*lb.Plugin); ok {
			lbs = append(lbs, l)
		} else if l, ok := p.(ledgerUser); ok {
			shared = append(shared, l)
		}
		if r, ok := p.(resultReaderUser); ok {
			// The controllers' answers (PodEIP, PodDNAT, CLBPodBinding) are unstructured objects, which
			// the manager's client reads from the API server: read them from the cache.
			r.UseResultReader(mgr.GetCache())
		}
	}
	registry, err := plugin.NewRegistry(all...)
	if err != nil {
		return nil, cfg, nil, fmt.Errorf("register network plugins: %w", err)
	}
	watchServices, err := setupLoadBalancers(ctx, mgr, lbs, shared, namespace, ledgerName)
	if err != nil {
		return nil, cfg, nil, err
	}
	if p, ok := registry.Get(kubernetes.HostPortName); ok {
		if hp, ok := p.(*kubernetes.HostPort); ok {
			if err := metrics.Registry.Register(hp.Collector()); err != nil {
				return nil, cfg, nil, fmt.Errorf("register host port metrics: %w", err)
			}
		}
	}
	if err := metrics.Registry.Register(plugin.CreateRacesCollector()); err != nil {
		return nil, cfg, nil, fmt.Errorf("register the create race metric: %w", err)
	}
	if err := metrics.Registry.Register(lb.RepairsCollector()); err != nil {
		return nil, cfg, nil, fmt.Errorf("register the load-balancer repair metric: %w", err)
	}
	if err := kubernetes.RegisterIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		return nil, cfg, nil, err
	}
	ready := &atomic.Bool{}
	init := runnable{name: "plugin-init", fn: func(ctx context.Context) error {
		if err := registry.InitAll(ctx, mgr.GetClient(), cfg); err != nil {
			return fmt.Errorf("initialise network plugins: %w", err)
		}
		// After Init: the handler replays every Service into the allocators Init built.
		if err := watchServices(ctx); err != nil {
			return err
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
			if meta.IsNoMatchError(err) {
				// A controller's own kind whose CRD is not installed (Terway's PodEIP on a
				// cluster without it): the plugins that read it say so in their runs'
				// errors; the others are served.
				ctrl.LoggerFrom(ctx).Info("A kind the network plugins read is not served by the API server; their pods get an error naming it", "kind", kindName(obj), "error", err.Error())
				continue
			}
			if err != nil {
				return fmt.Errorf("get the %s informer for the network plugins: %w", kindName(obj), err)
			}
			cachesSynced = append(cachesSynced, informer.HasSynced)
			kinds = append(kinds, kindName(obj))
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
		return nil, cfg, nil, fmt.Errorf("add plugin initialisation: %w", err)
	}
	return registry, cfg, ready, nil
}

// ledgerUser is a plugin other than a per-pod load-balancer one that claims listener ports
// in a per-pod plugin's port ledger (the shared-port plugins, pkg/plugin/sharedport; the
// Multi engine, lb.Multi): its claims are released by its own ServiceGone and by that
// plugin's sweep.
type ledgerUser interface {
	UseLedger(lb.Ledger)
	LedgerKey() string
	// ServiceGone releases the claims of a shared Service that is gone.
	ServiceGone(ctx context.Context, c client.Reader, svc *corev1.Service) error
}

// serviceCounter is a ledgerUser that counts every Service's listener ports itself, as the
// per-pod plugins do (lb.Multi, AlibabaCloud-Multi-NLBs): the Service informer's add and
// update handler calls it.
type serviceCounter interface {
	ServiceSeen(svc *corev1.Service)
}

// backendLedgerUser is a ledgerUser that also holds its game servers' places among a load
// balancer's backends in the ledger's ConfigMaps (sharedport.Plugin.UseBackendLedger), under
// a group of its own.
type backendLedgerUser interface {
	UseBackendLedger(sharedport.BackendLedger)
	BackendLedgerKey() string
}

// setupLoadBalancers gives each load-balancer plugin, and each ledgerUser of shared, its ledger (lb.ConfigMapLedger in
// namespace, through a client that reads the API server, not the cache: a claim another
// replica just made must be seen), adds, on the leader, the sweep of the ledger's stale claims
// every lb.SweepGrace (lb.Plugin.Sweep), and the index of the Event cache the plugins read the
// cloud controllers' word through (lb.RegisterIndexes). It returns watch, which the plugins'
// initialisation calls on every replica once Init has run: it adds a Service informer handler
// that counts the ports of every Service it shows (lb.Plugin.ServiceSeen, and the ServiceSeen
// of each ledgerUser that counts Services itself, serviceCounter: lb.Multi) and frees those of
// a Service that is gone (lb.Plugin.ServiceGone, and the shared plugins' ServiceGone, read
// live, within 10 s, at most 4 at once; what fails is left to the sweep). Without plugins nothing is added and watch does nothing.
// Errors come from building the client, the indexer and adding the runnable.
func setupLoadBalancers(ctx context.Context, mgr ctrl.Manager, lbs []*lb.Plugin, shared []ledgerUser, namespace, ledgerName string) (watch func(context.Context) error, err error) {
	if len(lbs) == 0 && len(shared) == 0 {
		return func(context.Context) error { return nil }, nil
	}
	if err := lb.RegisterIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		return nil, err
	}
	live, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(), HTTPClient: mgr.GetHTTPClient()})
	if err != nil {
		return nil, fmt.Errorf("create the ledger's client: %w", err)
	}
	for _, p := range lbs {
		p.UseLedger(&lb.ConfigMapLedger{Client: live, Namespace: namespace, Name: ledgerName, Plugin: p.LedgerKey()})
	}
	for _, p := range shared {
		if p.LedgerKey() == "" {
			continue
		}
		p.UseLedger(&lb.ConfigMapLedger{Client: live, Namespace: namespace, Name: ledgerName, Plugin: p.LedgerKey()})
		if b, ok := p.(backendLedgerUser); ok {
			b.UseBackendLedger(&lb.ConfigMapLedger{Client: live, Namespace: namespace, Name: ledgerName, Plugin: b.BackendLedgerKey()})
		}
	}
	inflight := make(chan struct{}, 4) // ServiceGone's live reads at once
	watch = func(ctx context.Context) error {
		informer, err := mgr.GetCache().GetInformer(ctx, &corev1.Service{})
		if err != nil {
			return fmt.Errorf("get the Service informer for the load-balancer plugins: %w", err)
		}
		seen := func(obj any) {
			if svc, ok := obj.(*corev1.Service); ok {
				for _, p := range lbs {
					p.ServiceSeen(svc)
				}
				for _, p := range shared {
					if s, ok := p.(serviceCounter); ok {
						s.ServiceSeen(svc)
					}
				}
			}
		}
		gone := func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			svc, ok := obj.(*corev1.Service)
			if !ok {
				return
			}
			key, created := client.ObjectKeyFromObject(svc).String(), svc.CreationTimestamp.Time
			go func() {
				inflight <- struct{}{}
				defer func() { <-inflight }()
				ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				for _, p := range lbs {
					if err := p.ServiceGone(ctx, mgr.GetAPIReader(), key, created); err != nil {
						ctrl.LoggerFrom(ctx).Info("Ports of a deleted Service left to the ledger's sweep", "service", key, "plugin", p.Name(), "error", err.Error())
					}
				}
				for _, p := range shared {
					if err := p.ServiceGone(ctx, mgr.GetAPIReader(), svc); err != nil {
						ctrl.LoggerFrom(ctx).Info("Ports of a deleted shared Service left to the ledger's sweep", "service", key, "error", err.Error())
					}
				}
			}()
		}
		if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc: seen, UpdateFunc: func(_, obj any) { seen(obj) }, DeleteFunc: gone,
		}); err != nil {
			return fmt.Errorf("watch Services for the load-balancer plugins: %w", err)
		}
		return nil
	}
	sweep := runnable{name: "lb-ledger-sweep", leader: true, fn: func(ctx context.Context) error {
		tick := time.NewTicker(lb.SweepGrace)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-tick.C:
			}
			for _, p := range lbs {
				if err := p.Sweep(ctx, mgr.GetAPIReader(), time.Now()); err != nil {
					ctrl.LoggerFrom(ctx).Info("Sweep of the load-balancer port ledger failed; next in a minute", "plugin", p.Name(), "error", err.Error())
				}
			}
		}
	}}
	if err := mgr.Add(sweep); err != nil {
		return nil, fmt.Errorf("add the load-balancer ledger sweep: %w", err)
	}
	return watch, nil
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
// replica, so what they need must not wait for leader election), or on the elected leader
// only with leader set. The manager starts it after the cache has synced.
type runnable struct {
	name   string
	leader bool
	fn     func(ctx context.Context) error
}

func (r runnable) Start(ctx context.Context) error {
	return r.fn(ctrl.LoggerInto(ctx, ctrl.Log.WithName(r.name)))
}

// NeedLeaderElection is leader: false runs the runnable on every replica.
func (r runnable) NeedLeaderElection() bool { return r.leader }

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

// kindName names obj's kind for logs and errors: its Go type, and for an unstructured
// object its apiVersion and kind.
func kindName(obj client.Object) string {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u.GroupVersionKind().String()
	}
	return fmt.Sprintf("%T", obj)
}

// resultReaderUser is a plugin that reads its controller's answers through a reader it is
// given (eip.Plugin.UseResultReader).
type resultReaderUser interface{ UseResultReader(client.Reader) }
