package network

import (
	"slices"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// namespaceFairQueue is the ready-item order of the controller's workqueue: one FIFO per
// namespace, served round-robin, so that a namespace with thousands of pods due for a retry
// delays another namespace's pod by at most one item per busy namespace, not by its whole
// backlog. It implements client-go's workqueue.Queue: the workqueue keeps its own
// de-duplication (an item is queued once however often it is added), its processing set (an
// item is never handed to two workers) and its locking, and calls Push, Pop, Touch and Len
// under its lock; this type only decides which ready item a free worker gets next.
//
// Items added with AddAfter (the retry schedule's RequeueAfter) wait in the delaying queue
// until due and are pushed here then, so within a namespace pods keep their due order.
//
// Two lanes, each namespace-fair as above: an item that urgent reports (a pod whose load
// balancer or whose controller's answer just arrived: the run that can turn its network
// Ready) goes in the urgent lane, also when it was queued already (Touch moves it), and the
// urgent lane is served first, but never more than maxUrgentStreak items in a row while the
// other lane has items: no event starves.
type namespaceFairQueue struct {
	lanes [2]fairLane // laneOther, laneUrgent
	// lane records which lane each queued item is in.
	lane map[reconcile.Request]int
	// urgent reports whether an item goes in the urgent lane; nil: none does.
	urgent func(reconcile.Request) bool
	// streak counts the urgent items served in a row.
	streak int
	// pushed records when each queued item was pushed, and waited observes, at Pop, the
	// seconds it waited in its lane (nil: not observed).
	pushed map[reconcile.Request]time.Time
	waited func(lane string, seconds float64)
	now    func() time.Time
}

// The lanes of namespaceFairQueue, and their names in npp_network_queue_wait_seconds.
const (
	laneOther  = 0
	laneUrgent = 1
)

var laneNames = [2]string{"other", "urgent"}

// maxUrgentStreak is how many urgent items namespaceFairQueue serves in a row while the other
// lane has items: under a flood of addresses (the cloud answering a fleet at once) the other
// work still gets one worker turn in 17.
const maxUrgentStreak = 16

// fairLane is one lane: one FIFO per namespace, the namespaces served round-robin.
type fairLane struct {
	// fifo holds each namespace's ready items in push order; a namespace is present only
	// while it has items.
	fifo map[string][]reconcile.Request
	// ring lists the namespaces that have items, in serving order: pop serves ring[0] and
	// moves it to the back.
	ring []string
	// n is the number of items in all FIFOs.
	n int
}

var _ workqueue.Queue[reconcile.Request] = (*namespaceFairQueue)(nil)

func newNamespaceFairQueue() *namespaceFairQueue {
	q := &namespaceFairQueue{lane: map[reconcile.Request]int{}, pushed: map[reconcile.Request]time.Time{}, now: time.Now}
	for i := range q.lanes {
		q.lanes[i].fifo = map[string][]reconcile.Request{}
	}
	return q
}

// Touch is called when an item that is already queued is added again: it keeps its place,
// unless it is urgent now and was queued in the other lane: then it moves to the back of its
// namespace's urgent FIFO.
func (q *namespaceFairQueue) Touch(item reconcile.Request) {
	if l, queued := q.lane[item]; !queued || l == laneUrgent || q.urgent == nil || !q.urgent(item) {
		return
	}
	q.lanes[laneOther].remove(item)
	q.lanes[laneUrgent].push(item)
	q.lane[item] = laneUrgent
}

// Push queues item at the back of its namespace's FIFO in its lane.
func (q *namespaceFairQueue) Push(item reconcile.Request) {
	l := laneOther
	if q.urgent != nil && q.urgent(item) {
		l = laneUrgent
	}
	q.lanes[l].push(item)
	q.lane[item] = l
	if q.waited != nil {
		q.pushed[item] = q.now()
	}
}

// Len is the number of queued items.
func (q *namespaceFairQueue) Len() int { return q.lanes[laneOther].n + q.lanes[laneUrgent].n }

// Pop returns the next item: from the urgent lane while it has items, unless maxUrgentStreak
// urgent items in a row were served and the other lane has items; each lane round-robin over
// its namespaces. The workqueue calls it only when Len is positive.
func (q *namespaceFairQueue) Pop() reconcile.Request {
	l := laneOther
	switch {
	case q.lanes[laneUrgent].n == 0:
		q.streak = 0 // a new burst of urgent items starts a new streak
	case q.streak < maxUrgentStreak || q.lanes[laneOther].n == 0:
		l = laneUrgent
		q.streak++
	default:
		q.streak = 0
	}
	item := q.lanes[l].pop()
	delete(q.lane, item)
	if at, ok := q.pushed[item]; ok {
		delete(q.pushed, item)
		q.waited(laneNames[l], q.now().Sub(at).Seconds())
	}
	return item
}

// push queues item at the back of its namespace's FIFO; a namespace that had no items joins
// the back of the ring.
func (l *fairLane) push(item reconcile.Request) {
	ns := item.Namespace
	if len(l.fifo[ns]) == 0 {
		l.ring = append(l.ring, ns)
	}
	l.fifo[ns] = append(l.fifo[ns], item)
	l.n++
}

// pop returns the oldest item of the namespace at the front of the ring and moves that
// namespace to the back (or drops it from the ring when it has no more items). n must be
// positive.
func (l *fairLane) pop() reconcile.Request {
	ns := l.ring[0]
	l.ring[0] = ""
	l.ring = l.ring[1:]
	items := l.fifo[ns]
	item := items[0]
	items[0] = reconcile.Request{} // let the backing array drop the key
	if len(items) == 1 {
		delete(l.fifo, ns)
	} else {
		l.fifo[ns] = items[1:]
		l.ring = append(l.ring, ns)
	}
	l.n--
	return item
}

// remove takes item out of its namespace's FIFO (and the namespace out of the ring when it
// has no more items), if it is there.
func (l *fairLane) remove(item reconcile.Request) {
	ns := item.Namespace
	items := l.fifo[ns]
	i := slices.Index(items, item)
	if i < 0 {
		return
	}
	if len(items) == 1 {
		delete(l.fifo, ns)
		l.ring = slices.DeleteFunc(l.ring, func(s string) bool { return s == ns })
	} else {
		l.fifo[ns] = slices.Delete(items, i, i+1)
	}
	l.n--
}

// newFairWorkqueue returns the controller's workqueue: client-go's rate-limiting and delaying
// workqueue (metrics under name, as controller-runtime names them) over a namespaceFairQueue
// with urgent (nil: one lane) and waited (nil: not observed).
func newFairWorkqueue(name string, rateLimiter workqueue.TypedRateLimiter[reconcile.Request], urgent func(reconcile.Request) bool,
	waited func(lane string, seconds float64)) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	fair := newNamespaceFairQueue()
	fair.urgent, fair.waited = urgent, waited
	base := workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[reconcile.Request]{Name: name, Queue: fair})
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
