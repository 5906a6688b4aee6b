package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/okg-extensions/network-plugin-policy/e2e/cluster"
)

const (
	// dashboardFile is the generated Grafana dashboard (hack/observability).
	dashboardFile = "../../config/grafana/network-plugin-policy.json"
	// rulesFile holds the alert rules.
	rulesFile = "../../config/prometheus/rules.yaml"
	// metricsJob is the job label the dashboard and the rules select: the metrics Service's
	// name, as the ServiceMonitor of config/prometheus/servicemonitor makes it.
	metricsJob = "network-plugin-policy-metrics-service"
	// rateInterval stands for Grafana's $__rate_interval: four scrape intervals.
	rateInterval = "8s"
)

// promServer is a real Prometheus scraping the test's cluster.
type promServer struct {
	url string
}

// startPrometheus runs Debian's prometheus (installed by `make controlplane` as root; the
// test is skipped when it is missing and this is not root) on a loopback port, scraping every 2s both replicas' secured /metrics (job metricsJob, the scraper's
// metrics-reader token, the self-signed certificate not verified, a pod label per replica, as
// the ServiceMonitor gives) and the kube-apiserver's (admin client certificate). It waits
// until every target is up. The process stops with the control plane.
func startPrometheus(t *testing.T) *promServer {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Geteuid() != 0 {
			// As the real-node suite: what needs root to install is skipped without it.
			t.Skipf("prometheus not found, and not root, so make controlplane could not install Debian's package: %v", err)
		}
		t.Fatalf("prometheus not found (make controlplane installs Debian's package as root): %v", err)
	}
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	token := write("token", []byte(mgr.ScraperToken()))
	cert := write("admin.crt", cp.Config.CertData)
	key := write("admin.key", cp.Config.KeyData)
	var targets strings.Builder
	for _, r := range mgr.Replicas {
		u, err := url.Parse(r.MetricsURL)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&targets, "  - targets: [%q]\n    labels: {pod: %q}\n", u.Host, r.Name)
	}
	api, err := url.Parse(cp.URL)
	if err != nil {
		t.Fatal(err)
	}
	config := write("prometheus.yml", []byte(fmt.Sprintf(`global: {scrape_interval: 2s, evaluation_interval: 2s}
scrape_configs:
- job_name: %s
  scheme: https
  tls_config: {insecure_skip_verify: true}
  authorization: {credentials_file: %s}
  static_configs:
%s- job_name: apiserver
  scheme: https
  tls_config: {insecure_skip_verify: true, cert_file: %s, key_file: %s}
  static_configs:
  - targets: [%q]
`, metricsJob, token, targets.String(), cert, key, api.Host)))
	port := cluster.FreePort()
	p, err := cp.AddProcess("prometheus", nil, bin, "--config.file="+config, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address=127.0.0.1:"+strconv.Itoa(port), "--storage.tsdb.retention.time=1h")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	s := &promServer{url: "http://127.0.0.1:" + strconv.Itoa(port)}
	eventually(t, time.Minute, "Prometheus scraping the replicas and the API server", func(ctx context.Context) (bool, error) {
		res, err := s.query(ctx, `up == 1`)
		if err != nil {
			return false, nil
		}
		return len(res) == len(mgr.Replicas)+1, nil
	})
	return s
}

// promSeries is one series of a query result: its labels and its samples ([unix seconds,
// "value"] pairs; one for an instant query).
type promSeries struct {
	Metric map[string]string `json:"metric"`
	Value  []any             `json:"value,omitempty"`
	Values [][]any           `json:"values,omitempty"`
}

// get calls the Prometheus HTTP API path with params and returns the result's series, or an
// error with Prometheus's own message.
func (s *promServer) get(ctx context.Context, path string, params url.Values) ([]promSeries, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url+path+"?"+params.Encode(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("%s %s: %s", path, params.Get("query"), body.Error)
	}
	if body.Data.ResultType == "scalar" {
		return []promSeries{{}}, nil
	}
	var out []promSeries
	if err := json.Unmarshal(body.Data.Result, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// query evaluates expr now, with Grafana's $__rate_interval as rateInterval.
func (s *promServer) query(ctx context.Context, expr string) ([]promSeries, error) {
	return s.get(ctx, "/api/v1/query", url.Values{"query": {strings.ReplaceAll(expr, "$__rate_interval", rateInterval)}})
}

// panel is one panel of the dashboard: its title, unit, and its targets' queries and legends.
type panel struct {
	title, unit    string
	exprs, legends []string
}

// dashboardPanels reads the panels (rows left out) of the generated dashboard.
func dashboardPanels(t *testing.T) []panel {
	t.Helper()
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Type, Title string
			FieldConfig struct {
				Defaults struct{ Unit string } `json:"defaults"`
			} `json:"fieldConfig"`
			Targets []struct {
				Expr, LegendFormat string
			}
		}
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	var out []panel
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		pp := panel{title: p.Title, unit: p.FieldConfig.Defaults.Unit}
		for _, tg := range p.Targets {
			pp.exprs = append(pp.exprs, tg.Expr)
			pp.legends = append(pp.legends, tg.LegendFormat)
		}
		out = append(out, pp)
	}
	if len(out) < 10 {
		t.Fatalf("%s: %d panels, want the generated dashboard's", dashboardFile, len(out))
	}
	return out
}

// alertExprs reads the alert rules' expressions by alert name.
func alertExprs(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Rules []struct{ Alert, Expr string }
		}
	}
	if err := yaml.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			out[r.Alert] = r.Expr
		}
	}
	if len(out) < 8 {
		t.Fatalf("%s: %d alerts", rulesFile, len(out))
	}
	return out
}

// panelResult is one panel's series over the run, as NPP_DASHBOARD_RESULTS holds them
// (hack/observability renders them).
type panelResult struct {
	Title   string        `json:"title"`
	Unit    string        `json:"unit"`
	Queries []queryResult `json:"queries"`
}

// queryResult is one target of a panel and its series.
type queryResult struct {
	Expr   string       `json:"expr"`
	Legend string       `json:"legend"`
	Series []promSeries `json:"series"`
}

// writeRanges writes every panel's series from begin to end (2s steps) to path as JSON.
func (s *promServer) writeRanges(t *testing.T, path string, panels []panel, begin, end time.Time) {
	t.Helper()
	var out []panelResult
	for _, p := range panels {
		pr := panelResult{Title: p.title, Unit: p.unit}
		for i, expr := range p.exprs {
			series, err := s.get(context.Background(), "/api/v1/query_range", url.Values{
				"query": {strings.ReplaceAll(expr, "$__rate_interval", rateInterval)},
				"start": {strconv.FormatInt(begin.Unix(), 10)}, "end": {strconv.FormatInt(end.Unix(), 10)}, "step": {"2"},
			})
			if err != nil {
				t.Errorf("panel %q: %v", p.title, err)
			}
			pr.Queries = append(pr.Queries, queryResult{Expr: expr, Legend: p.legends[i], Series: series})
		}
		out = append(out, pr)
	}
	b, err := json.MarshalIndent(out, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
