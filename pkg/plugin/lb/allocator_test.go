package lb

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
)

// TestAllocatorLowestFreeOnTheLastLBWithRoom: ports are the lowest free ones of the range
// (blocked ports and, when Max is exclusive, Max left out); the load balancer is the last
// configured one with room, or the first with firstFit (Volcengine's order); an owner keeps
// its allocation while it fits the ids; observe and release follow the Services.
func TestAllocatorLowestFreeOnTheLastLBWithRoom(t *testing.T) {
	a := newAllocator(Range{Min: 500, Max: 504, MaxInclusive: true, Block: []int32{501}})
	al, ok := a.allocate("ns/gs-0", []string{"lb-a", "lb-b"}, 2, false, time.Time{}, time.Time{}, nil)
	if !ok || al.LB != "lb-b" || !slices.Equal(al.Ports, []int32{500, 502}) {
		t.Fatalf("first allocation %+v (%t), want lb-b 500,502", al, ok)
	}
	if again, _ := a.allocate("ns/gs-0", []string{"lb-a", "lb-b"}, 2, false, time.Time{}, time.Time{}, nil); !slices.Equal(again.Ports, al.Ports) || again.LB != al.LB {
		t.Errorf("the same owner again got %+v, want its allocation %+v", again, al)
	}
	al, _ = a.allocate("ns/gs-1", []string{"lb-a", "lb-b"}, 2, false, time.Time{}, time.Time{}, nil)
	if al.LB != "lb-b" || !slices.Equal(al.Ports, []int32{503, 504}) {
		t.Errorf("second allocation %+v, want lb-b 503,504 (Max included)", al)
	}
	if al, _ := a.allocate("ns/gs-2", []string{"lb-a", "lb-b"}, 2, false, time.Time{}, time.Time{}, nil); al.LB != "lb-a" {
		t.Errorf("third allocation %+v, want lb-a (lb-b is full)", al)
	}
	if _, ok := a.allocate("ns/gs-3", []string{"lb-b"}, 1, false, time.Time{}, time.Time{}, nil); ok {
		t.Error("lb-b has no free port: want no allocation")
	}
	a.release("ns/gs-1")
	if al, _ := a.allocate("ns/gs-3", []string{"lb-b"}, 1, false, time.Time{}, time.Time{}, nil); al.LB != "lb-b" || !slices.Equal(al.Ports, []int32{503}) {
		t.Errorf("after a release: %+v, want lb-b 503", al)
	}
	first := newAllocator(Range{Min: 500, Max: 502})
	if al, _ := first.allocate("ns/gs-0", []string{"lb-a", "lb-b"}, 1, true, time.Time{}, time.Time{}, nil); al.LB != "lb-a" {
		t.Errorf("firstFit: %+v, want lb-a", al)
	}
	exclusive := newAllocator(Range{Min: 500, Max: 501})
	exclusive.observe("ns/other", "lb-a", []int32{500, 80})
	if _, ok := exclusive.allocate("ns/gs-0", []string{"lb-a"}, 1, false, time.Time{}, time.Time{}, nil); ok {
		t.Error("Max exclusive and 500 observed: want no port")
	}
}

// TestParsePortProtocols: OKG's forms, and every malformed entry a parameterError naming
// PortProtocols (OKG skips non-numbers and passes lower-case protocols to the API server).
func TestParsePortProtocols(t *testing.T) {
	got, err := ParsePortProtocols("7777/UDP, 7778,7779/TCPUDP", true)
	want := []PortProtocol{{7777, corev1.ProtocolUDP}, {7778, corev1.ProtocolTCP}, {7779, ProtocolTCPUDP}}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("ParsePortProtocols = %v, %v; want %v", got, err, want)
	}
	for _, bad := range []string{"", "x", "0", "70000", "7777/udp", "7777/HTTP"} {
		if _, err := ParsePortProtocols(bad, true); plugin.AsError(err) == nil || plugin.AsError(err).Param != ParamPortProtocols {
			t.Errorf("%q: %v, want a parameterError naming PortProtocols", bad, err)
		}
	}
	if _, err := ParsePortProtocols("7777/TCPUDP", false); err == nil {
		t.Error("TCPUDP where the plugin cannot carry it: want an error")
	}
}
