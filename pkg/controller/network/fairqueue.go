package network

import (
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// namespaceFairQueue is the ready-item order of the controller's workqueue: one FIFO per
// namespace, served round-robin, so that a namespace with thousands of pods due for a retry
// delays another namespace's pod by at most one item per busy namespace, not by its whole
// backlog. It implements client-go's workqueue.Queue: the workqueue keeps its own
// de-duplication (an item is queued once however often it is added), its processing set (an
// item is never handed to two workers) and its locking, and calls Push, Pop and Len under its
// lock; this type only decides which ready item a free worker gets next.
//
// Items added with AddAfter (the retry schedule's RequeueAfter) wait in the delaying queue
// until due and are pushed here then, so within a namespace pods keep their due order.
type namespaceFairQueue struct {
	// fifo holds each namespace's ready items in push order; a namespace is present only
	// while it has items.
	fifo map[string][]reconcile.Request
	// ring lists the namespaces that have items, in serving order: Pop serves ring[0] and
	// moves it to the back.
	ring []string
	// n is the number of items in all FIFOs.
	n int
}

var _ workqueue.Queue[reconcile.Request] = (*namespaceFairQueue)(nil)

func newNamespaceFairQueue() *namespaceFairQueue {
	return &namespaceFairQueue{fifo: map[string][]reconcile.Request{}}
}

// Touch is called when an item that is already queued is added again; its place is kept.
func (q *namespaceFairQueue) Touch(reconcile.Request) {}

// Push queues item at the back of its namespace's FIFO; a namespace that had no items joins
// the back of the ring.
func (q *namespaceFairQueue) Push(item reconcile.Request) {
	ns := item.Namespace
	if len(q.fifo[ns]) == 0 {
		q.ring = append(q.ring, ns)
	}
	q.fifo[ns] = append(q.fifo[ns], item)
	q.n++
}

// Len is the number of queued items.
func (q *namespaceFairQueue) Len() int { return q.n }

// Pop returns the oldest item of the namespace at the front of the ring and moves that
// namespace to the back (or drops it from the ring when it has no more items). The
// workqueue calls it only when Len is positive.
func (q *namespaceFairQueue) Pop() reconcile.Request {
	ns := q.ring[0]
	q.ring[0] = ""
	q.ring = q.ring[1:]
	items := q.fifo[ns]
	item := items[0]
	items[0] = reconcile.Request{} // let the backing array drop the key
	if len(items) == 1 {
		delete(q.fifo, ns)
	} else {
		q.fifo[ns] = items[1:]
		q.ring = append(q.ring, ns)
	}
	q.n--
	return item
}

// newFairWorkqueue returns the controller's workqueue: client-go's rate-limiting and delaying
// workqueue (metrics under name, as controller-runtime names them) over a namespaceFairQueue.
// It is controller.Options.NewQueue.
func newFairWorkqueue(name string, rateLimiter workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	base := workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[reconcile.Request]{Name: name, Queue: newNamespaceFairQueue()})
	delaying := workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[reconcile.Request]{Name: name, Queue: base})
	return workqueue.NewTypedRateLimitingQueueWithConfig(rateLimiter, workqueue.TypedRateLimitingQueueConfig[reconcile.Request]{
		Name: name, DelayingQueue: delaying,
	})
}

// errorRateLimiter is the per-pod backoff after a Reconcile error (an API error of a read or
// write): 5ms doubling up to 1000s, controller-runtime's default for its own queue. No
// cluster-wide token bucket: one namespace's failing writes must not slow the others.
func errorRateLimiter() workqueue.TypedRateLimiter[reconcile.Request] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](5*time.Millisecond, 1000*time.Second)
}
