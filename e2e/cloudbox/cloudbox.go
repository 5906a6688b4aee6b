// Package cloudbox is a cloud in a box for tests and `make run`: Kubernetes' own service
// controller (k8s.io/cloud-provider/controllers/service, the code every cloud controller
// manager runs) in this process, against a cluster's API server, with a load-balancer cloud
// built on k8s.io/cloud-provider/fake that fails on demand. It reconciles Services of type
// LoadBalancer (without a loadBalancerClass, as the stock controller does; and of Alibaba's
// NLB class, through a small status writer of its own) into status.loadBalancer.ingress, and reports failures as the real ones do: a Warning Event
// SyncLoadBalancerFailed on the Service and no ingress.
//
// The cloud gives each load balancer id (read from one of a list of annotations, the
// providers' LB-id keys, or made up for a Service that asks the cloud to create one) its own
// address, counts its listeners (Service ports) against a
// quota per id, can delay every call (or those of one id), and can fail every call with an error or a
// RetryError, each switched on and off while the test runs. Nothing leaves the process: no
// address it reports is reachable.
package cloudbox

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/api"
	servicecontroller "k8s.io/cloud-provider/controllers/service"
	"k8s.io/cloud-provider/fake"
	"k8s.io/component-base/featuregate"
	controllersmetrics "k8s.io/component-base/metrics/prometheus/controllers"
)

// Cloud is the box's cloud provider: fake.Cloud for everything but load balancers, which
// it implements itself (cloudprovider.LoadBalancer). Safe for concurrent use; change its
// knobs through the methods while the controller runs.
type Cloud struct {
	*fake.Cloud

	// IDAnnotations are the Service annotations that name a load balancer id, tried in
	// order (e.g. Alibaba's, Huawei's, Volcengine's, JD Cloud's LB-id keys).
	IDAnnotations []string
	// IDLabel, when set, is the label a real cloud controller puts on a Service it manages,
	// with the load balancer id (Alibaba's service.k8s.alibaba/loadbalancer-id, which OKG's
	// SLB and NLB count ports by at start): the box adds it once the load balancer is
	// ensured.
	IDLabel string
	// AutoCreate maps an annotation that asks the cloud to create a load balancer for the
	// Service (CCE's kubernetes.io/elb.autocreate) to the annotation the cloud then writes
	// the new load balancer's id in (kubernetes.io/elb.id). A Service with the first and
	// none of IDAnnotations gets a load balancer of its own, id "auto-<namespace>-<name>",
	// which the box writes back once the load balancer is ensured, as CCE does.
	AutoCreate map[string]string

	mu        sync.Mutex
	quota     map[string]int            // LB id -> listener quota (0: none)
	delay     time.Duration             // every load-balancer call sleeps this long
	delays    map[string]time.Duration  // LB id -> what a call for it sleeps beside delay
	err       error                     // every Ensure fails with it when set
	listeners map[string]map[string]int // LB id -> Service key -> listeners
	addrs     map[string]string         // LB id -> address
	changed   func()                    // Forward's: the listeners changed (nil: no Forward)
}

var _ cloudprovider.LoadBalancer = (*Cloud)(nil)

// New returns a Cloud reading load balancer ids from idAnnotations.
func New(idAnnotations ...string) *Cloud {
	return &Cloud{Cloud: &fake.Cloud{ExternalIP: net.ParseIP("198.51.100.1")}, IDAnnotations: idAnnotations,
		quota: map[string]int{}, delays: map[string]time.Duration{}, listeners: map[string]map[string]int{}, addrs: map[string]string{}}
}

// LoadBalancer returns c itself.
func (c *Cloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return c, true }

// SetQuota sets load balancer id's listener quota; 0 removes it.
func (c *Cloud) SetQuota(id string, listeners int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.quota[id] = listeners
}

// SetDelay makes every load-balancer call take d.
func (c *Cloud) SetDelay(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.delay = d
}

// SetDelayFor makes every load-balancer call for load balancer id take d more than SetDelay's
// (a cloud slow for one load balancer: a worker of the service controller waits that long,
// the others go on); 0 removes it.
func (c *Cloud) SetDelayFor(id string, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.delays[id] = d
}

// SetError makes every Ensure fail with err (nil: succeed). An api.RetryError makes the
// controller try again after exactly its delay, as a real cloud says "still provisioning".
func (c *Cloud) SetError(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.err = err
}

// Address returns the address of load balancer id (198.51.100.<n>, n by first use, from
// 10; TEST-NET-2, never routed).
func (c *Cloud) Address(id string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.addressLocked(id)
}

func (c *Cloud) addressLocked(id string) string {
	if a, ok := c.addrs[id]; ok {
		return a
	}
	a := fmt.Sprintf("198.51.100.%d", 10+len(c.addrs))
	c.addrs[id] = a
	return a
}

// id returns svc's load balancer id.
func (c *Cloud) id(svc *corev1.Service) string {
	for _, k := range c.IDAnnotations {
		if v := svc.Annotations[k]; v != "" {
			return v
		}
	}
	if _, ok := c.autoCreated(svc); ok {
		return "auto-" + svc.Namespace + "-" + svc.Name
	}
	return ""
}

// autoCreated returns the annotation the cloud writes svc's new load balancer id in, when
// svc asks for one to be created (AutoCreate).
func (c *Cloud) autoCreated(svc *corev1.Service) (string, bool) {
	for ask, idKey := range c.AutoCreate {
		if svc.Annotations[ask] != "" && svc.Annotations[idKey] == "" {
			return idKey, true
		}
	}
	return "", false
}

// wait sleeps the delay of a call for svc (nil: of any load balancer).
func (c *Cloud) wait(svc *corev1.Service) {
	c.mu.Lock()
	d := c.delay
	if svc != nil {
		d += c.delays[c.id(svc)]
	}
	c.mu.Unlock()
	time.Sleep(d)
}

// GetLoadBalancer reports whether svc has listeners on its load balancer.
func (c *Cloud) GetLoadBalancer(_ context.Context, _ string, svc *corev1.Service) (*corev1.LoadBalancerStatus, bool, error) {
	c.wait(svc)
	c.mu.Lock()
	defer c.mu.Unlock()
	id := c.id(svc)
	if _, ok := c.listeners[id][svc.Namespace+"/"+svc.Name]; !ok {
		return nil, false, nil
	}
	return &corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: c.addressLocked(id)}}}, true, nil
}

// GetLoadBalancerName returns "<id>/<namespace>/<name>".
func (c *Cloud) GetLoadBalancerName(_ context.Context, _ string, svc *corev1.Service) string {
	return c.id(svc) + "/" + svc.Namespace + "/" + svc.Name
}

// EnsureLoadBalancer puts svc's ports on its load balancer, within the quota: beyond it the
// error is the cloud's quota message, which the controller records in a
// SyncLoadBalancerFailed Event.
func (c *Cloud) EnsureLoadBalancer(_ context.Context, _ string, svc *corev1.Service, _ []*corev1.Node) (*corev1.LoadBalancerStatus, error) {
	c.wait(svc)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return nil, c.err
	}
	id := c.id(svc)
	if id == "" {
		return nil, fmt.Errorf("no load balancer id in any of the annotations %v", c.IDAnnotations)
	}
	key := svc.Namespace + "/" + svc.Name
	used := 0
	for k, n := range c.listeners[id] {
		if k != key {
			used += n
		}
	}
	if q := c.quota[id]; q > 0 && used+len(svc.Spec.Ports) > q {
		return nil, fmt.Errorf("QuotaExceeded.Listeners: load balancer %s has %d of %d listeners, %d more asked for", id, used, q, len(svc.Spec.Ports))
	}
	if c.listeners[id] == nil {
		c.listeners[id] = map[string]int{}
	}
	c.listeners[id][key] = len(svc.Spec.Ports)
	if c.changed != nil {
		c.changed()
	}
	return &corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: c.addressLocked(id)}}}, nil
}

// UpdateLoadBalancer does nothing: the box has no backends to update.
func (c *Cloud) UpdateLoadBalancer(_ context.Context, _ string, svc *corev1.Service, _ []*corev1.Node) error {
	c.wait(svc)
	return nil
}

// EnsureLoadBalancerDeleted removes svc's listeners.
func (c *Cloud) EnsureLoadBalancerDeleted(_ context.Context, _ string, svc *corev1.Service) error {
	c.wait(svc)
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.listeners[c.id(svc)], svc.Namespace+"/"+svc.Name)
	if c.changed != nil {
		c.changed()
	}
	return nil
}

// NewRetryError returns the error a real cloud gives while a load balancer is still being
// provisioned: the controller tries again after exactly after.
func NewRetryError(msg string, after time.Duration) error { return api.NewRetryError(msg, after) }

// NLBHostname is the ingress hostname the box gives the Services of ClassedLoadBalancers on
// load balancer id, beside its address: "<id>.nlb.example" (a reserved name, RFC 2606;
// Alibaba's are "<id>.<region>.nlb.aliyuncs.com"-like DNS names).
func NLBHostname(id string) string { return id + ".nlb.example" }

// ClassedLoadBalancers are the loadBalancerClass values the box serves beside the stock
// controller, which skips every classed Service: Alibaba's NLB class.
var ClassedLoadBalancers = []string{"alibabacloud.com/nlb"}

// ClassedController is the name the box's controller for ClassedLoadBalancers writes its
// Events with (a provider's own cloud controller).
const ClassedController = "cloudbox-cloud-controller-manager"

// Start runs the service controller with cloud against the API server of cfg until ctx
// ends, with workers workers (1 reproduces a cloud controller that handles one Service at a
// time), and a status writer for the Services of ClassedLoadBalancers (what a provider's own
// controller for that class does: the cloud's answer in status.loadBalancer; a refusal is a
// Warning Event SyncLoadBalancerFailed on the Service from ClassedController, as the stock
// controller writes, and is tried again 5 s later), and the readiness-gate writer of
// Alibaba's cloud controller (startGates). Errors come from building the controllers.
func Start(ctx context.Context, cfg *rest.Config, cloud *Cloud, workers int) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactory(cs, 0)
	services := factory.Core().V1().Services()
	ctrl, err := servicecontroller.New(cloud, cs, services, factory.Core().V1().Nodes(), "cloudbox", featuregate.NewFeatureGate())
	if err != nil {
		return fmt.Errorf("build the service controller: %w", err)
	}
	var retry func(obj any)
	var retrying sync.Map // Service key -> true while a retry waits
	classed := func(obj any) {
		svc, ok := obj.(*corev1.Service)
		if !ok || svc.Spec.Type != corev1.ServiceTypeLoadBalancer || svc.Spec.LoadBalancerClass == nil ||
			!slices.Contains(ClassedLoadBalancers, *svc.Spec.LoadBalancerClass) || len(svc.Status.LoadBalancer.Ingress) > 0 {
			return
		}
		go func() {
			st, err := cloud.EnsureLoadBalancer(ctx, "cloudbox", svc, nil)
			if err != nil {
				now := metav1.Now()
				_, _ = cs.CoreV1().Events(svc.Namespace).Create(ctx, &corev1.Event{
					ObjectMeta:     metav1.ObjectMeta{GenerateName: svc.Name + ".", Namespace: svc.Namespace},
					InvolvedObject: corev1.ObjectReference{Kind: "Service", APIVersion: "v1", Namespace: svc.Namespace, Name: svc.Name, UID: svc.UID, ResourceVersion: svc.ResourceVersion},
					Reason:         "SyncLoadBalancerFailed", Message: "Error syncing load balancer: failed to ensure load balancer: " + err.Error(),
					Type: corev1.EventTypeWarning, Source: corev1.EventSource{Component: ClassedController}, ReportingController: ClassedController,
					FirstTimestamp: now, LastTimestamp: now, Count: 1,
				}, metav1.CreateOptions{})
				key := svc.Namespace + "/" + svc.Name
				if _, waiting := retrying.LoadOrStore(key, true); waiting {
					return // one retry a Service at a time
				}
				select {
				case <-ctx.Done():
				case <-time.After(5 * time.Second):
					retrying.Delete(key)
					if cur, err := services.Lister().Services(svc.Namespace).Get(svc.Name); err == nil {
						retry(cur)
					}
				}
				return
			}
			s := svc.DeepCopy()
			s.Status.LoadBalancer = *st
			// An NLB is reached by its DNS name, which Alibaba's controller publishes as the
			// ingress hostname (OKG's NLB plugins read it: the per-pod one beside the IP,
			// the shared-port one alone). The box's name is NLBHostname's.
			for i := range s.Status.LoadBalancer.Ingress {
				s.Status.LoadBalancer.Ingress[i].Hostname = NLBHostname(cloud.id(svc))
			}
			_, _ = cs.CoreV1().Services(s.Namespace).UpdateStatus(ctx, s, metav1.UpdateOptions{})
		}()
	}
	retry = classed
	label := func(obj any) {
		svc, ok := obj.(*corev1.Service)
		if !ok || len(svc.Status.LoadBalancer.Ingress) == 0 {
			return
		}
		id := cloud.id(svc)
		var patch string
		if idKey, auto := cloud.autoCreated(svc); auto && id != "" {
			patch = fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, idKey, id)
		} else if cloud.IDLabel != "" && id != "" && svc.Labels[cloud.IDLabel] != id {
			patch = fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, cloud.IDLabel, id)
		} else {
			return
		}
		go func() {
			_, _ = cs.CoreV1().Services(svc.Namespace).Patch(ctx, svc.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		}()
	}
	if _, err := services.Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { classed(obj); label(obj) },
		UpdateFunc: func(_, obj any) { classed(obj); label(obj) },
	}); err != nil {
		return err
	}
	if err := startGates(ctx, cs, factory); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	go ctrl.Run(ctx, workers, controllersmetrics.NewControllerManagerMetrics("cloudbox"))
	return nil
}
