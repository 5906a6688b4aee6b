package cloudbox

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/volcengine"
)

// EIPs is the box's stand-in for Volcengine's VKE network controller: for a pod that asks for
// an EIP (volcengine.AnnotationEIPAllocate, or volcengine.AnnotationEIPID for an existing
// one) and has an IP, it writes the result annotation volcengine.AnnotationAllocatedEIPs
// after a delay, as the real controller does once the EIP is bound to the pod's ENI: one
// entry {"EipId","EipAddress","EniId","EniIp"} with an address of TEST-NET-3 (203.0.113.0/24,
// never routed). Told to fail, it writes nothing, as a controller out of EIP quota. Safe for
// concurrent use; change its knobs while it runs.
type EIPs struct {
	mu    sync.Mutex
	delay time.Duration
	fail  bool
	addrs map[string]string // EIP id -> address
}

// SetDelay makes the controller answer d after it first sees a pod asking.
func (e *EIPs) SetDelay(d time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.delay = d
}

// SetFail makes the controller answer no pod (true) or answer again (false); pods it did not
// answer are answered at their next change, or within 5 s.
func (e *EIPs) SetFail(fail bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.fail = fail
}

// Address returns the address of EIP id (203.0.113.<n>, n by first use, from 10).
func (e *EIPs) Address(id string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.addrs == nil {
		e.addrs = map[string]string{}
	}
	if a, ok := e.addrs[id]; ok {
		return a
	}
	a := fmt.Sprintf("203.0.113.%d", 10+len(e.addrs))
	e.addrs[id] = a
	return a
}

// eipID is the EIP a pod asks for: its existing id, or one named after the pod.
func eipID(pod *corev1.Pod) string {
	if id := pod.Annotations[volcengine.AnnotationEIPID]; id != "" {
		return id
	}
	return "eip-" + pod.Namespace + "-" + pod.Name
}

// StartEIPs runs e against the API server of cfg until ctx ends. Errors come from building the
// client.
func StartEIPs(ctx context.Context, cfg *rest.Config, e *EIPs) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactory(cs, 5*time.Second)
	pods := factory.Core().V1().Pods().Informer()
	var pending sync.Map // pod key -> true while an answer is on its way
	answer := func(obj any) {
		pod, ok := obj.(*corev1.Pod)
		if !ok || pod.Status.PodIP == "" || pod.DeletionTimestamp != nil || pod.Annotations[volcengine.AnnotationAllocatedEIPs] != "" ||
			(pod.Annotations[volcengine.AnnotationEIPAllocate] == "" && pod.Annotations[volcengine.AnnotationEIPID] == "") {
			return
		}
		key := pod.Namespace + "/" + pod.Name
		if _, busy := pending.LoadOrStore(key, true); busy {
			return
		}
		e.mu.Lock()
		delay, fail := e.delay, e.fail
		e.mu.Unlock()
		if fail {
			pending.Delete(key)
			return
		}
		go func() {
			defer pending.Delete(key)
			select {
			case <-ctx.Done():
				return
			case <-time.After(delay):
			}
			id := eipID(pod)
			result, _ := json.Marshal([]map[string]string{{"EipId": id, "EipAddress": e.Address(id), "EniId": "eni-" + pod.Name, "EniIp": pod.Status.PodIP}})
			patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{volcengine.AnnotationAllocatedEIPs: string(result)}}})
			_, _ = cs.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		}()
	}
	if _, err := pods.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: answer, UpdateFunc: func(_, obj any) { answer(obj) },
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	return nil
}
