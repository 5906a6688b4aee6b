package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// keyPanels are the dashboard panels drawn into the picture, in reading order (two per row).
var keyPanels = []string{
	"Game servers by network state",
	"Oldest not-Ready network",
	"Admission decisions by outcome",
	"Network retries",
	"Retry windows exhausted",
	"Memory (RSS)",
}

// panelResult is one panel's series as the e2e test TestDashboardAndAlertQueriesOnRealMetrics
// writes them (NPP_DASHBOARD_RESULTS): Prometheus query_range results per target.
type panelResult struct {
	Title   string `json:"title"`
	Unit    string `json:"unit"`
	Queries []struct {
		Expr   string `json:"expr"`
		Legend string `json:"legend"`
		Series []struct {
			Metric map[string]string `json:"metric"`
			Values [][]any           `json:"values"`
		} `json:"series"`
	} `json:"queries"`
}

// unitLabels are the y axis labels of the dashboard's units.
var unitLabels = map[string]string{
	"short": "count", "s": "seconds", "reqps": "requests per second", "ops": "per second", "bytes": "bytes",
}

var legendLabel = regexp.MustCompile(`\{\{\s*(\w+)\s*\}\}`)

// legend fills a Grafana legend format ({{label}}) from a series' labels.
func legend(format string, labels map[string]string) string {
	return legendLabel.ReplaceAllStringFunc(format, func(m string) string {
		return labels[legendLabel.FindStringSubmatch(m)[1]]
	})
}

// renderSVG draws keyPanels of the results file in into an SVG at out (a PNG when out ends in
// .png), leaving out series that are zero throughout: one line per series,
// time on the x axis (seconds since the first sample), the panel's unit on the y axis.
// Errors are the files' and a missing panel's.
func renderSVG(in, out string) error {
	raw, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	var results []panelResult
	if err := json.Unmarshal(raw, &results); err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	byTitle := map[string]panelResult{}
	start := math.Inf(1)
	for _, r := range results {
		byTitle[r.Title] = r
		for _, q := range r.Queries {
			for _, s := range q.Series {
				if len(s.Values) > 0 {
					if t, ok := s.Values[0][0].(float64); ok {
						start = math.Min(start, t)
					}
				}
			}
		}
	}
	const cols = 2
	rows := (len(keyPanels) + cols - 1) / cols
	plots := make([][]*plot.Plot, rows)
	for i, title := range keyPanels {
		r, ok := byTitle[title]
		if !ok {
			return fmt.Errorf("%s: no panel %q", in, title)
		}
		p := plot.New()
		p.Title.Text = title
		p.X.Label.Text = "seconds into the run"
		p.Y.Label.Text = unitLabels[r.Unit]
		p.Y.Min = 0
		p.Legend.Top = true
		p.Legend.Left = true
		n := 0
		for _, q := range r.Queries {
			for _, s := range q.Series {
				var xys plotter.XYs
				for _, v := range s.Values {
					t, _ := v[0].(float64)
					str, _ := v[1].(string)
					y, err := strconv.ParseFloat(str, 64)
					if err != nil || math.IsNaN(y) || math.IsInf(y, 0) {
						continue
					}
					xys = append(xys, plotter.XY{X: t - start, Y: y})
				}
				if len(xys) == 0 || allZero(xys) {
					continue // as Grafana's "hide series with only zeros"
				}
				line, err := plotter.NewLine(xys)
				if err != nil {
					return err
				}
				line.Color = plotutil.Color(n)
				line.Width = vg.Points(1.5)
				p.Add(line)
				p.Legend.Add(legend(q.Legend, s.Metric), line)
				n++
			}
		}
		if plots[i/cols] == nil {
			plots[i/cols] = make([]*plot.Plot, cols)
		}
		plots[i/cols][i%cols] = p
	}
	w, h := vg.Points(1100), vg.Points(330*float64(rows))
	var img interface {
		vg.CanvasSizer
		io.WriterTo
	}
	if strings.HasSuffix(out, ".png") {
		img = vgimg.PngCanvas{Canvas: vgimg.New(w, h)}
	} else {
		img = vgsvg.New(w, h)
	}
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Points(20), PadY: vg.Points(20), PadTop: vg.Points(10), PadBottom: vg.Points(10), PadLeft: vg.Points(10), PadRight: vg.Points(10)}
	canvases := plot.Align(plots, tiles, dc)
	for r := range plots {
		for c, p := range plots[r] {
			if p != nil {
				p.Draw(canvases[r][c])
			}
		}
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if _, err := img.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// allZero reports whether every point of xys is at zero.
func allZero(xys plotter.XYs) bool {
	for _, p := range xys {
		if p.Y != 0 {
			return false
		}
	}
	return true
}
