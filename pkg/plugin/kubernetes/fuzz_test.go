package kubernetes

import (
	"errors"
	"strings"
	"testing"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// checkParseError fails unless err is nil or a *plugin.Error of type parameterError.
func checkParseError(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	var perr *plugin.Error
	if !errors.As(err, &perr) || perr.Type != plugin.ParameterError || perr.Param == "" {
		t.Fatalf("error = %v, want a parameterError naming a parameter", err)
	}
}

// FuzzHostPortParams: any ContainerPorts value parses to ports within 1-65535 (or
// SameAsHost) with upper-case protocols, or fails with a parameterError naming
// ContainerPorts. Seeds: f.Add and testdata/fuzz/FuzzHostPortParams.
func FuzzHostPortParams(f *testing.F) {
	for _, s := range []string{"game:7777/UDP", "game:7777/TCPUDP,SameAsHost", "game:80,443/TCP", "game:udp", "game:", ":80", "game:7777/udp", "x:1", "game:0", "game:65536", "game:1/SCTP,,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		p, err := parseHostPortParams(networkstatus.Conf{{Name: ParamContainerPorts, Value: value}}, []string{"game", "sidecar"})
		checkParseError(t, err)
		if err != nil {
			return
		}
		if p.count() == 0 {
			t.Fatalf("%q parsed to no ports", value)
		}
		for _, c := range p.containers {
			for _, r := range c.ports {
				if r.port < 0 || r.port > 65535 || (r.protocol != "TCP" && r.protocol != "UDP" && r.protocol != "SCTP" && r.protocol != protocolTCPUDP) {
					t.Fatalf("%q parsed to invalid %+v", value, r)
				}
			}
		}
	})
}

// FuzzNodePortParams: any PortProtocols / Fixed / AllowNotReadyContainers values parse
// to distinct valid ports, or fail with a parameterError.
func FuzzNodePortParams(f *testing.F) {
	f.Add("80/TCP,7777/UDP", "false", "game")
	f.Add("80", "true", "")
	f.Add("80,80", "", "a,,b")
	f.Add("x/TCP", "yes", "")
	f.Add("1/tcp", "1", " ")
	f.Fuzz(func(t *testing.T, ports, fixed, allow string) {
		conf := networkstatus.Conf{{Name: ParamPortProtocols, Value: ports}, {Name: ParamFixed, Value: fixed}, {Name: ParamAllowNotReadyContainers, Value: allow}}
		p, err := parseNodePortParams(conf)
		checkParseError(t, err)
		if err != nil && !plugin.IsWarning(err) {
			return
		}
		seen := map[servicePortSpec]bool{}
		names := map[string]bool{}
		for _, sp := range p.ports {
			if sp.port < 1 || sp.port > 65535 || seen[sp] {
				t.Fatalf("%q parsed to invalid or duplicate %+v", ports, sp)
			}
			seen[sp] = true
			n := servicePortName(sp, p.ports)
			if names[n] {
				t.Fatalf("%q gives two service ports named %q", ports, n)
			}
			names[n] = true
		}
	})
}

// FuzzIngressParams: any Path / Host / Annotation values parse (and expand for pod
// gs-7, the one <id> replaced by 7), or fail with a parameterError.
func FuzzIngressParams(f *testing.F) {
	f.Add("/game<id>(/|$)(.*)", "play.example.com", "nginx.ingress.kubernetes.io/rewrite-target: /$2", "8080")
	f.Add("/g<id>/<id>", "", "a:b", "80")
	f.Add("/", "<id>.example.com", ": x", "0")
	f.Add("g", "<id><id>", "k: v: w", "65535")
	f.Fuzz(func(t *testing.T, path, host, annotation, port string) {
		conf := networkstatus.Conf{{Name: ParamPath, Value: path}, {Name: ParamPathType, Value: "Prefix"}, {Name: ParamPort, Value: port},
			{Name: ParamAnnotation, Value: annotation}}
		if host != "" {
			conf = append(conf, networkstatus.ConfParam{Name: ParamHost, Value: host})
		}
		p, err := parseIngressParams(conf, plugin.IngressConfig{})
		checkParseError(t, err)
		if err != nil && !plugin.IsWarning(err) {
			return
		}
		x, err := p.expand("gs-7")
		checkParseError(t, err)
		if err != nil {
			return
		}
		if want := strings.Replace(path, idPlaceholder, "7", 1); x.paths[0] != want {
			t.Fatalf("path %q expanded to %q, want %q", path, x.paths[0], want)
		}
	})
}
