package lb_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/alibabacloud"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/lb"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// TestDriftRepairKeepsReady: someone rewrites a field the plugin owns on a Ready SLB
// Service (its health-check flag) while the network-conf stays the same. The next run puts
// it back and keeps the network Ready, with a warning naming the field; rewritten again at
// once, the repair waits (10 s, doubling) and the network stays Ready meanwhile; after the
// wait it is repaired again, and that warning is Notable (the webhook records an Event naming
// the field: something keeps writing it). A change of the network-conf itself still rebuilds the Service
// and turns the network NotReady, as OKG does.
func TestDriftRepairKeepsReady(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC))
	c := fakeClient(t)
	p := alibabacloud.NewSLB(lb.Range{Min: 500, Max: 510})
	p.UseClock(clk)
	conf := `[{"name":"SlbIds","value":"lb-a"},{"name":"PortProtocols","value":"7777/UDP"}]`
	pod := runningPod(alibabacloud.SLBName, conf)
	key := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	run := func() (*corev1.Pod, error) { return p.OnPodUpdated(ctx, c, pod.DeepCopy()) }
	if _, err := run(); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{}
	if err := c.Get(ctx, key, svc); err != nil {
		t.Fatal(err)
	}
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "203.0.113.9"}}
	if err := c.Status().Update(ctx, svc); err != nil {
		t.Fatal(err)
	}
	ready := func(what string) {
		t.Helper()
		out, err := run()
		if err != nil && !plugin.IsWarning(err) {
			t.Fatalf("%s: %v, want a Ready network with at most a warning", what, err)
		}
		if st, _ := networkstatus.StatusFromPod(out); st == nil || st.CurrentNetworkState != networkstatus.NetworkReady {
			t.Fatalf("%s: status %+v, want Ready", what, st)
		}
	}
	ready("as made")

	const flag = "service.beta.kubernetes.io/alibaba-cloud-loadbalancer-health-check-flag"
	edit := func() {
		t.Helper()
		if err := c.Get(ctx, key, svc); err != nil {
			t.Fatal(err)
		}
		svc.Annotations[flag] = "on"
		if err := c.Update(ctx, svc); err != nil {
			t.Fatal(err)
		}
	}
	flagOf := func() string {
		t.Helper()
		if err := c.Get(ctx, key, svc); err != nil {
			t.Fatal(err)
		}
		return svc.Annotations[flag]
	}
	edit()
	out, err := run()
	if !plugin.IsWarning(err) || !strings.Contains(err.Error(), "metadata.annotations["+flag+"]") || !strings.Contains(err.Error(), "put back") {
		t.Errorf("first repair: %v, want a warning naming the field", err)
	}
	if first := (*plugin.Error)(nil); errors.As(err, &first) && first.Notable {
		t.Errorf("first repair: %v is Notable, want a warning only (an Event is for a field rewritten again)", err)
	}
	if st, _ := networkstatus.StatusFromPod(out); st == nil || st.CurrentNetworkState != networkstatus.NetworkReady {
		t.Errorf("first repair: status %+v, want Ready", st)
	}
	if got := flagOf(); got != "off" {
		t.Errorf("after the repair the flag is %q, want off", got)
	}

	edit()
	clk.Step(time.Second)
	if _, err := run(); !plugin.IsWarning(err) || !strings.Contains(err.Error(), "repaired again after") {
		t.Errorf("rewritten at once: %v, want a warning that the repair waits", err)
	}
	ready("while the repair waits")
	if got := flagOf(); got != "on" {
		t.Errorf("the repair did not wait: flag %q", got)
	}
	clk.Step(10 * time.Second)
	_, err = run()
	var w *plugin.Error
	if !errors.As(err, &w) || !w.Warning || !w.Notable || !strings.Contains(w.Message, "metadata.annotations["+flag+"]") {
		t.Errorf("repaired again after it was rewritten: %v, want a Notable warning (an Event on the pod) naming the field", err)
	}
	ready("after the wait")
	if got := flagOf(); got != "off" {
		t.Errorf("not repaired after the wait: flag %q", got)
	}

	pod.Annotations[networkstatus.AnnotationNetworkConf] = `[{"name":"SlbIds","value":"lb-a"},{"name":"PortProtocols","value":"7778/UDP"}]`
	out, err = run()
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := networkstatus.StatusFromPod(out); st == nil || st.CurrentNetworkState != networkstatus.NetworkNotReady {
		t.Errorf("network-conf changed: status %+v, want NotReady (as OKG)", st)
	}
}
