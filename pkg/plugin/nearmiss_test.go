package plugin_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
)

// kubernetesNames are the names of this project's plugins.
var kubernetesNames = []string{"Kubernetes-HostPort", "Kubernetes-Ingress", "Kubernetes-NodePort"}

func TestOSADistance(t *testing.T) {
	cases := map[string]struct {
		a, b string
		want int
	}{
		"equal":                          {a: "HostPort", b: "HostPort", want: 0},
		"both empty":                     {a: "", b: "", want: 0},
		"from empty":                     {a: "", b: "abc", want: 3},
		"substitution":                   {a: "HostPort", b: "HostPart", want: 1},
		"deletion":                       {a: "HostPort", b: "HostPrt", want: 1},
		"insertion":                      {a: "HostPort", b: "HostPoort", want: 1},
		"adjacent swap counts one":       {a: "HostPort", b: "HsotPort", want: 1},
		"substring edited once only":     {a: "CA", b: "ABC", want: 3},
		"runes, not bytes":               {a: "Ingreß", b: "Ingress", want: 2},
		"case matters to the distance":   {a: "hostport", b: "HostPort", want: 2},
		"the registered names are apart": {a: "hostport", b: "nodeport", want: 3},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := plugin.OSADistance(tc.a, tc.b); got != tc.want {
				t.Errorf("OSADistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
			}
			if got := plugin.OSADistance(tc.b, tc.a); got != tc.want {
				t.Errorf("OSADistance(%q, %q) = %d, want %d (symmetric)", tc.b, tc.a, got, tc.want)
			}
		})
	}
}

func TestNearMissOf(t *testing.T) {
	cases := map[string]struct {
		s        string
		names    []string
		want     string
		wantNear bool
	}{
		"lower case":                      {s: "kubernetes-hostport", want: "Kubernetes-HostPort", wantNear: true},
		"upper case":                      {s: "KUBERNETES-NODEPORT", want: "Kubernetes-NodePort", wantNear: true},
		"one letter missing":              {s: "Kubernetes-HostPrt", want: "Kubernetes-HostPort", wantNear: true},
		"two edits":                       {s: "Kubernets-Ingres", want: "Kubernetes-Ingress", wantNear: true},
		"swap and case":                   {s: "kuberentes-nodeport", want: "Kubernetes-NodePort", wantNear: true},
		"no hyphen":                       {s: "KubernetesHostPort", want: "Kubernetes-HostPort", wantNear: true},
		"three edits are too many":        {s: "Kubernetes-HstPrt-", wantNear: false},
		"exact name is no near-miss":      {s: "Kubernetes-HostPort", wantNear: false},
		"empty":                           {s: "", wantNear: false},
		"OKG cloud type SLB":              {s: "AlibabaCloud-SLB", wantNear: false},
		"OKG cloud type NLB":              {s: "AlibabaCloud-NLB", wantNear: false},
		"OKG cloud type EIP":              {s: "AlibabaCloud-EIP", wantNear: false},
		"OKG cloud type SLB-SharedPort":   {s: "AlibabaCloud-SLB-SharedPort", wantNear: false},
		"OKG cloud type NLB-SharedPort":   {s: "AlibabaCloud-NLB-SharedPort", wantNear: false},
		"OKG cloud type Multi-NLBs":       {s: "AlibabaCloud-Multi-NLBs", wantNear: false},
		"OKG cloud type AutoNLBs":         {s: "AlibabaCloud-AutoNLBs", wantNear: false},
		"OKG cloud type AWS NLB":          {s: "AmazonWebServices-NLB", wantNear: false},
		"OKG cloud type Tencent CLB":      {s: "TencentCloud-CLB", wantNear: false},
		"OKG cloud type Huawei ELB":       {s: "HwCloud-ELB", wantNear: false},
		"OKG cloud type JD NLB":           {s: "JdCloud-NLB", wantNear: false},
		"OKG cloud type JD EIP":           {s: "JdCloud-EIP", wantNear: false},
		"OKG cloud type Volcengine CLB":   {s: "Volcengine-CLB", wantNear: false},
		"OKG cloud type Volcengine EIP":   {s: "Volcengine-EIP", wantNear: false},
		"long value is cut off cheaply":   {s: strings.Repeat("Kubernetes-HostPort", 1000), wantNear: false},
		"short name: case only":           {s: "abc", names: []string{"ABC", "abd"}, want: "ABC", wantNear: true},
		"short name: one edit too many":   {s: "abe", names: []string{"abd"}, wantNear: false},
		"middle name: one edit":           {s: "Slbx", names: []string{"Slb-x"}, want: "Slb-x", wantNear: true},
		"middle name: two edits too many": {s: "Slb", names: []string{"Slb-x"}, wantNear: false},
		"closest wins":                    {s: "Name-AB", names: []string{"Name-AXY", "Name-ABC"}, want: "Name-ABC", wantNear: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			names := tc.names
			if names == nil {
				names = kubernetesNames
			}
			got, near := plugin.NearMissOf(tc.s, names)
			if got != tc.want || near != tc.wantNear {
				t.Errorf("NearMissOf(%q) = %q, %t; want %q, %t", tc.s, got, near, tc.want, tc.wantNear)
			}
		})
	}
}

func TestRegistryNearMissAndMetricLabel(t *testing.T) {
	var plugins []plugin.Plugin
	for _, n := range kubernetesNames {
		plugins = append(plugins, &fakePlugin{name: n, alias: "Kubernetes-Family"})
	}
	r, err := plugin.NewRegistry(plugins...)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		networkType string
		wantLabel   string
		wantNear    string
		wantMsg     string
	}{
		"registered":   {networkType: "Kubernetes-HostPort", wantLabel: "Kubernetes-HostPort"},
		"case":         {networkType: "kubernetes-hostport", wantLabel: "unknown", wantNear: "Kubernetes-HostPort", wantMsg: `unknown network type "kubernetes-hostport": did you mean Kubernetes-HostPort?`},
		"typo":         {networkType: "Kubernetes-HostPrt", wantLabel: "unknown", wantNear: "Kubernetes-HostPort", wantMsg: "did you mean Kubernetes-HostPort?"},
		"cloud type":   {networkType: "AlibabaCloud-SLB", wantLabel: "unknown", wantMsg: "expected one of [Kubernetes-HostPort Kubernetes-Ingress Kubernetes-NodePort]"},
		"alias":        {networkType: "Kubernetes-Family", wantLabel: "unknown", wantMsg: "expected one of"},
		"label itself": {networkType: "unknown", wantLabel: "unknown", wantMsg: "expected one of"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := r.MetricLabel(tc.networkType); got != tc.wantLabel {
				t.Errorf("MetricLabel = %q, want %q", got, tc.wantLabel)
			}
			near, ok := r.NearMiss(tc.networkType)
			if near != tc.wantNear || ok != (tc.wantNear != "") {
				t.Errorf("NearMiss = %q, %t; want %q", near, ok, tc.wantNear)
			}
			p, err := r.Lookup(tc.networkType)
			if tc.wantMsg == "" {
				if err != nil || p == nil || p.Name() != tc.networkType {
					t.Errorf("Lookup = %v, %v; want the plugin", p, err)
				}
				return
			}
			var perr *plugin.Error
			if p != nil || !errors.As(err, &perr) || perr.Type != plugin.ParameterError || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("Lookup = %v, %v; want a parameterError containing %q", p, err, tc.wantMsg)
			}
		})
	}
}
