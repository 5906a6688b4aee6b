package lb_test

import (
	"context"
	"strings"
	"testing"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/alibabacloud"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/hwcloud"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/jdcloud"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/lb"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/volcengine"
)

// FuzzLoadBalancerConf: whatever the network-conf (OKG's plugins panic on eight shapes of
// bad input), each of the five plugins returns a pod and nil or an error of a category a
// policy can act on (never an internalError), and never panics.
func FuzzLoadBalancerConf(f *testing.F) {
	for _, seed := range []string{
		`[{"name":"SlbIds","value":"lb-a"},{"name":"PortProtocols","value":"7777/UDP"}]`,
		`[{"name":"NlbIds","value":"lb-a,lb-b"},{"name":"PortProtocols","value":"7777/TCPUDP,80"},{"name":"LBHealthCheckType","value":"http"},{"name":"LBHealthCheckProtocolPort","value":"http"}]`,
		`[{"name":"ElbIds","value":""},{"name":"PortProtocols","value":"x/UDP"},{"name":"LBHealthCheckOption","value":"{"}]`,
		`[{"name":"ClbIds","value":"lb-a"},{"name":"PortProtocols","value":"7777"},{"name":"Annotations","value":":,a:b:c"}]`,
		`[{"name":`, `null`, `[]`, `[{"name":"Fixed","value":"maybe"}]`,
	} {
		f.Add(seed)
	}
	plugins := func() []*lb.Plugin {
		// One client and one instance of each plugin for every input: the inputs' Services
		// accumulate (a later one may find its Service there), which is more to check, not
		// less.
		return []*lb.Plugin{alibabacloud.NewSLB(lb.Range{Min: 500, Max: 505}), alibabacloud.NewNLB(lb.Range{Min: 500, Max: 505}),
			hwcloud.NewELB(lb.Range{Min: 500, Max: 505}), volcengine.NewCLB(lb.Range{Min: 500, Max: 505}), jdcloud.NewNLB(lb.Range{Min: 500, Max: 505})}
	}
	c := newFakeClient()
	ps := plugins()
	f.Fuzz(func(t *testing.T, conf string) {
		for _, p := range ps {
			// Called directly, not through plugin.Run, which would recover a panic.
			out, err := p.OnPodUpdated(context.Background(), c, runningPod(p.Name(), conf))
			if out == nil {
				t.Fatalf("%s: nil pod", p.Name())
			}
			// Volcengine-CLB's exhaustion is OKG's internalError; any other is a bug.
			if err != nil && plugin.TypeOf(err) == plugin.InternalError && !strings.Contains(err.Error(), "unable to find load balancer") {
				t.Errorf("%s: internal error on %q: %v", p.Name(), conf, err)
			}
		}
	})
}
