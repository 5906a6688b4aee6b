package cloudbox

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/alibabacloud"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/lb"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// TestSLBAgainstTheServiceController: the AlibabaCloud-SLB plugin, with its port ledger, on
// a real API server with Kubernetes' own service controller and the box's cloud: a game
// server's Service gets its SLB's address and the network turns Ready on it; a second one
// beyond the SLB's listener quota stays NotReady (no ingress, the cloud's message in a
// SyncLoadBalancerFailed Event) until the quota is raised. The manager does not serve the
// cloud types yet; this drives the plugin as the webhook would, update by update.
func TestSLBAgainstTheServiceController(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cloud := New(alibabacloud.AnnotationLBID)
	cloud.SetQuota("lb-slb", 1)
	if err := Start(ctx, cp.Config, cloud, 2); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cp.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(cp.Config)
	ns := "slb"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The ServiceAccount admission wants the namespace's default ServiceAccount; this
	// package's control plane runs no controller manager to make it.
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := alibabacloud.NewSLB(lb.Range{Min: 500, Max: 510})
	p.UseLedger(&lb.ConfigMapLedger{Client: c, Namespace: ns, Plugin: alibabacloud.SLBName})
	if err := p.Init(ctx, c, plugin.Config{}); err != nil {
		t.Fatal(err)
	}
	gameServer := func(name string) *corev1.Pod {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{
			networkstatus.AnnotationNetworkType: alibabacloud.SLBName,
			networkstatus.AnnotationNetworkConf: `[{"name":"SlbIds","value":"lb-slb"},{"name":"PortProtocols","value":"7777/UDP"}]`}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "game", Image: "game:1"}}}}
		created, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}) // the Service's owner
		if err != nil {
			t.Fatal(err)
		}
		created.Status.PodIP = "10.244.0.7"
		return created
	}
	// update runs the plugin as a pod UPDATE would, until the network is in state want.
	update := func(pod *corev1.Pod, want networkstatus.NetworkState, timeout time.Duration) *networkstatus.NetworkStatus {
		var st *networkstatus.NetworkStatus
		_ = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
			out, err := plugin.Run(ctx, 5*time.Second, p, plugin.OperationUpdate, c, pod)
			if err != nil {
				t.Logf("%s: %v", pod.Name, err)
			}
			*pod = *out
			st, _ = networkstatus.StatusFromPod(pod)
			return st != nil && st.CurrentNetworkState == want, nil
		})
		return st
	}
	first := gameServer("gs-0")
	st := update(first, networkstatus.NetworkReady, time.Minute)
	if st == nil || st.CurrentNetworkState != networkstatus.NetworkReady || len(st.ExternalAddresses) != 1 ||
		st.ExternalAddresses[0].IP != cloud.Address("lb-slb") || st.ExternalAddresses[0].Ports[0].Port.IntVal != 500 {
		t.Fatalf("gs-0 status %+v, want Ready on %s:500", st, cloud.Address("lb-slb"))
	}
	second := gameServer("gs-1")
	if st := update(second, networkstatus.NetworkReady, 15*time.Second); st == nil || st.CurrentNetworkState != networkstatus.NetworkNotReady {
		t.Fatalf("gs-1 beyond the SLB's listener quota: status %+v, want NotReady", st)
	}
	evs, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=gs-1,reason=SyncLoadBalancerFailed"})
	if err != nil || len(evs.Items) == 0 {
		t.Errorf("no SyncLoadBalancerFailed Event for gs-1's Service (%v)", err)
	}
	cloud.SetQuota("lb-slb", 0)
	if st := update(second, networkstatus.NetworkReady, time.Minute); st == nil || st.CurrentNetworkState != networkstatus.NetworkReady ||
		st.ExternalAddresses[0].Ports[0].Port.IntVal != 501 {
		t.Errorf("gs-1 after the quota was raised: status %+v, want Ready on port 501", st)
	}
}
