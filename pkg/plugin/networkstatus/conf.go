package networkstatus

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
