package policy

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
)

func resolveTimeout(t *testing.T, snap *Snapshot, store *Store) string {
	t.Helper()
	res, err := begin(context.Background(), snap, store.metrics, 0, Input{Pod: newPod("game", "x"), Plugin: nodePort})
	if err != nil {
		t.Fatalf("begin(): %v", err)
	}
	return res.Decision(context.Background()).Explanation.Timeout.String()
}

func TestStoreRecompilesOnlyOnNewGeneration(t *testing.T) {
	store := newTestStore(t, newPolicy("game", "p", timeout(time.Second)))
	h := store.Handler(context.Background())
	before := store.Snapshot()

	// Same UID and generation (a label or status change): nothing is recompiled or published.
	relabeled := newPolicy("game", "p", timeout(time.Second))
	relabeled.Labels = map[string]string{"team": "red"}
	h.OnUpdate(nil, relabeled)
	if store.Snapshot() != before {
		t.Errorf("snapshot replaced on an update without a new generation")
	}

	// A new generation is compiled and published.
	h.OnUpdate(nil, newPolicy("game", "p", timeout(2*time.Second), generation(2)))
	if diff := cmp.Diff("game/p@2", resolveTimeout(t, store.Snapshot(), store)); diff != "" {
		t.Errorf("timeout source (-want,+got):\n%s", diff)
	}

	// A recreated policy (new UID, generation 1 again) is compiled too.
	recreated := newPolicy("game", "p", timeout(3*time.Second))
	recreated.UID = "new-uid"
	h.OnUpdate(nil, recreated)
	if res, _ := store.Result("game", "p"); res.UID != "new-uid" {
		t.Errorf("Result().UID = %q, want new-uid", res.UID)
	}
}

// TestStoreSnapshotIsolation: a request that loaded a snapshot keeps resolving against it
// while the policy is deleted; new requests no longer see the policy.
func TestStoreSnapshotIsolation(t *testing.T) {
	p := newPolicy("game", "p", timeout(time.Second))
	store := newTestStore(t, p)
	inFlight := store.Snapshot()

	store.Handler(context.Background()).OnDelete(toolscache.DeletedFinalStateUnknown{Key: "game/p", Obj: p})

	if diff := cmp.Diff("game/p@1", resolveTimeout(t, inFlight, store)); diff != "" {
		t.Errorf("in-flight request timeout source (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff("default", resolveTimeout(t, store.Snapshot(), store)); diff != "" {
		t.Errorf("new request timeout source (-want,+got):\n%s", diff)
	}
	if _, ok := store.Result("game", "p"); ok {
		t.Errorf("Result() found a deleted policy")
	}
	if inFlight.Len() != 1 || store.Snapshot().Len() != 0 {
		t.Errorf("snapshot sizes = %d, %d; want 1, 0", inFlight.Len(), store.Snapshot().Len())
	}
}

// TestStoreConcurrentReaders resolves while policies change; run with -race. Every decision
// must come from one whole snapshot: the timeout and the readiness gate of policy "p" always
// travel together.
func TestStoreConcurrentReaders(t *testing.T) {
	store := newTestStore(t)
	resolver := NewResolver(store)
	h := store.Handler(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for ctx.Err() == nil {
				d, err := resolver.Resolve(ctx, Input{Pod: newPod("game", "x"), Plugin: nodePort})
				if err != nil {
					t.Errorf("Resolve(): %v", err)
					return
				}
				if d.Explanation.Timeout.String() != d.Explanation.ReadinessGate.String() {
					t.Errorf("half-updated decision: %s", d.Explanation)
					return
				}
			}
		})
	}
	for i := range 200 {
		p := newPolicy("game", "p", timeout(time.Second), readinessGate(true), generation(int64(i+1)))
		if i%2 == 0 {
			h.OnAdd(p, false)
		} else {
			h.OnDelete(p)
		}
	}
	cancel()
	wg.Wait()
}

func TestStoreReportsCompileResults(t *testing.T) {
	broken := newPolicy("game", "broken", matchCondition("ok", "true"), matchCondition("bad", "object.metadata.labels["))
	spec := newPolicy("game", "spec", namespaceSelector("env", "prod"))
	store := newTestStore(t, broken, spec, newPolicy("game", "good", timeout(time.Second)))

	cases := map[string]struct {
		name       string
		wantReason string
		wantFields []string
	}{
		"expression":         {name: "broken", wantReason: v1alpha1.ReasonInvalidExpression, wantFields: []string{"spec.matchConditions[1].expression"}},
		"namespace selector": {name: "spec", wantReason: v1alpha1.ReasonInvalidSpec, wantFields: []string{"spec.namespaceSelector"}},
		"good":               {name: "good", wantReason: v1alpha1.ReasonAccepted},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			res, ok := store.Result("game", tc.name)
			if !ok {
				t.Fatalf("Result() not found")
			}
			var fields []string
			for _, e := range res.Errors {
				fields = append(fields, e.Field)
			}
			if diff := cmp.Diff(tc.wantReason, res.Reason); diff != "" {
				t.Errorf("reason (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantFields, fields); diff != "" {
				t.Errorf("error fields (-want,+got):\n%s", diff)
			}
		})
	}
	if got := store.Snapshot().Len(); got != 1 {
		t.Errorf("snapshot has %d policies, want only the good one", got)
	}
	if got := testutil.ToFloat64(store.metrics.compileErrors.WithLabelValues("game", "broken")); got != 1 {
		t.Errorf("npp_policy_compile_errors_total{game/broken} = %v, want 1", got)
	}
	if got := testutil.ToFloat64(store.metrics.policies.WithLabelValues(v1alpha1.ReasonAccepted)); got != 1 {
		t.Errorf("npp_policies{Accepted} = %v, want 1", got)
	}
}

// listThenWatch is a ListWatch that opts out of the streaming watch-list protocol, so the
// reflector lists first and then watches.
type listThenWatch struct{ *toolscache.ListWatch }

func (listThenWatch) IsWatchListSemanticsUnSupported() bool { return true }

// fakeListWatch serves a fixed initial list and then a fake watch.
func fakeListWatch(items []v1alpha1.NetworkPluginPolicy, w *watch.FakeWatcher) toolscache.ListerWatcher {
	return listThenWatch{&toolscache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			return &v1alpha1.NetworkPluginPolicyList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}, Items: items}, nil
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
			return w, nil
		},
	}}
}

func TestStoreRegisterHasSynced(t *testing.T) {
	var items []v1alpha1.NetworkPluginPolicy
	for _, name := range []string{"a", "b", "c"} {
		items = append(items, *newPolicy("game", name, timeout(time.Second)))
	}
	w := watch.NewFake()
	inf := toolscache.NewSharedIndexInformer(fakeListWatch(items, w), &v1alpha1.NetworkPluginPolicy{}, 0, toolscache.Indexers{})
	store := newTestStore(t)
	if store.HasSynced() {
		t.Fatalf("HasSynced() before Register = true")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := store.Register(ctx, inf); err != nil {
		t.Fatalf("Register(): %v", err)
	}
	go inf.RunWithContext(ctx)
	if !toolscache.WaitForCacheSync(ctx.Done(), store.HasSynced) {
		t.Fatalf("store never synced")
	}
	// Synced means the whole initial list is compiled and published.
	if got := store.Snapshot().Len(); got != 3 {
		t.Errorf("snapshot after sync has %d policies, want 3", got)
	}

	// A watch event reaches the snapshot.
	w.Add(newPolicy("game", "d", timeout(time.Second)))
	deadline := time.Now().Add(10 * time.Second)
	for store.Snapshot().Len() != 4 {
		if time.Now().After(deadline) {
			t.Fatalf("watch event never reached the snapshot")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestExplanationString(t *testing.T) {
	e := Explanation{
		Failure: Source{Policy: ref("game", "lb", 3)},
		Notes:   []string{"failureModeExpression of game/lb@3 failed (boom); failureMode Asynchronous used"},
		Losers: []Loser{
			{Policy: ref("game", "a", 1), Reason: LostConditionFalse, Condition: "not-canary"},
			{Policy: ref("game", "b", 1), Reason: LostPodSelector},
			{Policy: ref("game", "c", 1), Reason: LostOutranked},
			{Policy: ref("game", "d", 1), Reason: LostOutranked},
			{Policy: ref("game", "e", 1), Reason: LostOutranked},
		},
	}
	want := "failure=game/lb@3 timeout=default readinessGate=default retry=default; " +
		"failureModeExpression of game/lb@3 failed (boom); failureMode Asynchronous used; " +
		"lost: game/a@1: matchCondition not-canary is false, game/b@1: podSelector does not match, game/c@1: outranked, and 2 more"
	if diff := cmp.Diff(want, e.String()); diff != "" {
		t.Errorf("String() (-want,+got):\n%s", diff)
	}
	if strings.Contains(e.String(), "\n") {
		t.Errorf("String() spans lines")
	}
}
