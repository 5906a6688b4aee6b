package kubernetes

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
)

// quotaBuilder builds ResourceQuotas of namespace "game" as the quota controller leaves
// them: status.hard a copy of spec.hard, status.used computed.
type quotaBuilder struct{ q *corev1.ResourceQuota }

func newQuota(name string) *quotaBuilder {
	return &quotaBuilder{q: &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "game"}}}
}

// limit sets spec.hard, status.hard and status.used of resource r.
func (b *quotaBuilder) limit(r corev1.ResourceName, hard, used int64) *quotaBuilder {
	return b.specHard(r, hard).statusHard(r, hard).used(r, used)
}

func (b *quotaBuilder) specHard(r corev1.ResourceName, n int64) *quotaBuilder {
	if b.q.Spec.Hard == nil {
		b.q.Spec.Hard = corev1.ResourceList{}
	}
	b.q.Spec.Hard[r] = *resource.NewQuantity(n, resource.DecimalSI)
	return b
}

func (b *quotaBuilder) statusHard(r corev1.ResourceName, n int64) *quotaBuilder {
	if b.q.Status.Hard == nil {
		b.q.Status.Hard = corev1.ResourceList{}
	}
	b.q.Status.Hard[r] = *resource.NewQuantity(n, resource.DecimalSI)
	return b
}

func (b *quotaBuilder) used(r corev1.ResourceName, n int64) *quotaBuilder {
	if b.q.Status.Used == nil {
		b.q.Status.Used = corev1.ResourceList{}
	}
	b.q.Status.Used[r] = *resource.NewQuantity(n, resource.DecimalSI)
	return b
}

func (b *quotaBuilder) scopes(s ...corev1.ResourceQuotaScope) *quotaBuilder {
	b.q.Spec.Scopes = s
	return b
}

func (b *quotaBuilder) scopeSelector(op corev1.ScopeSelectorOperator, scope corev1.ResourceQuotaScope, values ...string) *quotaBuilder {
	b.q.Spec.ScopeSelector = &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{
		{ScopeName: scope, Operator: op, Values: values},
	}}
	return b
}

func (b *quotaBuilder) obj() *corev1.ResourceQuota { return b.q.DeepCopy() }

// quotaCalls counts what the plugin asked of the API: Service creates and patches, and
// ResourceQuota lists.
type quotaCalls struct{ creates, patches, lists atomic.Int32 }

// quotaClient is a fake client holding objs that counts into calls. Every ResourceQuota
// list fails with listFails; with listBlocks, it waits for its context to end, as the
// cached client's List does while the informer has not synced.
func quotaClient(calls *quotaCalls, listFails, listBlocks bool, objs ...client.Object) client.Client {
	return fake.NewClientBuilder().WithObjects(objs...).WithStatusSubresource(&corev1.ResourceQuota{}).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if _, ok := obj.(*corev1.Service); ok {
				calls.creates.Add(1)
			}
			return c.Create(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if _, ok := obj.(*corev1.Service); ok {
				calls.patches.Add(1)
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*corev1.ResourceQuotaList); ok {
				calls.lists.Add(1)
				if listFails {
					return errors.New("resourcequotas is forbidden: cannot list")
				}
				if listBlocks {
					<-ctx.Done()
					return apierrors.NewTimeoutError("failed waiting for *v1.ResourceQuota Informer to sync", 0)
				}
			}
			return c.List(ctx, list, opts...)
		},
	}).Build()
}

// TestNodePortQuotaPrecheck: a Service create that the namespace's ResourceQuotas (as the
// cache holds them) cannot fit is refused without a create call, while the API server has
// refused one for that quota recently (every quota here is), with the API server's
// exceeded-quota error wrapped as the API server's refusal is and marked FromCache; anything
// else is created or patched as before.
func TestNodePortQuotaPrecheck(t *testing.T) {
	const wrapped = "apiCallError: create or patch Service game/gs-0: "
	onePort, twoPorts := "7777/UDP", "7777/UDP,7778/TCP"
	// An existing Service of the pod whose ports differ from the pod's: it is patched.
	existing := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "gs-0", Namespace: "game", Annotations: map[string]string{AnnotationServiceHash: "old"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "gs-0", UID: "u0", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: map[string]string{SelectorPodNameLabel: "gs-0"},
			Ports: []corev1.ServicePort{{Name: "7000", Port: 7000, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(7000), NodePort: 30000}}},
	}
	cases := map[string]struct {
		ports      string
		objs       []client.Object
		listFails  bool
		listBlocks bool
		// wantMsg is the whole error message ("" = no error).
		wantMsg     string
		wantCreates int32
		wantPatches int32
		wantLists   int32
	}{
		"no quota: created": {
			ports: onePort, wantCreates: 1, wantLists: 1,
		},
		"services.nodeports hard 0: refused in the API server's words": {
			ports: onePort, objs: []client.Object{newQuota("nodeports").limit(corev1.ResourceServicesNodePorts, 0, 0).obj()},
			wantMsg:   wrapped + `services "gs-0" is forbidden: exceeded quota: nodeports, requested: services.nodeports=1, used: services.nodeports=0, limited: services.nodeports=0`,
			wantLists: 1,
		},
		"services.nodeports hard 2 used 1, two ports: refused": {
			ports: twoPorts, objs: []client.Object{newQuota("nodeports").limit(corev1.ResourceServicesNodePorts, 2, 1).obj()},
			wantMsg:   wrapped + `services "gs-0" is forbidden: exceeded quota: nodeports, requested: services.nodeports=2, used: services.nodeports=1, limited: services.nodeports=2`,
			wantLists: 1,
		},
		"services.nodeports hard 2 used 0, two ports: created": {
			ports: twoPorts, objs: []client.Object{newQuota("nodeports").limit(corev1.ResourceServicesNodePorts, 2, 0).obj()},
			wantCreates: 1, wantLists: 1,
		},
		"services hard 1 used 1: refused": {
			ports: onePort, objs: []client.Object{newQuota("objects").limit(corev1.ResourceServices, 1, 1).limit(corev1.ResourcePods, 10, 0).obj()},
			wantMsg:   wrapped + `services "gs-0" is forbidden: exceeded quota: objects, requested: services=1, used: services=1, limited: services=1`,
			wantLists: 1,
		},
		"several resources exceeded: joined by resource name, only the exceeded ones": {
			ports: twoPorts, objs: []client.Object{newQuota("all").
				limit(corev1.ResourceServicesNodePorts, 3, 2).limit(corev1.ResourceServices, 5, 5).
				limit(serviceCountQuotaResource, 5, 5).limit(corev1.ResourceServicesLoadBalancers, 0, 0).obj()},
			wantMsg: wrapped + `services "gs-0" is forbidden: exceeded quota: all, requested: count/services=1,services=1,services.nodeports=2, ` +
				`used: count/services=5,services=5,services.nodeports=2, limited: count/services=5,services=5,services.nodeports=3`,
			wantLists: 1,
		},
		"two quotas exceeded: the first by name": {
			ports: onePort, objs: []client.Object{
				newQuota("b-nodeports").limit(corev1.ResourceServicesNodePorts, 0, 0).obj(),
				newQuota("a-services").limit(corev1.ResourceServices, 3, 3).obj(),
				newQuota("0-roomy").limit(corev1.ResourceServices, 10, 3).obj(),
			},
			wantMsg:   wrapped + `services "gs-0" is forbidden: exceeded quota: a-services, requested: services=1, used: services=3, limited: services=3`,
			wantLists: 1,
		},
		"quota limiting only services.loadbalancers: created": {
			ports: onePort, objs: []client.Object{newQuota("lb").limit(corev1.ResourceServicesLoadBalancers, 0, 0).obj()},
			wantCreates: 1, wantLists: 1,
		},
		"scoped quota ignored (scopes apply to pods only)": {
			ports: onePort, objs: []client.Object{newQuota("scoped").limit(corev1.ResourceServicesNodePorts, 0, 0).scopes(corev1.ResourceQuotaScopeBestEffort).obj()},
			wantCreates: 1, wantLists: 1,
		},
		"quota with a scope selector ignored": {
			ports: onePort, objs: []client.Object{newQuota("selected").limit(corev1.ResourceServices, 0, 0).
				scopeSelector(corev1.ScopeSelectorOpIn, corev1.ResourceQuotaScopePriorityClass, "high").obj()},
			wantCreates: 1, wantLists: 1,
		},
		"spec.hard not yet in status.hard: created (the API server does not enforce it yet either)": {
			ports: onePort, objs: []client.Object{newQuota("fresh").specHard(corev1.ResourceServicesNodePorts, 0).obj()},
			wantCreates: 1, wantLists: 1,
		},
		"status.used not computed yet: left to the API server": {
			ports: onePort, objs: []client.Object{newQuota("fresh").specHard(corev1.ResourceServicesNodePorts, 0).statusHard(corev1.ResourceServicesNodePorts, 0).obj()},
			wantCreates: 1, wantLists: 1,
		},
		"list fails: falls through to the create": {
			ports: onePort, listFails: true, objs: []client.Object{newQuota("nodeports").limit(corev1.ResourceServicesNodePorts, 0, 0).obj()},
			wantCreates: 1, wantLists: 1,
		},
		"informer not synced: falls through to the create after quotaListTimeout": {
			ports: onePort, listBlocks: true, objs: []client.Object{newQuota("nodeports").limit(corev1.ResourceServicesNodePorts, 0, 0).obj()},
			wantCreates: 1, wantLists: 1,
		},
		"existing Service patched: never prechecked": {
			ports: onePort, objs: []client.Object{existing, newQuota("nodeports").limit(corev1.ResourceServicesNodePorts, 1, 1).limit(corev1.ResourceServices, 1, 1).obj()},
			wantPatches: 1,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			calls := &quotaCalls{}
			c := quotaClient(calls, tc.listFails, tc.listBlocks, tc.objs...)
			pod := newPod("gs-0", NodePortName, param("PortProtocols", tc.ports)).uid("u0").node("n1").ip("10.0.0.9").obj()
			n := NewNodePort()
			for _, o := range tc.objs {
				if q, ok := o.(*corev1.ResourceQuota); ok {
					n.quota.at.Store("game/"+q.Name, time.Now())
				}
			}
			_, err := n.OnPodUpdated(context.Background(), c, pod)
			if tc.wantMsg == "" {
				wantError(t, err, "", "", false)
				svc := getService(t, c, "gs-0")
				if got := len(svc.Spec.Ports); got != len(strings.Split(tc.ports, ",")) {
					t.Errorf("service has %d ports, want %d", got, len(strings.Split(tc.ports, ",")))
				}
			} else {
				wantError(t, err, plugin.APICallError, "", false)
				if !plugin.AsError(err).FromCache {
					t.Error("a refusal predicted from the cache is not marked FromCache")
				}
				if diff := cmp.Diff(tc.wantMsg, err.Error()); diff != "" {
					t.Errorf("error message (-want,+got):\n%s", diff)
				}
				var status *apierrors.StatusError
				if !errors.As(err, &status) || !apierrors.IsForbidden(err) || status.ErrStatus.Details == nil ||
					status.ErrStatus.Details.Kind != "services" || status.ErrStatus.Details.Name != "gs-0" {
					t.Errorf("cause = %#v, want a Forbidden StatusError for services gs-0 as the API server returns", errors.Unwrap(err))
				}
				if err := c.Get(context.Background(), client.ObjectKey{Namespace: "game", Name: "gs-0"}, &corev1.Service{}); !apierrors.IsNotFound(err) {
					t.Errorf("get refused service: %v, want NotFound", err)
				}
			}
			got := [3]int32{calls.creates.Load(), calls.patches.Load(), calls.lists.Load()}
			if want := [3]int32{tc.wantCreates, tc.wantPatches, tc.wantLists}; got != want {
				t.Errorf("service creates, service patches, quota lists = %v, want %v", got, want)
			}
		})
	}
}

// TestServiceCreateUsage: what a Service create adds to a namespace's quota usage, as the
// API server's service evaluator counts it.
func TestServiceCreateUsage(t *testing.T) {
	ports := []corev1.ServicePort{{Port: 1}, {Port: 2, NodePort: 30002}, {Port: 3}}
	q := func(n int64) resource.Quantity { return *resource.NewQuantity(n, resource.DecimalSI) }
	cases := map[string]struct {
		spec corev1.ServiceSpec
		want corev1.ResourceList
	}{
		"NodePort: a node port per port": {
			spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: ports},
			want: corev1.ResourceList{serviceCountQuotaResource: q(1), corev1.ResourceServices: q(1), corev1.ResourceServicesNodePorts: q(3)},
		},
		"ClusterIP: no node port": {
			spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Ports: ports},
			want: corev1.ResourceList{serviceCountQuotaResource: q(1), corev1.ResourceServices: q(1)},
		},
		"LoadBalancer: a load balancer and a node port per port": {
			spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: ports},
			want: corev1.ResourceList{serviceCountQuotaResource: q(1), corev1.ResourceServices: q(1), corev1.ResourceServicesNodePorts: q(3),
				corev1.ResourceServicesLoadBalancers: q(1)},
		},
		"LoadBalancer without node port allocation: only the node ports set": {
			spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: ports, AllocateLoadBalancerNodePorts: ptr.To(false)},
			want: corev1.ResourceList{serviceCountQuotaResource: q(1), corev1.ResourceServices: q(1), corev1.ResourceServicesNodePorts: q(1),
				corev1.ResourceServicesLoadBalancers: q(1)},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := serviceCreateUsage(&corev1.Service{Spec: tc.spec})
			if !equality.Semantic.DeepEqual(tc.want, got) {
				t.Errorf("usage = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestCachedQuotaRefusalNeedsTheAPIServer: the cache refuses a Service create only while the
// API server itself refused one for the same quota within QuotaConfirmInterval. The first
// create goes to the API server, whose refusal is not FromCache; the next ones are refused
// from the cache (FromCache, no create sent); once the interval has passed since the API
// server's refusal, the create goes to it again; and when the API server lets it through
// (the cache was stale: room appeared), the Service is created.
func TestCachedQuotaRefusalNeedsTheAPIServer(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	n := &NodePort{quota: newQuotaConfirmations(func() time.Time { return now })}
	var creates atomic.Int32
	apiRefuses := true
	c := fake.NewClientBuilder().WithObjects(newQuota("nodeports").limit(corev1.ResourceServicesNodePorts, 0, 0).obj()).
		WithInterceptorFuncs(interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				if _, ok := obj.(*corev1.Service); !ok {
					return c.Create(ctx, obj, opts...)
				}
				creates.Add(1)
				if apiRefuses {
					return apierrors.NewForbidden(corev1.Resource("services"), obj.GetName(), errors.New(
						"exceeded quota: nodeports, requested: services.nodeports=1, used: services.nodeports=0, limited: services.nodeports=0"))
				}
				return c.Create(ctx, obj, opts...)
			},
		}).Build()
	pod := newPod("gs-0", NodePortName, param("PortProtocols", "7777/UDP")).uid("u0").node("n1").ip("10.0.0.9").obj()
	attempt := func(wantCreates int32, wantFromCache, wantErr bool) {
		t.Helper()
		_, err := n.OnPodUpdated(context.Background(), c, pod.DeepCopy())
		perr := plugin.AsError(err)
		if (perr != nil) != wantErr {
			t.Fatalf("error = %v, want an error %t", err, wantErr)
		}
		if perr != nil && perr.FromCache != wantFromCache {
			t.Errorf("FromCache = %t, want %t (%v)", perr.FromCache, wantFromCache, err)
		}
		if got := creates.Load(); got != wantCreates {
			t.Errorf("creates sent = %d, want %d", got, wantCreates)
		}
	}
	attempt(1, false, true) // nothing confirmed: the API server answers
	now = now.Add(10 * time.Second)
	attempt(1, true, true) // confirmed 10 s ago: refused from the cache
	now = now.Add(QuotaConfirmInterval)
	attempt(2, false, true) // the confirmation is too old: the API server again
	now = now.Add(time.Second)
	attempt(2, true, true)
	// The run that may close a window after a predicted refusal: the API server answers,
	// however fresh the confirmation.
	if _, err := n.OnPodUpdated(plugin.WithoutPrediction(context.Background()), c, pod.DeepCopy()); plugin.AsError(err) == nil || plugin.AsError(err).FromCache || creates.Load() != 3 {
		t.Errorf("without prediction: error %v, creates %d; want the API server's refusal (3 creates)", err, creates.Load())
	}
	apiRefuses = false // the cache is stale: room has appeared
	now = now.Add(QuotaConfirmInterval)
	attempt(4, false, false)
}
