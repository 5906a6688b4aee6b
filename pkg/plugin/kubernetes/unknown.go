package kubernetes

import (
	"strings"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// unknownParams returns a warning-level ParameterError that names every network-conf
// parameter of conf not in known (nil when all are known). OKG ignores them silently; the
// plugin still does its work and returns its pod with this warning, and the webhook admits
// the pod with an admission warning naming the parameters (warnings never go through the
// policy's failure mode; see plugin.Split for returning several).
func unknownParams(pluginName string, conf networkstatus.Conf, known ...string) error {
	return conf.Warn(networkstatus.NotIn(known...), pluginName+" ignores unknown network-conf parameters, expected only "+strings.Join(known, ", "))
}
