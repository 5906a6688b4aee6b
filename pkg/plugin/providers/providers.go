// Package providers builds every network plugin this project has, for the providers a
// provider configuration enables: the one list the manager serves and nppctl evaluates, so
// that the two cannot disagree.
package providers

import (
	"slices"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/alibabacloud"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/aws"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/hwcloud"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/jdcloud"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/kubernetes"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/tencentcloud"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/volcengine"
)

// Plugins returns new instances of every plugin of every provider cfg enables (each
// provider package's Plugins), in the order they are registered: Kubernetes, Alibaba Cloud,
// HwCloud, Volcengine, JdCloud, Tencent Cloud, AWS. cfg must have passed Config.Validate.
func Plugins(cfg plugin.Config) []plugin.Plugin {
	return slices.Concat(kubernetes.Plugins(cfg), alibabacloud.Plugins(cfg), hwcloud.Plugins(cfg), volcengine.Plugins(cfg), jdcloud.Plugins(cfg), tencentcloud.Plugins(cfg), aws.Plugins(cfg))
}
