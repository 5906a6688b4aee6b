package plugin

import (
	"context"
	"fmt"
	"reflect"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// networkTypeAnnotation is networkstatus.AnnotationNetworkType; pkg/plugin/networkstatus
// imports this package for its error type, so the key is repeated here (a test pins
// the two together).
const networkTypeAnnotation = "game.kruise.io/network-type"

// Registry holds the plugins of one manager process. It is built once at start-up by
// NewRegistry and never changes afterwards, so lookups need no lock.
type Registry struct {
	byName  map[string]Plugin
	byAlias map[string][]Plugin
	names   []string
}

// NewRegistry returns a registry of plugins. It fails when a plugin is nil, has an
// empty Name, or has the same Name as another (names are compared exactly, as the
// network-type annotation is).
func NewRegistry(plugins ...Plugin) (*Registry, error) {
	r := &Registry{byName: map[string]Plugin{}, byAlias: map[string][]Plugin{}}
	for i, p := range plugins {
		if p == nil {
			return nil, fmt.Errorf("register plugin %d: plugin is nil", i)
		}
		name := p.Name()
		if name == "" {
			return nil, fmt.Errorf("register plugin %d (%T): empty name", i, p)
		}
		if prev, ok := r.byName[name]; ok {
			return nil, fmt.Errorf("register plugin %q (%T): name already registered by %T", name, p, prev)
		}
		r.byName[name] = p
		r.names = append(r.names, name)
		if alias := p.Alias(); alias != "" {
			r.byAlias[alias] = append(r.byAlias[alias], p)
		}
	}
	slices.Sort(r.names)
	return r, nil
}

// Get returns the plugin whose Name is exactly name.
func (r *Registry) Get(name string) (Plugin, bool) {
	p, ok := r.byName[name]
	return p, ok
}

// Lookup returns the plugin whose Name is exactly networkType. When there is none it
// returns a ParameterError naming the game.kruise.io/network-type annotation: for a
// near-miss of a registered name (see NearMiss) the message suggests that name ("unknown
// network type \"kubernetes-hostport\": did you mean Kubernetes-HostPort? ..."), otherwise
// it lists the registered names. The pod webhook passes types that are neither registered
// nor a near-miss through untouched (OKG's own webhook owns its cloud types) and calls
// Lookup for the rest.
func (r *Registry) Lookup(networkType string) (Plugin, error) {
	if p, ok := r.byName[networkType]; ok {
		return p, nil
	}
	if name, ok := r.NearMiss(networkType); ok {
		return nil, ParamErrorf(networkTypeAnnotation,
			"unknown network type %q: did you mean %s? (network types are exact and case-sensitive)", networkType, name)
	}
	return nil, ParamErrorf(networkTypeAnnotation,
		"unknown network type %q, expected one of %v (exact, case-sensitive)", networkType, r.names)
}

// ByAlias returns the plugins whose Alias is alias, in registration order, for
// policies that target a plugin family. Pods never select plugins by alias.
func (r *Registry) ByAlias(alias string) []Plugin {
	return slices.Clone(r.byAlias[alias])
}

// Names returns the registered plugin names, sorted.
func (r *Registry) Names() []string {
	return slices.Clone(r.names)
}

// Finalizers returns the registered plugins that are PodFinalizers, by name; nil when none is.
func (r *Registry) Finalizers() map[string]PodFinalizer {
	var out map[string]PodFinalizer
	for _, n := range r.names {
		if f, ok := r.byName[n].(PodFinalizer); ok {
			if out == nil {
				out = map[string]PodFinalizer{}
			}
			out[n] = f
		}
	}
	return out
}

// List returns the registered plugins sorted by name.
func (r *Registry) List() []Plugin {
	out := make([]Plugin, 0, len(r.names))
	for _, n := range r.names {
		out = append(out, r.byName[n])
	}
	return out
}

// InitAll calls Init on every plugin in name order and stops at the first error,
// which names the plugin.
func (r *Registry) InitAll(ctx context.Context, c client.Client, cfg Config) error {
	for _, n := range r.names {
		if err := r.byName[n].Init(ctx, c, cfg); err != nil {
			return fmt.Errorf("init plugin %q: %w", n, err)
		}
	}
	return nil
}

// UsePodInformer hands informer to every plugin that implements PodInformerUser, in
// name order, and returns a function that reports whether all their handler
// registrations have synced (true at once when no plugin uses the informer). Call it
// after InitAll. It stops at the first error, which names the plugin.
func (r *Registry) UsePodInformer(ctx context.Context, informer cache.Informer) (synced func() bool, err error) {
	var regs []toolscache.ResourceEventHandlerRegistration
	for _, n := range r.names {
		u, ok := r.byName[n].(PodInformerUser)
		if !ok {
			continue
		}
		reg, err := u.UsePodInformer(ctx, informer)
		if err != nil {
			return nil, fmt.Errorf("plugin %q: use the pod informer: %w", n, err)
		}
		regs = append(regs, reg)
	}
	return func() bool {
		for _, reg := range regs {
			if !reg.HasSynced() {
				return false
			}
		}
		return true
	}, nil
}

// CachedObjects returns one empty object of each kind that some registered plugin reads
// through the cached client (CachedReader), each kind once, in plugin name order.
func (r *Registry) CachedObjects() []client.Object {
	return r.objects(func(p Plugin) []client.Object {
		if u, ok := p.(CachedReader); ok {
			return u.CachedObjects()
		}
		return nil
	})
}

// ResultAnnotations returns, by plugin name, the annotation keys of every registered plugin
// that reads another controller's answer on the pod itself (ResultReader); nil when none
// does.
func (r *Registry) ResultAnnotations() map[string][]string {
	var out map[string][]string
	for _, n := range r.names {
		if rr, ok := r.byName[n].(ResultReader); ok {
			if out == nil {
				out = map[string][]string{}
			}
			out[n] = slices.Clone(rr.ResultAnnotations())
		}
	}
	return out
}

// ResultObjects returns each kind that some registered plugin reads its controller's answer
// from (ResultObjectsReader), each kind once (the first plugin's answer fields), in plugin
// name order.
func (r *Registry) ResultObjects() []ResultKind {
	var out []ResultKind
	seen := map[schema.GroupVersionKind]bool{}
	for _, n := range r.names {
		u, ok := r.byName[n].(ResultObjectsReader)
		if !ok {
			continue
		}
		for _, k := range u.ResultObjects() {
			if gvk := k.Object.GetObjectKind().GroupVersionKind(); !seen[gvk] {
				seen[gvk] = true
				out = append(out, k)
			}
		}
	}
	return out
}

// objects returns the objects of of every registered plugin, each kind once (a Go type, and
// for unstructured objects their apiVersion and kind), in plugin name order.
func (r *Registry) objects(of func(Plugin) []client.Object) []client.Object {
	var out []client.Object
	type kind struct {
		t   reflect.Type
		gvk schema.GroupVersionKind
	}
	seen := map[kind]bool{}
	for _, n := range r.names {
		for _, obj := range of(r.byName[n]) {
			k := kind{t: reflect.TypeOf(obj)}
			if u, ok := obj.(*unstructured.Unstructured); ok {
				k.gvk = u.GroupVersionKind()
			}
			if !seen[k] {
				seen[k] = true
				out = append(out, obj)
			}
		}
	}
	return out
}
