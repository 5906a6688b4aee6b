package main

import (
	"context"
	"fmt"
	"sync/atomic"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/kubernetes"
	"github.com/okg-extensions/network-plugin-policy/pkg/policy"
)

// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=networking.k8s.io,resources=ingresses,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=pods/finalizers,verbs=update
// +kubebuilder:rbac:groups=game.kruise.io,resources=gameserversets,verbs=get;list;watch

// setupPlugins reads the OKG provider configuration at path (a missing file means the
// built-in defaults and a warning), builds the plugin registry, and adds a runnable that
// initialises every plugin once the cache has synced (HostPort rebuilds its port allocations
// from the existing pods). The returned flag turns true when initialisation has finished.
func setupPlugins(ctx context.Context, mgr ctrl.Manager, path string) (*plugin.Registry, *atomic.Bool, error) {
	cfg, err := plugin.LoadConfig(ctx, path)
	if err != nil {
		return nil, nil, fmt.Errorf("load provider configuration: %w", err)
	}
	registry, err := plugin.NewRegistry(kubernetes.Plugins(cfg)...)
	if err != nil {
		return nil, nil, fmt.Errorf("register network plugins: %w", err)
	}
	ready := &atomic.Bool{}
	init := runnable{name: "plugin-init", fn: func(ctx context.Context) error {
		if err := registry.InitAll(ctx, mgr.GetClient(), cfg); err != nil {
			return fmt.Errorf("initialise network plugins: %w", err)
		}
		ready.Store(true)
		ctrl.LoggerFrom(ctx).Info("Network plugins initialised", "plugins", registry.Names())
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
