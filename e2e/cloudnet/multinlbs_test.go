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
	"github.com/okg-extensions/network-plugin-policy/pkg/networkretry"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/alibabacloud"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// TestMultiNLBsAsDeployed: AlibabaCloud-Multi-NLBs game servers of two lines (dx, lt), served
// by the manager as deployed (two replicas, the shipped RBAC), get one Service per line on
// that line's NLB, both on the same listener port, a readiness gate per line, and turn Ready
// once the box's cloud (standing in for Alibaba's NLB controller) has given both Services an
// address, with each line's address and endPoint ("<NLB hostname>/<line>") in the status. No
// listener port is on two Services of one NLB. (kwok, which runs these pods, sets every
// readiness gate True as soon as it sees it: the gates' own meaning, that the cloud
// controller set them, is held by TestMultiNLBsLinesInOneRun.)
func TestMultiNLBsAsDeployed(t *testing.T) {
	c := startCloud(t)
	ns := newNamespace(t, "multi-nlbs", nil)
	const dx, lt = "e2e-mnlb-dx", "e2e-mnlb-lt"
	createStatefulSet(t, ns, "mnlb", 2, gamePodTemplate("mnlb", alibabacloud.MultiNLBsName,
		fmt.Sprintf(`[{"name":"NlbIdNames","value":"%s/dx,%s/lt"},{"name":"PortProtocols","value":"7777/UDP"}]`, dx, lt)))
	eventually(t, 120*time.Second, "two Multi-NLBs game servers Ready on both lines", func(ctx context.Context) (bool, error) {
		pods, err := listPods(ctx, ns, "mnlb")
		if err != nil || len(pods) != 2 {
			return false, err
		}
		for i := range pods {
			pod := &pods[i]
			st := networkStatusOf(pod)
			if st == nil || st.CurrentNetworkState != networkstatus.NetworkReady {
				return false, nil
			}
			gates := map[corev1.PodConditionType]bool{}
			for _, g := range pod.Spec.ReadinessGates {
				gates[g.ConditionType] = true
			}
			var port int32
			for j, line := range []struct{ name, id string }{{"dx", dx}, {"lt", lt}} {
				if !gates[corev1.PodConditionType(alibabacloud.ServiceReadinessGatePrefix+pod.Name+"-"+line.name)] {
					return false, fmt.Errorf("%s: readiness gates %v, want one per line", pod.Name, pod.Spec.ReadinessGates)
				}
				svc, err := cs.CoreV1().Services(ns).Get(ctx, pod.Name+"-"+line.name, metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				if svc.Annotations[alibabacloud.AnnotationLBID] != line.id || len(svc.Spec.Ports) != 1 || (j > 0 && svc.Spec.Ports[0].Port != port) {
					return false, fmt.Errorf("Service %s: load balancer %q ports %v, want %s on the other line's port %d", svc.Name, svc.Annotations[alibabacloud.AnnotationLBID], svc.Spec.Ports, line.id, port)
				}
				port = svc.Spec.Ports[0].Port
				if len(st.ExternalAddresses) != 2 {
					return false, fmt.Errorf("%s: external addresses %+v, want one per line", pod.Name, st.ExternalAddresses)
				}
				a := st.ExternalAddresses[j]
				if a.IP != c.Address(line.id) || a.EndPoint != cloudbox.NLBHostname(line.id)+"/"+line.name || len(a.Ports) != 1 || a.Ports[0].Port == nil || int32(a.Ports[0].Port.IntValue()) != port {
					return false, fmt.Errorf("%s: line %s address %+v, want %s, %s/%s, port %d", pod.Name, line.name, a, c.Address(line.id), cloudbox.NLBHostname(line.id), line.name, port)
				}
			}
		}
		return true, nil
	})
	noPortTwice(t, ns, alibabacloud.AnnotationLBID, dx)
	noPortTwice(t, ns, alibabacloud.AnnotationLBID, lt)

	// network-disabled switches both lines to ClusterIP and the network to NotReady; removed,
	// both lines are load balancers again and the network Ready.
	setLabel := func(value string) {
		t.Helper()
		patch := fmt.Sprintf(`{"metadata":{"labels":{"game.kruise.io/network-disabled":%q}}}`, value)
		if _, err := cs.CoreV1().Pods(ns).Patch(context.Background(), "mnlb-0", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	lineTypes := func(ctx context.Context, want corev1.ServiceType) (bool, error) {
		for _, line := range []string{"dx", "lt"} {
			svc, err := cs.CoreV1().Services(ns).Get(ctx, "mnlb-0-"+line, metav1.GetOptions{})
			if err != nil || svc.Spec.Type != want {
				return false, err
			}
		}
		return true, nil
	}
	setLabel("true")
	eventually(t, 60*time.Second, "network-disabled: both lines ClusterIP, the network NotReady", func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "mnlb-0", metav1.GetOptions{})
		if err != nil || networkState(p) != networkstatus.NetworkNotReady {
			return false, err
		}
		return lineTypes(ctx, corev1.ServiceTypeClusterIP)
	})
	setLabel("false")
	eventually(t, 90*time.Second, "enabled again: both lines load balancers, the network Ready", func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "mnlb-0", metav1.GetOptions{})
		if err != nil || networkState(p) != networkstatus.NetworkReady {
			return false, err
		}
		return lineTypes(ctx, corev1.ServiceTypeLoadBalancer)
	})
}

// TestMultiNLBsExhausted, as deployed: a level of two NLBs whose 11 listener ports (the
// suite's [alibabacloud.nlb] range) hold one game server of six ports; a second game server
// of six is refused at its CREATE under a Synchronous policy, naming NlbIdNames and the
// policy, and under an Asynchronous one is admitted NotReady, retried, and Ready once the
// first is gone and its Services with it.
func TestMultiNLBsExhausted(t *testing.T) {
	startCloud(t)
	ns := newNamespace(t, "multi-nlbs-full", nil)
	applyPolicy(t, fmt.Sprintf(`
apiVersion: policy.game.kruise.io/v1alpha1
kind: NetworkPluginPolicy
metadata: {name: full, namespace: %s}
spec:
  plugins: [%q]
  failureModeExpression: "('mode' in object.metadata.labels && object.metadata.labels['mode'] == 'sync') ? 'Synchronous' : 'Asynchronous'"
  retry: {window: 5m, interval: 2s, maxInterval: 4s}
`, ns, alibabacloud.MultiNLBsName))
	waitForPolicy(t, ns, "full", alibabacloud.MultiNLBsName)
	conf := `[{"name":"NlbIdNames","value":"full-mnlb-dx/dx,full-mnlb-lt/lt"},{"name":"PortProtocols","value":"7001/UDP,7002/UDP,7003/UDP,7004/UDP,7005/UDP,7006/UDP"}]`
	createStatefulSet(t, ns, "first", 1, gamePodTemplate("first", alibabacloud.MultiNLBsName, conf))
	eventually(t, 90*time.Second, "the first game server Ready on both lines", func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "first-0", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return networkState(p) == networkstatus.NetworkReady, nil
	})

	syncTmpl := gamePodTemplate("sync", alibabacloud.MultiNLBsName, conf)
	syncTmpl.Labels["mode"] = "sync"
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sync-0", Labels: syncTmpl.Labels, Annotations: syncTmpl.Annotations}, Spec: syncTmpl.Spec}
	_, err := cs.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "NlbIdNames") || !strings.Contains(err.Error(), "denied by policy "+ns+"/full@") {
		t.Fatalf("a Synchronous game server with no level free: error %v, want a denial naming NlbIdNames and the policy", err)
	}

	asyncTmpl := gamePodTemplate("async", alibabacloud.MultiNLBsName, conf)
	pod = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "async-0", Labels: asyncTmpl.Labels, Annotations: asyncTmpl.Annotations}, Spec: asyncTmpl.Spec}
	if _, err := cs.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("an Asynchronous game server with no level free denied: %v", err)
	}
	eventually(t, 30*time.Second, "the Asynchronous game server NotReady, retried", func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "async-0", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return networkState(p) == networkstatus.NetworkNotReady && retryState(t, p) != nil, nil
	})
	scaleStatefulSet(t, ns, "first", 0)
	eventually(t, 2*time.Minute, "the waiting game server Ready once the first is gone", func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "async-0", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return networkState(p) == networkstatus.NetworkReady, nil
	})
	noPortTwice(t, ns, alibabacloud.AnnotationLBID, "full-mnlb-dx")
	noPortTwice(t, ns, alibabacloud.AnnotationLBID, "full-mnlb-lt")
}

// TestAutoNLBsAsDeployed: two AlibabaCloud-AutoNLBs game servers of a GameServerSet, served by
// the manager as deployed (two replicas, the shipped RBAC), get the GameServerSet's pool
// Services (its replicas' pool and a spare, owned by it), each of which the box's cloud gives
// an NLB of its own; each game server turns Ready on its ordinal's port of the first pool's
// NLB, at the NLB's hostname.
func TestAutoNLBsAsDeployed(t *testing.T) {
	ctx := context.Background()
	startCloud(t)
	ns := newNamespace(t, "auto-nlbs", nil)
	const set = "anlb"
	confParams := []any{
		map[string]any{"name": "PortProtocols", "value": "7777/UDP"},
		map[string]any{"name": "ZoneMaps", "value": "cn-hangzhou-h:vsw-a,cn-hangzhou-i:vsw-b"},
		map[string]any{"name": "EipIspTypes", "value": "bgp"},
		map[string]any{"name": "MinPort", "value": "1000"},
		map[string]any{"name": "MaxPort", "value": "1003"},
	}
	gss := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "game.kruise.io/v1alpha1", "kind": "GameServerSet",
		"metadata": map[string]any{"name": set, "namespace": ns},
		"spec":     map[string]any{"replicas": int64(2), "network": map[string]any{"networkType": alibabacloud.AutoNLBsName, "networkConf": confParams}},
	}}
	gssClient := dynamic.NewForConfigOrDie(cp.Config).Resource(schema.GroupVersionResource{Group: "game.kruise.io", Version: "v1alpha1", Resource: "gameserversets"}).Namespace(ns)
	if _, err := gssClient.Create(ctx, gss, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the GameServerSet: %v", err)
	}
	conf := `[{"name":"PortProtocols","value":"7777/UDP"},{"name":"ZoneMaps","value":"cn-hangzhou-h:vsw-a,cn-hangzhou-i:vsw-b"},{"name":"EipIspTypes","value":"bgp"},{"name":"MinPort","value":"1000"},{"name":"MaxPort","value":"1003"}]`
	tmpl := gamePodTemplate(set, alibabacloud.AutoNLBsName, conf)
	tmpl.Labels["game.kruise.io/owner-gss"] = set
	createStatefulSet(t, ns, set, 2, tmpl)
	nlb := "auto-" + ns + "-" + set + "-bgp-0"
	eventually(t, 2*time.Minute, "two AutoNLBs game servers Ready on their ordinals' ports of the first pool's NLB", func(ctx context.Context) (bool, error) {
		pods, err := listPods(ctx, ns, set)
		if err != nil || len(pods) != 2 {
			return false, err
		}
		for i := range pods {
			st := networkStatusOf(&pods[i])
			if st == nil || st.CurrentNetworkState != networkstatus.NetworkReady {
				return false, nil
			}
			want := int32(1000)
			if pods[i].Name == set+"-1" {
				want = 1001
			}
			if len(st.ExternalAddresses) != 1 || st.ExternalAddresses[0].EndPoint != cloudbox.NLBHostname(nlb)+"/bgp" ||
				len(st.ExternalAddresses[0].Ports) != 1 || int32(st.ExternalAddresses[0].Ports[0].Port.IntValue()) != want {
				return false, fmt.Errorf("%s: external addresses %+v, want %s/bgp on %d", pods[i].Name, st.ExternalAddresses, cloudbox.NLBHostname(nlb), want)
			}
		}
		return true, nil
	})
	svcs, err := cs.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var pools []string
	for _, s := range svcs.Items {
		if ref := metav1.GetControllerOf(&s); ref != nil && ref.Kind == "GameServerSet" && ref.Name == set {
			pools = append(pools, s.Name)
		}
	}
	if fmt.Sprint(pools) != "[anlb-bgp-0 anlb-bgp-1]" {
		t.Errorf("pool Services %v, want anlb-bgp-0 and the spare anlb-bgp-1, owned by the GameServerSet", pools)
	}
}

// TestMultiNLBsLineRefused, as deployed: when one line's NLB refuses a game server's
// listener (the box's cloud at its listener quota; its NLB-class controller says so in a
// Warning Event), that game server stays NotReady with the cloud's message as its last error
// (a cloudError), while its other line is served (its readiness gate True, set by the cloud
// controller's stand-in; the refused line's not) and the other game server is Ready on both
// lines; once the quota is raised, it turns Ready.
func TestMultiNLBsLineRefused(t *testing.T) {
	c := startCloud(t)
	ns := newNamespace(t, "multi-nlbs-refused", nil)
	const dx, lt = "e2e-mnlb-refused-dx", "e2e-mnlb-refused-lt"
	c.SetQuota(lt, 1)
	t.Cleanup(func() { c.SetQuota(lt, 0) })
	createStatefulSet(t, ns, "mnlbr", 2, gamePodTemplate("mnlbr", alibabacloud.MultiNLBsName,
		fmt.Sprintf(`[{"name":"NlbIdNames","value":"%s/dx,%s/lt"},{"name":"PortProtocols","value":"7777/UDP"}]`, dx, lt)))
	var refused string
	eventually(t, 2*time.Minute, "one game server Ready on both lines, the other NotReady on the refused line's cloud error", func(ctx context.Context) (bool, error) {
		pods, err := listPods(ctx, ns, "mnlbr")
		if err != nil || len(pods) != 2 {
			return false, err
		}
		ready := 0
		refused = ""
		for i := range pods {
			switch networkState(&pods[i]) {
			case networkstatus.NetworkReady:
				ready++
			case networkstatus.NetworkNotReady:
				state, err := networkretry.FromPod(&pods[i])
				if err != nil || state == nil || state.LastError == nil || state.LastError.Type != "cloudError" || !strings.Contains(state.LastError.Message, "QuotaExceeded") {
					return false, fmt.Errorf("%s NotReady, retry state %+v (%v)", pods[i].Name, state, err)
				}
				refused = pods[i].Name
			}
		}
		return ready == 1 && refused != "", nil
	})
	if svc, err := cs.CoreV1().Services(ns).Get(context.Background(), refused+"-dx", metav1.GetOptions{}); err != nil || len(svc.Status.LoadBalancer.Ingress) == 0 {
		t.Errorf("%s's dx line: %v, want it served while lt refuses", refused, err)
	}
	// The cloud controller's stand-in sets a line's readiness gate once its load balancer
	// serves the pod; the fake node does not.
	gate := func(p *corev1.Pod, line string) corev1.ConditionStatus {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodConditionType(alibabacloud.ServiceReadinessGatePrefix+p.Name+"-"+line) {
				return c.Status
			}
		}
		return ""
	}
	eventually(t, time.Minute, "the served line's readiness gate True, the refused line's not", func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, refused, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if gate(p, "lt") == corev1.ConditionTrue {
			t.Errorf("%s's lt readiness gate is True while its load balancer is refused", refused)
			return true, nil
		}
		return gate(p, "dx") == corev1.ConditionTrue, nil
	})
	c.SetQuota(lt, 0)
	eventually(t, 2*time.Minute, "the refused game server Ready, both gates True, once the quota is raised", func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, refused, metav1.GetOptions{})
		return err == nil && networkState(p) == networkstatus.NetworkReady && gate(p, "dx") == corev1.ConditionTrue && gate(p, "lt") == corev1.ConditionTrue, err
	})
}
