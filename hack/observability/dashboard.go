package main

import (
	"encoding/json"
	"fmt"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// job is the scrape job of the manager's metrics: the metrics Service's name, which the
// ServiceMonitor of config/prometheus/servicemonitor makes the job label (the alert rules
// select the same).
const job = "network-plugin-policy-metrics-service"

// query is one series query of a panel: PromQL with Grafana's $__rate_interval, and the
// legend.
type query struct {
	expr, legend string
}

// panel is one time-series panel of the dashboard.
type panel struct {
	title, description, unit string
	queries                  []query
	stacked                  bool
}

// row is a titled group of panels.
type row struct {
	title  string
	panels []panel
}

// rows are the dashboard's panels, top to bottom. Gauges that every replica serves from its
// caches are read with max (docs/metrics.md, "Which replica"); per-replica counters are
// summed.
var rows = []row{
	{"Game servers' networks", []panel{
		{title: "Game servers by network state", unit: "short", stacked: true,
			description: "npp_network_pods: game servers by plugin and state (every replica serves the same figures from its pod cache).",
			queries:     []query{{`max by (plugin, state) (npp_network_pods)`, "{{plugin}} {{state}}"}}},
		{title: "Oldest not-Ready network", unit: "s",
			description: "How long the oldest not-Ready network of each plugin has been not Ready (alert NetworkPluginPolicyNetworksNotReady above 15 minutes).",
			queries:     []query{{`max by (plugin) (npp_network_not_ready_oldest_seconds)`, "{{plugin}}"}}},
		{title: "Not-Ready networks by namespace (top namespaces)", unit: "short",
			description: "npp_network_not_ready_pods_by_namespace: the namespaces with the most not-Ready networks (--metrics-top-namespaces).",
			queries:     []query{{`max by (namespace, plugin) (npp_network_not_ready_pods_by_namespace)`, "{{namespace}} {{plugin}}"}}},
		{title: "Catch-up backlog", unit: "short",
			description: "Game servers no webhook replica has decided yet (admitted while none answered).",
			queries:     []query{{`max by (plugin) (npp_network_catch_up_backlog)`, "{{plugin}}"}}},
	}},
	{"Admission", []panel{
		{title: "Admission decisions by outcome", unit: "reqps", stacked: true,
			description: "npp_admission_decisions_total summed over the replicas: allowed, denied, admitted_not_ready, passed_through, errored.",
			queries:     []query{{`sum by (outcome) (rate(npp_admission_decisions_total[$__rate_interval]))`, "{{outcome}}"}}},
		{title: "Pod webhook latency", unit: "s",
			description: "Time inside the webhook server per pod admission request (controller-runtime's histogram, buckets up to 10s).",
			queries: []query{
				{`histogram_quantile(0.5, sum by (le) (rate(controller_runtime_webhook_latency_seconds_bucket{job="` + job + `", webhook="/mutate-v1-pod"}[$__rate_interval])))`, "p50"},
				{`histogram_quantile(0.99, sum by (le) (rate(controller_runtime_webhook_latency_seconds_bucket{job="` + job + `", webhook="/mutate-v1-pod"}[$__rate_interval])))`, "p99"},
			}},
		{title: "Plugin run p99", unit: "s",
			description: "99th percentile of plugin runs in the webhook, by plugin (alert NetworkPluginPolicyAdmissionSlow above 20s).",
			queries:     []query{{`histogram_quantile(0.99, sum by (plugin, le) (rate(npp_plugin_duration_seconds_bucket[$__rate_interval])))`, "{{plugin}}"}}},
		{title: "Webhook requests by code", unit: "reqps", stacked: true,
			description: "HTTP answers of the webhook servers, every path.",
			queries:     []query{{`sum by (webhook, code) (rate(controller_runtime_webhook_requests_total{job="` + job + `"}[$__rate_interval]))`, "{{webhook}} {{code}}"}}},
	}},
	{"Retries", []panel{
		{title: "Network retries", unit: "ops",
			description: "Retries by plugin: real plugin runs (trigger stamps) and retries counted from the caches without a pod write.",
			queries: []query{
				{`sum by (plugin) (rate(npp_network_retries_total[$__rate_interval]))`, "{{plugin}} run"},
				{`sum by (plugin) (rate(npp_network_retries_from_cache_total[$__rate_interval]))`, "{{plugin}} from cache"},
			}},
		{title: "Retry windows exhausted", unit: "short",
			description: "Retry windows that closed without a network, by plugin and exhausted action, per 10 minutes.",
			queries:     []query{{`sum by (plugin, action) (increase(npp_network_retry_windows_exhausted_total[10m]))`, "{{plugin}} {{action}}"}}},
		{title: "Retry lateness p99", unit: "s",
			description: "How late retries ran against their backoff schedule.",
			queries:     []query{{`histogram_quantile(0.99, sum by (plugin, le) (rate(npp_network_retry_lateness_seconds_bucket[$__rate_interval])))`, "{{plugin}}"}}},
		{title: "Time to network Ready p90", unit: "s",
			description: "For pods that needed retries: from the first not-Ready plugin run to the network Ready.",
			queries:     []query{{`histogram_quantile(0.9, sum by (plugin, le) (rate(npp_network_ready_duration_seconds_bucket[$__rate_interval])))`, "{{plugin}}"}}},
	}},
	{"Policies and HostPort", []panel{
		{title: "Policies by reason", unit: "short",
			description: "NetworkPluginPolicies in the store: Accepted, InvalidExpression, InvalidSpec (alert NetworkPluginPolicyRejected).",
			queries:     []query{{`max by (reason) (npp_policies)`, "{{reason}}"}}},
		{title: "HostPort ports in use", unit: "short",
			description: "Distinct ports of the Kubernetes-HostPort range held by pods, against the range.",
			queries: []query{
				{`max(npp_hostport_ports_in_use)`, "in use"},
				{`max(npp_hostport_range_ports)`, "range"},
			}},
	}},
	{"Manager", []panel{
		{title: "CPU", unit: "short",
			description: "CPU seconds per second of each replica.",
			queries:     []query{{`rate(process_cpu_seconds_total{job="` + job + `"}[$__rate_interval])`, "{{pod}}"}}},
		{title: "Memory (RSS)", unit: "bytes",
			description: "Resident memory of each replica (docs/deploy.md, \"Sizing\").",
			queries:     []query{{`process_resident_memory_bytes{job="` + job + `"}`, "{{pod}}"}}},
		{title: "Workqueue depth", unit: "short",
			description: "Items waiting in each controller's workqueue (the leader's controllers).",
			queries:     []query{{`max by (name) (workqueue_depth{job="` + job + `"})`, "{{name}}"}}},
		{title: "Leader", unit: "short",
			description: "1 on the replica that holds the leader Lease (alert NetworkPluginPolicyNoLeader).",
			queries:     []query{{`max by (pod) (leader_election_master_status{job="` + job + `", name="network-plugin-policy.policy.game.kruise.io"})`, "{{pod}}"}}},
	}},
}

// datasource is the dashboard's Prometheus data source variable.
var datasource = common.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr("${datasource}")}

// build returns the dashboard.
func build() (dashboard.Dashboard, error) {
	b := dashboard.NewDashboardBuilder("network-plugin-policy").
		Uid("network-plugin-policy").
		Description("Game-server networks, admission, retries, policies and the manager (generated by hack/observability; docs/operations.md).").
		Tags([]string{"network-plugin-policy", "openkruise-game"}).
		Refresh("30s").
		Time("now-1h", "now").
		Timezone("browser").
		WithVariable(dashboard.NewDatasourceVariableBuilder("datasource").Label("Data source").Type("prometheus"))
	for _, r := range rows {
		b = b.WithRow(dashboard.NewRowBuilder(r.title))
		for _, p := range r.panels {
			tp := timeseries.NewPanelBuilder().
				Title(p.title).
				Description(p.description).
				Datasource(datasource).
				Unit(p.unit).
				Min(0).
				Height(8).
				Span(6)
			if p.stacked {
				tp = tp.FillOpacity(30).Stacking(common.NewStackingConfigBuilder().Mode(common.StackingModeNormal))
			}
			for i, q := range p.queries {
				tp = tp.WithTarget(prometheus.NewDataqueryBuilder().
					Datasource(datasource).
					Expr(q.expr).
					LegendFormat(q.legend).
					RefId(string(rune('A' + i))))
			}
			b = b.WithPanel(tp)
		}
	}
	return b.Build()
}

// dashboardJSON returns the dashboard as indented JSON with a final newline.
func dashboardJSON() ([]byte, error) {
	d, err := build()
	if err != nil {
		return nil, fmt.Errorf("build the dashboard: %w", err)
	}
	out, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// queries returns every query of the dashboard, each with its panel's title.
func queries() map[string][]string {
	out := map[string][]string{}
	for _, r := range rows {
		for _, p := range r.panels {
			for _, q := range p.queries {
				out[p.title] = append(out[p.title], q.expr)
			}
		}
	}
	return out
}
