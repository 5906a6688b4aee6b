package cachefilter

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// pod returns a pod default/name whose label "keep" is keep.
func pod(name, keep string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: map[string]string{"keep": keep}, ResourceVersion: "1"}}
}

// keepLabelled accepts pods labelled keep=yes.
func keepLabelled(obj runtime.Object) bool {
	p, ok := obj.(*corev1.Pod)
	return ok && p.Labels["keep"] == "yes"
}

// source is a ListerWatcher whose list is items and whose watches are fake watchers the
// test drives (the informer's side is client-go's own).
type source struct {
	items   []corev1.Pod
	watches chan *watch.FakeWatcher
	opts    chan metav1.ListOptions
	// watchList makes a watch that asks for the initial events send items as Added events
	// and then the initial-events-end bookmark, as the API server's watch-list does.
	watchList bool
}

func newSource(items ...*corev1.Pod) *source {
	s := &source{watches: make(chan *watch.FakeWatcher, 4), opts: make(chan metav1.ListOptions, 8)}
	for _, p := range items {
		s.items = append(s.items, *p)
	}
	return s
}

func (s *source) lw() *toolscache.ListWatch {
	return &toolscache.ListWatch{
		ListWithContextFunc: func(_ context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}, Items: slices.Clone(s.items)}, nil
		},
		WatchFuncWithContext: func(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
			s.opts <- o
			w := watch.NewFakeWithChanSize(16, false)
			if s.watchList && o.SendInitialEvents != nil && *o.SendInitialEvents {
				for i := range s.items {
					w.Add(s.items[i].DeepCopy())
				}
				w.Action(watch.Bookmark, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "2",
					Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}})
			}
			s.watches <- w
			return w, nil
		},
	}
}

// storeNames returns the names the informer's store holds, sorted.
func storeNames(inf toolscache.SharedIndexInformer) []string {
	var names []string
	for _, obj := range inf.GetStore().List() {
		names = append(names, obj.(*corev1.Pod).Name)
	}
	slices.Sort(names)
	return names
}

// waitFor waits until the store holds exactly want.
func waitFor(t *testing.T, inf toolscache.SharedIndexInformer, want ...string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return slices.Equal(storeNames(inf), want), nil
	})
	if err != nil {
		t.Fatalf("store holds %v, want %v", storeNames(inf), want)
	}
}

// TestInformerHoldsOnlyAccepted runs client-go's informer over the filtered ListerWatcher
// through a list and the watch events of every kind, and checks what the store holds and
// what a handler was told after each.
func TestInformerHoldsOnlyAccepted(t *testing.T) {
	src := newSource(pod("a", "yes"), pod("b", "no"))
	inf := toolscache.NewSharedIndexInformer(ListerWatcher(src.lw(), keepLabelled), &corev1.Pod{}, 0, toolscache.Indexers{})
	type told struct{ kind, name string }
	events := make(chan told, 32)
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { events <- told{"add", o.(*corev1.Pod).Name} },
		UpdateFunc: func(_, o any) { events <- told{"update", o.(*corev1.Pod).Name} },
		DeleteFunc: func(o any) { events <- told{"delete", o.(*corev1.Pod).Name} },
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go inf.RunWithContext(ctx)
	// The test's informer lists (watch-list is the client's default; this source's
	// watches do not send the initial events, so the reflector falls back to a list after
	// the first watch ends without its bookmark: both paths are served).
	var w *watch.FakeWatcher
	for w == nil {
		select {
		case fw := <-src.watches:
			o := <-src.opts
			if o.SendInitialEvents != nil && *o.SendInitialEvents {
				fw.Stop() // no initial events here: the reflector falls back to a list
				continue
			}
			w = fw
		case <-time.After(10 * time.Second):
			t.Fatal("the informer never watched")
		}
	}
	waitFor(t, inf, "a")

	steps := []struct {
		do   func()
		want []string
		told []told
	}{
		{func() { w.Add(pod("c", "no")) }, []string{"a"}, nil},
		{func() { w.Modify(pod("c", "yes")) }, []string{"a", "c"}, []told{{"add", "c"}}},
		{func() { w.Modify(pod("c", "yes")) }, []string{"a", "c"}, []told{{"update", "c"}}},
		{func() { w.Modify(pod("a", "no")) }, []string{"c"}, []told{{"delete", "a"}}},
		{func() { w.Modify(pod("a", "no")) }, []string{"c"}, nil},
		{func() { w.Delete(pod("b", "no")) }, []string{"c"}, nil},
		{func() { w.Delete(pod("c", "yes")) }, nil, []told{{"delete", "c"}}},
		{func() { w.Add(pod("d", "yes")) }, []string{"d"}, []told{{"add", "d"}}},
	}
	<-events // the list's a
	for i, s := range steps {
		s.do()
		// A marker event that is always passed, so that everything before it was handled.
		w.Add(pod("zz-marker", "yes"))
		w.Delete(pod("zz-marker", "yes"))
		var got []told
		for {
			ev := <-events
			if ev.name == "zz-marker" {
				if ev.kind == "delete" {
					break
				}
				continue
			}
			got = append(got, ev)
		}
		waitFor(t, inf, s.want...)
		if !slices.Equal(got, s.told) {
			t.Errorf("step %d: handler told %v, want %v", i, got, s.told)
		}
	}
}

// TestInformerOverWatchList: the informer's default, a watch-list whose initial events are
// filtered, then the same watch's events: the store holds only the accepted pods throughout.
func TestInformerOverWatchList(t *testing.T) {
	src := newSource(pod("a", "yes"), pod("b", "no"), pod("c", "yes"))
	src.watchList = true
	inf := toolscache.NewSharedIndexInformer(ListerWatcher(src.lw(), keepLabelled), &corev1.Pod{}, 0, toolscache.Indexers{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go inf.RunWithContext(ctx)
	var w *watch.FakeWatcher
	select {
	case w = <-src.watches:
	case <-time.After(10 * time.Second):
		t.Fatal("the informer never watched")
	}
	if o := <-src.opts; o.SendInitialEvents == nil || !*o.SendInitialEvents {
		t.Fatalf("the informer's first watch did not ask for the initial events: %+v", o)
	}
	waitFor(t, inf, "a", "c")
	w.Modify(pod("a", "no"))
	w.Modify(pod("b", "yes"))
	waitFor(t, inf, "b", "c")
	select {
	case w := <-src.watches:
		t.Errorf("the informer watched again (%+v): the watch-list was not taken", <-src.opts)
		w.Stop()
	default:
	}
}

// TestInitialEventsStartAgain: a watch that asks for the initial events (watch-list)
// forgets what the previous watch passed, so a refused Modified of an object only the
// previous watch passed is dropped, not turned into a delete of an object the new store
// never held; and a list's first page does the same, while a next page adds to it.
func TestInitialEventsStartAgain(t *testing.T) {
	src := newSource(pod("a", "yes"))
	f := ListerWatcher(src.lw(), keepLabelled).(*filtered)
	if _, err := f.ListWithContext(context.Background(), metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	src.items = []corev1.Pod{*pod("b", "yes"), *pod("x", "no")}
	list, err := f.ListWithContext(context.Background(), metav1.ListOptions{Continue: "next"})
	if err != nil {
		t.Fatal(err)
	}
	if items := list.(*corev1.PodList).Items; len(items) != 1 || items[0].Name != "b" {
		t.Errorf("second page = %v, want only b", items)
	}
	if _, ok := f.held["default/a"]; !ok {
		t.Error("a next page forgot the first page's a")
	}

	w, err := f.WatchWithContext(context.Background(), metav1.ListOptions{SendInitialEvents: ptr.To(true)})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	fw := <-src.watches
	<-src.opts
	fw.Modify(pod("a", "no"))
	fw.Add(pod("c", "yes"))
	if ev := <-w.ResultChan(); ev.Type != watch.Added || ev.Object.(*corev1.Pod).Name != "c" {
		t.Errorf("first event passed = %s %s, want ADDED c (a's refused update dropped)", ev.Type, ev.Object.(*corev1.Pod).Name)
	}
	fw.Action(watch.Bookmark, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "9"}})
	if ev := <-w.ResultChan(); ev.Type != watch.Bookmark {
		t.Errorf("bookmark passed as %s", ev.Type)
	}
}

// TestStopEndsTheGoroutine: stopping the filtered watch while an event waits to be read
// stops the wrapped watch and closes the result channel.
func TestStopEndsTheGoroutine(t *testing.T) {
	src := newSource()
	w, err := ListerWatcher(src.lw(), keepLabelled).(*filtered).WatchWithContext(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fw := <-src.watches
	fw.Add(pod("a", "yes")) // never read
	time.Sleep(10 * time.Millisecond)
	w.Stop()
	select {
	case <-w.ResultChan():
	case <-time.After(10 * time.Second):
		t.Fatal("result channel never closed")
	}
	if !fw.IsStopped() {
		t.Error("the wrapped watch was not stopped")
	}
}
