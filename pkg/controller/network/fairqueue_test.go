package network

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func req(ns, name string) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}
}

// TestNamespaceFairQueueOrder: namespaces are served round-robin, each in push order.
func TestNamespaceFairQueueOrder(t *testing.T) {
	q := newNamespaceFairQueue()
	for i := range 3 {
		q.Push(req("big", fmt.Sprint("b", i)))
	}
	q.Push(req("small", "s0"))
	q.Push(req("other", "o0"))
	q.Push(req("small", "s1"))
	if q.Len() != 6 {
		t.Fatalf("Len = %d, want 6", q.Len())
	}
	var got []string
	for q.Len() > 0 {
		r := q.Pop()
		got = append(got, r.Name)
		if r.Name == "b0" {
			q.Push(req("big", "b3")) // pushed while served: behind b1, b2
		}
	}
	want := []string{"b0", "s0", "o0", "b1", "s1", "b2", "b3"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pop order (-want,+got):\n%s", diff)
	}
	for _, l := range q.lanes {
		if len(l.fifo) != 0 || len(l.ring) != 0 {
			t.Errorf("empty queue keeps state: fifo %v, ring %v", l.fifo, l.ring)
		}
	}
	if len(q.lane) != 0 {
		t.Errorf("empty queue keeps lanes %v", q.lane)
	}
}

// TestFairWorkqueueSmallNamespaceFirst: with 4,990 pods of one namespace queued before the 10
// of another, the workers (MaxConcurrentReconciles) reach every pod of the small namespace
// within the first two rounds, where a FIFO queue would serve the whole backlog first. The
// workqueue still de-duplicates an item added twice.
func TestFairWorkqueueSmallNamespaceFirst(t *testing.T) {
	const big, small, workers = 4990, 10, DefaultMaxConcurrentReconciles
	q := newFairWorkqueue("test-fair", errorRateLimiter(), nil, nil)
	defer q.ShutDown()
	for i := range big {
		q.Add(req("big", fmt.Sprint("b", i)))
	}
	for i := range small {
		q.Add(req("small", fmt.Sprint("s", i)))
		q.Add(req("small", fmt.Sprint("s", i))) // de-duplicated
	}
	if got := q.Len(); got != big+small {
		t.Fatalf("Len = %d, want %d", got, big+small)
	}
	var (
		mu    sync.Mutex
		order []reconcile.Request
		wg    sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			for {
				item, shutdown := q.Get()
				if shutdown {
					return
				}
				mu.Lock()
				order = append(order, item)
				done := len(order) == big+small
				mu.Unlock()
				time.Sleep(100 * time.Microsecond) // a webhook round trip, shortened
				q.Done(item)
				if done {
					q.ShutDown()
				}
			}
		})
	}
	wg.Wait()
	if len(order) != big+small {
		t.Fatalf("processed %d items, want %d", len(order), big+small)
	}
	lastSmall := -1
	for i, r := range order {
		if r.Namespace == "small" {
			lastSmall = i
		}
	}
	// Round-robin: the small namespace's pods alternate with the big one's from the start,
	// so the last is the 2*small-th item served (give or take the workers' recording order).
	if lastSmall >= 2*small+workers {
		t.Errorf("last small-namespace item served at position %d of %d, want before %d", lastSmall, len(order), 2*small+workers)
	}
}

// TestUrgentLaneFirst: an item urgent reports goes before the other lane's, namespace-fair
// within its lane; an item already queued that turns urgent moves to the urgent lane (Touch);
// the wait of each item is observed under its lane.
func TestUrgentLaneFirst(t *testing.T) {
	urgent := map[string]bool{}
	waits := map[string]int{}
	q := newNamespaceFairQueue()
	q.urgent = func(r reconcile.Request) bool { return urgent[r.Name] }
	q.waited = func(lane string, _ float64) { waits[lane]++ }
	for i := range 3 {
		q.Push(req("big", fmt.Sprint("b", i)))
	}
	q.Push(req("small", "s0"))
	urgent["a0"], urgent["a1"], urgent["c0"] = true, true, true
	q.Push(req("big", "a0"))
	q.Push(req("big", "a1"))
	q.Push(req("small", "c0"))
	urgent["b2"] = true
	q.Touch(req("big", "b2")) // queued as other, urgent now
	q.Touch(req("big", "a0")) // urgent already: keeps its place
	var got []string
	for q.Len() > 0 {
		got = append(got, q.Pop().Name)
	}
	want := []string{"a0", "c0", "a1", "b2", "b0", "s0", "b1"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pop order (-want,+got):\n%s", diff)
	}
	if waits["urgent"] != 4 || waits["other"] != 3 {
		t.Errorf("waits observed %v, want 4 urgent and 3 other", waits)
	}
	for _, l := range q.lanes {
		if len(l.fifo) != 0 || len(l.ring) != 0 || l.n != 0 {
			t.Errorf("empty queue keeps state: %+v", l)
		}
	}
}

// TestUrgentLaneNeverStarvesTheOther: under a flood of urgent items (each pop pushes another),
// the other lane's items are still served, one after every maxUrgentStreak urgent ones.
func TestUrgentLaneNeverStarvesTheOther(t *testing.T) {
	q := newNamespaceFairQueue()
	q.urgent = func(r reconcile.Request) bool { return r.Namespace == "flood" }
	for i := range 3 {
		q.Push(req("quiet", fmt.Sprint("q", i)))
	}
	next := 0
	q.Push(req("flood", "u0"))
	var served []int // positions of the quiet items
	for pos := 0; len(served) < 3 && pos < 1000; pos++ {
		item := q.Pop()
		if item.Namespace == "quiet" {
			served = append(served, pos)
			continue
		}
		next++
		q.Push(req("flood", fmt.Sprint("u", next)))
	}
	want := []int{maxUrgentStreak, 2*maxUrgentStreak + 1, 3*maxUrgentStreak + 2}
	if diff := cmp.Diff(want, served); diff != "" {
		t.Errorf("positions of the other lane's items (-want,+got):\n%s", diff)
	}
}
