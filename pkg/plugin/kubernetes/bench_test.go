package kubernetes

import (
	"context"
	"fmt"
	"testing"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
)

// BenchmarkHostPortAllocate measures one allocation and its release (the CREATE and
// DELETE of one pod) in OKG's default range (8000-9000, 1001 ports) with 10 and
// 10,000 pods already holding a port. Figures: docs/benchmarks.md, section Plugins.
func BenchmarkHostPortAllocate(b *testing.B) {
	for _, allocated := range []int{10, 10000} {
		b.Run(fmt.Sprintf("allocated=%d", allocated), func(b *testing.B) {
			a := newHostPortAllocator(plugin.DefaultConfig().Kubernetes.HostPort)
			for i := range allocated {
				if _, _, err := a.allocate(allocKey{namespace: "game", name: fmt.Sprintf("old-%d", i)}, 1); err != nil {
					b.Fatal(err)
				}
			}
			key := allocKey{namespace: "game", name: "gs-new"}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, _, err := a.allocate(key, 1); err != nil {
					b.Fatal(err)
				}
				a.releaseLocked(key)
			}
		})
	}
}

// BenchmarkHostPortOnPodAdded measures the whole CREATE path of the plugin (decode
// network-conf, parse ContainerPorts, allocate, patch the container, write the
// NotReady status) for a one-port pod, with 10 and 10,000 pods allocated; the
// allocation is released after each call.
func BenchmarkHostPortOnPodAdded(b *testing.B) {
	for _, allocated := range []int{10, 10000} {
		b.Run(fmt.Sprintf("allocated=%d", allocated), func(b *testing.B) {
			h := NewHostPort()
			ctx := context.Background()
			for i := range allocated {
				if _, err := h.OnPodAdded(ctx, nil, newPod(fmt.Sprintf("old-%d", i), HostPortName, param("ContainerPorts", "game:7777/UDP")).obj()); err != nil {
					b.Fatal(err)
				}
			}
			pod := newPod("gs-new", HostPortName, param("ContainerPorts", "game:7777/UDP")).obj()
			key := allocKey{namespace: "game", name: "gs-new"}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				b.StopTimer()
				in := pod.DeepCopy()
				b.StartTimer()
				if _, err := h.OnPodAdded(ctx, nil, in); err != nil {
					b.Fatal(err)
				}
				h.alloc.releaseLocked(key)
			}
		})
	}
}
