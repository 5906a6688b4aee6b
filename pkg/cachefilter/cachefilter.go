// Package cachefilter keeps objects out of an informer's store by a rule evaluated in the
// client, for the cases no server-side label or field selector can express (a pod's
// annotation, its container ports). The informer still lists and watches every object
// and decodes each one once; what the rule refuses is dropped before the informer's
// queue, so it costs no memory in the store and no event in its handlers.
//
// client-go has no such filter: FilteringResourceEventHandler filters what one handler
// sees, not what the store holds, and a cache transform must return an object for every
// key. This package wraps the informer's ListerWatcher instead.
package cachefilter

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
)

// ListerWatcher returns lw with only the objects keep accepts, for an informer whose
// store must hold exactly those:
//
//   - A list keeps the items keep accepts (each page of a paged list on its own); the
//     list's resourceVersion and continue token are untouched.
//   - A watch passes an Added or Modified event of an accepted object: as Added when the
//     store does not hold the object yet (a Modified of an object refused before), as it
//     came otherwise. An Added or Modified event of an object keep refuses is passed as
//     Deleted when the store holds the object (it was accepted before and must leave the
//     store) and dropped otherwise. A Deleted event is passed when the store holds the
//     object, dropped otherwise. Bookmark and Error events pass unchanged.
//
// "The store holds" is the set of keys (MetaNamespaceKeyFunc) this ListerWatcher last
// passed: a list whose continue token is empty, or a watch that asks for the initial
// events (the informer's watch-list, SendInitialEvents), starts it again, since the
// informer then replaces its store with what follows. One ListerWatcher serves one
// informer. It costs one key string per object held. The result also implements toolscache.ListerWatcherWithContext, which the
// informer uses. keep is called from the informer's list and watch goroutines; it must not
// block. A list that is not a list type fails with the error of meta.ExtractList.
func ListerWatcher(lw toolscache.ListerWatcher, keep func(runtime.Object) bool) toolscache.ListerWatcher {
	return &filtered{lw: toolscache.ToListerWatcherWithContext(lw), keep: keep, held: map[string]struct{}{}}
}

// filtered is ListerWatcher's result.
type filtered struct {
	lw   toolscache.ListerWatcherWithContext
	keep func(runtime.Object) bool

	mu   sync.Mutex          // guards held and gen: the list and a watch's goroutine both write them
	held map[string]struct{} // keys passed and not deleted since the last start
	gen  uint64              // counts the starts: a watch's events change held only within its own
}

var (
	_ toolscache.ListerWatcher            = (*filtered)(nil)
	_ toolscache.ListerWatcherWithContext = (*filtered)(nil)
)

// List is ListWithContext without a context (toolscache.Lister).
func (f *filtered) List(options metav1.ListOptions) (runtime.Object, error) {
	return f.ListWithContext(context.Background(), options)
}

// Watch is WatchWithContext without a context (toolscache.Watcher).
func (f *filtered) Watch(options metav1.ListOptions) (watch.Interface, error) {
	return f.WatchWithContext(context.Background(), options)
}

// ListWithContext lists through the wrapped ListerWatcher and keeps the accepted items.
func (f *filtered) ListWithContext(ctx context.Context, options metav1.ListOptions) (runtime.Object, error) {
	list, err := f.lw.ListWithContext(ctx, options)
	if err != nil {
		return nil, err
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil, fmt.Errorf("filter the list: %w", err)
	}
	kept := make([]runtime.Object, 0, len(items))
	keys := make([]string, 0, len(items))
	for _, item := range items {
		if !f.keep(item) {
			continue
		}
		key, err := toolscache.MetaNamespaceKeyFunc(item)
		if err != nil {
			return nil, fmt.Errorf("filter the list: %w", err)
		}
		kept = append(kept, item)
		keys = append(keys, key)
	}
	if err := meta.SetList(list, kept); err != nil {
		return nil, fmt.Errorf("filter the list: %w", err)
	}
	f.mu.Lock()
	if options.Continue == "" {
		f.held = make(map[string]struct{}, len(keys))
		f.gen++
	}
	for _, k := range keys {
		f.held[k] = struct{}{}
	}
	f.mu.Unlock()
	return list, nil
}

// WatchWithContext watches through the wrapped ListerWatcher and passes the events
// ListerWatcher's doc names, from a goroutine that ends when the wrapped watch ends or the
// returned one is stopped. An event changes the set of held keys only once the informer has
// taken it, and only while no later list or watch has started the set again.
func (f *filtered) WatchWithContext(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
	w, err := f.lw.WatchWithContext(ctx, options)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	if options.SendInitialEvents != nil && *options.SendInitialEvents {
		f.held = map[string]struct{}{}
		f.gen++
	}
	gen := f.gen
	f.mu.Unlock()
	out := make(chan watch.Event)
	proxy := watch.NewProxyWatcher(out)
	go func() {
		defer close(out)
		defer w.Stop()
		for {
			select {
			case <-proxy.StopChan():
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					return
				}
				ev, pass, c := f.event(ev)
				if !pass {
					continue
				}
				select {
				case out <- ev:
					f.apply(gen, c)
				case <-proxy.StopChan():
					return
				}
			}
		}
	}()
	return proxy, nil
}

// change is what passing one event does to the held keys: key is held from then on, or not.
type change struct {
	key  string
	hold bool
}

// event returns what the informer is given for ev, whether it is given anything, and the
// change to the held keys once it is (nil: none).
func (f *filtered) event(ev watch.Event) (watch.Event, bool, *change) {
	switch ev.Type {
	case watch.Added, watch.Modified, watch.Deleted:
	default:
		return ev, true, nil
	}
	key, err := toolscache.MetaNamespaceKeyFunc(ev.Object)
	if err != nil {
		// Not an object with metadata: the informer reports it as it would unwrapped.
		return ev, true, nil
	}
	accepted := ev.Type != watch.Deleted && f.keep(ev.Object)
	f.mu.Lock()
	_, held := f.held[key]
	f.mu.Unlock()
	switch {
	case accepted:
		if !held {
			ev.Type = watch.Added
		}
		return ev, true, &change{key: key, hold: true}
	case held:
		ev.Type = watch.Deleted
		return ev, true, &change{key: key}
	default:
		return ev, false, nil
	}
}

// apply makes c, the change of an event a watch started at generation gen passed, unless a
// list or watch has started the held keys again since.
func (f *filtered) apply(gen uint64, c *change) {
	if c == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gen != gen {
		return
	}
	if c.hold {
		f.held[c.key] = struct{}{}
	} else {
		delete(f.held, c.key)
	}
}
