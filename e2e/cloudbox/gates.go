package cloudbox

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
)

// ServiceReadinessGatePrefix is the readiness gate Alibaba's cloud controller sets on the
// pods behind a load balancer it serves: service.readiness.alibabacloud.com/<Service> is
// True once the pod is a backend of the Service's load balancer (Alibaba Cloud's
// documentation of its cloud-controller-manager, "readiness gate"; OKG's Multi-NLBs and
// AutoNLBs plugins add the gate at CREATE and wait for it). The fake nodes' kwok stages leave
// these gates alone (e2e/cluster.CloudReadinessGatePrefixes).
const ServiceReadinessGatePrefix = "service.readiness.alibabacloud.com/"

// startGates stands in for the readiness-gate writer of Alibaba's cloud controller: a pod
// with the readiness gate ServiceReadinessGatePrefix+<Service> gets its condition True, with
// reason LoadBalancerBackendReady, once that Service of its namespace has an ingress address
// and selects the pod; never False (the cloud controller's removal of a backend is not
// stood in for). It runs on pod and Service events of factory's informers.
func startGates(ctx context.Context, cs kubernetes.Interface, factory informers.SharedInformerFactory) error {
	pods, services := factory.Core().V1().Pods(), factory.Core().V1().Services()
	set := func(pod *corev1.Pod) {
		for _, g := range pod.Spec.ReadinessGates {
			name, ok := strings.CutPrefix(string(g.ConditionType), ServiceReadinessGatePrefix)
			if !ok || conditionTrue(pod, g.ConditionType) {
				continue
			}
			svc, err := services.Lister().Services(pod.Namespace).Get(name)
			if err != nil || len(svc.Status.LoadBalancer.Ingress) == 0 || len(svc.Spec.Selector) == 0 ||
				!labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(pod.Labels)) {
				continue
			}
			patch := fmt.Sprintf(`{"status":{"conditions":[{"type":%q,"status":"True","reason":"LoadBalancerBackendReady","lastTransitionTime":%q}]}}`,
				g.ConditionType, time.Now().UTC().Format(time.RFC3339))
			go func() {
				_, _ = cs.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
			}()
		}
	}
	onPod := func(obj any) {
		if pod, ok := obj.(*corev1.Pod); ok && pod.DeletionTimestamp == nil {
			set(pod)
		}
	}
	onService := func(obj any) {
		svc, ok := obj.(*corev1.Service)
		if !ok || len(svc.Status.LoadBalancer.Ingress) == 0 || len(svc.Spec.Selector) == 0 {
			return
		}
		list, err := pods.Lister().Pods(svc.Namespace).List(labels.SelectorFromSet(svc.Spec.Selector))
		if err != nil {
			return
		}
		for _, pod := range list {
			onPod(pod)
		}
	}
	if _, err := pods.Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: onPod, UpdateFunc: func(_, obj any) { onPod(obj) }}); err != nil {
		return err
	}
	_, err := services.Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: onService, UpdateFunc: func(_, obj any) { onService(obj) }})
	return err
}

// conditionTrue reports whether pod's condition t is True.
func conditionTrue(pod *corev1.Pod, t corev1.PodConditionType) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
