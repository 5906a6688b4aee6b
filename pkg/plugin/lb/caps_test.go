package lb_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/jdcloud"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/lb"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// TestCapsBoundWhatPodsHold: max_ports_per_pod refuses a pod that asks for more listener
// ports (nothing claimed at its CREATE, a parameterError naming PortProtocols and the key at
// its first UPDATE; its default, 16, admits every
// recorded OKG case, checked by the conformance test); max_reserved_ports_per_namespace
// bounds the ports one namespace holds for CREATEs whose pods have not shown up (a
// retryError naming the key), other namespaces unaffected, and a pod that shows up no longer
// counts.
func TestCapsBoundWhatPodsHold(t *testing.T) {
	ctx := context.Background()
	if err := (plugin.Config{JdCloud: plugin.JdCloudConfig{Enable: true, NLB: &plugin.PortRangeConfig{MinPort: 700, MaxPort: 720, MaxPortsPerPod: ptr.To[int32](-1)}}}).Validate(); err == nil ||
		!strings.Contains(err.Error(), "jdcloud.nlb.max_ports_per_pod") {
		t.Errorf("a negative max_ports_per_pod: %v, want an error naming jdcloud.nlb.max_ports_per_pod", err)
	}

	rng := lb.RangeOf(plugin.PortRangeConfig{MinPort: 700, MaxPort: 740})
	if rng.MaxPerPod != plugin.DefaultLBMaxPortsPerPod || rng.MaxReservedPerNamespace != plugin.DefaultLBMaxReservedPortsPerNamespace {
		t.Errorf("RangeOf without the keys: %+v, want the defaults", rng)
	}
	c := fakeClient(t)
	p := jdcloud.NewNLB(rng)
	many := make([]string, plugin.DefaultLBMaxPortsPerPod+1)
	for i := range many {
		many[i] = strconv.Itoa(7000+i) + "/UDP"
	}
	pod := runningPod(jdcloud.NLBName, `[{"name":"NlbIds","value":"lb-a"},{"name":"PortProtocols","value":"`+strings.Join(many, ",")+`"}]`)
	// At CREATE a network-conf the plugin cannot use claims nothing and is left to the first
	// UPDATE (OKG reports bad input there); the UPDATE refuses it.
	if out, err := p.OnPodAdded(ctx, c, pod.DeepCopy()); err != nil || out.Annotations[lb.AnnotationAllocation] != "" {
		t.Errorf("%d ports at CREATE: %v, allocation %q; want nothing claimed", len(many), err, out.Annotations[lb.AnnotationAllocation])
	}
	_, err := p.OnPodUpdated(ctx, c, pod)
	if perr := plugin.AsError(err); perr == nil || perr.Type != plugin.ParameterError || perr.Param != lb.ParamPortProtocols || !strings.Contains(err.Error(), "max_ports_per_pod") ||
		perr.ReasonOf() != plugin.ReasonNotAllowed {
		t.Errorf("%d ports: %v, want a parameterError (reason NotAllowed) naming PortProtocols and max_ports_per_pod", len(many), err)
	}

	capped := lb.RangeOf(plugin.PortRangeConfig{MinPort: 700, MaxPort: 740, MaxReservedPortsPerNamespace: ptr.To[int32](2)})
	p = jdcloud.NewNLB(capped)
	if err := p.Init(ctx, c, plugin.Config{}); err != nil {
		t.Fatal(err)
	}
	create := func(ns, name string) error {
		pod := runningPod(jdcloud.NLBName, `[{"name":"NlbIds","value":"lb-a"},{"name":"PortProtocols","value":"7777/UDP"}]`)
		pod.Namespace, pod.Name, pod.UID = ns, name, ""
		_, err := p.OnPodAdded(ctx, c, pod)
		return err
	}
	for _, name := range []string{"a-0", "a-1"} {
		if err := create("tenant-a", name); err != nil {
			t.Fatalf("CREATE %s within the cap: %v", name, err)
		}
	}
	err = create("tenant-a", "a-2")
	if perr := plugin.AsError(err); perr == nil || perr.Type != plugin.RetryError || !strings.Contains(err.Error(), "max_reserved_ports_per_namespace (2)") ||
		perr.ReasonOf() != plugin.ReasonPortsExhausted {
		t.Errorf("a third CREATE of tenant-a: %v, want a retryError (reason PortsExhausted) naming max_reserved_ports_per_namespace (2)", err)
	}
	if err := create("tenant-b", "b-0"); err != nil {
		t.Errorf("another namespace's CREATE: %v, want ports", err)
	}
	if err := c.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "a-0"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "game"}}}}); err != nil {
		t.Fatal(err)
	}
	if err := create("tenant-a", "a-2"); err != nil {
		t.Errorf("a third CREATE of tenant-a once a-0 exists: %v, want ports", err)
	}
}

// TestRulesKeepAStandingService: the rules over what a network-conf may ask for apply where
// something is made or changed, not to a Service that already stands as the network-conf
// asks (one OKG made before the handover): a pod whose Service was made for 3 ports under no
// cap stays Ready when the cap becomes 2; a network-conf change that asks for 4 is refused,
// naming the key, and the Service is left as it was.
func TestRulesKeepAStandingService(t *testing.T) {
	ctx := context.Background()
	c := fakeClient(t)
	conf := `[{"name":"NlbIds","value":"lb-a"},{"name":"PortProtocols","value":"7001/UDP,7002/UDP,7003/UDP"}]`
	pod := runningPod(jdcloud.NLBName, conf)
	before := jdcloud.NewNLB(lb.Range{Min: 700, Max: 720})
	if _, err := before.OnPodUpdated(ctx, c, pod.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(pod), svc); err != nil {
		t.Fatal(err)
	}
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "203.0.113.5"}}
	if err := c.Status().Update(ctx, svc); err != nil {
		t.Fatal(err)
	}

	capped := jdcloud.NewNLB(lb.Range{Min: 700, Max: 720, MaxPerPod: 2})
	if err := capped.Init(ctx, c, plugin.Config{}); err != nil {
		t.Fatal(err)
	}
	out, err := capped.OnPodUpdated(ctx, c, pod.DeepCopy())
	if err != nil && !plugin.IsWarning(err) {
		t.Fatalf("the standing Service under the new cap: %v, want it kept", err)
	}
	if st, _ := networkstatus.StatusFromPod(out); st == nil || st.CurrentNetworkState != networkstatus.NetworkReady {
		t.Errorf("the standing Service under the new cap: status %+v, want Ready", st)
	}

	changed := pod.DeepCopy()
	changed.Annotations[networkstatus.AnnotationNetworkConf] = `[{"name":"NlbIds","value":"lb-a"},{"name":"PortProtocols","value":"7001/UDP,7002/UDP,7003/UDP,7004/UDP"}]`
	_, err = capped.OnPodUpdated(ctx, c, changed)
	if perr := plugin.AsError(err); perr == nil || perr.Type != plugin.ParameterError || !strings.Contains(err.Error(), "max_ports_per_pod") {
		t.Errorf("a network-conf change past the cap: %v, want a parameterError naming max_ports_per_pod", err)
	}
	after := &corev1.Service{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(pod), after); err != nil || len(after.Spec.Ports) != 3 {
		t.Errorf("the Service after a refused change: %d ports (%v), want its 3", len(after.Spec.Ports), err)
	}
}
