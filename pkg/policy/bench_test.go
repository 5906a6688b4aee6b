package policy

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
)

var benchPlugins = []string{"Kubernetes-NodePort", "Kubernetes-HostPort", "Kubernetes-Ingress"}

// benchPolicies returns n policies: 10 in the root namespace and n-10 spread over the 100
// namespaces ns-0..ns-99. Namespace policy j is in ns-(j%100), names plugin
// benchPlugins[(j/100)%3], selects pods with owner-gss gss-(j/100), and sets failure, timeout
// and retry. Root policy k names "*" (k=0) or benchPlugins[k%3], sets a timeout and, for even
// k, the readiness gate. Every policy has one matchCondition.
func benchPolicies(n int) []*v1alpha1.NetworkPluginPolicy {
	var out []*v1alpha1.NetworkPluginPolicy
	for k := range min(n, 10) {
		entry := benchPlugins[k%3]
		if k == 0 {
			entry = "*"
		}
		opts := []policyOption{plugins(entry), timeout(5 * time.Second), matchCondition("not-delete", "request.operation != 'DELETE'")}
		if k%2 == 0 {
			opts = append(opts, readinessGate(true))
		}
		out = append(out, newPolicy(testRoot, fmt.Sprintf("root-%02d", k), opts...))
	}
	for j := range max(n-10, 0) {
		out = append(out, newPolicy(fmt.Sprintf("ns-%d", j%100), fmt.Sprintf("p-%05d", j),
			plugins(benchPlugins[(j/100)%3]),
			podSelector("game.kruise.io/owner-gss", fmt.Sprintf("gss-%d", j/100)),
			matchCondition("not-canary", "!('canary' in object.metadata.labels)"),
			mode(v1alpha1.FailureModeAsynchronous), timeout(3*time.Second),
			retry(v1alpha1.RetryPolicy{Window: &metavDuration5m})))
	}
	return out
}

func benchInput() Input {
	return Input{
		Pod:       newPod("ns-42", "lobby-0", "game.kruise.io/owner-gss", "gss-3", "app", "lobby"),
		Namespace: newNamespace("ns-42", "env", "prod"),
		Request:   RequestInfo{Operation: "CREATE"},
		Plugin:    nodePort,
	}
}

// BenchmarkResolve measures one resolution against a synced store (go test -bench Resolve).
func BenchmarkResolve(b *testing.B) {
	for _, n := range []int{10, 1000, 10000} {
		b.Run(fmt.Sprintf("policies=%d", n), func(b *testing.B) {
			resolver := NewResolver(newTestStore(b, benchPolicies(n)...))
			ctx := context.Background()
			in := benchInput()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := resolver.Resolve(ctx, in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	// Worst case: 1000 policies in the pod's namespace all naming its plugin, without
	// podSelector; only the last one's matchCondition is true, so all 1000 are evaluated.
	b.Run("worst-case=1000-in-one-namespace", func(b *testing.B) {
		var policies []*v1alpha1.NetworkPluginPolicy
		for j := range 1000 {
			policies = append(policies, newPolicy("ns-42", fmt.Sprintf("p-%05d", j), plugins("Kubernetes-NodePort"),
				matchCondition("owner", fmt.Sprintf("object.metadata.labels['game.kruise.io/owner-gss'] == 'gss-%d'", j+3-999)),
				timeout(3*time.Second)))
		}
		resolver := NewResolver(newTestStore(b, policies...))
		ctx := context.Background()
		in := benchInput()
		b.ReportAllocs()
		for b.Loop() {
			d, err := resolver.Resolve(ctx, in)
			if err != nil {
				b.Fatal(err)
			}
			if d.Explanation.Timeout.Policy == nil || d.Explanation.Timeout.Policy.Name != "p-00999" {
				b.Fatalf("unexpected decision: %s", d.Explanation)
			}
		}
	})
}

// BenchmarkStoreUpdate measures one informer update event (a new generation of one policy)
// until the new snapshot is published, in a store holding n policies: with an expression the
// program cache already holds (shared), and with a new expression text each time (compiled).
func BenchmarkStoreUpdate(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		for _, distinct := range []bool{false, true} {
			name := fmt.Sprintf("policies=%d/expression=shared", n)
			if distinct {
				name = fmt.Sprintf("policies=%d/expression=new", n)
			}
			b.Run(name, func(b *testing.B) {
				policies := benchPolicies(n)
				store := newTestStore(b, policies...)
				h := store.Handler(context.Background())
				p := policies[len(policies)-1].DeepCopy()
				b.ReportAllocs()
				for b.Loop() {
					p.Generation++
					if distinct {
						p.Spec.MatchConditions[0].Expression = fmt.Sprintf("!('canary' in object.metadata.labels) || object.metadata.name == 'x-%d'", p.Generation)
					}
					before := store.Snapshot()
					h.OnUpdate(nil, p)
					if store.Snapshot() == before {
						b.Fatal("no new snapshot")
					}
				}
			})
		}
	}
}

// BenchmarkStoreMemory reports the heap held by a store of 10000 policies per 1000 policies
// (metric heap-bytes/1000-policies): with the one matchCondition text benchPolicies uses
// (shared programs) and with a distinct text per policy.
func BenchmarkStoreMemory(b *testing.B) {
	for _, distinct := range []bool{false, true} {
		name := "expression=shared"
		if distinct {
			name = "expression=distinct"
		}
		b.Run(name, func(b *testing.B) {
			policies := benchPolicies(10000)
			if distinct {
				for i, p := range policies {
					p.Spec.MatchConditions[0].Expression = fmt.Sprintf("object.metadata.name != 'x-%d'", i)
				}
			}
			var perThousand float64
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				store := newTestStore(b, policies...)
				runtime.GC()
				runtime.ReadMemStats(&after)
				perThousand = float64(after.HeapAlloc-before.HeapAlloc) / 10
				runtime.KeepAlive(store)
			}
			b.ReportMetric(perThousand, "heap-bytes/1000-policies")
		})
	}
}
