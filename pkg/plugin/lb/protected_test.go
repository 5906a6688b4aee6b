package lb_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/hwcloud"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/jdcloud"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/lb"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/volcengine"
)

// TestProtectedAnnotationsRefused: a network-conf may not set a Service annotation the plugin
// writes itself, the load balancer id, the load balancer specification or the config hash,
// through Volcengine's and JdCloud's Annotations or as one of HwCloud-CCE-ELB's copied
// parameters: a parameterError naming the parameter and the key, and no Service (OKG writes
// the entry over its own, and the pod lands on a load balancer and port never allocated to
// it). HwCloud-CCE-ELB's kubernetes.io/elb.autocreate, which makes CCE create a billable ELB,
// is refused unless the provider configuration allows it ([hwcloud.cce]
// allow_elb_autocreate). Keys OKG lets the user override (Volcengine's scheduler) still pass.
func TestProtectedAnnotationsRefused(t *testing.T) {
	for name, tc := range map[string]struct {
		p                  *lb.Plugin
		networkType        string
		conf               string
		wantParam, wantKey string
	}{
		"Volcengine-CLB, the CLB id": {volcengine.NewCLB(lb.Range{Min: 550, Max: 600}), volcengine.CLBName,
			`[{"name":"ClbIds","value":"lb-a"},{"name":"PortProtocols","value":"7777/UDP"},{"name":"Annotations","value":"` + volcengine.AnnotationCLBID + `:lb-other"}]`,
			lb.ParamAnnotations, volcengine.AnnotationCLBID},
		"JdCloud-NLB, the NLB id": {jdcloud.NewNLB(lb.Range{Min: 500, Max: 700}), jdcloud.NLBName,
			`[{"name":"NlbIds","value":"lb-a"},{"name":"PortProtocols","value":"7777/UDP"},{"name":"Annotations","value":"` + jdcloud.AnnotationNLBID + `:lb-other"}]`,
			lb.ParamAnnotations, jdcloud.AnnotationNLBID},
		"JdCloud-NLB, the load balancer specification": {jdcloud.NewNLB(lb.Range{Min: 500, Max: 700}), jdcloud.NLBName,
			`[{"name":"NlbIds","value":"lb-a"},{"name":"PortProtocols","value":"7777/UDP"},{"name":"Annotations","value":"` + jdcloud.AnnotationLBSpec + `:{}"}]`,
			lb.ParamAnnotations, jdcloud.AnnotationLBSpec},
		"HwCloud-CCE-ELB, the config hash": {hwcloud.NewCCEELB(lb.Range{Min: 500, Max: 510}, true), hwcloud.CCEELBName,
			`[{"name":"kubernetes.io/elb.id","value":"elb-a"},{"name":"PortProtocols","value":"7777"},{"name":"` + lb.AnnotationConfigHash + `","value":"1"}]`,
			lb.AnnotationConfigHash, lb.AnnotationConfigHash},
		"HwCloud-CCE-ELB, auto-create not allowed": {hwcloud.NewCCEELB(lb.Range{Min: 500, Max: 510}, false), hwcloud.CCEELBName,
			`[{"name":"kubernetes.io/elb.autocreate","value":"{\"type\":\"public\"}"},{"name":"PortProtocols","value":"7777"}]`,
			hwcloud.AnnotationELBAutoCreate, "allow_elb_autocreate"},
		"Volcengine-CLB, the scheduler (OKG's user override)": {volcengine.NewCLB(lb.Range{Min: 550, Max: 600}), volcengine.CLBName,
			`[{"name":"ClbIds","value":"lb-a"},{"name":"PortProtocols","value":"7777/UDP"},{"name":"Annotations","value":"service.beta.kubernetes.io/volcengine-loadbalancer-scheduler:wlc"}]`,
			"", ""},
	} {
		t.Run(name, func(t *testing.T) {
			c := fakeClient(t)
			_, err := tc.p.OnPodUpdated(context.Background(), c, runningPod(tc.networkType, tc.conf))
			if tc.wantParam == "" {
				if err != nil {
					t.Fatalf("OnPodUpdated: %v, want the key passed", err)
				}
				return
			}
			perr := plugin.AsError(err)
			if perr == nil || perr.Type != plugin.ParameterError || perr.Param != tc.wantParam || !strings.Contains(err.Error(), tc.wantKey) {
				t.Fatalf("OnPodUpdated: %v, want a parameterError naming %s and %s", err, tc.wantParam, tc.wantKey)
			}
			var list corev1.ServiceList
			if err := c.List(context.Background(), &list); err != nil || len(list.Items) != 0 {
				t.Errorf("%d Services written (%v), want none", len(list.Items), err)
			}
		})
	}
}
