package main

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// readyWatch records when a pod informer first sees each kindNodePort pod's network Ready.
type readyWatch struct {
	mu sync.Mutex
	// readyAt maps a pod name to when its network-status was first seen Ready.
	readyAt map[string]time.Time
	// changed is closed and replaced whenever readyAt grows.
	changed chan struct{}
	// cancel stops the informer.
	cancel context.CancelFunc
}

// startReadyWatch starts a pod informer on the kindNodePort pods of ns (a list and a watch,
// no polling) and waits until its cache has synced. Errors: ctx ended before the sync, or
// the handler could not be added.
func startReadyWatch(ctx context.Context, cs kubernetes.Interface, ns string) (*readyWatch, error) {
	ctx, cancel := context.WithCancel(ctx)
	w := &readyWatch{readyAt: map[string]time.Time{}, changed: make(chan struct{}), cancel: cancel}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = labelKind + "=" + kindNodePort.String() }))
	inf := factory.Core().V1().Pods().Informer()
	observe := func(obj any) {
		if pod, ok := obj.(*corev1.Pod); ok {
			w.observe(pod, time.Now())
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    observe,
		UpdateFunc: func(_, obj any) { observe(obj) },
	}); err != nil {
		cancel()
		return nil, fmt.Errorf("add pod event handler: %w", err)
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		cancel()
		factory.Shutdown()
		return nil, fmt.Errorf("sync the pod informer of %s: %w", ns, context.Cause(ctx))
	}
	w.cancel = func() { cancel(); factory.Shutdown() }
	return w, nil
}

// observe records now as the Ready time of pod when its network-status says Ready and none
// was recorded yet.
func (w *readyWatch) observe(pod *corev1.Pod, now time.Time) {
	st, err := networkstatus.StatusFromPod(pod)
	if err != nil || st == nil || st.CurrentNetworkState != networkstatus.NetworkReady {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, seen := w.readyAt[pod.Name]; seen {
		return
	}
	w.readyAt[pod.Name] = now
	close(w.changed)
	w.changed = make(chan struct{})
}

// waitAll waits until every pod named in pods has been seen Ready, timeout passes or ctx
// ends, and returns the Ready times seen so far (pod name to time). The error is ctx's when
// it ended; a timeout is not an error: the pods not in the map were not Ready in time.
func (w *readyWatch) waitAll(ctx context.Context, pods map[string]time.Time, timeout time.Duration) (map[string]time.Time, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		w.mu.Lock()
		done := true
		for name := range pods {
			if _, ok := w.readyAt[name]; !ok {
				done = false
				break
			}
		}
		changed := w.changed
		w.mu.Unlock()
		if done {
			return w.snapshot(), nil
		}
		select {
		case <-changed:
		case <-deadline.C:
			return w.snapshot(), nil
		case <-ctx.Done():
			return w.snapshot(), ctx.Err()
		}
	}
}

// snapshot returns a copy of the Ready times recorded so far.
func (w *readyWatch) snapshot() map[string]time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.readyAt)
}

// stop stops the informer.
func (w *readyWatch) stop() { w.cancel() }
