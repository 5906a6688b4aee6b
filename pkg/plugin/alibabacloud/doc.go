// Package alibabacloud holds the Alibaba Cloud network plugins: AlibabaCloud-EIP and
// AlibabaCloud-NATGW (eip.go, natgw.go: pod annotations for Terway and the DNAT controller,
// whose PodEIP and PodDNAT objects are the answer), and AlibabaCloud-SLB, a per-pod
// LoadBalancer Service on one of the Classic Load Balancers (SLB) the network-conf names,
// built on the load-balancer engine (pkg/plugin/lb) with OKG's keys, annotations and
// checks. Alibaba's cloud controller (CCM) reconciles the Service into listeners on that
// SLB and reports its address in the Service's status. The Multi-NLBs, SharedPort and
// AutoNLBs types are in files of their names.
package alibabacloud

import (
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/lb"
)

// Plugins returns new instances of the Alibaba Cloud plugins cfg enables: none when
// [alibabacloud] enable is false, else AlibabaCloud-EIP, AlibabaCloud-NATGW, both SharedPort
// types, AlibabaCloud-AutoNLBs and AlibabaCloud-AutoNLBs-V2 (their port ranges are their
// network-conf's), AlibabaCloud-SLB when [alibabacloud.slb] is present, and AlibabaCloud-NLB
// and AlibabaCloud-Multi-NLBs (on the same NLBs' ports) when [alibabacloud.nlb] is. cfg must
// have passed Config.Validate.
func Plugins(cfg plugin.Config) []plugin.Plugin {
	c := cfg.AlibabaCloud
	if !c.Enable {
		return nil
	}
	out := []plugin.Plugin{NewEIP(), NewNATGW(), NewSLBSharedPort(), NewNLBSharedPort(), NewAutoNLBs(), NewAutoNLBsV2()}
	if c.SLB != nil {
		out = append(out, NewSLB(lb.RangeOf(*c.SLB)))
	}
	if c.NLB != nil {
		out = append(out, NewNLB(lb.RangeOf(*c.NLB)), NewMultiNLBs(lb.RangeOf(*c.NLB)))
	}
	return out
}
