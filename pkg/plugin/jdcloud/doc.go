// Package jdcloud holds the JD Cloud network plugins: JdCloud-NLB, a per-pod LoadBalancer
// Service on one of the Network Load Balancers the network-conf names, built on the
// load-balancer engine (pkg/plugin/lb) with OKG's keys; JD Cloud's cloud controller reads the
// load-balancer spec annotation and reconciles it; and JdCloud-EIP, an EIP bound to the pod
// by JD Cloud's network controller through pod annotations (eip.go).
package jdcloud

import (
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/lb"
)

// Plugins returns new instances of the JdCloud plugins cfg enables: none when [jdcloud] enable
// is false, else JdCloud-EIP and, when [jdcloud.nlb] is present, JdCloud-NLB. With both, every
// JdCloud type of OKG is served here. cfg must have passed Config.Validate.
func Plugins(cfg plugin.Config) []plugin.Plugin {
	c := cfg.JdCloud
	if !c.Enable {
		return nil
	}
	out := []plugin.Plugin{NewEIP(c.ResultWriters)}
	if c.NLB != nil {
		out = append(out, NewNLB(lb.RangeOf(*c.NLB)))
	}
	return out
}
