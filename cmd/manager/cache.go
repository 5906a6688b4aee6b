package main

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/okg-extensions/network-plugin-policy/pkg/cachefilter"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/kubernetes"
)

// newInformer is the manager cache's informer constructor (cache.Options.NewInformer):
// client-go's shared index informer, as controller-runtime builds it by default, over lw
// as it is for every kind but Pod, and for Pod over lw filtered by kubernetes.CachesPod
// (cachefilter.ListerWatcher): the game servers and the pods with host ports, the only
// pods anything in the manager reads. The other pods are still listed, watched and
// decoded, and dropped before the informer stores them or tells a handler.
func newInformer(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
	if _, ok := obj.(*corev1.Pod); ok {
		lw = cachefilter.ListerWatcher(lw, kubernetes.CachesPod)
	}
	return toolscache.NewSharedIndexInformer(lw, obj, resync, indexers)
}
