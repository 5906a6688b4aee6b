package network

import "testing"

// TestPluginLabel: the metrics' plugin label is a registered name or "unknown", never a
// near-miss the webhook admitted NotReady.
func TestPluginLabel(t *testing.T) {
	o := Options{NetworkTypes: []string{"Kubernetes-HostPort", "Kubernetes-NodePort"}}
	for networkType, want := range map[string]string{
		"Kubernetes-HostPort": "Kubernetes-HostPort",
		"kubernetes-hostport": "unknown",
		"Kubernetes-HostPrt":  "unknown",
		"":                    "unknown",
	} {
		if got := o.pluginLabel(networkType); got != want {
			t.Errorf("pluginLabel(%q) = %q, want %q", networkType, got, want)
		}
	}
	if got := (Options{}).pluginLabel("Test"); got != "Test" {
		t.Errorf("without NetworkTypes: pluginLabel = %q, want the name", got)
	}
}
