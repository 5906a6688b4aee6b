package networkstatus

import (
	"slices"
	"strings"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
)

// ConfParam is one network-conf entry, OKG's v1alpha1.NetworkConfParams:
// {"name": "ContainerPorts", "value": "game:7777/UDP"}.
type ConfParam struct {
	// Name is the parameter name, case-sensitive (e.g. "ContainerPorts").
	Name string `json:"name"`
	// Value is the parameter value as a string; its grammar depends on Name.
	Value string `json:"value"`
}

// Conf is the decoded game.kruise.io/network-conf annotation: parameters in the
// order written. A name may repeat (e.g. Ingress Annotation, HostPort ContainerPorts).
type Conf []ConfParam

// Values returns the values of every entry named name, in order.
func (c Conf) Values(name string) []string {
	var out []string
	for _, p := range c {
		if p.Name == name {
			out = append(out, p.Value)
		}
	}
	return out
}

// Last returns the value of the last entry named name, and whether there is one: the value
// that counts for a parameter given once, as OKG's plugins read it when it is repeated.
func (c Conf) Last(name string) (string, bool) {
	for i := len(c) - 1; i >= 0; i-- {
		if c[i].Name == name {
			return c[i].Value, true
		}
	}
	return "", false
}

// Warn returns a warning-level ParameterError (plugin.Error with Warning) whose Param names
// every distinct parameter name of c for which pick is true, in order, and whose message is
// message; nil when pick is true for none. The plugins name the network-conf parameters
// they ignore or do not act on with it: OKG ignores them silently, and the webhook admits
// the pod with an admission warning naming them.
func (c Conf) Warn(pick func(name string) bool, message string) error {
	var named []string
	for _, p := range c {
		if pick(p.Name) && !slices.Contains(named, p.Name) {
			named = append(named, p.Name)
		}
	}
	if len(named) == 0 {
		return nil
	}
	return &plugin.Error{Type: plugin.ParameterError, Param: strings.Join(named, ","), Warning: true, Message: message}
}

// NotIn returns a pick for Warn: the names not among known.
func NotIn(known ...string) func(string) bool {
	return func(name string) bool { return !slices.Contains(known, name) }
}
