package cloudbox

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/hwcloud"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/jdcloud"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/volcengine"
)

// EIPs is the box's stand-in for the network controllers that bind an EIP to a pod, for the
// three EIP plugins: for a pod that asks for one and has an IP, after a delay, it writes the
// answer the real controller writes once the EIP is bound, with an address of TEST-NET-3
// (203.0.113.0/24, never routed):
//   - Volcengine's VKE (volcengine.AnnotationEIPAllocate or AnnotationEIPID):
//     volcengine.AnnotationAllocatedEIPs, one entry {"EipId","EipAddress","EniId","EniIp"};
//   - JD Cloud's (jdcloud.AnnotationEIPEnable "true"): jdcloud.AnnotationEIPID and
//     jdcloud.AnnotationEIPIP;
//   - Huawei CCE's Yangtse (yangtse.io/pod-with-eip "true" or yangtse.io/eip-id):
//     hwcloud.AnnotationAllocatedEIP, the address.
//
// Told to fail, it writes nothing, as a controller out of EIP quota. Safe for concurrent use;
// change its knobs while it runs.
type EIPs struct {
	Knobs
	addrs map[string]string // EIP id -> address
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

// EIPID is the EIP the box binds to pod: the existing one it names, or one named after the
// pod ("eip-<namespace>-<name>").
func EIPID(pod *corev1.Pod) string {
	for _, k := range []string{volcengine.AnnotationEIPID, "yangtse.io/eip-id"} {
		if id := pod.Annotations[k]; id != "" {
			return id
		}
	}
	return "eip-" + pod.Namespace + "-" + pod.Name
}

// answerFor returns the annotations the controller of pod's EIP plugin writes to bind EIP id
// at address, or nil when the pod asks for no EIP or has its answer already.
func answerFor(pod *corev1.Pod, id, address string) map[string]string {
	a := pod.Annotations
	switch {
	case a[volcengine.AnnotationEIPAllocate] != "" || a[volcengine.AnnotationEIPID] != "":
		if a[volcengine.AnnotationAllocatedEIPs] != "" {
			return nil
		}
		result, _ := json.Marshal([]map[string]string{{"EipId": id, "EipAddress": address, "EniId": "eni-" + pod.Name, "EniIp": pod.Status.PodIP}})
		return map[string]string{volcengine.AnnotationAllocatedEIPs: string(result)}
	case a[jdcloud.AnnotationEIPEnable] == "true":
		if a[jdcloud.AnnotationEIPIP] != "" {
			return nil
		}
		return map[string]string{jdcloud.AnnotationEIPID: id, jdcloud.AnnotationEIPIP: address}
	case a["yangtse.io/pod-with-eip"] == "true" || a["yangtse.io/eip-id"] != "":
		if a[hwcloud.AnnotationAllocatedEIP] != "" {
			return nil
		}
		return map[string]string{hwcloud.AnnotationAllocatedEIP: address}
	}
	return nil
}

// EIPControllerServiceAccount is the identity the box's EIP controller writes its answers
// with, as the clouds' network controllers run: a ServiceAccount of kube-system (member of
// system:serviceaccounts:kube-system, the result writers the EIP plugins trust by default).
const EIPControllerServiceAccount = "cloudbox-eip-controller"

// StartEIPs runs e until ctx ends, as ServiceAccount kube-system/EIPControllerServiceAccount
// with the rights to read and patch pods, which it creates (or updates) through admin, a
// cluster admin's config, with a ClusterRole and ClusterRoleBinding of the same name. Errors
// come from the API server and from building the clients.
func StartEIPs(ctx context.Context, admin *rest.Config, e *EIPs) error {
	cfg, err := asServiceAccount(ctx, admin, metav1.NamespaceSystem, EIPControllerServiceAccount,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch", "patch"}})
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactory(cs, 5*time.Second)
	pods := factory.Core().V1().Pods().Informer()
	var pending sync.Map // pod key -> true while an answer is on its way
	answer := func(obj any) {
		pod, ok := obj.(*corev1.Pod)
		if !ok || pod.Status.PodIP == "" || pod.DeletionTimestamp != nil || answerFor(pod, "", "") == nil {
			return
		}
		key := pod.Namespace + "/" + pod.Name
		if _, busy := pending.LoadOrStore(key, true); busy {
			return
		}
		delay, fail := e.knobs()
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
			id := EIPID(pod)
			patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": answerFor(pod, id, e.Address(id))}})
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

// asServiceAccount creates ServiceAccount ns/name through admin, binds it cluster-wide to a
// ClusterRole of rules (both named name; an existing one is updated), and returns a config of
// admin's API server that authenticates with a token of it (TokenRequest API, valid 24 h).
func asServiceAccount(ctx context.Context, admin *rest.Config, ns, name string, rules ...rbacv1.PolicyRule) (*rest.Config, error) {
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return nil, err
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create ServiceAccount %s/%s: %w", ns, name, err)
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
		_, err = cs.RbacV1().ClusterRoles().Update(ctx, role, metav1.UpdateOptions{})
		if err != nil {
			return nil, fmt.Errorf("update ClusterRole %s: %w", name, err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("create ClusterRole %s: %w", name, err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}}}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create ClusterRoleBinding %s: %w", name, err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(24 * time.Hour / time.Second))},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("request a token of ServiceAccount %s/%s: %w", ns, name, err)
	}
	cfg := rest.AnonymousClientConfig(admin)
	cfg.BearerToken = tr.Status.Token
	return cfg, nil
}
