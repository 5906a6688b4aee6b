// Package ordinal lays out listener ports by a game server's ordinal: the index at the end of
// its name, which OKG's GameServerSets give their pods. The AlibabaCloud-AutoNLBs plugins
// derive a game server's load balancer and listener ports from it, over load balancers made
// for its GameServerSet: nothing is chosen or claimed, the ordinal decides.
package ordinal

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Of returns the ordinal of a game server named name: the decimal number after its last "-"
// ("gs-9" is 9), as OKG reads it, written as a StatefulSet writes it (no sign, no leading
// zero: "gs-09" has none); ok is false when there is none or it does not fit an int32.
func Of(name string) (int, bool) {
	i := strings.LastIndex(name, "-")
	if i < 0 || i == len(name)-1 {
		return 0, false
	}
	n, err := strconv.ParseInt(name[i+1:], 10, 32)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != name[i+1:] {
		return 0, false
	}
	return int(n), true
}

// Layout is the listener ports of a range, without its blocked ports, cut into slots of
// PerPod ports, one slot per game server: the game server of ordinal i is on load balancer
// i / PerService() of its GameServerSet, in slot i % PerService(). Blocked ports are skipped
// for every slot after them, so no two ordinals share a port.
type Layout struct {
	// Ports are the range's ports that are not blocked, ascending.
	Ports []int32
	// PerPod is how many listener ports a game server takes: one per PortProtocols entry
	// (a TCPUDP entry's two Service ports share one).
	PerPod int
}

// NewLayout returns the layout of lo to hi (both included) without block, perPod ports per
// game server. Errors: lo or hi outside 1-65535, lo above hi, perPod below 1, or fewer usable
// ports than perPod (OKG divides by zero there).
func NewLayout(lo, hi int32, block []int32, perPod int) (Layout, error) {
	if lo < 1 || hi > 65535 || lo > hi {
		return Layout{}, fmt.Errorf("the port range %d-%d is not a range of ports 1-65535", lo, hi)
	}
	if perPod < 1 {
		return Layout{}, fmt.Errorf("a game server takes %d ports, want at least one", perPod)
	}
	var blocked [65536]bool // one pass over block, one over the range
	for _, b := range block {
		if b >= 0 {
			blocked[b] = true
		}
	}
	l := Layout{PerPod: perPod}
	for p := lo; ; p++ {
		if !blocked[p] {
			l.Ports = append(l.Ports, p)
		}
		if p == hi {
			break
		}
	}
	if len(l.Ports) < perPod {
		return Layout{}, fmt.Errorf("the port range %d-%d has %d ports that are not blocked, fewer than the %d one game server takes", lo, hi, len(l.Ports), perPod)
	}
	return l, nil
}

// PerService is how many game servers one load balancer serves: whole slots of the range.
func (l Layout) PerService() int { return len(l.Ports) / l.PerPod }

// Service is the index of the load balancer of the game server of ordinal i.
func (l Layout) Service(i int) int { return i / l.PerService() }

// Slot returns the listener ports of the game server of ordinal i, in PortProtocols order.
func (l Layout) Slot(i int) []int32 {
	s := i % l.PerService()
	return slices.Clone(l.Ports[s*l.PerPod : (s+1)*l.PerPod])
}

// Services is how many load balancers a GameServerSet needs for ordinals up to highest, plus
// reserve spare ones: highest / PerService() + reserve + 1 (OKG's count).
func (l Layout) Services(highest, reserve int) int { return highest/l.PerService() + reserve + 1 }
