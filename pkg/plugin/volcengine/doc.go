// Package volcengine holds the Volcengine network plugins: Volcengine-CLB, a per-pod
// LoadBalancer Service on one of the Classic Load Balancers the network-conf names, built on
// the load-balancer engine (pkg/plugin/lb) with OKG's keys; Volcengine's cloud controller
// reconciles it; and Volcengine-EIP, an EIP bound to the pod's ENI by VKE's network controller
// through pod annotations (eip.go).
package volcengine

import (
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/lb"
)

// Plugins returns new instances of the Volcengine plugins cfg enables: none when [volcengine]
// enable is false, else Volcengine-EIP and, when [volcengine.clb] is present,
// Volcengine-CLB. With both, every Volcengine type of OKG is served here. cfg must have
// passed Config.Validate.
func Plugins(cfg plugin.Config) []plugin.Plugin {
	c := cfg.Volcengine
	if !c.Enable {
		return nil
	}
	out := []plugin.Plugin{NewEIP(c.ResultWriters)}
	if c.CLB != nil {
		out = append(out, NewCLB(lb.RangeOf(*c.CLB)))
	}
	return out
}
