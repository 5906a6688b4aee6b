package main

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v2"
)

const (
	dashboardFile = "../../config/grafana/network-plugin-policy.json"
	rulesFile     = "../../config/prometheus/rules.yaml"
	// queriedMetrics lists every metric the dashboard and the alert rules name. The e2e suite
	// (TestDashboardAndAlertQueriesOnRealMetrics in e2e/admission) checks each against the real /metrics
	// of the manager's replicas and of the kube-apiserver on a local cluster.
	queriedMetrics = "testdata/queried-metrics.txt"
)

// TestDashboardIsGenerated: the committed dashboard is what this generator writes (run
// `go run .` in hack/observability after a change).
func TestDashboardIsGenerated(t *testing.T) {
	want, err := dashboardJSON()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is not what hack/observability generates: run `cd hack/observability && go run .`", dashboardFile)
	}
}

// ruleQueries returns the expr of every rule of the rules file, by alert name.
func ruleQueries(t *testing.T) map[string][]string {
	t.Helper()
	raw, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			out["alert "+r.Alert] = append(out["alert "+r.Alert], r.Expr)
		}
	}
	return out
}

// metricNames parses expr with Prometheus's PromQL parser, with Grafana's $__rate_interval
// as 5m, and returns the metric names its selectors name.
func metricNames(expr string) ([]string, error) {
	e, err := parser.NewParser(parser.Options{}).ParseExpr(strings.ReplaceAll(expr, "$__rate_interval", "5m"))
	if err != nil {
		return nil, err
	}
	var names []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok && vs.Name != "" {
			names = append(names, vs.Name)
		}
		return nil
	})
	return names, nil
}

// TestQueriesParseAndNameKnownMetrics parses every query of the dashboard and of the alert
// rules with the PromQL parser, requires each to name a metric, and requires the metrics
// they name to be exactly those of testdata/queried-metrics.txt (which the e2e suite checks
// against the real /metrics).
func TestQueriesParseAndNameKnownMetrics(t *testing.T) {
	all := queries()
	for k, v := range ruleQueries(t) {
		all[k] = v
	}
	if len(all) < 20 {
		t.Fatalf("%d panels and alerts, want the dashboard's and the rules' (at least 20)", len(all))
	}
	seen := map[string]bool{}
	for where, exprs := range all {
		for _, expr := range exprs {
			names, err := metricNames(expr)
			if err != nil {
				t.Errorf("%s: %q: %v", where, expr, err)
				continue
			}
			if len(names) == 0 {
				t.Errorf("%s: %q names no metric", where, expr)
			}
			for _, n := range names {
				seen[n] = true
			}
		}
	}
	var got []string
	for n := range seen {
		got = append(got, n)
	}
	slices.Sort(got)
	raw, err := os.ReadFile(queriedMetrics)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, l := range strings.Split(string(raw), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			want = append(want, l)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("the queries name these metrics:\n%s\n%s lists:\n%s", strings.Join(got, "\n"), queriedMetrics, strings.Join(want, "\n"))
	}
}

// TestQueriesOfABrokenExpressionFail: the check above would catch a query that does not
// parse or names no metric.
func TestQueriesOfABrokenExpressionFail(t *testing.T) {
	if _, err := metricNames(`sum by (plugin) (rate(npp_network_retries_total[$__rate_interval])`); err == nil {
		t.Error("an unbalanced parenthesis parsed")
	}
	names, err := metricNames(`histogram_quantile(0.99, sum by (le) (rate(x_bucket{job="j"}[$__rate_interval]))) > on() group_left vector(1)`)
	if err != nil || !slices.Equal(names, []string{"x_bucket"}) {
		t.Errorf("metricNames = %v, %v; want [x_bucket]", names, err)
	}
}
