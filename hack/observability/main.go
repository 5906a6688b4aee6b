// Command observability generates the Grafana dashboard of network-plugin-policy
// (config/grafana/network-plugin-policy.json) as code, with Grafana's Apache-2.0 foundation
// SDK (github.com/grafana/grafana-foundation-sdk/go; Grafana itself is not built, vendored or
// linked). The module also pins Prometheus's promtool, which `make test-observability` builds
// into bin/ to check and test config/prometheus's alert rules; its tests parse every query of
// the dashboard and of the rules with Prometheus's PromQL parser. It is a module of its own so
// that Prometheus's and the SDK's dependencies never touch the manager's.
//
// Usage:
//
//	go run . [-out FILE]                 # the dashboard (default ../../config/grafana/network-plugin-policy.json)
//	go run . -render RESULTS -svg FILE   # draw the key panels of an e2e run's query results
//
// RESULTS is the JSON file TestDashboardAndAlertQueriesOnRealMetrics (e2e/admission) writes
// when NPP_DASHBOARD_RESULTS names it: the series a real Prometheus returned for each panel
// over the run (`make dashboard-picture` runs both steps into docs/dashboard.svg).
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	out := flag.String("out", "../../config/grafana/network-plugin-policy.json", "File to write the dashboard JSON to.")
	results := flag.String("render", "", "Draw the key panels of this e2e results file instead (with -svg).")
	svg := flag.String("svg", "../../docs/dashboard.svg", "With -render: the SVG file to write.")
	flag.Parse()
	if *results != "" {
		if err := renderSVG(*results, *svg); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	b, err := dashboardJSON()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := os.WriteFile(*out, b, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
