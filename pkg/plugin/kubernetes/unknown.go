package kubernetes

import (
	"slices"
	"strings"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// unknownParams returns a warning-level ParameterError that names every network-conf
// parameter of conf not in known (nil when all are known). OKG ignores them silently; the
// plugin still does its work and returns its pod with this warning, and the webhook admits
// the pod with an admission warning naming the parameters (warnings never go through the
// policy's failure mode; see plugin.Split for returning several).
func unknownParams(pluginName string, conf networkstatus.Conf, known ...string) error {
	var unknown []string
	for _, p := range conf {
		if !slices.Contains(known, p.Name) && !slices.Contains(unknown, p.Name) {
			unknown = append(unknown, p.Name)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	return &plugin.Error{Type: plugin.ParameterError, Param: strings.Join(unknown, ","), Warning: true,
		Message: pluginName + " ignores unknown network-conf parameters, expected only " + strings.Join(known, ", ")}
}
