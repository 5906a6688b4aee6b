package plugin_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
)

func TestParseConfig(t *testing.T) {
	def := plugin.DefaultConfig()
	cases := map[string]struct {
		toml    string
		want    plugin.Config
		wantErr []string
	}{
		"OKG's shipped file": {
			toml: "[kubernetes]\nenable = true\n[kubernetes.hostPort]\nmax_port = 9000\nmin_port = 8000\n\n[alibabacloud]\nenable = true\n[alibabacloud.slb]\nmax_port = 700\nmin_port = 500\nblock_ports = [593]\n" +
				"[hwcloud]\nenable = false\n[hwcloud.elb]\nmax_port = 700\nmin_port = 500\n[hwcloud.cce.elb]\nmax_port = 65535\nmin_port = 32768\n",
			want: func() plugin.Config {
				c := def
				c.AlibabaCloud = plugin.AlibabaCloudConfig{Enable: true, SLB: &plugin.PortRangeConfig{MinPort: 500, MaxPort: 700, BlockPorts: []int32{593}}}
				c.HwCloud = plugin.HwCloudConfig{ELB: &plugin.PortRangeConfig{MinPort: 500, MaxPort: 700},
					CCE: &plugin.HwCloudCCEConfig{ELB: &plugin.PortRangeConfig{MinPort: 32768, MaxPort: 65535}}}
				return c
			}(),
		},
		"OKG's chart: 200 SLB ports, which OKG skips silently, are named": {
			toml:    "[alibabacloud]\nenable = true\n[alibabacloud.slb]\nmax_port = 700\nmin_port = 500\n",
			wantErr: []string{"alibabacloud.slb: (max_port - min_port) - len(block_ports) is 200, at most 199 allowed"},
		},
		"a disabled provider's tables are not checked": {
			toml: "[volcengine]\nenable = false\n[volcengine.clb]\nmax_port = 5\nmin_port = 10\n",
			want: func() plugin.Config {
				c := def
				c.Volcengine = plugin.VolcengineConfig{CLB: &plugin.PortRangeConfig{MinPort: 10, MaxPort: 5}}
				return c
			}(),
		},
		"cloud tables checked, every key named": {
			toml: "[volcengine]\nenable = true\n[volcengine.clb]\nmax_port = 600\nmin_port = 500\nblock_ports = [600, 550, 550]\n" +
				"[jdcloud]\nenable = true\n[jdcloud.nlb]\nmax_port = 70000\nmin_port = 500\nblock_ports = [501]\n" +
				"[alibabacloud]\nenable = true\n",
			wantErr: []string{"volcengine.clb.block_ports[0] (600) must be within [min_port, max_port) = [500, 600)",
				"volcengine.clb.block_ports[2] (550) is listed twice", "jdcloud.nlb.max_port (70000) must be within 1-65535",
				"jdcloud.nlb.block_ports is not read"},
		},
		"the CCE ELB table checked as OKG's, without the 200-port rule": {
			toml:    "[hwcloud]\nenable = true\n[hwcloud.cce.elb]\nmax_port = 65535\nmin_port = 32768\nblock_ports = [32768]\n[hwcloud.cce.multi-elb]\nmax_port = 9\n",
			wantErr: []string{"hwcloud.cce.elb.block_ports[0] (32768) must be strictly between min_port (32768) and max_port (65535)"},
		},
		"AWS: at most 50 listeners on an NLB (OKG's rule)": {
			toml:    "[aws]\nenable = true\n[aws.nlb]\nmin_port = 30001\nmax_port = 30100\nblock_ports = [30002]\n",
			wantErr: []string{"aws.nlb: (max_port - min_port + 1) - len(block_ports) is 99, at most 50 allowed"},
		},
		"AWS: 50 ports": {
			toml: "[aws]\nenable = true\n[aws.nlb]\nmin_port = 30001\nmax_port = 30050\n",
			want: func() plugin.Config {
				c := def
				c.AWS = plugin.AWSConfig{Enable: true, NLB: &plugin.PortRangeConfig{MinPort: 30001, MaxPort: 30050}}
				return c
			}(),
		},
		"unknown key of the CCE table": {
			toml:    "[hwcloud]\nenable = true\n[hwcloud.cce]\nelbs = 1\n",
			wantErr: []string{"unknown keys [hwcloud.cce.elbs]"},
		},
		"unknown key of a cloud table": {
			toml:    "[alibabacloud]\nenable = true\n[alibabacloud.slb]\nmax_port = 600\nminport = 500\n",
			wantErr: []string{"unknown keys [alibabacloud.slb.minport]"},
		},
		"empty file keeps the defaults": {
			want: def,
		},
		"disabled with own range": {
			toml: "[kubernetes]\nenable = false\n[kubernetes.hostPort]\nmin_port = 30000\nmax_port = 30009\nmax_pods_per_port = 1\n",
			want: plugin.Config{Kubernetes: plugin.KubernetesConfig{HostPort: plugin.HostPortConfig{MinPort: 30000, MaxPort: 30009, MaxPodsPerPort: 1,
				MaxReservedPortsPerNamespace: plugin.DefaultMaxReservedPortsPerNamespace}}},
		},
		"single port range": {
			toml: "[kubernetes.hostPort]\nmin_port = 8000\nmax_port = 8000\n",
			want: plugin.Config{Kubernetes: plugin.KubernetesConfig{Enable: true, HostPort: plugin.HostPortConfig{MinPort: 8000, MaxPort: 8000,
				MaxReservedPortsPerNamespace: plugin.DefaultMaxReservedPortsPerNamespace}}},
		},
		"per-pod and per-namespace caps": {
			toml: "[kubernetes.hostPort]\nmax_ports_per_pod = 4\nmax_reserved_ports_per_namespace = 0\n",
			want: plugin.Config{Kubernetes: plugin.KubernetesConfig{Enable: true, HostPort: plugin.HostPortConfig{MinPort: 8000, MaxPort: 9000, MaxPortsPerPod: 4, MaxReservedPortsPerNamespace: 0}}},
		},
		"negative caps name the keys": {
			toml:    "[kubernetes.hostPort]\nmax_ports_per_pod = -1\nmax_reserved_ports_per_namespace = -2\n",
			wantErr: []string{"kubernetes.hostPort.max_ports_per_pod (-1) must be 0 (no cap) or positive", "kubernetes.hostPort.max_reserved_ports_per_namespace (-2) must be 0 (no cap) or positive"},
		},
		"inverted range names both keys": {
			toml:    "[kubernetes.hostPort]\nmin_port = 9000\nmax_port = 8000\n",
			wantErr: []string{"kubernetes.hostPort.min_port (9000) is greater than kubernetes.hostPort.max_port (8000)"},
		},
		"zero range names the keys": {
			toml:    "[kubernetes.hostPort]\nmin_port = 0\nmax_port = 0\n",
			wantErr: []string{"kubernetes.hostPort.min_port (0) must be within 1-65535", "kubernetes.hostPort.max_port (0) must be within 1-65535"},
		},
		"port above 65535": {
			toml:    "[kubernetes.hostPort]\nmax_port = 70000\n",
			wantErr: []string{"kubernetes.hostPort.max_port (70000)"},
		},
		"negative limit": {
			toml:    "[kubernetes.hostPort]\nmax_pods_per_port = -1\n",
			wantErr: []string{"max_pods_per_port (-1)"},
		},
		"ingress guardrails": {
			toml: "[kubernetes.ingress]\nallowed_annotations = [\"nginx.ingress.kubernetes.io/rewrite-target\", \"example.com/*\"]\nallowed_host_suffixes = [\".games.example.com\", \"play.example.org\"]\nallowed_ingress_classes = [\"nginx-public\", \"*\"]\n",
			want: plugin.Config{Kubernetes: plugin.KubernetesConfig{Enable: true, HostPort: def.Kubernetes.HostPort, Ingress: plugin.IngressConfig{
				AllowedAnnotations:    []string{"nginx.ingress.kubernetes.io/rewrite-target", "example.com/*"},
				AllowedHostSuffixes:   []string{".games.example.com", "play.example.org"},
				AllowedIngressClasses: []string{"nginx-public", "*"},
			}}},
		},
		"ingress: an empty allowlist is set, not the default": {
			toml: "[kubernetes.ingress]\nallowed_annotations = []\n",
			want: plugin.Config{Kubernetes: plugin.KubernetesConfig{Enable: true, HostPort: def.Kubernetes.HostPort, Ingress: plugin.IngressConfig{AllowedAnnotations: []string{}}}},
		},
		"ingress: bad annotation entries name the key and index": {
			toml: "[kubernetes.ingress]\nallowed_annotations = [\"\", \"a*b\", \"not a key\"]\n",
			wantErr: []string{`kubernetes.ingress.allowed_annotations[0] ("")`, `kubernetes.ingress.allowed_annotations[1] ("a*b"): "*" may only end a prefix`,
				`kubernetes.ingress.allowed_annotations[2] ("not a key"): not an annotation key`},
		},
		"ingress: bad host suffixes name the key and index": {
			toml:    "[kubernetes.ingress]\nallowed_host_suffixes = [\".\", \"exa_mple.com\"]\n",
			wantErr: []string{`kubernetes.ingress.allowed_host_suffixes[0] (".")`, `kubernetes.ingress.allowed_host_suffixes[1] ("exa_mple.com"): expected a DNS suffix`},
		},
		"ingress: bad class names name the key and index": {
			toml:    "[kubernetes.ingress]\nallowed_ingress_classes = [\"ok\", \"Not_A_Class\"]\n",
			wantErr: []string{`kubernetes.ingress.allowed_ingress_classes[1] ("Not_A_Class"): expected an IngressClass name or "*"`},
		},
		"ingress: wrong type names the key": {
			toml:    "[kubernetes.ingress]\nallowed_host_suffixes = \"example.com\"\n",
			wantErr: []string{"allowed_host_suffixes"},
		},
		"ingress: typo in a key": {
			toml:    "[kubernetes.ingress]\nallowed_annotation = [\"a\"]\n",
			wantErr: []string{"unknown keys [kubernetes.ingress.allowed_annotation]"},
		},
		"typo in a kubernetes key": {
			toml:    "[kubernetes.hostPort]\nminport = 100\n",
			wantErr: []string{"unknown keys [kubernetes.hostPort.minport]"},
		},
		"not TOML": {
			toml:    "[kubernetes\n",
			wantErr: []string{"decode provider config"},
		},
		"wrong type": {
			toml:    "[kubernetes.hostPort]\nmin_port = \"8000\"\n",
			wantErr: []string{"decode provider config"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := plugin.ParseConfig([]byte(tc.toml))
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatalf("ParseConfig = %+v, want error", got)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseConfig: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("config (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(good, []byte("[kubernetes.hostPort]\nmin_port = 100\nmax_port = 200\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.toml")
	if err := os.WriteFile(bad, []byte("[kubernetes.hostPort]\nmin_port = 300\nmax_port = 200\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		path        string
		want        plugin.Config
		wantErr     string
		wantWarning bool
	}{
		"file": {path: good, want: plugin.Config{Kubernetes: plugin.KubernetesConfig{Enable: true, HostPort: plugin.HostPortConfig{MinPort: 100, MaxPort: 200, MaxReservedPortsPerNamespace: plugin.DefaultMaxReservedPortsPerNamespace}}}},
		"missing file means defaults and a warning": {path: filepath.Join(dir, "none.toml"), want: plugin.DefaultConfig(), wantWarning: true},
		"invalid file names the path":               {path: bad, wantErr: bad},
		"directory is an error":                     {path: dir, wantErr: "read provider config"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var logs strings.Builder
			ctx := ctrl.LoggerInto(context.Background(), funcr.New(func(_, args string) { logs.WriteString(args) }, funcr.Options{}))
			got, err := plugin.LoadConfig(ctx, tc.path)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("LoadConfig error = %v, want containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("config (-want,+got):\n%s", diff)
			}
			if gotWarn := strings.Contains(logs.String(), "not found"); gotWarn != tc.wantWarning {
				t.Errorf("warning logged = %t, want %t; log: %s", gotWarn, tc.wantWarning, logs.String())
			}
		})
	}
}

func TestDefaultsMatchOKG(t *testing.T) {
	h := plugin.DefaultConfig().Kubernetes.HostPort
	if h.MinPort != 8000 || h.MaxPort != 9000 || h.Size() != 1001 {
		t.Errorf("defaults = %+v (size %d), want OKG's 8000-9000", h, h.Size())
	}
	if !plugin.DefaultConfig().Kubernetes.Enable {
		t.Errorf("Kubernetes provider disabled by default")
	}
}
