package cloudnet

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/okg-extensions/network-plugin-policy/e2e/cloudbox"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/tencentcloud"
)

// tke is the box's tke-extend-network-controller,
// started once for the rest of the run by startTKE.
var tke standIn[cloudbox.TKEPortMapping]

// startTKE starts the box's tke-extend-network-controller against the suite's cluster,
// once, for the rest of the run.
func startTKE(t *testing.T) *cloudbox.TKEPortMapping {
	t.Helper()
	return tke.get(t, "the box's tke-extend-network-controller", cloudbox.StartTKEPortMapping)
}

// TestTencentCloudCLBAsDeployed: TencentCloud-CLB game servers of GameServerSet "tclb", served
// as deployed, on the box's tke-extend-network-controller with a port pool of one port:
//   - the first is mapped: Ready with the pool's CLB address and port outside, the pod's IP
//     and port inside, from the result the controller writes as its own ServiceAccount (the
//     [tencentcloud] result writer);
//   - the second finds no free port: its CLBPodBinding says NoPortAvailable, and the retry
//     state's last error is the controller's, with reason PortsExhausted;
//   - once the pool has a second port, the second is Ready on it;
//   - while the controller fails (Failed), a third waits with reason CloudRefused, and is
//     Ready once it recovers, the first kept Ready;
//   - a rolling restart of the replicas changes no game server's network-status nor mapping;
//   - network-disabled turns the mapping's enable annotation to "false" (the controller
//     unbinds: Disabled), and back.
func TestTencentCloudCLBAsDeployed(t *testing.T) {
	ctx := context.Background()
	m := startTKE(t)
	ns := newNamespace(t, "tencent-clb", nil)
	const set = "tclb"
	pool := ns + "-" + set
	m.SetPool(pool, cloudbox.TKEPool{LBID: "lb-" + ns, Address: "203.0.113.70", MinPort: 30000, MaxPort: 30000})
	dyn := dynamic.NewForConfigOrDie(cp.Config)
	createCLBGameServerSet(t, ns, set)
	tmpl := gamePodTemplate(set, tencentcloud.CLBName, `[{"name":"PortProtocols","value":"7777/UDP"}]`)
	tmpl.Labels["game.kruise.io/owner-gss"] = set
	createStatefulSet(t, ns, set, 1, tmpl)

	readyAt := func(name string, port int32) func(ctx context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, ignoreNotFound(err)
			}
			st := networkStatusOf(p)
			if st == nil || st.CurrentNetworkState != networkstatus.NetworkReady {
				return false, nil
			}
			if len(st.ExternalAddresses) != 1 || st.ExternalAddresses[0].IP != "203.0.113.70" || st.ExternalAddresses[0].Ports[0].Port.IntVal != port ||
				len(st.InternalAddresses) != 1 || st.InternalAddresses[0].IP != p.Status.PodIP || st.InternalAddresses[0].Ports[0].Port.IntVal != 7777 {
				return false, fmt.Errorf("%s Ready at %+v inside %+v, want 203.0.113.70:%d and %s:7777", name, st.ExternalAddresses, st.InternalAddresses, port, p.Status.PodIP)
			}
			if got := p.Annotations[tencentcloud.AnnotationPortMapping]; got != "7777 UDP "+pool+"\n" {
				return false, fmt.Errorf("%s's mapping %q", name, got)
			}
			return true, nil
		}
	}
	waitingWith := func(name, reason, state string) func(ctx context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, ignoreNotFound(err)
			}
			if networkstatus.IsReady(p) {
				return false, fmt.Errorf("%s Ready, want it waiting with %s", name, reason)
			}
			st := retryState(t, p)
			return st != nil && st.LastError != nil && st.LastError.Reason == reason && strings.Contains(st.LastError.Message, state), nil
		}
	}
	eventually(t, time.Minute, set+"-0 Ready on the pool's one port", readyAt(set+"-0", 30000))

	scaleStatefulSet(t, ns, set, 2)
	eventually(t, time.Minute, set+"-1 waiting: no port in the pool (PortsExhausted)", waitingWith(set+"-1", "PortsExhausted", "NoPortAvailable"))
	m.SetPool(pool, cloudbox.TKEPool{LBID: "lb-" + ns, Address: "203.0.113.70", MinPort: 30000, MaxPort: 30002})
	eventually(t, time.Minute, set+"-1 Ready once the pool has room", readyAt(set+"-1", 30001))

	m.SetFail(true)
	t.Cleanup(func() { m.SetFail(false) })
	scaleStatefulSet(t, ns, set, 3)
	eventually(t, time.Minute, set+"-2 waiting while the controller fails (CloudRefused)", waitingWith(set+"-2", "CloudRefused", "Failed"))
	m.SetFail(false)
	eventually(t, time.Minute, set+"-2 Ready once the controller recovers", readyAt(set+"-2", 30002))
	p, err := cs.CoreV1().Pods(ns).Get(ctx, set+"-0", metav1.GetOptions{})
	if err != nil || !networkstatus.IsReady(p) {
		t.Errorf("%s-0 after the controller's failure: %v, ready %t; want it kept Ready", set, err, err == nil && networkstatus.IsReady(p))
	}

	// A rolling restart of the replicas with the game servers live changes none of their
	// network-status nor their mapping, as the replicas come back and once their catch-up has
	// run every game server (10 s).
	before := readyPods(t, ns, set, 3, time.Minute)
	mappings := map[string]string{}
	live, err := listPods(ctx, ns, set)
	if err != nil {
		t.Fatal(err)
	}
	for i := range live {
		mappings[live[i].Name] = live[i].Annotations[tencentcloud.AnnotationPortMapping]
	}
	if err := mgr.RollingRestart(ctx); err != nil {
		t.Fatalf("rolling restart: %v", err)
	}
	for _, when := range []string{"as the replicas are back", "10 s after the restart"} {
		if when != "as the replicas are back" {
			time.Sleep(10 * time.Second)
		}
		pods, err := listPods(ctx, ns, set)
		if err != nil {
			t.Fatal(err)
		}
		for i := range pods {
			if got := pods[i].Annotations[networkstatus.AnnotationNetworkStatus]; got != before[pods[i].Name] {
				t.Errorf("%s's network-status %s:\n%s\nwant it unchanged:\n%s", pods[i].Name, when, got, before[pods[i].Name])
			}
			if got := pods[i].Annotations[tencentcloud.AnnotationPortMapping]; got != mappings[pods[i].Name] {
				t.Errorf("%s's mapping %s: %q, want it unchanged: %q", pods[i].Name, when, got, mappings[pods[i].Name])
			}
		}
	}

	// network-disabled asks the controller to unbind the game server (enable "false"), the
	// network-status kept as OKG keeps it; removing the label asks for the mapping again.
	disabled, err := cs.CoreV1().Pods(ns).Patch(ctx, set+"-0", types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"game.kruise.io/network-disabled":"true"}}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := disabled.Annotations[tencentcloud.AnnotationEnablePortMapping]; got != "false" {
		t.Errorf("%s-0 disabled: %s %q, want \"false\"", set, tencentcloud.AnnotationEnablePortMapping, got)
	}
	bindings := dyn.Resource(tencentcloud.GroupVersion.WithResource("clbpodbindings")).Namespace(ns)
	eventually(t, time.Minute, set+"-0's binding Disabled by the controller", func(ctx context.Context) (bool, error) {
		b, err := bindings.Get(ctx, set+"-0", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		state, _, _ := unstructured.NestedString(b.Object, "status", "state")
		return state == "Disabled", nil
	})
	enabled, err := cs.CoreV1().Pods(ns).Patch(ctx, set+"-0", types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"game.kruise.io/network-disabled":null}}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := enabled.Annotations[tencentcloud.AnnotationEnablePortMapping]; got != "true" {
		t.Errorf("%s-0 enabled again: %s %q, want \"true\"", set, tencentcloud.AnnotationEnablePortMapping, got)
	}
}

// TestTencentCloudHandedOverWhole: this manager serves OKG's one Tencent Cloud type, so the
// provider can be handed over whole. While OKG serves [tencentcloud] TencentCloud-CLB pods are
// left to it (admitted untouched, npp_okg_coexistence says conflict on both replicas); once
// OKG's is off, a game server is mapped and Ready through the box's controller; rollback,
// OKG's [tencentcloud] on again, gives the type back to OKG.
func TestTencentCloudHandedOverWhole(t *testing.T) {
	m := startTKE(t)
	ns := newNamespace(t, "tencent-handover", nil)
	tmpl := gamePodTemplate("clb", tencentcloud.CLBName, `[{"name":"PortProtocols","value":"7777/UDP"}]`)
	rollback := handOver(t, ns, "tencentcloud", tmpl)
	m.SetPool(ns+"-clb", cloudbox.TKEPool{LBID: "lb-handover", Address: "203.0.113.71", MinPort: 31000, MaxPort: 31009})
	createCLBGameServerSet(t, ns, "clb")
	tmpl.Labels["game.kruise.io/owner-gss"] = "clb"
	createStatefulSet(t, ns, "clb", 1, tmpl)
	eventually(t, time.Minute, "the game server Ready on the pool", func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "clb-0", metav1.GetOptions{})
		if err != nil {
			return false, ignoreNotFound(err)
		}
		ip, ok := externalAddress(p)
		return ok && ip == "203.0.113.71", nil
	})
	rollback()
}

// handOver hands OKG's provider table over to this manager, as a platform does, and checks
// each step: while OKG's [provider] is on, pods of tmpl in ns are left to OKG (admitted
// untouched, npp_okg_coexistence says conflict on every replica); once it is off, the
// provider is this manager's (no conflict). It returns the rollback: OKG's [provider] on
// again, and the type left to OKG again.
func handOver(t *testing.T, ns, provider string, tmpl corev1.PodTemplateSpec) (rollback func()) {
	t.Helper()
	okg := func(on bool) string {
		return fmt.Sprintf("[kubernetes]\nenable = false\n[%s]\nenable = %t\n", provider, on)
	}
	setOKG := installOKG(t, okg(true))
	conflicts := func(ctx context.Context) (float64, error) {
		return mgr.Metric(ctx, "npp_okg_coexistence", `provider="`+provider+`"`, `state="conflict"`)
	}
	decided := func(ctx context.Context) (bool, error) {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-", Namespace: ns, Annotations: tmpl.Annotations}, Spec: tmpl.Spec}
		got, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false, err
		}
		return got.Annotations["policy.game.kruise.io/network-decision"] != "", nil
	}
	leftToOKG := func(ctx context.Context) (bool, error) {
		n, err := conflicts(ctx)
		if err != nil || n != float64(len(mgr.Replicas)) {
			return false, err
		}
		d, err := decided(ctx)
		return !d, err
	}
	eventually(t, 40*time.Second, provider+"'s types left to OKG", leftToOKG)
	setOKG(okg(false))
	eventually(t, 40*time.Second, provider+" served whole", func(ctx context.Context) (bool, error) {
		n, err := conflicts(ctx)
		return n == 0 && err == nil, err
	})
	return func() {
		t.Helper()
		setOKG(okg(true))
		eventually(t, 40*time.Second, provider+"'s types OKG's again after the rollback", leftToOKG)
	}
}

// createCLBGameServerSet creates GameServerSet ns/name of TencentCloud-CLB with PortProtocols
// 7777/UDP (OKG's object only: no OKG controller runs in the suite), whose port pool is
// "<ns>-<name>".
func createCLBGameServerSet(t *testing.T, ns, name string) {
	t.Helper()
	gss := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "game.kruise.io/v1alpha1", "kind": "GameServerSet",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{"replicas": int64(1), "network": map[string]any{"networkType": tencentcloud.CLBName,
			"networkConf": []any{map[string]any{"name": "PortProtocols", "value": "7777/UDP"}}}},
	}}
	gvr := schema.GroupVersionResource{Group: "game.kruise.io", Version: "v1alpha1", Resource: "gameserversets"}
	if _, err := dynamic.NewForConfigOrDie(cp.Config).Resource(gvr).Namespace(ns).Create(context.Background(), gss, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the GameServerSet %s/%s: %v", ns, name, err)
	}
}
