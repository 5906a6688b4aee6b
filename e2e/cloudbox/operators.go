package cloudbox

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/alibabacloud"
)

// AlibabaOperators is the box's stand-in for Alibaba's EIP and NLB operators, whose objects
// AlibabaCloud-AutoNLBs-V2 creates (testdata/crds), doing what the recorded behaviour of OKG's
// plugin relies on (its README's AutoNLBs-V2 mechanism):
//   - EIP operator: an EIP object without status.allocationID gets, after the delay,
//     status {allocationID "eip-<namespace>-<name>", eipAddress (TEST-NET-3), status "InUse"};
//   - NLB operator: an NLB object without status.loadBalancerId, whose zone mappings all name
//     an allocation id, gets status {loadBalancerId "nlb-<namespace>-<name>", dnsName
//     NLBHostname of that id, loadBalancerStatus "Active"}.
//
// Told to fail, it answers nothing, as an operator out of quota. Safe for concurrent use;
// change its knobs while it runs.
type AlibabaOperators struct {
	Knobs
	// answered counts the objects answered, by kind ("EIP", "NLB").
	answered map[string]int
}

// Answered returns how many objects of kind the operators answered.
func (o *AlibabaOperators) Answered(kind string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.answered[kind]
}

// AlibabaOperatorsServiceAccount is the identity the stand-in operators write with: a
// ServiceAccount of kube-system, where Alibaba's operators run.
const AlibabaOperatorsServiceAccount = "cloudbox-alibaba-operators"

// NLBID is the id the stand-in NLB operator gives the NLB object ns/name.
func NLBID(ns, name string) string { return "nlb-" + ns + "-" + name }

// StartAlibabaOperators runs o until ctx ends, as ServiceAccount
// kube-system/AlibabaOperatorsServiceAccount with the rights to read NLB and EIP objects and
// write their status, which it creates through admin (a cluster admin's config). The CRDs
// (testdata/crds) must be installed. Errors come from the API server and from building the
// clients.
func StartAlibabaOperators(ctx context.Context, admin *rest.Config, o *AlibabaOperators) error {
	cfg, err := asServiceAccount(ctx, admin, metav1.NamespaceSystem, AlibabaOperatorsServiceAccount,
		rbacv1.PolicyRule{APIGroups: []string{alibabacloud.NLBGVK.Group}, Resources: []string{"nlbs", "nlbs/status"}, Verbs: []string{"get", "list", "watch", "update"}},
		rbacv1.PolicyRule{APIGroups: []string{alibabacloud.EIPGVK.Group}, Resources: []string{"eips", "eips/status"}, Verbs: []string{"get", "list", "watch", "update"}})
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	factory := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 5*time.Second)
	for _, k := range []struct {
		gvr    schema.GroupVersionResource
		status func(u *unstructured.Unstructured) map[string]any
	}{
		{alibabacloud.EIPGVK.GroupVersion().WithResource("eips"), func(u *unstructured.Unstructured) map[string]any {
			if id, _, _ := unstructured.NestedString(u.Object, "status", "allocationID"); id != "" {
				return nil
			}
			return map[string]any{"allocationID": "eip-" + u.GetNamespace() + "-" + u.GetName(),
				"eipAddress": AlibabaEIPAddress(u.GetNamespace(), u.GetName()), "status": "InUse"}
		}},
		{alibabacloud.NLBGVK.GroupVersion().WithResource("nlbs"), func(u *unstructured.Unstructured) map[string]any {
			if id, _, _ := unstructured.NestedString(u.Object, "status", "loadBalancerId"); id != "" {
				return nil
			}
			zones, _, _ := unstructured.NestedSlice(u.Object, "spec", "zoneMappings")
			for _, z := range zones {
				if m, _ := z.(map[string]any); m == nil || m["allocationId"] == nil || m["allocationId"] == "" {
					return nil
				}
			}
			id := NLBID(u.GetNamespace(), u.GetName())
			return map[string]any{"loadBalancerId": id, "dnsName": NLBHostname(id), "loadBalancerStatus": "Active"}
		}},
	} {
		client := dyn.Resource(k.gvr)
		var pending sync.Map // object key -> true while an answer is on its way
		answer := func(obj any) {
			u, ok := obj.(*unstructured.Unstructured)
			if !ok || u.GetDeletionTimestamp() != nil {
				return
			}
			status := k.status(u)
			delay, fail := o.knobs()
			if status == nil || fail {
				return
			}
			key := u.GetNamespace() + "/" + u.GetName()
			if _, loaded := pending.LoadOrStore(key, true); loaded {
				return
			}
			go func() {
				defer pending.Delete(key)
				select {
				case <-ctx.Done():
					return
				case <-time.After(delay):
				}
				if err := writeStatus(ctx, client, u.GetNamespace(), u.GetName(), status); err == nil {
					o.mu.Lock()
					if o.answered == nil {
						o.answered = map[string]int{}
					}
					o.answered[u.GetKind()]++
					o.mu.Unlock()
				}
			}()
		}
		if _, err := factory.ForResource(k.gvr).Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc: answer, UpdateFunc: func(_, obj any) { answer(obj) },
		}); err != nil {
			return err
		}
	}
	factory.Start(ctx.Done())
	return nil
}

// writeStatus sets the object's status through the status subresource, read fresh.
func writeStatus(ctx context.Context, client dynamic.NamespaceableResourceInterface, ns, name string, status map[string]any) error {
	got, err := client.Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if got.GetDeletionTimestamp() != nil {
		return errors.New("being deleted")
	}
	got.Object["status"] = status
	if _, err := client.Namespace(ns).UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update %s/%s status: %w", ns, name, err)
	}
	return nil
}
