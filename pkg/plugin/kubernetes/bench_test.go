package kubernetes

import (
	"context"
	"fmt"
	"testing"

	"k8s.io/utils/clock"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
)

// BenchmarkHostPortAllocate measures one allocation and its release (the reservation
// of one CREATE, dropped again) in OKG's default range (8000-9000, 1001 ports) with 10
// and 10,000 pods observed through the pod informer, each holding one port (spread
// least-used first, as the allocator would have placed them). Figures: docs/benchmarks.md, section Plugins.
func BenchmarkHostPortAllocate(b *testing.B) {
	for _, allocated := range []int{10, 10000} {
		b.Run(fmt.Sprintf("allocated=%d", allocated), func(b *testing.B) {
			a := newHostPortAllocator(plugin.DefaultConfig().Kubernetes.HostPort, clock.RealClock{}, ReservationTTL)
			observeSpread(a, allocated)
			key := reservationKey{namespace: "game", name: "gs-new"}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, _, err := a.allocate(key, "", 1); err != nil {
					b.Fatal(err)
				}
				a.unreserveLocked(key)
			}
		})
	}
}

// BenchmarkHostPortOnPodAdded measures the whole CREATE path of the plugin (decode
// network-conf, parse ContainerPorts, allocate, patch the container, write the
// NotReady status) for a one-port pod, with 10 and 10,000 observed pods; the
// reservation is dropped after each call.
func BenchmarkHostPortOnPodAdded(b *testing.B) {
	for _, allocated := range []int{10, 10000} {
		b.Run(fmt.Sprintf("allocated=%d", allocated), func(b *testing.B) {
			h := NewHostPort()
			ctx := context.Background()
			observeSpread(h.alloc, allocated)
			pod := newPod("gs-new", HostPortName, param("ContainerPorts", "game:7777/UDP")).obj()
			key := reservationKey{namespace: "game", name: "gs-new"}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				b.StopTimer()
				in := pod.DeepCopy()
				b.StartTimer()
				if _, err := h.OnPodAdded(ctx, nil, in); err != nil {
					b.Fatal(err)
				}
				h.alloc.unreserveLocked(key)
			}
		})
	}
}

// observeSpread feeds a n observed Kubernetes-HostPort pods, pod i on port
// min + i mod size (what least-used allocation gives).
func observeSpread(a *hostPortAllocator, n int) {
	for i := range n {
		port := a.min + int32(i%len(a.usage))
		a.observe(hostPortPod(HostPortName, fmt.Sprintf("old-%d", i), fmt.Sprintf("uid-%d", i), port).obj())
	}
}
