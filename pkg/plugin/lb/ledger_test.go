package lb_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/alibabacloud"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/lb"
)

// TestTwoReplicasNeverHandOutAPortTwice: two replicas, each with its own allocator and no
// view of the other's Services, share the ConfigMap ledger; a burst of 24 pods, each served
// by either replica, on an SLB with 20 free ports gets 20 Services with 20 distinct ports,
// and the other 4 pods the exhaustion error. Without the ledger the two replicas hand out
// the same ports.
func TestTwoReplicasNeverHandOutAPortTwice(t *testing.T) {
	for _, withLedger := range []bool{true, false} {
		t.Run(fmt.Sprintf("ledger %t", withLedger), func(t *testing.T) {
			ctx := context.Background()
			c := fakeClient(t)
			replicas := []*lb.Plugin{alibabacloud.NewSLB(lb.Range{Min: 500, Max: 519}), alibabacloud.NewSLB(lb.Range{Min: 500, Max: 519})}
			for _, r := range replicas {
				if withLedger {
					r.UseLedger(&lb.ConfigMapLedger{Client: c, Namespace: "network-plugin-policy-system", Plugin: alibabacloud.SLBName})
				}
				if err := r.Init(ctx, c, plugin.Config{}); err != nil {
					t.Fatal(err)
				}
			}
			const pods = 24
			var wg sync.WaitGroup
			errs := make([]error, pods)
			for i := range pods {
				wg.Add(1)
				go func() {
					defer wg.Done()
					pod := runningPod(alibabacloud.SLBName, `[{"name":"SlbIds","value":"lb-a"},{"name":"PortProtocols","value":"7777/UDP"}]`)
					pod.Name, pod.UID = fmt.Sprintf("gs-%d", i), types.UID(fmt.Sprintf("uid-%d", i))
					_, errs[i] = replicas[i%2].OnPodUpdated(ctx, c, pod)
				}()
			}
			wg.Wait()
			var list corev1.ServiceList
			if err := c.List(ctx, &list); err != nil {
				t.Fatal(err)
			}
			holders := map[int32][]string{}
			for _, svc := range list.Items {
				holders[svc.Spec.Ports[0].Port] = append(holders[svc.Spec.Ports[0].Port], svc.Name)
			}
			dup := 0
			for port, names := range holders {
				if len(names) > 1 {
					dup++
					if withLedger {
						t.Errorf("port %d handed out to %v", port, names)
					}
				}
			}
			if !withLedger {
				if dup == 0 {
					t.Error("without the ledger no port was handed out twice: the test does not show what the ledger prevents")
				}
				return
			}
			exhausted := 0
			for _, err := range errs {
				if err != nil {
					if plugin.TypeOf(err) != plugin.ParameterError {
						t.Errorf("error %v, want only the exhaustion parameterError", err)
					}
					exhausted++
				}
			}
			if len(list.Items) != 20 || exhausted != 4 {
				t.Errorf("%d Services and %d exhausted pods, want 20 and 4", len(list.Items), exhausted)
			}
		})
	}
}

// TestLedgerCountsAndSweeps: a restarted replica counts the ledger's claims (a Service
// another replica is about to create holds its port), and Sweep releases a claim older than
// SweepGrace whose Service and pod are both gone, and keeps one whose pod still exists.
func TestLedgerCountsAndSweeps(t *testing.T) {
	ctx := context.Background()
	alive := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "alive"}}
	c := fakeClient(t, alive)
	ledger := &lb.ConfigMapLedger{Client: c, Namespace: "npp", Plugin: alibabacloud.SLBName}
	for owner, port := range map[string]int32{"default/alive": 500, "default/gone": 501} {
		if taken, err := ledger.Claim(ctx, "lb-a", []int32{port}, owner, nil); err != nil || taken != nil {
			t.Fatalf("claim %d: %v %v", port, taken, err)
		}
	}
	p := alibabacloud.NewSLB(lb.Range{Min: 500, Max: 502})
	p.UseLedger(ledger)
	if err := p.Init(ctx, c, plugin.Config{}); err != nil {
		t.Fatal(err)
	}
	pod := runningPod(alibabacloud.SLBName, `[{"name":"SlbIds","value":"lb-a"},{"name":"PortProtocols","value":"7777/UDP"}]`)
	if _, err := p.OnPodUpdated(ctx, c, pod); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: "default", Name: "gs-0"}, svc); err != nil || svc.Spec.Ports[0].Port != 502 {
		t.Fatalf("Service %v (%v), want port 502: 500 and 501 are claimed", svc.Spec.Ports, err)
	}
	// Within SweepGrace nothing goes: a claim made at a CREATE has no pod yet.
	if err := p.Sweep(ctx, c, time.Now()); err != nil {
		t.Fatal(err)
	}
	if claims, _ := ledger.Load(ctx); len(claims["lb-a"]) != 3 {
		t.Errorf("claims %v after a sweep within the grace, want all 3", claims)
	}
	if err := p.Sweep(ctx, c, time.Now().Add(lb.SweepGrace)); err != nil {
		t.Fatal(err)
	}
	claims, err := ledger.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := claims["lb-a"][501]; ok {
		t.Errorf("claims %v: the claim of a gone Service and pod is still there", claims)
	}
	if claims["lb-a"][500].Owner != "default/alive" || claims["lb-a"][502].Owner != "default/gs-0" {
		t.Errorf("claims %v, want 500 (its pod exists) and 502 (its Service exists) kept", claims)
	}
}

// countingClient counts the ConfigMap writes (creates and updates) that reach the client,
// each taking delay: the round trip of a real API server, during which more claims arrive.
type countingClient struct {
	client.Client
	writes atomic.Int64
	delay  time.Duration
}

func (c *countingClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	c.writes.Add(1)
	time.Sleep(c.delay)
	return c.Client.Create(ctx, obj, opts...)
}

func (c *countingClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	c.writes.Add(1)
	time.Sleep(c.delay)
	return c.Client.Update(ctx, obj, opts...)
}

// TestLedgerGroupsConcurrentClaims: 60 claims of one load balancer at once, each on its own
// port, are all recorded in fewer writes than claims (those that arrive during a write go
// into the next one); two owners claiming one port in the same burst: one gets it, the
// other is told who holds it; and a release in the burst is applied too.
func TestLedgerGroupsConcurrentClaims(t *testing.T) {
	ctx := context.Background()
	c := &countingClient{Client: fakeClient(t), delay: 10 * time.Millisecond}
	l := &lb.ConfigMapLedger{Client: c, Namespace: "network-plugin-policy-system", Plugin: alibabacloud.SLBName}
	if taken, err := l.Claim(ctx, "lb-a", []int32{700}, "default/old", nil); err != nil || taken != nil {
		t.Fatalf("claim 700: taken %v, error %v", taken, err)
	}
	const claims = 60
	var wg sync.WaitGroup
	errs := make([]error, claims)
	takens := make([]map[int32]lb.Claim, claims)
	for i := range claims {
		wg.Add(1)
		go func() {
			defer wg.Done()
			takens[i], errs[i] = l.Claim(ctx, "lb-a", []int32{int32(500 + i)}, fmt.Sprintf("default/gs-%d", i), nil)
		}()
	}
	var dup [2]map[int32]lb.Claim
	var dupErr [2]error
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dup[i], dupErr[i] = l.Claim(ctx, "lb-a", []int32{600}, fmt.Sprintf("default/dup-%d", i), nil)
		}()
	}
	wg.Add(1)
	var releaseErr error
	go func() { defer wg.Done(); releaseErr = l.Release(ctx, "lb-a", "default/old", time.Time{}) }()
	wg.Wait()
	for i := range claims {
		if errs[i] != nil || takens[i] != nil {
			t.Errorf("claim %d: taken %v, error %v", i, takens[i], errs[i])
		}
	}
	if dupErr[0] != nil || dupErr[1] != nil || (dup[0] == nil) == (dup[1] == nil) {
		t.Errorf("two owners of port 600: taken %v / %v, errors %v / %v; want exactly one told the other holds it", dup[0], dup[1], dupErr[0], dupErr[1])
	}
	if releaseErr != nil {
		t.Errorf("release: %v", releaseErr)
	}
	all, err := l.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(all["lb-a"]); n != claims+1 {
		t.Errorf("ledger holds %d ports, want %d (the 60, port 600 once, 700 released)", n, claims+1)
	}
	if _, ok := all["lb-a"][700]; ok {
		t.Error("port 700 still claimed after its release")
	}
	if w := c.writes.Load(); w >= claims {
		t.Errorf("%d writes for %d claims and a release: want them grouped", w, claims+2)
	} else {
		t.Logf("%d writes for %d claims and a release", w, claims+2)
	}
}

// failingGets fails every Get of one ConfigMap, as an API server that refuses one object.
type failingGets struct {
	client.Client
	name string
}

func (c *failingGets) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if key.Name == c.name {
		return fmt.Errorf("injected: get %s refused", key.Name)
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

// TestLedgerIsBounded: claims on 40 load balancers that pods named, of two plugin groups,
// live in the ledger's fixed ConfigMaps (LedgerConfigMapNames), no others; a load balancer's
// id entry goes with its last claim; and a ConfigMap that cannot be read does not stop the
// sweep of the others: Sweep releases the gone owners' claims elsewhere and returns the
// error naming that ConfigMap.
func TestLedgerIsBounded(t *testing.T) {
	ctx := context.Background()
	c := fakeClient(t)
	slb := &lb.ConfigMapLedger{Client: c, Namespace: "npp", Plugin: alibabacloud.SLBName}
	nlb := &lb.ConfigMapLedger{Client: c, Namespace: "npp", Plugin: alibabacloud.NLBName}
	for i := range 20 {
		for _, l := range []*lb.ConfigMapLedger{slb, nlb} {
			if taken, err := l.Claim(ctx, fmt.Sprintf("lb-%d", i), []int32{500, 501}, fmt.Sprintf("t%d/gs-0", i), nil); err != nil || taken != nil {
				t.Fatalf("claim: %v %v", taken, err)
			}
		}
	}
	var cms corev1.ConfigMapList
	if err := c.List(ctx, &cms, client.InNamespace("npp")); err != nil {
		t.Fatal(err)
	}
	names := lb.LedgerConfigMapNames(lb.DefaultLedgerName)
	held := 0
	for _, cm := range cms.Items {
		if !slices.Contains(names, cm.Name) {
			t.Errorf("ConfigMap %s is not one of the ledger's %v", cm.Name, names)
		}
		for _, lbs := range lb.ParseLedger(cm.Data) {
			for _, ports := range lbs {
				held += len(ports)
			}
		}
	}
	if len(cms.Items) > lb.LedgerShards || held != 80 {
		t.Errorf("%d ConfigMaps holding %d claims, want at most %d holding 80", len(cms.Items), held, lb.LedgerShards)
	}
	// The last claim of lb-0 goes, and its id entry with it.
	if err := slb.ReleasePorts(ctx, "lb-0", "t0/gs-0", []int32{500, 501}); err != nil {
		t.Fatal(err)
	}
	if claims, err := slb.Load(ctx); err != nil || claims["lb-0"] != nil || len(claims) != 19 {
		t.Errorf("after releasing lb-0: %d load balancers (%v), lb-0 %v, want 19 without it", len(claims), err, claims["lb-0"])
	}

	// One ConfigMap unreadable: the sweep frees the rest and names it.
	broken := names[0]
	sweeper := &failingGets{Client: c, name: broken}
	p := alibabacloud.NewSLB(lb.Range{Min: 500, Max: 510})
	p.UseLedger(&lb.ConfigMapLedger{Client: sweeper, Namespace: "npp", Plugin: alibabacloud.SLBName})
	err := p.Sweep(ctx, c, time.Now().Add(lb.SweepGrace))
	if err == nil || !strings.Contains(err.Error(), broken) {
		t.Errorf("Sweep error %v, want it to name %s", err, broken)
	}
	left, _ := (&lb.ConfigMapLedger{Client: &failingGets{Client: c}, Namespace: "npp", Plugin: alibabacloud.SLBName}).Load(ctx)
	unread := 0
	for i := range 20 {
		cm := &corev1.ConfigMap{}
		if c.Get(ctx, types.NamespacedName{Namespace: "npp", Name: broken}, cm) == nil {
			if _, ok := lb.ParseLedger(cm.Data)[alibabacloud.SLBName][fmt.Sprintf("lb-%d", i)]; ok {
				unread++
			}
		}
	}
	if len(left) != unread || (unread == 0 && len(left) != 0) {
		t.Errorf("%d load balancers left after the sweep, want only the %d in the unreadable %s", len(left), unread, broken)
	}
}

// TestLedgerPlacementIsPinned: where a load balancer's claims live (which ConfigMap, which
// key prefix) is part of the stored format: a change would orphan every claim of a running
// cluster at an upgrade. This pins it for one id.
func TestLedgerPlacementIsPinned(t *testing.T) {
	ctx := context.Background()
	c := fakeClient(t)
	l := &lb.ConfigMapLedger{Client: c, Namespace: "npp", Plugin: alibabacloud.SLBName}
	if _, err := l.Claim(ctx, "lb-pinned", []int32{500}, "game/gs-0", nil); err != nil {
		t.Fatal(err)
	}
	var cms corev1.ConfigMapList
	if err := c.List(ctx, &cms, client.InNamespace("npp")); err != nil || len(cms.Items) != 1 {
		t.Fatalf("ConfigMaps %v (%v), want one", cms.Items, err)
	}
	cm := cms.Items[0]
	var keys []string
	for k := range cm.Data {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	const wantName, prefix = "network-plugin-policy-lb-ledger-2", "b2eb055dd91e83b3de1824fa145cddab"
	if want := []string{prefix + ".500", prefix + ".lb"}; cm.Name != wantName || !slices.Equal(keys, want) {
		t.Errorf("claim stored in %s as %v, want %s with %v", cm.Name, keys, wantName, want)
	}
}

// tooLarge refuses a ConfigMap update whose data has more than limit entries, as the API
// server refuses an object over 1 MiB.
type tooLarge struct {
	client.Client
	limit int
}

func (c *tooLarge) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	if cm, ok := obj.(*corev1.ConfigMap); ok && len(cm.Data) > c.limit {
		return apierrors.NewRequestEntityTooLargeError("limit is 1048576")
	}
	return c.Client.Update(ctx, obj, opts...)
}

// TestFullLedgerStillReleases: two plugin groups share the ledger's ConfigMaps and one
// writer per ConfigMap (no lost claim, no conflict, when they claim at once); when a
// ConfigMap is full, claims fail with an error saying so while releases, even those written
// in the same group as the refused claims, go through, so that a full ConfigMap empties.
func TestFullLedgerStillReleases(t *testing.T) {
	ctx := context.Background()
	base := fakeClient(t)
	c := &tooLarge{Client: base, limit: 1 << 20}
	slb := &lb.ConfigMapLedger{Client: c, Namespace: "npp", Plugin: alibabacloud.SLBName}
	nlb := &lb.ConfigMapLedger{Client: c, Namespace: "npp", Plugin: alibabacloud.NLBName}
	var wg sync.WaitGroup
	errs := make(chan error, 80)
	for i := range 40 {
		for _, l := range []*lb.ConfigMapLedger{slb, nlb} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				taken, err := l.Claim(ctx, "lb-shared", []int32{int32(500 + i)}, fmt.Sprintf("game/gs-%d", i), nil)
				if err == nil && taken != nil {
					err = fmt.Errorf("taken %v", taken)
				}
				errs <- err
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent claims of two plugin groups: %v", err)
		}
	}
	for _, l := range []*lb.ConfigMapLedger{slb, nlb} {
		if claims, err := l.Load(ctx); err != nil || len(claims["lb-shared"]) != 40 {
			t.Fatalf("%s holds %d claims (%v), want 40", l.Plugin, len(claims["lb-shared"]), err)
		}
	}
	// Full: the entries SLB's ConfigMap holds now fill it; a claim of 2 more ports does not
	// fit, even beside a release of 1.
	var cms corev1.ConfigMapList
	if err := base.List(ctx, &cms, client.InNamespace("npp")); err != nil {
		t.Fatal(err)
	}
	for _, cm := range cms.Items {
		if _, ok := lb.ParseLedger(cm.Data)[alibabacloud.SLBName]; ok {
			c.limit = len(cm.Data)
		}
	}
	var claimErr, releaseErr error
	wg.Add(2)
	go func() { defer wg.Done(); _, claimErr = slb.Claim(ctx, "lb-shared", []int32{600, 601}, "game/new", nil) }()
	go func() { defer wg.Done(); releaseErr = slb.Release(ctx, "lb-shared", "game/gs-0", time.Time{}) }()
	wg.Wait()
	if claimErr == nil || !strings.Contains(claimErr.Error(), "is full") {
		t.Errorf("claim on a full ledger: %v, want an error saying it is full", claimErr)
	}
	// The release shrinks the data: written on its own if it shared a write with the claim.
	claims, _ := slb.Load(ctx)
	if _, held := claims["lb-shared"][500]; held || releaseErr != nil {
		t.Errorf("release on a full ledger: %v, claim of 500 still held: %t; want it released", releaseErr, held)
	}
}

// readCountingClient counts the reads of a client.
type readCountingClient struct {
	client.Client
	reads atomic.Int64
}

func (c *readCountingClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.reads.Add(1)
	return c.Client.Get(ctx, key, obj, opts...)
}

// TestLedgerWritesFromItsLastCopy: one replica's claims in a row read the ledger's ConfigMap
// once, then write from the copy the API server answered; a claim after another replica
// wrote finds its copy out of date (a conflict), reads anew and loses nothing; a claim of a
// port the other replica holds, made from a copy that does not show it, is told who holds
// it; a release of
// another replica's claim, which the copy does not hold, reads anew and is applied; a claim
// after the ConfigMap was deleted makes it again.
func TestLedgerWritesFromItsLastCopy(t *testing.T) {
	ctx := context.Background()
	store := fakeClient(t)
	c1, c2 := &readCountingClient{Client: store}, &readCountingClient{Client: store}
	l1 := &lb.ConfigMapLedger{Client: c1, Namespace: "network-plugin-policy-system", Plugin: alibabacloud.SLBName}
	l2 := &lb.ConfigMapLedger{Client: c2, Namespace: "network-plugin-policy-system", Plugin: alibabacloud.SLBName}
	// reader reads the ledger as it is stored, with reads of its own.
	reader := &lb.ConfigMapLedger{Client: store, Namespace: "network-plugin-policy-system", Plugin: alibabacloud.SLBName}
	claim := func(l *lb.ConfigMapLedger, port int32) {
		t.Helper()
		if taken, err := l.Claim(ctx, "lb-a", []int32{port}, fmt.Sprintf("default/gs-%d", port), nil); err != nil || taken != nil {
			t.Fatalf("claim %d: taken %v, error %v", port, taken, err)
		}
	}
	for _, p := range []int32{500, 501, 502} {
		claim(l1, p)
	}
	if n := c1.reads.Load(); n != 1 {
		t.Errorf("three claims in a row: %d reads, want 1", n)
	}
	claim(l2, 503) // the other replica
	claim(l1, 504)
	if n := c1.reads.Load(); n != 2 {
		t.Errorf("a claim after the other replica wrote: %d reads in all, want 2 (one more, after the conflict)", n)
	}
	got, err := reader.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ports := sortedKeys(got["lb-a"]); !slices.Equal(ports, []int32{500, 501, 502, 503, 504}) {
		t.Errorf("claims of lb-a: %v, want 500-504", ports)
	}
	// The other replica claims 507; this one's claim of it, from a copy that does not show
	// it, fails the resourceVersion check, is read anew and told who holds it.
	claim(l2, 507)
	taken, err := l1.Claim(ctx, "lb-a", []int32{507}, "default/late", nil)
	if err != nil || taken[507].Owner != "default/gs-507" {
		t.Errorf("a claim from a stale copy of a port the other replica holds: taken %v, error %v; want it held by default/gs-507", taken, err)
	}
	if err := l2.Release(ctx, "lb-a", "default/gs-507", time.Time{}); err != nil {
		t.Fatal(err)
	}
	// The other replica claims 505; a release of it by this one, whose copy does not hold
	// it, is decided on a fresh read, and applied.
	claim(l2, 505)
	before := c1.reads.Load()
	if err := l1.Release(ctx, "lb-a", "default/gs-505", time.Time{}); err != nil {
		t.Fatal(err)
	}
	if n := c1.reads.Load() - before; n != 1 {
		t.Errorf("a release the copy cannot decide: %d reads, want 1", n)
	}
	if got, err = reader.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if ports := sortedKeys(got["lb-a"]); !slices.Equal(ports, []int32{500, 501, 502, 503, 504}) {
		t.Errorf("claims of lb-a after the release of 505: %v, want 500-504", ports)
	}
	var cms corev1.ConfigMapList
	if err := store.List(ctx, &cms, client.InNamespace("network-plugin-policy-system")); err != nil {
		t.Fatal(err)
	}
	for i := range cms.Items {
		if err := store.Delete(ctx, &cms.Items[i]); err != nil {
			t.Fatal(err)
		}
	}
	claim(l1, 506)
	if got, err = reader.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if ports := sortedKeys(got["lb-a"]); !slices.Equal(ports, []int32{506}) {
		t.Errorf("claims of lb-a after the ConfigMap was deleted: %v, want 506", ports)
	}
}

// sortedKeys returns m's ports in order.
func sortedKeys(m map[int32]lb.Claim) []int32 {
	out := make([]int32, 0, len(m))
	for p := range m {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}
