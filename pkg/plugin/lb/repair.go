package lb

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
)

// MetricServiceRepairs is the counter of the drift repairs of load-balancer Services, by
// plugin and result: "repaired" (a field the plugin owns, changed by someone else while the
// network-conf stayed the same, put back) or "deferred" (changed again, repaired later: see
// repairBackoff).
const MetricServiceRepairs = "npp_lb_service_repairs_total"

var serviceRepairs = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: MetricServiceRepairs,
	Help: "Repairs of load-balancer Services whose plugin-owned fields someone else changed while the network-conf stayed the same, by plugin and result (repaired, deferred); the network stays Ready.",
}, []string{"plugin", "result"})

// RepairsCollector returns the collector of MetricServiceRepairs, one per process; register
// it once (the manager registers it with controller-runtime's metrics.Registry).
func RepairsCollector() prometheus.Collector { return serviceRepairs }

// repairQuiet is how long a Service must stay as the plugin wrote it for its repair count to
// start again from zero.
const repairQuiet = 10 * time.Minute

// repairBackoff is the wait before the (n+1)th repair of a Service whose field was changed
// again after each of n repairs: none for the first, then 10 s doubling to at most 5 min,
// so that a tool that keeps writing its own value (a mutating policy engine) and this
// plugin do not write the Service against each other at every pod update.
func repairBackoff(n int) time.Duration {
	if n == 0 {
		return 0
	}
	d := 10 * time.Second
	for i := 1; i < n && d < 5*time.Minute; i++ {
		d *= 2
	}
	return min(d, 5*time.Minute)
}

// repairState is one Service's repairs: how many in a row, the last one's time.
type repairState struct {
	mu    sync.Mutex
	count int
	last  time.Time
}

// drift reports whether have differs from want only because someone edited it: it carries
// the config hash of the network-conf want is built from, and its type is want's (the type
// follows network-disabled).
func (p *Plugin) drift(want, have *corev1.Service) bool {
	return have.Annotations[AnnotationConfigHash] != "" && have.Annotations[AnnotationConfigHash] == want.Annotations[AnnotationConfigHash] &&
		have.Spec.Type == want.Spec.Type
}

// repair puts back fields (differences of svc from want) on svc, unless the Service's
// repairs back off (repairBackoff; annotations and labels only: any other field is put back
// at once), and returns a warning naming the fields and what was
// done: the network's status does not change on its account. Errors: a patch that lost to a
// newer version (Unknown) or was not accepted (WriteRefused), both keeping a Ready network.
func (p *Plugin) repair(ctx context.Context, c client.Client, svc, want *corev1.Service, fields []string) error {
	v, _ := p.repairs.LoadOrStore(client.ObjectKeyFromObject(svc).String(), &repairState{})
	st := v.(*repairState)
	st.mu.Lock()
	defer st.mu.Unlock()
	now := p.now()
	if st.count > 0 && now.Sub(st.last) >= repairQuiet {
		st.count = 0
	}
	what := strings.Join(fields, ", ")
	// Only annotations and labels wait: a changed selector, type field or owner breaks or
	// hides the game server's traffic, and is put back at once, every time.
	deferrable := !slices.ContainsFunc(fields, func(f string) bool {
		return !strings.HasPrefix(f, "metadata.annotations[") && !strings.HasPrefix(f, "metadata.labels[")
	})
	if wait := repairBackoff(st.count); deferrable && now.Sub(st.last) < wait {
		serviceRepairs.WithLabelValues(p.spec.Name, "deferred").Inc()
		return &plugin.Error{Warning: true, Message: fmt.Sprintf("Service %s/%s: %s changed again by someone else after %d repairs; repaired again after %s (the network stays Ready)",
			svc.Namespace, svc.Name, what, st.count, (wait - now.Sub(st.last)).Round(time.Second))}
	}
	before := svc.DeepCopy()
	p.apply(want, svc)
	if err := c.Patch(ctx, svc, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsConflict(err) {
			return plugin.WrapUnknown(err, "repair Service %s/%s", svc.Namespace, svc.Name)
		}
		return plugin.WrapWriteRefused(err, "repair Service %s/%s", svc.Namespace, svc.Name)
	}
	st.count++
	st.last = now
	serviceRepairs.WithLabelValues(p.spec.Name, "repaired").Inc()
	ctrl.LoggerFrom(ctx).Info("Service repaired: fields the plugin owns were changed by someone else", "service", klog.KObj(svc), "fields", fields, "repairs", st.count)
	again := ""
	if st.count > 1 {
		again = fmt.Sprintf("; changed again after each of %d repairs: the next one waits %s", st.count-1, repairBackoff(st.count))
	}
	// Changed again after a repair: something keeps writing the field (a mutating policy
	// engine, a controller); an Event on the pod names it, at every such repair.
	return &plugin.Error{Warning: true, Notable: st.count > 1,
		Message: fmt.Sprintf("Service %s/%s: %s changed by someone else, put back (the network stays Ready)%s", svc.Namespace, svc.Name, what, again)}
}
