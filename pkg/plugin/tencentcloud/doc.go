// Package tencentcloud holds the Tencent Cloud network plugin TencentCloud-CLB: a pod's ports
// mapped to addresses of Cloud Load Balancers by tke-extend-network-controller, which
// allocates them from a CLBPortPool named after the pod's GameServerSet. The plugin writes
// only pod annotations (the controller's input) and reads the controller's answer: its
// result annotations, and the state of the CLBPodBinding it keeps for the pod (clb.go).
package tencentcloud

import (
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
)

// Plugins returns new instances of the Tencent Cloud plugins cfg enables: none when
// [tencentcloud] enable is false, else TencentCloud-CLB, OKG's only Tencent Cloud type (so
// every one is served here). cfg must have passed Config.Validate.
func Plugins(cfg plugin.Config) []plugin.Plugin {
	if !cfg.TencentCloud.Enable {
		return nil
	}
	return []plugin.Plugin{NewCLB(cfg.TencentCloud.ResultWriters)}
}
