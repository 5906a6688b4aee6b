// Package jdcloud holds the JD Cloud network plugins: JdCloud-NLB, a per-pod LoadBalancer
// Service on one of the Network Load Balancers the network-conf names, built on the
// load-balancer engine (pkg/plugin/lb) with OKG's keys; JD Cloud's cloud controller reads the
// load-balancer spec annotation and reconciles it.
package jdcloud

import (
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/lb"
)

// Plugins returns a new instance of JdCloud-NLB when cfg enables it ([jdcloud] enable = true and
// [jdcloud.nlb] present), else none. cfg must have passed Config.Validate.
func Plugins(cfg plugin.Config) []plugin.Plugin {
	c := cfg.JdCloud
	if !c.Enable || c.NLB == nil {
		return nil
	}
	return []plugin.Plugin{NewNLB(lb.RangeOf(*c.NLB))}
}
