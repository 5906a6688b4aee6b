package network

import (
	"context"
	"sync"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/okg-extensions/network-plugin-policy/pkg/networkretry"
)

// Outcomes of a Recreate, the result label of npp_network_recreates_total.
const (
	// RecreateEvicted: the Eviction API accepted the eviction; the pod terminates gracefully
	// and its controller owner recreates it.
	RecreateEvicted = "evicted"
	// RecreateRefused: the Eviction API refused it (a PodDisruptionBudget answered 429 Too
	// Many Requests, or an admission webhook such as a PodUnavailableBudget denied it); it
	// is tried again after RecreateRetryInterval.
	RecreateRefused = "refused"
	// RecreateRateLimited: the namespace used up its Recreates for now
	// (Options.MaxRecreatesPerNamespacePerMinute); tried again when the next one is allowed.
	RecreateRateLimited = "rate_limited"
	// RecreateNoOwner: the pod has no controller owner that would bring it back; it is never
	// deleted.
	RecreateNoOwner = "skipped_no_owner"
)

// RecreateRetryInterval is how long the controller waits before it asks the Eviction API
// again after a refusal: the eviction API's own advice for a PodDisruptionBudget that
// allows no disruption is to retry, and kubectl drain waits 5 s between attempts; 10 s
// keeps a fleet of refused pods from becoming a write storm.
const RecreateRetryInterval = 10 * time.Second

// DefaultMaxRecreatesPerNamespacePerMinute is Options.MaxRecreatesPerNamespacePerMinute
// when zero: the manager's --max-recreates-per-namespace-per-minute default. One shared
// cause (a quota, an API brownout, a cloud outage) exhausts the windows of a whole fleet at
// once; at 10 a minute a namespace of 1,000 game servers loses at most 1 % of them a minute
// to Recreate, which leaves on-call the time to see the NetworkRetryExhausted events and
// act.
const DefaultMaxRecreatesPerNamespacePerMinute = 10

// recreateLimiter is a token bucket per namespace: rate n a minute, burst n. The buckets are
// the leader's memory: a new leader starts with full buckets, so in the minute of a leader
// change a namespace may see up to twice n evictions.
type recreateLimiter struct {
	perMinute int
	mu        sync.Mutex
	buckets   map[string]*rate.Limiter
}

func newRecreateLimiter(perMinute int) *recreateLimiter {
	return &recreateLimiter{perMinute: perMinute, buckets: map[string]*rate.Limiter{}}
}

// take takes one Recreate from namespace's bucket at now. It returns the reservation, which
// the caller cancels (CancelAt) when the eviction was not accepted, so that a refused
// eviction does not use up the namespace's Recreates; or nil and how long until the next one
// when none is left.
func (l *recreateLimiter) take(namespace string, now time.Time) (*rate.Reservation, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[namespace]
	if !ok {
		b = rate.NewLimiter(rate.Every(time.Minute/time.Duration(l.perMinute)), l.perMinute)
		l.buckets[namespace] = b
	}
	r := b.ReserveN(now, 1)
	if wait := r.DelayFrom(now); wait > 0 {
		r.CancelAt(now)
		return nil, max(wait, minRequeue)
	}
	return r, 0
}

// recreate takes the Recreate exhausted action on pod, whose retry state s closed its
// window; first is true at the reconcile that marked it exhausted (events that must not
// repeat are recorded then). Recreate is the eviction of the pod through the Eviction API
// (pods/eviction, with the pod's UID as precondition), so that PodDisruptionBudgets and
// admission webhooks that guard evictions (OpenKruise's PodUnavailableBudget) decide, as
// they do for a node drain:
//   - a pod without a controller owner (metav1.GetControllerOf) is never evicted: nothing
//     would bring it back; a Warning event NetworkRecreateSkipped says so, once;
//   - at most Options.MaxRecreatesPerNamespacePerMinute evictions a minute per namespace
//     and leader (recreateLimiter); the rest wait for their turn (requeued), so one shared
//     cause cannot take a fleet down at once; a refused eviction gives its turn back;
//   - a refused eviction (429 from a PodDisruptionBudget, a webhook's denial, any other API
//     error) records a Warning event NetworkRecreateRefused and is tried again after
//     RecreateRetryInterval;
//   - NotFound and Conflict (the pod is gone, or a same-name successor replaced it) end it.
func (r *Reconciler) recreate(ctx context.Context, pod *corev1.Pod, s *networkretry.State, first bool) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	if pod.DeletionTimestamp != nil {
		return ctrl.Result{}, nil
	}
	if metav1.GetControllerOf(pod) == nil {
		if first {
			r.opts.Metrics.recreates.WithLabelValues(RecreateNoOwner).Inc()
			log.Info("Not recreating a pod without a controller owner", "plugin", s.Plugin, "policy", s.Policy)
			r.eventf(pod, corev1.EventTypeWarning, ReasonNetworkRecreateSkipped, actionRecreate,
				"Exhausted action Recreate of %s not taken: the pod has no controller owner (a StatefulSet, GameServerSet, ReplicaSet, ...) that would bring it back, so it is not deleted", policySource(s))
		}
		return ctrl.Result{}, nil
	}
	reservation, wait := r.recreates.take(pod.Namespace, r.opts.Clock.Now())
	if reservation == nil {
		r.opts.Metrics.recreates.WithLabelValues(RecreateRateLimited).Inc()
		log.V(1).Info("Recreate waits for the namespace's rate limit", "limitPerMinute", r.opts.MaxRecreatesPerNamespacePerMinute, "wait", wait)
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	uid := pod.UID
	eviction := &policyv1.Eviction{DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}}
	err := r.client.SubResource("eviction").Create(ctx, pod, eviction)
	switch {
	case err == nil:
		r.opts.Metrics.recreates.WithLabelValues(RecreateEvicted).Inc()
		log.Info("Evicted the pod so that its owner recreates it", "plugin", s.Plugin, "policy", s.Policy)
		return ctrl.Result{}, nil
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		reservation.CancelAt(r.opts.Clock.Now())
		return ctrl.Result{}, nil
	}
	// Not evicted: the Recreate goes back to the namespace's bucket.
	reservation.CancelAt(r.opts.Clock.Now())
	r.opts.Metrics.recreates.WithLabelValues(RecreateRefused).Inc()
	log.Info("Eviction refused; trying again later", "error", err.Error(), "retryAfter", RecreateRetryInterval)
	r.eventf(pod, corev1.EventTypeWarning, ReasonNetworkRecreateRefused, actionRecreate,
		"Exhausted action Recreate of %s: the eviction was refused, tried again in %s: %v", policySource(s), RecreateRetryInterval, err)
	return ctrl.Result{RequeueAfter: RecreateRetryInterval}, nil
}
