// Package hwcloud holds the Huawei Cloud network plugins: HwCloud-ELB and HwCloud-CCE-ELB, a
// per-pod LoadBalancer Service on one of the Elastic Load Balancers the network-conf names
// (or, for CCE-ELB, on one CCE creates for it), built on the load-balancer engine
// (pkg/plugin/lb) with OKG's keys and checks; Huawei's cloud controller reconciles it; and
// HwCloud-CCE-EIP, an EIP bound to the pod by CCE's container
// network controller (Yangtse) through pod annotations (eip.go).
package hwcloud

import (
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/lb"
)

// Plugins returns new instances of the HwCloud plugins cfg enables: none when [hwcloud]
// enable is false, else HwCloud-CCE-EIP, HwCloud-ELB when [hwcloud.elb] is present and
// HwCloud-CCE-ELB when [hwcloud.cce.elb] is. cfg must have passed Config.Validate.
func Plugins(cfg plugin.Config) []plugin.Plugin {
	c := cfg.HwCloud
	if !c.Enable {
		return nil
	}
	out := []plugin.Plugin{NewCCEEIP(c.ResultWriters)}
	if c.ELB != nil {
		out = append(out, NewELB(lb.RangeOf(*c.ELB)))
	}
	if c.CCE != nil && c.CCE.ELB != nil {
		out = append(out, NewCCEELB(lb.RangeOf(*c.CCE.ELB), c.CCE.AllowELBAutoCreate))
	}
	return out
}
