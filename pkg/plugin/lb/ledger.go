package lb

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Ledger is where every replica records the listener ports it hands out, so that no two
// replicas hand out one port of one load balancer twice: an in-memory allocator is private
// to its replica, and with force-override-listeners a duplicate port takes over a live
// server's listener. A claim must be in the ledger before the Service that uses the port
// is written.
type Ledger interface {
	// Claim records ports of load balancer lb as owner's ("<namespace>/<name>" of the
	// Service). A port another owner holds is taken over when stale (not nil) says that
	// owner's claim is stale (a claim for a pod that never came into being); otherwise it is
	// returned in taken, with that owner's claim, and nothing is recorded. Errors: the
	// ledger cannot be read or written.
	Claim(ctx context.Context, lb string, ports []int32, owner string, stale func(Claim) bool) (taken map[int32]Claim, err error)
	// Release removes owner's ports of lb claimed before cutoff (the zero time: all of
	// them), in the same guarded write that reads them. Releasing what is not held is not
	// an error.
	Release(ctx context.Context, lb, owner string, cutoff time.Time) error
	// ReleasePorts removes owner's claims of the listed ports of lb, in one guarded write;
	// a port another owner holds, or nobody, is left as it is.
	ReleasePorts(ctx context.Context, lb, owner string, ports []int32) error
	// Load returns every claim: load balancer -> port -> claim.
	Load(ctx context.Context) (map[string]map[int32]Claim, error)
}

// Claim is one port's entry of a Ledger.
type Claim struct {
	// Owner is the Service's "<namespace>/<name>".
	Owner string
	// At is when the port was claimed (second precision).
	At time.Time
}

// encodeClaim and decodeClaim are a ConfigMapLedger entry's value: "<owner> <RFC 3339 time>".
func encodeClaim(c Claim) string { return c.Owner + " " + c.At.UTC().Format(time.RFC3339) }

func decodeClaim(v string) Claim {
	owner, at, _ := strings.Cut(v, " ")
	t, _ := time.Parse(time.RFC3339, at)
	return Claim{Owner: owner, At: t}
}

// LabelLedger marks the ConfigMaps of ConfigMapLedger, with the plugin's name as value.
const LabelLedger = "policy.game.kruise.io/lb-ledger"

// AnnotationLedgerLB holds the load balancer id of a ledger ConfigMap (its name is a hash).
const AnnotationLedgerLB = "policy.game.kruise.io/lb-id"

// ConfigMapLedger is a Ledger of one ConfigMap per load balancer in the manager's namespace,
// named "npp-lb-<plugin hash>-<lb hash>" (FNV-1a 32-bit, hex), labelled LabelLedger, whose
// data maps each claimed port ("<port>") to its owner. Every write is guarded by the
// ConfigMap's resourceVersion, retried on a conflict, so that two replicas claiming at once
// are serialized by the API server: the second sees the first's ports. Within a replica the
// claims and releases of one load balancer go through one writer (ledgerWriter), which puts
// all those waiting into one write, applied in order, so that a burst of admissions does
// not race itself. One write holds all of a Service's ports (atomic for a TCPUDP pair or
// several ports). Use it by pointer; it must not be copied after its first use.
type ConfigMapLedger struct {
	// Client reads and writes the ConfigMaps (the API server directly: a cached read could
	// miss a claim another replica just made, and the write's resourceVersion check would
	// then fail, costing a retry, never a duplicate).
	Client client.Client
	// Namespace is the manager's namespace.
	Namespace string
	// Plugin is the ledger's group: the network type, e.g. "AlibabaCloud-SLB", or the
	// Spec's LedgerGroup that plugins sharing load balancers have in common
	// (Plugin.LedgerKey).
	Plugin string
	// Now is the clock of the claims' times; nil is time.Now.
	Now func() time.Time

	// writers holds each load balancer's *ledgerWriter, started at its first claim or
	// release and gone after writerIdle without one.
	writers sync.Map
}

// ledgerOp is one claim or release waiting for its load balancer's ledgerWriter: change is
// applied to the ledger's data in the order the writer received the ops (it may run again
// on a retried write: it must reset what it reports), and err is delivered on done.
type ledgerOp struct {
	change func(data map[string]string) (write bool)
	err    error
	done   chan struct{}
}

// ledgerWriter commits the claims and releases of one load balancer's ledger in groups:
// every op that arrives while a write is in flight goes into the next write, so that N
// concurrent admissions on one load balancer cost about one write per write's round trip,
// not N writes racing for the resourceVersion (measured in docs/benchmarks.md, "Time to
// playable": 1,000 SLB game servers at 20 creates a second on 6 load balancers). Ops are
// received on an unbuffered channel, so an op is either taken by a running writer or not
// sent at all; quit is closed when the writer has gone idle and will take no more.
type ledgerWriter struct {
	ops  chan *ledgerOp
	quit chan struct{}
}

// writerIdle is how long a ledgerWriter waits for an op before it ends: load balancers are
// named by pods, so their writers must not outlive their use.
const writerIdle = 30 * time.Second

// writeTimeout bounds one group write, its conflict retries included; the ops' own contexts
// do not, since the write serves several callers.
const writeTimeout = 10 * time.Second

// maxGroup is the most ops one write carries; the rest wait for the next.
const maxGroup = 256

// do runs change in lb's ledger through lb's writer and returns the write's error, or
// ctx's when ctx ends first (the change may still be written: a claim left behind that way
// is stale, and Plugin.Sweep frees it).
func (l *ConfigMapLedger) do(ctx context.Context, lb string, change func(data map[string]string) bool) error {
	op := &ledgerOp{change: change, done: make(chan struct{})}
	for {
		v, loaded := l.writers.LoadOrStore(lb, &ledgerWriter{ops: make(chan *ledgerOp), quit: make(chan struct{})})
		w := v.(*ledgerWriter)
		if !loaded {
			go l.write(lb, w)
		}
		select {
		case w.ops <- op:
			select {
			case <-op.done:
				return op.err
			case <-ctx.Done():
				return fmt.Errorf("write the port ledger of load balancer %s: %w", lb, ctx.Err())
			}
		case <-w.quit:
			// That writer went idle; the next LoadOrStore starts another.
		case <-ctx.Done():
			return fmt.Errorf("write the port ledger of load balancer %s: %w", lb, ctx.Err())
		}
	}
}

// write is lb's writer: it takes an op, every other op already waiting (up to maxGroup), and
// commits them in one update, until no op comes for writerIdle.
func (l *ConfigMapLedger) write(lb string, w *ledgerWriter) {
	idle := time.NewTimer(writerIdle)
	defer idle.Stop()
	for {
		var group []*ledgerOp
		select {
		case op := <-w.ops:
			group = append(group, op)
		case <-idle.C:
			l.writers.CompareAndDelete(lb, w)
			close(w.quit)
			return
		}
	collect:
		for len(group) < maxGroup {
			select {
			case op := <-w.ops:
				group = append(group, op)
			default:
				break collect
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
		err := l.update(ctx, lb, func(data map[string]string) bool {
			write := false
			for _, op := range group {
				if op.change(data) {
					write = true
				}
			}
			return write
		})
		cancel()
		for _, op := range group {
			op.err = err
			close(op.done)
		}
		idle.Reset(writerIdle)
	}
}

var _ Ledger = (*ConfigMapLedger)(nil)

// ledgerBackoff paces the retries of a claim or release that lost an optimistic-lock race
// to another writer of the same load balancer's ledger: up to 24 tries over 2.5 to 5 s,
// jittered so that racing replicas and requests spread out (client-go's retry.OnError).
var ledgerBackoff = wait.Backoff{Steps: 24, Duration: 5 * time.Millisecond, Factor: 1.3, Jitter: 1, Cap: 200 * time.Millisecond}

func hash32(s string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(s))
	return strconv.FormatUint(uint64(h.Sum32()), 16)
}

// name returns the ConfigMap name of lb.
func (l *ConfigMapLedger) name(lb string) string {
	return "npp-lb-" + hash32(l.Plugin) + "-" + hash32(lb)
}

// update applies change to lb's ConfigMap (created when missing) under the resourceVersion
// check, retrying on a conflict (or a create that lost to another) after ledgerBackoff.
func (l *ConfigMapLedger) update(ctx context.Context, lb string, change func(data map[string]string) (write bool)) error {
	key := client.ObjectKey{Namespace: l.Namespace, Name: l.name(lb)}
	err := retry.OnError(ledgerBackoff, func(err error) bool {
		return (apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)) && ctx.Err() == nil
	}, func() error {
		cm := &corev1.ConfigMap{}
		err := l.Client.Get(ctx, key, cm)
		switch {
		case apierrors.IsNotFound(err):
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name,
				Labels: map[string]string{LabelLedger: labelValue(l.Plugin)}, Annotations: map[string]string{AnnotationLedgerLB: lb}},
				Data: map[string]string{}}
			if !change(cm.Data) {
				return nil
			}
			return l.Client.Create(ctx, cm)
		case err != nil:
			return err
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		if !change(cm.Data) {
			return nil
		}
		return l.Client.Update(ctx, cm)
	})
	if err != nil {
		return fmt.Errorf("write the port ledger of load balancer %s: %w", lb, err)
	}
	return nil
}

// labelValue is the plugin name as a label value (network types are valid ones).
func labelValue(plugin string) string { return strings.ReplaceAll(plugin, "/", "-") }

// Claim implements Ledger. stale runs in the writer of lb's ledger, inside the guarded
// write: it must be quick and must not claim or release itself.
func (l *ConfigMapLedger) Claim(ctx context.Context, lb string, ports []int32, owner string, stale func(Claim) bool) (map[int32]Claim, error) {
	now := time.Now
	if l.Now != nil {
		now = l.Now
	}
	var taken map[int32]Claim
	err := l.do(ctx, lb, func(data map[string]string) bool {
		taken = nil
		for _, p := range ports {
			v, ok := data[strconv.Itoa(int(p))]
			if !ok {
				continue
			}
			if c := decodeClaim(v); c.Owner != owner && (stale == nil || !stale(c)) {
				if taken == nil {
					taken = map[int32]Claim{}
				}
				taken[p] = c
			}
		}
		if taken != nil {
			return false
		}
		// Every claim is written, the owner's own again included: its time is refreshed, so
		// that a sweep never takes a claim just made or made again.
		for _, p := range ports {
			data[strconv.Itoa(int(p))] = encodeClaim(Claim{Owner: owner, At: now()})
		}
		return true
	})
	if err != nil {
		// taken is the writer's until it has run the change, which it may not have yet.
		return nil, err
	}
	return taken, nil
}

// Release implements Ledger.
func (l *ConfigMapLedger) Release(ctx context.Context, lb, owner string, cutoff time.Time) error {
	return l.do(ctx, lb, func(data map[string]string) bool {
		write := false
		for p, v := range data {
			if c := decodeClaim(v); c.Owner == owner && (cutoff.IsZero() || c.At.Before(cutoff)) {
				delete(data, p)
				write = true
			}
		}
		return write
	})
}

// ReleasePorts implements Ledger.
func (l *ConfigMapLedger) ReleasePorts(ctx context.Context, lb, owner string, ports []int32) error {
	return l.do(ctx, lb, func(data map[string]string) bool {
		write := false
		for _, port := range ports {
			k := strconv.Itoa(int(port))
			if v, ok := data[k]; ok && decodeClaim(v).Owner == owner {
				delete(data, k)
				write = true
			}
		}
		return write
	})
}

// Load implements Ledger.
func (l *ConfigMapLedger) Load(ctx context.Context) (map[string]map[int32]Claim, error) {
	var list corev1.ConfigMapList
	if err := l.Client.List(ctx, &list, client.InNamespace(l.Namespace), client.MatchingLabels{LabelLedger: labelValue(l.Plugin)}); err != nil {
		return nil, fmt.Errorf("list the port ledgers: %w", err)
	}
	out := map[string]map[int32]Claim{}
	for _, cm := range list.Items {
		lb := cm.Annotations[AnnotationLedgerLB]
		if lb == "" {
			continue
		}
		ports := map[int32]Claim{}
		for k, v := range cm.Data {
			if p, err := strconv.ParseInt(k, 10, 32); err == nil {
				ports[int32(p)] = decodeClaim(v)
			}
		}
		out[lb] = ports
	}
	return out, nil
}

// sortedPorts returns the keys of m in order.
func sortedPorts[V any](m map[int32]V) []int32 {
	out := make([]int32, 0, len(m))
	for p := range m {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}
