package kubernetes

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
)

// serviceCountQuotaResource is the object-count quota resource of Services, counted
// beside "services" by the API server's service evaluator.
const serviceCountQuotaResource corev1.ResourceName = "count/services"

// serviceQuotaResources are the quota resources the API server's service evaluator
// counts (k8s.io/kubernetes/pkg/quota/v1/evaluator/core/services.go): a ResourceQuota
// whose status.hard names none of them does not apply to Services.
var serviceQuotaResources = []corev1.ResourceName{
	serviceCountQuotaResource, corev1.ResourceServices, corev1.ResourceServicesNodePorts, corev1.ResourceServicesLoadBalancers,
}

// quotaListTimeout bounds how long checkServiceQuota waits for the ResourceQuota
// informer to sync. The manager starts that informer and waits for it before it reports
// ready (so the manager needs list and watch on resourcequotas: without them it never
// turns ready), and a List is then an in-memory read; the bound only matters for a client
// whose informer has not synced, where the cached client would otherwise wait out the
// plugin's whole deadline. Past it the create goes to the API server.
const quotaListTimeout = 250 * time.Millisecond

// QuotaConfirmInterval is how long an exceeded-quota refusal by the API server lets the
// NodePort plugin refuse the same namespace's Service creates from its cached ResourceQuota
// without sending them (checkServiceQuota): past it, the next create goes to the API server,
// whose answer is the truth and starts a new interval. A cache that went stale (its watch
// broke while room appeared) therefore refuses for at most this long; and since such a
// refusal is marked plugin.Error.FromCache, on which the network controller never closes a
// retry window, every window sees the API server's own answer before it closes. The cost is
// one create the API server refuses per quota, replica and interval, ~155 ms of its time
// (docs/benchmarks.md). 30 s is the 30 s of networkretry.PauseSlack: the lateness the
// manager already tolerates of its own retries under load.
const QuotaConfirmInterval = 30 * time.Second

// quotaConfirmations records, per namespace and ResourceQuota name, when the API server
// last refused one of this plugin's Service creates as exceeding that quota. A plugin
// instance (one per manager replica) has one; a nil one confirms nothing. Safe for
// concurrent use: a sync.Map, read without a lock on the admission path.
type quotaConfirmations struct {
	now func() time.Time
	at  sync.Map // "<namespace>/<quota>" -> time.Time
}

func newQuotaConfirmations(now func() time.Time) *quotaConfirmations {
	return &quotaConfirmations{now: now}
}

// confirmed reports whether the API server refused a Service create in namespace as
// exceeding quota within QuotaConfirmInterval.
func (q *quotaConfirmations) confirmed(namespace, quota string) bool {
	if q == nil {
		return false
	}
	v, ok := q.at.Load(namespace + "/" + quota)
	return ok && q.now().Sub(v.(time.Time)) < QuotaConfirmInterval
}

// record notes err, the error of a Service create or patch in namespace, when it is the API
// server's own exceeded-quota refusal (a Forbidden whose message holds "exceeded quota:
// <name>,", not one predicted from the cache), under that quota's name.
func (q *quotaConfirmations) record(namespace string, err error) {
	if q == nil || err == nil || plugin.AsError(err).FromCache || !apierrors.IsForbidden(err) {
		return
	}
	const marker = "exceeded quota: "
	msg := err.Error()
	i := strings.Index(msg, marker)
	if i < 0 {
		return
	}
	name, _, _ := strings.Cut(msg[i+len(marker):], ",")
	if name = strings.TrimSpace(name); name != "" {
		q.at.Store(namespace+"/"+name, q.now())
	}
}

// serviceCreateUsage returns what creating svc adds to the quota usage of its namespace,
// counted as the API server's service evaluator counts it (Usage), zero entries left out:
// services and count/services 1; services.nodeports the number of ports for type
// NodePort, and for type LoadBalancer too (only the ports with a node port set when
// allocateLoadBalancerNodePorts is false), which also takes services.loadbalancers 1.
// Quantities are plain counts (DecimalSI).
func serviceCreateUsage(svc *corev1.Service) corev1.ResourceList {
	one := func() resource.Quantity { return *resource.NewQuantity(1, resource.DecimalSI) }
	usage := corev1.ResourceList{serviceCountQuotaResource: one(), corev1.ResourceServices: one()}
	nodePorts := 0
	switch svc.Spec.Type {
	case corev1.ServiceTypeNodePort:
		nodePorts = len(svc.Spec.Ports)
	case corev1.ServiceTypeLoadBalancer:
		usage[corev1.ResourceServicesLoadBalancers] = one()
		nodePorts = len(svc.Spec.Ports)
		if svc.Spec.AllocateLoadBalancerNodePorts != nil && !*svc.Spec.AllocateLoadBalancerNodePorts {
			nodePorts = 0
			for _, p := range svc.Spec.Ports {
				if p.NodePort != 0 {
					nodePorts++
				}
			}
		}
	}
	if nodePorts > 0 {
		usage[corev1.ResourceServicesNodePorts] = *resource.NewQuantity(int64(nodePorts), resource.DecimalSI)
	}
	return usage
}

// checkServiceQuota checks, before svc is created, whether it fits the ResourceQuotas of
// its namespace as c (the manager's cached client) holds them, the way the API server's
// quota admission checks a create (k8s.io/apiserver/pkg/admission/plugin/resourcequota,
// CheckRequest), so that a create the API server would refuse is refused here without a
// call: the API server allocates a ClusterIP and node ports before its quota admission
// refuses a Service, ~155 ms of its time per refusal on 2 cores (docs/benchmarks.md).
//
// As in the API server, a quota applies when it has no scopes (scopes and scope
// selectors apply to pods only) and its status.hard names one of serviceQuotaResources;
// spec.hard is not read (the API server does not read it either: until the quota
// controller copies it into status.hard, a quota limits nothing). A resource is exceeded
// when status.used + serviceCreateUsage(svc) > status.hard. Quotas are taken in name
// order and the first with an exceeded resource refuses the create. The API server takes
// them in its informer's order, so with several exceeded quotas it may name another one.
//
// It returns nil when the create fits, and also, without refusing, when the quotas cannot
// be listed within quotaListTimeout (not synced, RBAC: logged at V(1)) or an applicable
// quota has no status.used for one of its Service resources (the API server answers that
// case with its own "status unknown for quota" error): the API server decides. Otherwise
// it returns the API server's refusal, a Forbidden *apierrors.StatusError with the API
// server's message, byte for byte:
//
//	services "<name>" is forbidden: exceeded quota: <quota>, requested: <resource>=<n>[,...], used: <resource>=<n>[,...], limited: <resource>=<n>[,...]
//
// with the exceeded resources sorted by name in each list; the caller wraps it as it
// wraps the API server's own (an APICallError), so a policy's CEL condition on the
// message matches both alike. The refusal is logged at V(1) with the quota's name.
//
// The cache can be stale: the quota admission raises status.used synchronously at each
// create, and the quota controller lowers it (and copies a changed spec.hard into
// status.hard) within seconds, so a stale quota shows at most the usage and limits of a
// moment ago. It can therefore only refuse a create when room has just appeared (a
// Service deleted, a limit raised): the pod is retried at its next interval, when the
// cache has caught up. A create the stale cache lets through goes to the API server,
// which decides as before.
func checkServiceQuota(ctx context.Context, c client.Reader, svc *corev1.Service, confirmed func(namespace, quota string) bool) error {
	log := ctrl.LoggerFrom(ctx).WithName("nodeport").V(1)
	listCtx, cancel := context.WithTimeout(ctx, quotaListTimeout)
	defer cancel()
	var quotas corev1.ResourceQuotaList
	if err := c.List(listCtx, &quotas, client.InNamespace(svc.Namespace)); err != nil {
		log.Info("ResourceQuotas not read from the cache; the API server checks the Service create", "service", klog.KObj(svc), "error", err.Error())
		return nil
	}
	items := slices.Clone(quotas.Items)
	slices.SortFunc(items, func(a, b corev1.ResourceQuota) int { return strings.Compare(a.Name, b.Name) })
	var applicable []*corev1.ResourceQuota
	for i := range items {
		q := &items[i]
		if len(q.Spec.Scopes) > 0 || (q.Spec.ScopeSelector != nil && len(q.Spec.ScopeSelector.MatchExpressions) > 0) {
			continue
		}
		limits := false
		for _, r := range serviceQuotaResources {
			if _, ok := q.Status.Hard[r]; !ok {
				continue
			}
			limits = true
			if _, ok := q.Status.Used[r]; !ok {
				log.Info("ResourceQuota has no usage yet; the API server checks the Service create", "service", klog.KObj(svc), "quota", q.Name)
				return nil
			}
		}
		if limits {
			applicable = append(applicable, q)
		}
	}
	requested := serviceCreateUsage(svc)
	for _, q := range applicable {
		var names []string
		for r, req := range requested {
			hard, ok := q.Status.Hard[r]
			if !ok {
				continue
			}
			total := q.Status.Used[r].DeepCopy()
			total.Add(req)
			if total.Cmp(hard) > 0 {
				names = append(names, string(r))
			}
		}
		if len(names) == 0 {
			continue
		}
		if confirmed == nil || !confirmed(svc.Namespace, q.Name) {
			log.Info("The cached ResourceQuota would refuse the Service create, but the API server has not refused one recently; it decides",
				"service", klog.KObj(svc), "quota", q.Name, "confirmInterval", QuotaConfirmInterval)
			return nil
		}
		slices.Sort(names)
		log.Info("Service create refused from the cached ResourceQuota", "service", klog.KObj(svc), "quota", q.Name)
		forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "services"}, svc.Name,
			fmt.Errorf("exceeded quota: %s, requested: %s, used: %s, limited: %s",
				q.Name, quotaList(names, requested), quotaList(names, q.Status.Used), quotaList(names, q.Status.Hard)))
		return &plugin.Error{Type: plugin.APICallError, Message: fmt.Sprintf("create or patch Service %s/%s", svc.Namespace, svc.Name),
			Err: forbidden, FromCache: true}
	}
	return nil
}

// quotaList formats the named entries of l as the API server's quota admission does
// (prettyPrint): "<name>=<quantity>" joined with ",", in the order of names (sorted by
// the caller).
func quotaList(names []string, l corev1.ResourceList) string {
	parts := make([]string, 0, len(names))
	for _, n := range names {
		q := l[corev1.ResourceName(n)]
		parts = append(parts, n+"="+q.String())
	}
	return strings.Join(parts, ",")
}
