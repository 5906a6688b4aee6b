// Package volcengine holds the Volcengine network plugins: Volcengine-CLB, a per-pod
// LoadBalancer Service on one of the Classic Load Balancers the network-conf names, built on
// the load-balancer engine (pkg/plugin/lb) with OKG's keys; Volcengine's cloud controller
// reconciles it.
package volcengine

import (
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/lb"
)

// Plugins returns a new instance of Volcengine-CLB when cfg enables it ([volcengine] enable = true and
// [volcengine.clb] present), else none. cfg must have passed Config.Validate.
func Plugins(cfg plugin.Config) []*lb.Plugin {
	c := cfg.Volcengine
	if !c.Enable || c.CLB == nil {
		return nil
	}
	return []*lb.Plugin{NewCLB(lb.RangeOf(*c.CLB))}
}
