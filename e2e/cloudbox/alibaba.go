package cloudbox

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/alibabacloud"
)

// AlibabaResults is the box's stand-in for the two Alibaba Cloud controllers whose objects
// AlibabaCloud-EIP and AlibabaCloud-NATGW read: Terway, which binds an EIP to a pod annotated
// k8s.aliyun.com/pod-with-eip "true" and reports it in a PodEIP of the pod's name, and the
// DNAT controller, which maps a pod's ports (k8s.aliyun.com/pod-dnat "true") on the NAT
// gateway and reports the forward entries in a PodDNAT of the pod's name. It publishes only
// the fields OKG's plugins read, in the shapes of OKG's alibabacloud.com/v1beta1 types
// (kruise-game d76ace2, cloudprovider/alibabacloud/apis/v1beta1):
//   - PodEIP: spec {allocationID, allocationType {type: Auto, releaseStrategy: the pod's
//     k8s.aliyun.com/pod-eip-release-strategy}}, status {eipAddress, privateIPAddress (the
//     pod's IP), status: InUse};
//   - PodDNAT: spec {externalIP, protocol, tableId, portMapping}, status {entries: one per
//     port of k8s.aliyun.com/pod-dnat-expose-port, {externalIP, externalPort (from 512),
//     internalIP, internalPort, ipProtocol (the expose protocol, tcp when none),
//     forwardEntryId}}.
//
// Assumption (docs/plugins.md, "Stand-ins"): the controllers write the object with its status
// in one go once the cloud has answered; the real ones may write the spec first. Addresses
// are of TEST-NET-3 (203.0.113.0/24, never routed). Told to fail, it writes nothing, as
// controllers that cannot reach the cloud; given an EIP quota (SetEIPQuota), Terway's binds
// that many EIPs and no more until it is raised. Safe for concurrent use.
type AlibabaResults struct {
	mu   sync.Mutex
	fail bool
	// quota is how many EIPs Terway's stand-in binds in all (0: no limit), bound how many
	// it has bound.
	quota, bound int
}

// SetEIPQuota makes Terway's stand-in bind at most n EIPs in all (0: no limit), as an
// account's EIP quota: a pod past it gets no PodEIP until the quota is raised; it is
// answered at its next change, or within 5 s.
func (a *AlibabaResults) SetEIPQuota(n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.quota = n
}

// releaseEIP uncounts an EIP whose PodEIP could not be written.
func (a *AlibabaResults) releaseEIP() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.bound--
}

// takeEIP counts one more bound EIP and reports true, or false when the quota is used up.
func (a *AlibabaResults) takeEIP() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.quota > 0 && a.bound >= a.quota {
		return false
	}
	a.bound++
	return true
}

// SetFail makes the controllers answer no pod (true) or answer again (false); pods not
// answered are answered at their next change, or within 5 s.
func (a *AlibabaResults) SetFail(fail bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.fail = fail
}

func (a *AlibabaResults) failing() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.fail
}

// AlibabaControllerServiceAccount is the identity the stand-in writes PodEIP and PodDNAT
// objects with: a ServiceAccount of kube-system, where Terway runs.
const AlibabaControllerServiceAccount = "cloudbox-alibaba-controller"

// AlibabaEIPAddress is the address the stand-in binds to pod ns/name: 203.0.113.<n>, n from a
// hash of the name between 100 and 199.
func AlibabaEIPAddress(ns, name string) string {
	h := 0
	for _, c := range ns + "/" + name {
		h = (h*31 + int(c)) % 100
	}
	return fmt.Sprintf("203.0.113.%d", 100+h)
}

// DNATExternalIP is the NAT gateway's address in the stand-in.
const DNATExternalIP = "203.0.113.250"

// StartAlibabaResults runs a until ctx ends, as ServiceAccount
// kube-system/AlibabaControllerServiceAccount with the rights to read pods and to create and
// write the status of PodEIPs and PodDNATs, which it creates through admin (a cluster
// admin's config). The CRDs (testdata/crds) must be installed. Errors come from the API
// server and from building the clients.
func StartAlibabaResults(ctx context.Context, admin *rest.Config, a *AlibabaResults) error {
	cfg, err := asServiceAccount(ctx, admin, metav1.NamespaceSystem, AlibabaControllerServiceAccount,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}},
		rbacv1.PolicyRule{APIGroups: []string{alibabacloud.GroupVersion.Group}, Resources: []string{"podeips", "poddnats", "podeips/status", "poddnats/status"},
			Verbs: []string{"get", "create", "update"}})
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactory(cs, 5*time.Second)
	pods := factory.Core().V1().Pods().Informer()
	var done sync.Map // pod UID -> true once answered
	answer := func(obj any) {
		pod, ok := obj.(*corev1.Pod)
		if !ok || pod.Status.PodIP == "" || pod.DeletionTimestamp != nil || a.failing() {
			return
		}
		if _, ok := done.Load(pod.UID); ok {
			return
		}
		var kind string
		var spec, status map[string]any
		switch {
		case pod.Annotations[alibabacloud.AnnotationWithEIP] == "true":
			if _, loaded := done.LoadOrStore(pod.UID, true); loaded {
				return
			}
			if !a.takeEIP() {
				done.Delete(pod.UID)
				return
			}
			kind = alibabacloud.PodEIPKind
			spec = map[string]any{"allocationID": "eip-alloc-" + pod.Name,
				"allocationType": map[string]any{"type": "Auto", "releaseStrategy": pod.Annotations["k8s.aliyun.com/pod-eip-release-strategy"]}}
			status = map[string]any{"eipAddress": AlibabaEIPAddress(pod.Namespace, pod.Name), "privateIPAddress": pod.Status.PodIP, "status": "InUse"}
		case pod.Annotations[alibabacloud.AnnotationPodDNAT] == "true":
			kind = alibabacloud.PodDNATKind
			protocol := strings.ToLower(pod.Annotations[alibabacloud.AnnotationDNATExposeProtocol])
			if protocol == "" {
				protocol = "tcp"
			}
			var mapping, entries []any
			for i, port := range strings.Split(pod.Annotations[alibabacloud.AnnotationDNATExposePort], ",") {
				ext := fmt.Sprint(512 + i)
				mapping = append(mapping, map[string]any{"externalPort": ext, "internalPort": port})
				entries = append(entries, map[string]any{"externalIP": DNATExternalIP, "externalPort": ext, "internalIP": pod.Status.PodIP,
					"internalPort": port, "ipProtocol": protocol, "forwardEntryId": "fwd-" + pod.Name + "-" + ext})
			}
			spec = map[string]any{"externalIP": DNATExternalIP, "protocol": protocol, "tableId": "ngw-box", "portMapping": mapping}
			status = map[string]any{"entries": entries}
		default:
			return
		}
		done.Store(pod.UID, true)
		go func() {
			if err := writeResult(ctx, dyn, kind, pod, spec, status); err != nil {
				if kind == alibabacloud.PodEIPKind {
					a.releaseEIP()
				}
				done.Delete(pod.UID) // tried again at the pod's next event
			}
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

// writeResult creates (or takes over) the object of kind named after pod with spec, then
// writes status through the status subresource.
func writeResult(ctx context.Context, dyn dynamic.Interface, kind string, pod *corev1.Pod, spec, status map[string]any) error {
	gvr := alibabacloud.GroupVersion.WithResource(strings.ToLower(kind) + "s")
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(alibabacloud.GroupVersion.WithKind(kind))
	u.SetNamespace(pod.Namespace)
	u.SetName(pod.Name)
	client := dyn.Resource(gvr).Namespace(pod.Namespace)
	got, err := client.Create(ctx, u, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		got, err = client.Get(ctx, pod.Name, metav1.GetOptions{})
	}
	if err != nil {
		return err
	}
	got.Object["status"] = status
	_, err = client.UpdateStatus(ctx, got, metav1.UpdateOptions{})
	return err
}
