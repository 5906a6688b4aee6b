package lb

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
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
	// Adopt records ports of lb as owner's as Claim does (no stale test), dated since, the
	// creation of the existing Service that holds them, not now: another replica records
	// the ports of a Service it did not make, and its record must be one that the release
	// at that Service's deletion (Release with a cutoff after since) removes. A claim dated
	// in the past is never stale while its Service exists (see Plugin.Sweep and the stale
	// test of Claim), so the date costs nothing. A zero since dates it now.
	Adopt(ctx context.Context, lb string, ports []int32, owner string, since time.Time) (taken map[int32]Claim, err error)
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

// LedgerShards is how many ConfigMaps the ledger spreads its claims over: a fixed set, so
// that the manager's rights name them (get and update by name, no create, no list) and their
// number does not grow with the load balancer ids pods name. A ConfigMap holds at most 1 MiB
// (the API server's limit), 6,000 to 9,000 claims of 110 to 170 bytes (by the length of the
// Services' names): 8 of them hold some 50,000 listener ports in use at once, spread by a
// hash of the load balancer.
const LedgerShards = 8

// DefaultLedgerName is the ledger ConfigMaps' base name (the manager's --lb-ledger-name):
// they are "<name>-0" to "<name>-7" (LedgerConfigMapNames), created empty by the manifests
// (config/manager/ledger.yaml, the chart's ledger.yaml).
const DefaultLedgerName = "network-plugin-policy-lb-ledger"

// LedgerConfigMapNames returns the names of the ledger's ConfigMaps for base name: "<name>-<i>"
// for i in 0..LedgerShards-1.
func LedgerConfigMapNames(name string) []string {
	out := make([]string, LedgerShards)
	for i := range out {
		out[i] = name + "-" + strconv.Itoa(i)
	}
	return out
}

// LabelLedger marked the per-load-balancer ConfigMaps ("npp-lb-<hash>-<hash>") of earlier
// releases, whose number grew with the ids pods named. This release neither reads nor writes
// them; remove them after the upgrade with
// `kubectl -n <namespace> delete configmap -l policy.game.kruise.io/lb-ledger`.
const LabelLedger = "policy.game.kruise.io/lb-ledger"

// ConfigMapLedger is a Ledger in LedgerShards ConfigMaps of the manager's namespace
// (LedgerConfigMapNames of Name). A load balancer's claims live in one of them, chosen by the
// SHA-256 of the plugin group and the id: its data maps "<h>.<port>" to the claim ("<owner>
// <RFC 3339 time>") and "<h>.lb" to "<plugin group>\n<load balancer id>", where <h> is the
// first 32 hex digits of that hash (ConfigMap keys allow no other characters than letters,
// digits, '-', '_' and '.'; ids are pod input, and a 128-bit prefix of SHA-256 is out of reach
// of a collision search; a claim whose prefix names another id is refused). Every write is
// guarded by the ConfigMap's resourceVersion, retried on a conflict, so that two replicas
// claiming at once are serialized by the API server: the second sees the first's ports. Within
// a replica the claims and releases of one ConfigMap go through one writer (ledgerWriter),
// which puts all those waiting into one write, applied in order, so that a burst of admissions
// does not race itself (the writers are the process's, shared by the ledgers of every plugin
// group). One write holds all of a Service's ports (atomic for a TCPUDP pair or several ports).
// A ConfigMap that is missing is created, which the manager's shipped rights do not allow: the
// manifests create them. Use it by pointer; it must not be copied after its first use.
type ConfigMapLedger struct {
	// Client reads and writes the ConfigMaps (the API server directly: a cached read could
	// miss a claim another replica just made, and the write's resourceVersion check would
	// then fail, costing a retry, never a duplicate).
	Client client.Client
	// Namespace is the manager's namespace.
	Namespace string
	// Name is the ConfigMaps' base name; empty is DefaultLedgerName.
	Name string
	// Plugin is the ledger's group: the network type, e.g. "AlibabaCloud-SLB", or the
	// Spec's LedgerGroup that plugins sharing load balancers have in common
	// (Plugin.LedgerKey).
	Plugin string
	// Now is the clock of the claims' times; nil is time.Now.
	Now func() time.Time
}

// writers holds each ConfigMap's *ledgerWriter (by writerKey), started at its first claim or
// release and gone after writerIdle without one. It is the process's, not a ledger's: the
// ledgers of several plugins (one per plugin group) share the same ConfigMaps, and one
// writer per ConfigMap keeps their writes from racing each other for its resourceVersion.
var writers sync.Map

// writerKey names a ConfigMap's writer: the client that writes it (a pointer, so
// comparable), its namespace and its name.
type writerKey struct {
	client          client.Client
	namespace, name string
}

// ledgerOp is one claim or release waiting for its load balancer's ledgerWriter: change is
// applied to the ledger's data in the order the writer received the ops (it may run again
// on a retried write: it must reset what it reports), and err is delivered on done.
type ledgerOp struct {
	change func(data map[string]string) (write bool)
	// release marks an op that only removes claims: when a group's write fails because the
	// ConfigMap is full, the releases are written again on their own, so that a full
	// ConfigMap can always be emptied.
	release bool
	err     error
	done    chan struct{}
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
	// last is the ConfigMap as this writer last read or wrote it (the API server's answer),
	// nil when unknown: the next write starts from it instead of a read, and a conflict (the
	// other replica wrote since) reads it anew. Only the writer's goroutine uses it.
	last *corev1.ConfigMap
}

// writerIdle is how long a ledgerWriter waits for an op before it ends: load balancers are
// named by pods, so their writers must not outlive their use.
const writerIdle = 30 * time.Second

// writeTimeout bounds one group write, its conflict retries included; the ops' own contexts
// do not, since the write serves several callers.
const writeTimeout = 10 * time.Second

// maxGroup is the most ops one write carries; the rest wait for the next.
const maxGroup = 256

// do runs change in the data of lb's ConfigMap through that ConfigMap's writer and returns
// the write's error, or ctx's when ctx ends first (the change may still be written: a claim
// left behind that way is stale, and Plugin.Sweep frees it).
func (l *ConfigMapLedger) do(ctx context.Context, lb string, release bool, change func(data map[string]string) bool) error {
	shard, _ := l.place(lb)
	op := &ledgerOp{change: change, release: release, done: make(chan struct{})}
	key := writerKey{client: l.Client, namespace: l.Namespace, name: shard}
	for {
		v, loaded := writers.LoadOrStore(key, &ledgerWriter{ops: make(chan *ledgerOp), quit: make(chan struct{})})
		w := v.(*ledgerWriter)
		if !loaded {
			go l.write(key, w)
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

// write is the writer of ConfigMap shard: it takes an op, every other op already waiting (up
// to maxGroup), and commits them in one update, until no op comes for writerIdle.
func (l *ConfigMapLedger) write(key writerKey, w *ledgerWriter) {
	shard := key.name
	idle := time.NewTimer(writerIdle)
	defer idle.Stop()
	for {
		var group []*ledgerOp
		select {
		case op := <-w.ops:
			group = append(group, op)
		case <-idle.C:
			writers.CompareAndDelete(key, w)
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
		apply := func(ops []*ledgerOp) error {
			ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
			defer cancel()
			return l.update(ctx, shard, &w.last, func(data map[string]string) bool {
				write := false
				for _, op := range ops {
					if op.change(data) {
						write = true
					}
				}
				return write
			})
		}
		err := apply(group)
		var releases []*ledgerOp
		if errors.Is(err, errLedgerFull) {
			for _, op := range group {
				if op.release {
					releases = append(releases, op)
				}
			}
			if len(releases) > 0 && len(releases) < len(group) {
				relErr := apply(releases)
				for _, op := range releases {
					op.err = relErr
				}
			}
		}
		for _, op := range group {
			if !slices.Contains(releases, op) || len(releases) == len(group) {
				op.err = err
			}
			close(op.done)
		}
		idle.Reset(writerIdle)
	}
}

var _ Ledger = (*ConfigMapLedger)(nil)

// ledgerBackoff paces the retries of a claim or release that lost an optimistic-lock race
// to another writer of the same ConfigMap: up to 24 tries over 2.5 to 5 s, jittered so that
// racing replicas and requests spread out (client-go's retry.OnError).
var ledgerBackoff = wait.Backoff{Steps: 24, Duration: 5 * time.Millisecond, Factor: 1.3, Jitter: 1, Cap: 200 * time.Millisecond}

// baseName is l.Name, or DefaultLedgerName.
func (l *ConfigMapLedger) baseName() string {
	if l.Name == "" {
		return DefaultLedgerName
	}
	return l.Name
}

// place returns the ConfigMap that holds lb's claims and the prefix of their keys ("<h>.").
func (l *ConfigMapLedger) place(lb string) (shard, prefix string) {
	sum := sha256.Sum256([]byte(l.Plugin + "\x00" + lb))
	return l.baseName() + "-" + strconv.Itoa(int(sum[0])%LedgerShards), hex.EncodeToString(sum[:16]) + "."
}

// idKey is the key, under a load balancer's prefix, whose value names it: "<plugin>\n<lb>".
const idKey = "lb"

// errLedgerFull is wrapped by a write that the API server refused for the ConfigMap's size.
var errLedgerFull = errors.New("port ledger full")

// update applies change to the data of ConfigMap shard (created when missing) under the
// resourceVersion check, retrying on a conflict (or a create that lost to another) after
// ledgerBackoff. It starts from *last, the writer's copy of the ConfigMap from its previous
// write, when there is one, and reads the ConfigMap otherwise: one replica's writes in a row
// cost one request each. A copy that is out of date (another replica wrote, or the
// ConfigMap was deleted) fails the update's resourceVersion check, and the retry reads it; a
// change that needs no write by the copy (a release of a claim the copy does not hold) is
// decided on a fresh read, since the copy may miss another writer's claims. *last is left
// as the API server's answer, or nil when unknown.
func (l *ConfigMapLedger) update(ctx context.Context, shard string, last **corev1.ConfigMap, change func(data map[string]string) (write bool)) error {
	key := client.ObjectKey{Namespace: l.Namespace, Name: shard}
	fromCopy := false
	put := func(cm *corev1.ConfigMap) error {
		err := l.Client.Update(ctx, cm)
		if apierrors.IsRequestEntityTooLargeError(err) || (apierrors.IsInvalid(err) && strings.Contains(err.Error(), "Too long")) {
			return fmt.Errorf("the port ledger's ConfigMap %s is full (the API server's 1 MiB per object; %d ConfigMaps hold the claims): %w: %w", key, LedgerShards, errLedgerFull, err)
		}
		if err == nil {
			*last = cm
		}
		return err
	}
	err := retry.OnError(ledgerBackoff, func(err error) bool {
		return (apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || (fromCopy && apierrors.IsNotFound(err))) && ctx.Err() == nil
	}, func() error {
		fromCopy = *last != nil
		if fromCopy {
			// The ConfigMap as this writer last saw it: if another writer changed it
			// since, the update is a conflict and the retry reads it.
			cm := (*last).DeepCopy()
			*last = nil
			if cm.Data == nil {
				cm.Data = map[string]string{}
			}
			if change(cm.Data) {
				return put(cm)
			}
			// Nothing to write by the copy, which may miss another writer's claims: the
			// ConfigMap as it is now decides.
			fromCopy = false
		}
		cm := &corev1.ConfigMap{}
		err := l.Client.Get(ctx, key, cm)
		switch {
		case apierrors.IsNotFound(err):
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}, Data: map[string]string{}}
			if !change(cm.Data) {
				return nil
			}
			if err := l.Client.Create(ctx, cm); apierrors.IsForbidden(err) {
				return fmt.Errorf("the port ledger's ConfigMap %s is missing and this manager may not create it (the manifests, config/ or the chart, create it empty): %w", key, err)
			} else if err != nil {
				return err
			}
			*last = cm
			return nil
		case err != nil:
			return err
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		unchanged := cm.DeepCopy()
		if !change(cm.Data) {
			*last = unchanged
			return nil
		}
		return put(cm)
	})
	if err != nil {
		return fmt.Errorf("write the port ledger (ConfigMap %s): %w", key, err)
	}
	return nil
}

// Claim implements Ledger. stale runs in the writer of lb's ConfigMap, inside the guarded
// write: it must be quick and must not claim or release itself.
func (l *ConfigMapLedger) Claim(ctx context.Context, lb string, ports []int32, owner string, stale func(Claim) bool) (map[int32]Claim, error) {
	now := time.Now
	if l.Now != nil {
		now = l.Now
	}
	return l.claim(ctx, lb, ports, owner, stale, now)
}

// Adopt implements Ledger.
func (l *ConfigMapLedger) Adopt(ctx context.Context, lb string, ports []int32, owner string, since time.Time) (map[int32]Claim, error) {
	if since.IsZero() {
		return l.Claim(ctx, lb, ports, owner, nil)
	}
	return l.claim(ctx, lb, ports, owner, nil, func() time.Time { return since })
}

// claim is Claim with the claims dated now().
func (l *ConfigMapLedger) claim(ctx context.Context, lb string, ports []int32, owner string, stale func(Claim) bool, now func() time.Time) (map[int32]Claim, error) {
	_, prefix := l.place(lb)
	var taken map[int32]Claim
	var idErr error
	err := l.do(ctx, lb, false, func(data map[string]string) bool {
		taken = nil
		idErr = nil
		if id, ok := data[prefix+idKey]; ok && id != l.Plugin+"\n"+lb {
			// Another load balancer with the same key prefix (a SHA-256 collision): refuse
			// rather than mix their claims.
			idErr = fmt.Errorf("the port ledger's key %s of load balancer %s is taken by %q", prefix, lb, id)
			return false
		}
		for _, p := range ports {
			v, ok := data[prefix+strconv.Itoa(int(p))]
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
			data[prefix+strconv.Itoa(int(p))] = encodeClaim(Claim{Owner: owner, At: now()})
		}
		data[prefix+idKey] = l.Plugin + "\n" + lb
		return true
	})
	if err != nil {
		// taken is the writer's until it has run the change, which it may not have yet.
		return nil, err
	}
	return taken, idErr
}

// Hold holds one of at most places places of load balancer lb for owner, in one guarded write:
// a place count, not ports (SLB-SharedPort's backends: the game servers one SLB serves). The
// places are the numbers 1 to places, stored as ports are (Load, ParseLedger and nppctl status
// show them as such). owner's place, when it has one, is kept and its time refreshed;
// otherwise the claims of others that stale (not nil) says are stale are dropped in the same
// write, and when the remaining places plus uncounted(their owners) (not nil: the members
// that hold no place, counted by the caller) are fewer than places, the lowest free place is
// recorded as owner's. stale and uncounted run inside the write: they must be quick. It
// returns the place, 0 when there is no room. Errors: the ledger cannot be read or written,
// or the key names another load balancer.
func (l *ConfigMapLedger) Hold(ctx context.Context, lb, owner string, places int, stale func(Claim) bool, uncounted func(holders map[string]bool) int) (int32, error) {
	now := time.Now
	if l.Now != nil {
		now = l.Now
	}
	_, prefix := l.place(lb)
	var place int32
	var idErr error
	err := l.do(ctx, lb, false, func(data map[string]string) bool {
		place, idErr = 0, nil
		if id, ok := data[prefix+idKey]; ok && id != l.Plugin+"\n"+lb {
			idErr = fmt.Errorf("the port ledger's key %s of load balancer %s is taken by %q", prefix, lb, id)
			return false
		}
		held := map[int32]bool{}
		holders := map[string]bool{}
		write := false
		for k, v := range data {
			n, ok := strings.CutPrefix(k, prefix)
			if !ok || n == idKey {
				continue
			}
			num, err := strconv.ParseInt(n, 10, 32)
			if err != nil {
				continue
			}
			c := decodeClaim(v)
			switch {
			case c.Owner == owner:
				place = int32(num)
			case stale != nil && stale(c):
				delete(data, k)
				write = true
			default:
				held[int32(num)] = true
				holders[c.Owner] = true
			}
		}
		others := len(held)
		if place == 0 && uncounted != nil {
			others += uncounted(holders)
		}
		if place == 0 && others < places {
			for n := int32(1); n <= int32(places); n++ {
				if !held[n] {
					place = n
					break
				}
			}
		}
		if place == 0 {
			return write
		}
		data[prefix+strconv.Itoa(int(place))] = encodeClaim(Claim{Owner: owner, At: now()})
		data[prefix+idKey] = l.Plugin + "\n" + lb
		return true
	})
	if err != nil {
		return 0, err
	}
	return place, idErr
}

// releaseWhere removes the claims of lb (prefix) in data for which drop says so, and lb's id
// entry once it has no claim left; it reports whether data changed.
func releaseWhere(data map[string]string, prefix string, drop func(port string, c Claim) bool) bool {
	write, left := false, false
	for k, v := range data {
		port, ok := strings.CutPrefix(k, prefix)
		if !ok || port == idKey {
			continue
		}
		if drop(port, decodeClaim(v)) {
			delete(data, k)
			write = true
		} else {
			left = true
		}
	}
	if _, ok := data[prefix+idKey]; ok && !left {
		delete(data, prefix+idKey)
		write = true
	}
	return write
}

// Release implements Ledger.
func (l *ConfigMapLedger) Release(ctx context.Context, lb, owner string, cutoff time.Time) error {
	_, prefix := l.place(lb)
	return l.do(ctx, lb, true, func(data map[string]string) bool {
		return releaseWhere(data, prefix, func(_ string, c Claim) bool {
			return c.Owner == owner && (cutoff.IsZero() || c.At.Before(cutoff))
		})
	})
}

// ReleasePorts implements Ledger.
func (l *ConfigMapLedger) ReleasePorts(ctx context.Context, lb, owner string, ports []int32) error {
	_, prefix := l.place(lb)
	release := map[string]bool{}
	for _, p := range ports {
		release[strconv.Itoa(int(p))] = true
	}
	return l.do(ctx, lb, true, func(data map[string]string) bool {
		return releaseWhere(data, prefix, func(port string, c Claim) bool { return release[port] && c.Owner == owner })
	})
}

// Load implements Ledger: the claims of l.Plugin in every ConfigMap of the ledger. A missing
// ConfigMap holds nothing; one that cannot be read is named in the error, joined with the
// others', and the claims of the rest are returned with it.
func (l *ConfigMapLedger) Load(ctx context.Context) (map[string]map[int32]Claim, error) {
	out := map[string]map[int32]Claim{}
	var errs []error
	for _, name := range LedgerConfigMapNames(l.baseName()) {
		cm := &corev1.ConfigMap{}
		if err := l.Client.Get(ctx, client.ObjectKey{Namespace: l.Namespace, Name: name}, cm); apierrors.IsNotFound(err) {
			continue
		} else if err != nil {
			errs = append(errs, fmt.Errorf("read the port ledger's ConfigMap %s/%s: %w", l.Namespace, name, err))
			continue
		}
		for lb, ports := range ParseLedger(cm.Data)[l.Plugin] {
			out[lb] = ports
		}
	}
	return out, errors.Join(errs...)
}

// ParseLedger reads the data of one of the ledger's ConfigMaps: plugin group -> load balancer
// -> port -> claim. Entries it cannot read (a key without its id entry, a port that is not a
// number) are left out.
func ParseLedger(data map[string]string) map[string]map[string]map[int32]Claim {
	ids := map[string][2]string{}          // <h> -> plugin group, load balancer
	claims := map[string]map[int32]Claim{} // <h> -> port -> claim
	for k, v := range data {
		h, rest, ok := strings.Cut(k, ".")
		if !ok {
			continue
		}
		if rest == idKey {
			if group, lb, ok := strings.Cut(v, "\n"); ok {
				ids[h] = [2]string{group, lb}
			}
			continue
		}
		n, err := strconv.ParseInt(rest, 10, 32)
		if err != nil {
			continue
		}
		if claims[h] == nil {
			claims[h] = map[int32]Claim{}
		}
		claims[h][int32(n)] = decodeClaim(v)
	}
	out := map[string]map[string]map[int32]Claim{}
	for h, id := range ids {
		if out[id[0]] == nil {
			out[id[0]] = map[string]map[int32]Claim{}
		}
		ports := claims[h]
		if ports == nil {
			ports = map[int32]Claim{}
		}
		out[id[0]][id[1]] = ports
	}
	return out
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
