package cloudnet

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/alibabacloud"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/lb"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// readyPods waits until every pod of app in ns (want of them) has a Ready network and returns
// their network-status annotations by pod name.
func readyPods(t *testing.T, ns, app string, want int, timeout time.Duration) map[string]string {
	t.Helper()
	out := map[string]string{}
	eventually(t, timeout, fmt.Sprintf("%d %s game servers Ready", want, app), func(ctx context.Context) (bool, error) {
		pods, err := listPods(ctx, ns, app)
		if err != nil || len(pods) != want {
			return false, err
		}
		for i := range pods {
			if st := networkStatusOf(&pods[i]); st == nil || st.CurrentNetworkState != networkstatus.NetworkReady {
				return false, nil
			}
			out[pods[i].Name] = pods[i].Annotations[networkstatus.AnnotationNetworkStatus]
		}
		return true, nil
	})
	return out
}

// TestAlibabaServersKeepTheirNetworkAcrossARestart, as deployed (two replicas, the shipped
// RBAC): AlibabaCloud-EIP, AlibabaCloud-NATGW, AlibabaCloud-SLB-SharedPort and
// AlibabaCloud-Multi-NLBs game servers Ready with the box's answers keep them, unchanged,
// through a rolling restart of the replicas, and the shared Service and the lines' Services
// are not written again (the same resourceVersion: nothing is re-chosen, moved or
// recounted); after it, new game servers of each type turn Ready (the
// restarted replicas count the shared SLB's backends from the pods). Then network-disabled
// on a shared-port game server takes it out of the Service (its SLB label goes, the network
// is NotReady) and removing it brings it back, Ready on the same SLB.
func TestAlibabaServersKeepTheirNetworkAcrossARestart(t *testing.T) {
	c := startCloud(t)
	startAlibaba(t)
	ctx := context.Background()
	ns := newNamespace(t, "alibaba-restart", nil)
	const id = "restart-slb"
	createStatefulSet(t, ns, "eip", 1, gamePodTemplate("eip", alibabacloud.EIPName, `[{"name":"ReleaseStrategy","value":"Follow"}]`))
	createStatefulSet(t, ns, "dnat", 1, gamePodTemplate("dnat", alibabacloud.NATGWName, `[{"name":"Ports","value":"7777"},{"name":"Protocol","value":"udp"}]`))
	createStatefulSet(t, ns, "shared", 2, gamePodTemplate("shared", alibabacloud.SLBSharedPortName,
		fmt.Sprintf(`[{"name":"SlbIds","value":%q},{"name":"PortProtocols","value":"7777/UDP"}]`, id)))
	createStatefulSet(t, ns, "lines", 1, gamePodTemplate("lines", alibabacloud.MultiNLBsName,
		`[{"name":"NlbIdNames","value":"restart-dx/dx,restart-lt/lt"},{"name":"PortProtocols","value":"7777/UDP"}]`))
	before := map[string]string{}
	for app, n := range map[string]int{"eip": 1, "dnat": 1, "shared": 2, "lines": 1} {
		for name, st := range readyPods(t, ns, app, n, 2*time.Minute) {
			before[name] = st
		}
	}
	written := map[string]string{} // resourceVersion of the Services that must not be written
	for _, name := range []string{id, "lines-0-dx", "lines-0-lt"} {
		svc, err := cs.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		written[name] = svc.ResourceVersion
	}

	if err := mgr.RollingRestart(ctx); err != nil {
		t.Fatalf("rolling restart: %v", err)
	}
	// Checked as the replicas are back (RollingRestart returns once both are ready), and again
	// once their catch-up, which runs every game server once at start, has had 10 s.
	unchanged := func(when string) {
		t.Helper()
		for _, app := range []string{"eip", "dnat", "shared", "lines"} {
			pods, err := listPods(ctx, ns, app)
			if err != nil {
				t.Fatal(err)
			}
			for i := range pods {
				if got := pods[i].Annotations[networkstatus.AnnotationNetworkStatus]; got != before[pods[i].Name] {
					t.Errorf("%s's network-status %s:\n%s\nwant it unchanged:\n%s", pods[i].Name, when, got, before[pods[i].Name])
				}
			}
		}
		for name, rv := range written {
			after, err := cs.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if after.ResourceVersion != rv {
				t.Errorf("Service %s was written %s (resourceVersion %s, was %s)", name, when, after.ResourceVersion, rv)
			}
		}
	}
	unchanged("as the replicas are back")
	time.Sleep(10 * time.Second)
	unchanged("10 s after the restart")

	scaleStatefulSet(t, ns, "eip", 2)
	scaleStatefulSet(t, ns, "dnat", 2)
	scaleStatefulSet(t, ns, "shared", 3)
	scaleStatefulSet(t, ns, "lines", 2)
	readyPods(t, ns, "lines", 2, 2*time.Minute)
	readyPods(t, ns, "eip", 2, 2*time.Minute)
	readyPods(t, ns, "dnat", 2, 2*time.Minute)
	shared := readyPods(t, ns, "shared", 3, 2*time.Minute)
	if !strings.Contains(shared["shared-2"], c.Address(id)) {
		t.Errorf("shared-2's network-status %s, want the SLB's address %s", shared["shared-2"], c.Address(id))
	}

	// network-disabled takes the game server out of the shared Service; removing it brings it
	// back on the same SLB.
	disabled, err := cs.CoreV1().Pods(ns).Patch(ctx, "shared-0", types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"game.kruise.io/network-disabled":"true"}}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, has := disabled.Labels[alibabacloud.LabelLBID]; has {
		t.Errorf("shared-0 disabled still has the SLB label: %v", disabled.Labels)
	}
	if st := networkStatusOf(disabled); st == nil || st.CurrentNetworkState != networkstatus.NetworkNotReady {
		t.Errorf("shared-0 disabled: network-status %+v, want NotReady", st)
	}
	if _, err := cs.CoreV1().Pods(ns).Patch(ctx, "shared-0", types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"game.kruise.io/network-disabled":null}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "shared-0 Ready again on its SLB", func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "shared-0", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ip, ok := externalAddress(p)
		return ok && ip == c.Address(id) && p.Labels[alibabacloud.LabelLBID] == id, nil
	})
}

// TestSharedPortExhaustionAndCloudFailure, as deployed (two replicas, the shipped RBAC) with
// the cloud in a box: an SLB serving 200 AlibabaCloud-SLB-SharedPort game servers, the most
// one serves, refuses a 201st under a Synchronous policy (the CREATE is denied naming
// SlbIds) and admits it under an Asynchronous one, NotReady with reason PortsExhausted,
// until one of the 200 goes: then it joins the SLB and is Ready. A shared Service the cloud
// refuses (a listener quota: two ports on an SLB that allows one) leaves its game server
// NotReady with the cloud's message as a cloudError, and Ready once the quota is raised.
func TestSharedPortExhaustionAndCloudFailure(t *testing.T) {
	c := startCloud(t)
	ctx := context.Background()
	ns := newNamespace(t, "shared-full", nil)
	const id, quotaID = "full-slb", "quota-shared-slb"
	applyPolicy(t, fmt.Sprintf(`
apiVersion: policy.game.kruise.io/v1alpha1
kind: NetworkPluginPolicy
metadata: {name: sync, namespace: %[1]s}
spec:
  plugins: [%[2]q]
  podSelector: {matchLabels: {app: sync}}
  failureMode: Synchronous
---
apiVersion: policy.game.kruise.io/v1alpha1
kind: NetworkPluginPolicy
metadata: {name: async, namespace: %[1]s}
spec:
  plugins: [%[2]q]
  failureMode: Asynchronous
  retry: {window: 10m, interval: 2s, maxInterval: 5s}
`, ns, alibabacloud.SLBSharedPortName))
	waitForPolicy(t, ns, "async", alibabacloud.SLBSharedPortName)
	conf := fmt.Sprintf(`[{"name":"SlbIds","value":%q},{"name":"PortProtocols","value":"7777/UDP"}]`, id)

	// 200 game servers fill the SLB: each is given it at its CREATE.
	createStatefulSet(t, ns, "fill", 200, gamePodTemplate("fill", alibabacloud.SLBSharedPortName, conf))
	eventually(t, 3*time.Minute, "200 game servers on the SLB", func(ctx context.Context) (bool, error) {
		pods, err := listPods(ctx, ns, "fill")
		if err != nil {
			return false, err
		}
		n := 0
		for i := range pods {
			if strings.Contains(pods[i].Annotations[lb.AnnotationAllocation], id) {
				n++
			}
		}
		return n == 200, nil
	})

	// Synchronous: the 201st is denied at its CREATE.
	tmpl := gamePodTemplate("sync", alibabacloud.SLBSharedPortName, conf)
	pod := &corev1.Pod{ObjectMeta: tmpl.ObjectMeta, Spec: tmpl.Spec}
	pod.Name, pod.Namespace = "sync-0", ns
	_, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "SlbIds") || !strings.Contains(err.Error(), "200") {
		t.Fatalf("the 201st game server under a Synchronous policy: %v, want its CREATE denied naming SlbIds and 200", err)
	}

	// Asynchronous: admitted, NotReady with reason PortsExhausted, until one of the 200 goes.
	createStatefulSet(t, ns, "async", 1, gamePodTemplate("async", alibabacloud.SLBSharedPortName, conf))
	eventually(t, time.Minute, "async-0 admitted and waiting for room on the SLB", func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "async-0", metav1.GetOptions{})
		if err != nil {
			return false, ignoreNotFound(err)
		}
		if _, ok := externalAddress(p); ok {
			return false, fmt.Errorf("async-0 Ready on a full SLB")
		}
		st := retryState(t, p)
		return st != nil && st.LastError != nil && st.LastError.Reason == "PortsExhausted", nil
	})
	scaleStatefulSet(t, ns, "fill", 199)
	eventually(t, 2*time.Minute, "async-0 Ready on the SLB once a game server went", func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "async-0", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ip, ok := externalAddress(p)
		return ok && ip == c.Address(id), nil
	})

	// The cloud refuses the shared Service (a listener quota), then accepts it.
	c.SetQuota(quotaID, 1)
	t.Cleanup(func() { c.SetQuota(quotaID, 0) })
	createStatefulSet(t, ns, "quota", 1, gamePodTemplate("quota", alibabacloud.SLBSharedPortName,
		fmt.Sprintf(`[{"name":"SlbIds","value":%q},{"name":"PortProtocols","value":"7777/UDP,7778/TCP"}]`, quotaID)))
	eventually(t, 2*time.Minute, "quota-0 NotReady with the cloud's refusal", func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "quota-0", metav1.GetOptions{})
		if err != nil {
			return false, ignoreNotFound(err)
		}
		if _, ok := externalAddress(p); ok {
			return false, fmt.Errorf("quota-0 Ready past the cloud's quota")
		}
		st := retryState(t, p)
		return st != nil && st.LastError != nil && st.LastError.Type == "cloudError" && strings.Contains(st.LastError.Message, "QuotaExceeded"), nil
	})
	c.SetQuota(quotaID, 0)
	eventually(t, 2*time.Minute, "quota-0 Ready once the quota is raised", func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "quota-0", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ip, ok := externalAddress(p)
		return ok && ip == c.Address(quotaID), nil
	})
}
