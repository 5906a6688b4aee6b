package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/alibabacloud"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/volcengine"
)

// writers returns the floor watchers' way to write: f runs on a goroutine of its own, at most
// 32 at once, so that one slow call does not hold the others; a write still waiting when ctx
// ends is dropped.
func writers(ctx context.Context) func(f func()) {
	sem := make(chan struct{}, 32)
	return func(f func()) {
		go func() {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			defer func() { <-sem }()
			f()
		}()
	}
}

// floorReady is the network-status the floor watcher writes: what the tracker counts as
// network Ready.
const floorReady = `{"currentNetworkState":"Ready"}`

// startFloor runs the floor phase's watcher on factory's informers: for each pod of the
// phase (no network type: the webhook leaves it alone), a LoadBalancer Service of its name on
// SLB fleet-slb-<ordinal/200>, port 500+ordinal%200 (the slb phases' shape), owned by the
// pod; and as soon as the Service has an ingress address, one merge PATCH of the pod's
// game.kruise.io/network-status to Ready. No policy, queue, retry or plugin run: Ready −
// ingress is one watch delivery and one PATCH, what the cluster itself allows on this
// machine. Its API calls: one Service CREATE and one pod PATCH a game server. The writes
// run on their own goroutines (at most 32 at once), so one slow call does not hold the
// others.
func startFloor(ctx context.Context, cs kubernetes.Interface, factory informers.SharedInformerFactory) error {
	async := writers(ctx)
	var made, patched sync.Map
	onPod := func(obj any) {
		pod, ok := obj.(*corev1.Pod)
		if !ok || pod.DeletionTimestamp != nil {
			return
		}
		if _, done := made.LoadOrStore(pod.UID, true); done {
			return
		}
		i, err := strconv.Atoi(pod.Name[len("fleet-"):])
		if err != nil {
			return
		}
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace,
				Annotations:     map[string]string{alibabacloud.AnnotationLBID: fmt.Sprintf("fleet-slb-%d", i/200)},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: ptr.To(true)}}},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"statefulset.kubernetes.io/pod-name": pod.Name},
				Ports: []corev1.ServicePort{{Name: "game", Port: int32(slbMinPort + i%200), Protocol: corev1.ProtocolUDP}}},
		}
		async(func() {
			if _, err := cs.CoreV1().Services(svc.Namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				made.Delete(pod.UID) // tried again at the pod's next event
			}
		})
	}
	onService := func(obj any) {
		svc, ok := obj.(*corev1.Service)
		if !ok || len(svc.Status.LoadBalancer.Ingress) == 0 {
			return
		}
		if _, done := patched.LoadOrStore(svc.UID, true); done {
			return
		}
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, networkstatus.AnnotationNetworkStatus, floorReady)
		async(func() {
			if _, err := cs.CoreV1().Pods(svc.Namespace).Patch(ctx, svc.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				patched.Delete(svc.UID)
			}
		})
	}
	if _, err := factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: onPod, UpdateFunc: func(_, obj any) { onPod(obj) }}); err != nil {
		return err
	}
	_, err := factory.Core().V1().Services().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: onService, UpdateFunc: func(_, obj any) { onService(obj) }})
	return err
}

// startEIPFloor runs the EIP floor phase's watcher on factory's pod informer: as soon as a
// pod of the phase (no network type; it asks the box's EIP controller for an EIP itself) has
// the controller's answer (volcengine.AnnotationAllocatedEIPs), one merge PATCH of its
// game.kruise.io/network-status to Ready: one watch delivery and one PATCH, what the cluster
// allows for Ready − answer. At most 32 writes at once, as startFloor.
func startEIPFloor(ctx context.Context, cs kubernetes.Interface, factory informers.SharedInformerFactory) error {
	async := writers(ctx)
	var patched sync.Map
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, networkstatus.AnnotationNetworkStatus, floorReady)
	onPod := func(obj any) {
		pod, ok := obj.(*corev1.Pod)
		if !ok || pod.DeletionTimestamp != nil || pod.Annotations[volcengine.AnnotationAllocatedEIPs] == "" {
			return
		}
		if _, done := patched.LoadOrStore(pod.UID, true); done {
			return
		}
		async(func() {
			if _, err := cs.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				patched.Delete(pod.UID)
			}
		})
	}
	_, err := factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: onPod, UpdateFunc: func(_, obj any) { onPod(obj) }})
	return err
}

// startSharedFloor runs the shared-Service floor phase's watcher on factory's informers: each
// pod of the phase (no network type) is labelled alibabacloud.LabelLBID fleet-sp-<ordinal/200>
// (one PATCH), and that SLB's LoadBalancer Service, named after it and selecting the label,
// is created once (port 7777/UDP, as AlibabaCloud-SLB-SharedPort's); as soon as a Service
// has an ingress address, every pod it selects, and every pod labelled for it later, gets
// one merge PATCH of its network-status to Ready. At most 32 writes at once, as startFloor.
func startSharedFloor(ctx context.Context, cs kubernetes.Interface, factory informers.SharedInformerFactory) error {
	async := writers(ctx)
	var labelled, made, patched, addressed sync.Map
	ready := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, networkstatus.AnnotationNetworkStatus, floorReady)
	markReady := func(pod *corev1.Pod) {
		if _, done := patched.LoadOrStore(pod.UID, true); done {
			return
		}
		async(func() {
			if _, err := cs.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, []byte(ready), metav1.PatchOptions{}); err != nil {
				patched.Delete(pod.UID)
			}
		})
	}
	pods := factory.Core().V1().Pods().Informer()
	onPod := func(obj any) {
		pod, ok := obj.(*corev1.Pod)
		if !ok || pod.DeletionTimestamp != nil {
			return
		}
		if id := pod.Labels[alibabacloud.LabelLBID]; id != "" {
			if _, up := addressed.Load(id); up {
				markReady(pod)
			}
			return
		}
		i, err := strconv.Atoi(pod.Name[len("fleet-"):])
		if err != nil {
			return
		}
		id := fmt.Sprintf("fleet-sp-%d", i/200)
		if _, done := made.LoadOrStore(id, true); !done {
			svc := &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: id, Namespace: pod.Namespace, Annotations: map[string]string{alibabacloud.AnnotationLBID: id}},
				Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{alibabacloud.LabelLBID: id},
					Ports: []corev1.ServicePort{{Name: "game", Port: 7777, Protocol: corev1.ProtocolUDP}}},
			}
			async(func() {
				if _, err := cs.CoreV1().Services(svc.Namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
					made.Delete(id)
				}
			})
		}
		if _, done := labelled.LoadOrStore(pod.UID, true); done {
			return
		}
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, alibabacloud.LabelLBID, id)
		async(func() {
			if _, err := cs.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				labelled.Delete(pod.UID)
			}
		})
	}
	onService := func(obj any) {
		svc, ok := obj.(*corev1.Service)
		if !ok || len(svc.Status.LoadBalancer.Ingress) == 0 {
			return
		}
		if _, done := addressed.LoadOrStore(svc.Name, true); done {
			return
		}
		for _, o := range pods.GetStore().List() {
			if pod, ok := o.(*corev1.Pod); ok && pod.Labels[alibabacloud.LabelLBID] == svc.Name && pod.DeletionTimestamp == nil {
				markReady(pod)
			}
		}
	}
	if _, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: onPod, UpdateFunc: func(_, obj any) { onPod(obj) }}); err != nil {
		return err
	}
	_, err := factory.Core().V1().Services().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: onService, UpdateFunc: func(_, obj any) { onService(obj) }})
	return err
}
