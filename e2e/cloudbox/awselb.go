package cloudbox

import (
	"context"
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/aws"
)

// AWSELB is the box's stand-in for the two controllers AmazonWebServices-NLB relies on, doing
// what they do for it (ACK's elbv2 controller, aws-controllers-k8s/elbv2-controller: its
// TargetGroup and Listener resources and ACK's status conventions, ackResourceMetadata.arn and
// the ACK.ResourceSynced, ACK.Recoverable conditions; the AWS Load Balancer Controller,
// kubernetes-sigs/aws-load-balancer-controller: TargetGroupBinding, whose status holds only
// observedGeneration):
//   - a TargetGroup is created in the box's AWS: ACK writes AWS's defaults into its spec
//     (ipAddressType), and its status gets the target group's ARN
//     ("arn:aws:elasticloadbalancing:<region>:<account>:targetgroup/<spec.name>/<id>", region
//     and account those of the NLB its aws-load-balancer-nlb-arn annotation names) and
//     ACK.ResourceSynced True;
//   - a Listener is created on its NLB (spec.loadBalancerARN; AWS's forwardConfig written into
//     its default actions) unless the NLB has its quota of
//     listeners already (SetMaxListeners; AWS's is 50): then ACK.Recoverable True with AWS's
//     TooManyListeners message and ACK.ResourceSynced False, tried again within 5 s (a resync);
//     a Listener deleted frees its place;
//   - a TargetGroupBinding is reconciled: status.observedGeneration is its generation.
//
// Told to fail, it leaves TargetGroups and Listeners not created, with ACK.Recoverable True
// and the box's message; bindings are still reconciled. Safe for concurrent use; change its
// knobs while it runs.
type AWSELB struct {
	Knobs
	maxListeners int
	listeners    map[string]map[string]bool // NLB ARN -> the "<namespace>/<name>" of its listeners
}

// SetMaxListeners sets the listeners one NLB may have (AWS's quota); 0, the default, is
// AWS's 50.
func (e *AWSELB) SetMaxListeners(n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.maxListeners = n
}

// The identities the stand-in writes with, where the controllers' charts install them: ACK's
// elbv2 controller (the ServiceAccount ack-elbv2-controller of ack-system) and the AWS Load
// Balancer Controller (aws-load-balancer-controller of kube-system).
const (
	ACKNamespace      = "ack-system"
	ACKServiceAccount = "ack-elbv2-controller"
	LBCNamespace      = "kube-system"
	LBCServiceAccount = "aws-load-balancer-controller"
)

// gvr is the resource of one of the plugin's kinds.
func gvr(gvk schema.GroupVersionKind, plural string) schema.GroupVersionResource {
	return gvk.GroupVersion().WithResource(plural)
}

// StartAWSELB runs e until ctx ends, as ACK's and the Load Balancer Controller's
// ServiceAccounts with the rights to read their kinds and write their status, which it
// creates through admin (a cluster admin's config), with the namespace. The CRDs of
// TargetGroup, Listener and TargetGroupBinding (testdata/crds) must be installed. Errors come
// from the API server and from building the clients.
func StartAWSELB(ctx context.Context, admin *rest.Config, e *AWSELB) error {
	acs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return err
	}
	if _, err := acs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ACKNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", ACKNamespace, err)
	}
	ackCfg, err := asServiceAccount(ctx, admin, ACKNamespace, ACKServiceAccount, rbacv1.PolicyRule{APIGroups: []string{aws.TargetGroupGVK.Group},
		Resources: []string{"targetgroups", "targetgroups/status", "listeners", "listeners/status"}, Verbs: []string{"get", "list", "watch", "update"}})
	if err != nil {
		return err
	}
	lbcCfg, err := asServiceAccount(ctx, admin, LBCNamespace, LBCServiceAccount, rbacv1.PolicyRule{APIGroups: []string{aws.TargetGroupBindingGVK.Group},
		Resources: []string{"targetgroupbindings", "targetgroupbindings/status"}, Verbs: []string{"get", "list", "watch", "update"}})
	if err != nil {
		return err
	}
	ack, err := dynamic.NewForConfig(ackCfg)
	if err != nil {
		return err
	}
	lbc, err := dynamic.NewForConfig(lbcCfg)
	if err != nil {
		return err
	}
	tgs := ack.Resource(gvr(aws.TargetGroupGVK, "targetgroups"))
	listeners := ack.Resource(gvr(aws.ListenerGVK, "listeners"))
	bindings := lbc.Resource(gvr(aws.TargetGroupBindingGVK, "targetgroupbindings"))
	ackInformers := dynamicinformer.NewDynamicSharedInformerFactory(ack, 5*time.Second)
	lbcInformers := dynamicinformer.NewDynamicSharedInformerFactory(lbc, 5*time.Second)
	on := func(inf toolscache.SharedIndexInformer, fn func(*unstructured.Unstructured), gone func(*unstructured.Unstructured)) error {
		_, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { e.later(ctx, obj, fn) },
			UpdateFunc: func(_, obj any) { e.later(ctx, obj, fn) },
			DeleteFunc: func(obj any) {
				if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
					obj = d.Obj
				}
				if u, ok := obj.(*unstructured.Unstructured); ok && gone != nil {
					gone(u)
				}
			},
		})
		return err
	}
	if err := on(ackInformers.ForResource(gvr(aws.TargetGroupGVK, "targetgroups")).Informer(), func(u *unstructured.Unstructured) { e.syncTargetGroup(ctx, tgs, u) }, nil); err != nil {
		return err
	}
	if err := on(ackInformers.ForResource(gvr(aws.ListenerGVK, "listeners")).Informer(), func(u *unstructured.Unstructured) { e.syncListener(ctx, listeners, u) }, e.listenerGone); err != nil {
		return err
	}
	if err := on(lbcInformers.ForResource(gvr(aws.TargetGroupBindingGVK, "targetgroupbindings")).Informer(), func(u *unstructured.Unstructured) { reconcileBinding(ctx, bindings, u) }, nil); err != nil {
		return err
	}
	ackInformers.Start(ctx.Done())
	lbcInformers.Start(ctx.Done())
	return nil
}

// later runs fn on obj after the box's delay.
func (e *AWSELB) later(ctx context.Context, obj any, fn func(*unstructured.Unstructured)) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || u.GetDeletionTimestamp() != nil {
		return
	}
	delay, _ := e.knobs()
	go func() {
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		fn(u.DeepCopy())
	}()
}

// arnParts returns the region and account of an ARN, and its resource.
func arnParts(arn string) (region, account, resource string) {
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) != 6 {
		return "us-east-1", "000000000000", ""
	}
	return parts[3], parts[4], parts[5]
}

// shortID is the 16 hex digits AWS puts at the end of an ARN, here a hash of key.
func shortID(key string) string {
	h := fnv.New64a()
	h.Write([]byte(key))
	return fmt.Sprintf("%016x", h.Sum64())
}

// synced sets u's status as ACK does for a resource it created in AWS.
func synced(u *unstructured.Unstructured, arn, region, account string) {
	u.Object["status"] = map[string]any{
		"ackResourceMetadata": map[string]any{"arn": arn, "ownerAccountID": account, "region": region},
		"conditions":          []any{map[string]any{"type": aws.ConditionResourceSynced, "status": "True"}},
	}
}

// refused sets u's status as ACK does for a call AWS refused, which it retries.
func refused(u *unstructured.Unstructured, message string) {
	u.Object["status"] = map[string]any{"conditions": []any{
		map[string]any{"type": aws.ConditionRecoverable, "status": "True", "message": message},
		map[string]any{"type": aws.ConditionResourceSynced, "status": "False"},
	}}
}

// answered reports whether u already has ACK's answer: an ARN.
func answered(u *unstructured.Unstructured) bool {
	arn, _, _ := unstructured.NestedString(u.Object, "status", "ackResourceMetadata", "arn")
	return arn != ""
}

const boxRefuses = "the box's ELB API refuses every call"

func (e *AWSELB) syncTargetGroup(ctx context.Context, r dynamic.NamespaceableResourceInterface, u *unstructured.Unstructured) {
	if answered(u) {
		return
	}
	if _, fail := e.knobs(); fail {
		refused(u, boxRefuses)
	} else {
		// ACK writes what AWS returns into the spec: the fields AWS defaults.
		_ = unstructured.SetNestedField(u.Object, "ipv4", "spec", "ipAddressType")
		if w, err := r.Namespace(u.GetNamespace()).Update(ctx, u, metav1.UpdateOptions{}); err == nil {
			u = w
		}
		region, account, _ := arnParts(u.GetAnnotations()[aws.AnnotationNLBARN])
		name, _, _ := unstructured.NestedString(u.Object, "spec", "name")
		synced(u, fmt.Sprintf("arn:aws:elasticloadbalancing:%s:%s:targetgroup/%s/%s", region, account, name, shortID(string(u.GetUID()))), region, account)
	}
	_, _ = r.Namespace(u.GetNamespace()).UpdateStatus(ctx, u, metav1.UpdateOptions{})
}

func (e *AWSELB) syncListener(ctx context.Context, r dynamic.NamespaceableResourceInterface, u *unstructured.Unstructured) {
	if answered(u) {
		return
	}
	nlb, _, _ := unstructured.NestedString(u.Object, "spec", "loadBalancerARN")
	key := u.GetNamespace() + "/" + u.GetName()
	region, account, resource := arnParts(nlb)
	e.mu.Lock()
	quota := e.maxListeners
	if quota == 0 {
		quota = 50
	}
	if e.listeners == nil {
		e.listeners = map[string]map[string]bool{}
	}
	if e.listeners[nlb] == nil {
		e.listeners[nlb] = map[string]bool{}
	}
	room := e.listeners[nlb][key] || len(e.listeners[nlb]) < quota
	if room && !e.fail {
		e.listeners[nlb][key] = true
	}
	fail := e.fail
	e.mu.Unlock()
	switch {
	case fail:
		refused(u, boxRefuses)
	case !room:
		refused(u, fmt.Sprintf("TooManyListeners: You've reached the limit on the number of listeners per load balancer (%d)", quota))
	default:
		// ACK writes AWS's default actions back into the spec, each with its forwardConfig.
		if actions, found, _ := unstructured.NestedSlice(u.Object, "spec", "defaultActions"); found {
			for _, a := range actions {
				if action, ok := a.(map[string]any); ok {
					action["forwardConfig"] = map[string]any{"targetGroups": []any{map[string]any{"targetGroupARN": action["targetGroupARN"], "weight": int64(1)}}}
				}
			}
			_ = unstructured.SetNestedSlice(u.Object, actions, "spec", "defaultActions")
			if w, err := r.Namespace(u.GetNamespace()).Update(ctx, u, metav1.UpdateOptions{}); err == nil {
				u = w
			}
		}
		synced(u, fmt.Sprintf("arn:aws:elasticloadbalancing:%s:%s:%s/%s", region, account, strings.Replace(resource, "loadbalancer/", "listener/", 1), shortID(key)), region, account)
	}
	_, _ = r.Namespace(u.GetNamespace()).UpdateStatus(ctx, u, metav1.UpdateOptions{})
}

// listenerGone frees the place of a deleted Listener on its NLB.
func (e *AWSELB) listenerGone(u *unstructured.Unstructured) {
	nlb, _, _ := unstructured.NestedString(u.Object, "spec", "loadBalancerARN")
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.listeners[nlb], u.GetNamespace()+"/"+u.GetName())
}

// reconcileBinding is the Load Balancer Controller's answer: status.observedGeneration.
func reconcileBinding(ctx context.Context, r dynamic.NamespaceableResourceInterface, u *unstructured.Unstructured) {
	if gen, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration"); gen == u.GetGeneration() {
		return
	}
	_ = unstructured.SetNestedField(u.Object, u.GetGeneration(), "status", "observedGeneration")
	_, _ = r.Namespace(u.GetNamespace()).UpdateStatus(ctx, u, metav1.UpdateOptions{})
}
