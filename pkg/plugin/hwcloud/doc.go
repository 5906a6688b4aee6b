// Package hwcloud holds the Huawei Cloud network plugins: HwCloud-ELB, a per-pod
// LoadBalancer Service on one of the Elastic Load Balancers the network-conf names, built on
// the load-balancer engine (pkg/plugin/lb) with OKG's keys and checks; Huawei's cloud
// controller reconciles it.
package hwcloud

import (
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/lb"
)

// Plugins returns a new instance of HwCloud-ELB when cfg enables it ([hwcloud] enable = true and
// [hwcloud.elb] present), else none. cfg must have passed Config.Validate.
func Plugins(cfg plugin.Config) []plugin.Plugin {
	c := cfg.HwCloud
	if !c.Enable || c.ELB == nil {
		return nil
	}
	return []plugin.Plugin{NewELB(lb.RangeOf(*c.ELB))}
}
