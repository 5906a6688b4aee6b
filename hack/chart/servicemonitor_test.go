package main

import (
	"context"
	"testing"
)

// TestServiceMonitorComponent renders config/default with the component
// config/prometheus/servicemonitor, as an overlay of a user would, and checks that the
// ServiceMonitor lands in the manager's namespace, selects the metrics Service by its labels
// and scrapes its https port over HTTPS with the service-account token, and that the
// binding grants the ClusterRole that config/default renders as the metrics reader.
func TestServiceMonitorComponent(t *testing.T) {
	objs, err := Kustomize(context.Background(), "testdata/servicemonitor-overlay")
	if err != nil {
		t.Fatal(err)
	}
	all := byKindName(objs)
	svc := all["Service/network-plugin-policy-metrics-service"]
	sm := all["ServiceMonitor/network-plugin-policy-metrics-monitor"]
	binding := all["ClusterRoleBinding/network-plugin-policy-metrics-reader-prometheus"]
	if svc == nil || sm == nil || binding == nil {
		t.Fatalf("rendered objects lack the metrics Service, the ServiceMonitor or the binding: %v", keys(all))
	}
	meta := func(o map[string]any) map[string]any { m, _ := o["metadata"].(map[string]any); return m }
	if ns := meta(sm)["namespace"]; ns != meta(svc)["namespace"] {
		t.Errorf("ServiceMonitor in namespace %v, the metrics Service in %v", ns, meta(svc)["namespace"])
	}
	spec, _ := sm["spec"].(map[string]any)
	sel, _ := spec["selector"].(map[string]any)
	match, _ := sel["matchLabels"].(map[string]any)
	labels, _ := meta(svc)["labels"].(map[string]any)
	for k, v := range match {
		if labels[k] != v {
			t.Errorf("ServiceMonitor selects %s=%v, the metrics Service has %v", k, v, labels)
		}
	}
	eps, _ := spec["endpoints"].([]any)
	if len(eps) != 1 {
		t.Fatalf("ServiceMonitor endpoints = %v, want one", eps)
	}
	ep, _ := eps[0].(map[string]any)
	svcSpec, _ := svc["spec"].(map[string]any)
	ports, _ := svcSpec["ports"].([]any)
	found := false
	for _, p := range ports {
		if pm, _ := p.(map[string]any); pm["name"] == ep["port"] {
			found = true
		}
	}
	if !found || ep["scheme"] != "https" || ep["bearerTokenFile"] == nil {
		t.Errorf("ServiceMonitor endpoint %v: want the Service's port by name (%v) over https with the service-account token", ep, ports)
	}
	roleRef, _ := binding["roleRef"].(map[string]any)
	if all["ClusterRole/"+roleRef["name"].(string)] == nil {
		t.Errorf("the binding grants ClusterRole %v, which config/default does not render", roleRef["name"])
	}
}

func keys(m map[string]map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
