// Package kubelet runs the end-to-end scenarios that need a real kubelet: the readiness gate
// game.kruise.io/network-ready holding a game-server pod out of Ready and out of its
// Service's ready endpoints. kwok marks every readiness gate True, so this package's cluster
// also runs a kubemark hollow node (e2e/cluster Options.HollowNodes): the kubelet's own code
// with a fake container runtime. The manager runs as config/default deploys it (two
// replicas, its own ServiceAccount and RBAC).
package kubelet

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	policyv1alpha1 "github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
	"github.com/okg-extensions/network-plugin-policy/e2e/cluster"
	"github.com/okg-extensions/network-plugin-policy/pkg/client/clientset/versioned"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

var (
	cp *cluster.ControlPlane
	cs kubernetes.Interface
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	return cluster.RunSuite(m, cluster.SuiteOptions{
		Cluster:        cluster.Options{FakeNodes: 1, HollowNodes: 1},
		CRDDirs:        []string{"../../crds"},
		ProviderConfig: "[kubernetes]\nenable = true\n",
		Manager:        &cluster.ManagerOptions{},
	}, func(s *cluster.Suite) error {
		cp = s.ControlPlane
		cs = kubernetes.NewForConfigOrDie(cp.Config)
		return nil
	})
}

// eventually polls cond every 250ms until it is true, failing the test after timeout with msg
// and cond's last error.
func eventually(t *testing.T, timeout time.Duration, msg string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last error
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		if err != nil && ctx.Err() == nil {
			last = err
		}
		return ok, nil
	})
	if err != nil {
		t.Fatalf("%s: not within %s (last error: %v)", msg, timeout, last)
	}
}

// setNodePortQuota sets the namespace's services.nodeports quota to n and waits until the
// quota admission plugin enforces it.
func setNodePortQuota(t *testing.T, ns string, n int64) {
	t.Helper()
	ctx := context.Background()
	hard := corev1.ResourceList{corev1.ResourceServicesNodePorts: *resource.NewQuantity(n, resource.DecimalSI)}
	q, err := cs.CoreV1().ResourceQuotas(ns).Get(ctx, "nodeports", metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = cs.CoreV1().ResourceQuotas(ns).Create(ctx, &corev1.ResourceQuota{
			ObjectMeta: metav1.ObjectMeta{Name: "nodeports", Namespace: ns},
			Spec:       corev1.ResourceQuotaSpec{Hard: hard},
		}, metav1.CreateOptions{})
	case err == nil:
		q.Spec.Hard = hard
		_, err = cs.CoreV1().ResourceQuotas(ns).Update(ctx, q, metav1.UpdateOptions{})
	}
	if err != nil {
		t.Fatalf("set services.nodeports quota of %s to %d: %v", ns, n, err)
	}
	eventually(t, 30*time.Second, "quota status computed", func(ctx context.Context) (bool, error) {
		q, err := cs.CoreV1().ResourceQuotas(ns).Get(ctx, "nodeports", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		h := q.Status.Hard[corev1.ResourceServicesNodePorts]
		return h.Value() == n, nil
	})
}

// podCondition returns the status of pod's condition typ, "" when absent.
func podCondition(p *corev1.Pod, typ corev1.PodConditionType) (corev1.ConditionStatus, string) {
	for _, c := range p.Status.Conditions {
		if c.Type == typ {
			return c.Status, c.Reason
		}
	}
	return "", ""
}

// readyEndpoint reports whether the lobby Service's EndpointSlices list the pod's IP as a
// ready endpoint (false when they list it not ready or not at all).
func readyEndpoint(ctx context.Context, ns, svc string) (ready bool, listed bool, err error) {
	slices, err := cs.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc})
	if err != nil {
		return false, false, err
	}
	for _, s := range slices.Items {
		for _, e := range s.Endpoints {
			for _, a := range e.Addresses {
				if a == cluster.HollowPodIP {
					return ptr.Deref(e.Conditions.Ready, false), true, nil
				}
			}
		}
	}
	return false, false, nil
}

// TestReadinessGateHoldsPodOutOfEndpoints: on a real kubelet (hollow node), a NodePort
// game-server pod whose network is not Ready (its namespace's services.nodeports quota is 0,
// and a namespace policy admits it Asynchronous with the readiness gate) runs with
// Ready=False (reason ReadinessGatesNotReady) and is not a ready endpoint of the Service that
// selects it; raising the quota makes its network Ready at the next retry, and the pod Ready
// and a ready endpoint. Then the network breaks (its NodePort Service is deleted while the
// quota is back at 0, and the next update runs the plugin again): the pod leaves the ready
// endpoints until the network is Ready again.
func TestReadinessGateHoldsPodOutOfEndpoints(t *testing.T) {
	ctx := context.Background()
	ns, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "gate-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{}) })
	setNodePortQuota(t, ns.Name, 0)
	policy := fmt.Sprintf(`
apiVersion: policy.game.kruise.io/v1alpha1
kind: NetworkPluginPolicy
metadata: {name: gate, namespace: %s}
spec:
  plugins: ["Kubernetes-NodePort"]
  failureMode: Asynchronous
  readinessGate: true
  retry: {window: 10m, interval: 2s, maxInterval: 4s}
`, ns.Name)
	cmd := exec.Command("kubectl", "apply", "-f", "-")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cp.KubeconfigPath)
	cmd.Stdin = strings.NewReader(policy)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	pc := versioned.NewForConfigOrDie(cp.Config)
	eventually(t, 30*time.Second, "policy compiled by the manager", func(ctx context.Context) (bool, error) {
		p, err := pc.PolicyV1alpha1().NetworkPluginPolicies(ns.Name).Get(ctx, "gate", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(p.Status.Conditions, "Ready")
		return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == p.Generation, nil
	})
	if _, err := cs.CoreV1().Services(ns.Name).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "lobby", Namespace: ns.Name},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "gs"},
			Ports:    []corev1.ServicePort{{Name: "game", Port: 7777, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(7777)}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "gs-0", Namespace: ns.Name, Labels: map[string]string{"app": "gs"},
			Annotations: map[string]string{
				networkstatus.AnnotationNetworkType: "Kubernetes-NodePort",
				networkstatus.AnnotationNetworkConf: `[{"name":"PortProtocols","value":"7777/UDP"}]`,
			},
		},
		Spec: corev1.PodSpec{
			NodeSelector:                  map[string]string{cluster.HollowNodeTaint: "true"},
			Tolerations:                   []corev1.Toleration{cluster.HollowNodeToleration},
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []corev1.Container{{
				Name: "game", Image: "game:1",
				Ports: []corev1.ContainerPort{{ContainerPort: 7777, Protocol: corev1.ProtocolUDP}},
			}},
		},
	}
	if _, err := cs.CoreV1().Pods(ns.Name).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod: %v", err)
	}

	// The network is NotReady: the kubelet runs the container but keeps the pod not Ready.
	notReadyAndOut := func(msg string) {
		t.Helper()
		eventually(t, 90*time.Second, msg, func(ctx context.Context) (bool, error) {
			p, err := cs.CoreV1().Pods(ns.Name).Get(ctx, "gs-0", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if len(p.Spec.ReadinessGates) != 1 || p.Spec.ReadinessGates[0].ConditionType != policyv1alpha1.ReadinessGateNetworkReady {
				return false, fmt.Errorf("readiness gates %v, want %s", p.Spec.ReadinessGates, policyv1alpha1.ReadinessGateNetworkReady)
			}
			st, err := networkstatus.StatusFromPod(p)
			if err != nil || st == nil || st.CurrentNetworkState != networkstatus.NetworkNotReady {
				return false, fmt.Errorf("network status %+v (%v), want NotReady", st, err)
			}
			cr, _ := podCondition(p, corev1.ContainersReady)
			ready, reason := podCondition(p, corev1.PodReady)
			if cr != corev1.ConditionTrue || ready != corev1.ConditionFalse || reason != "ReadinessGatesNotReady" {
				return false, fmt.Errorf("ContainersReady %q, Ready %q (%s); want True, False (ReadinessGatesNotReady)", cr, ready, reason)
			}
			gate, _ := podCondition(p, policyv1alpha1.ReadinessGateNetworkReady)
			if gate == corev1.ConditionTrue {
				return false, fmt.Errorf("condition %s True while the network is NotReady", policyv1alpha1.ReadinessGateNetworkReady)
			}
			ready2, listed, err := readyEndpoint(ctx, ns.Name, "lobby")
			if err != nil || !listed || ready2 {
				return false, fmt.Errorf("endpoint listed %v ready %v (%v); want listed not ready", listed, ready2, err)
			}
			return true, nil
		})
	}
	notReadyAndOut("pod running, Ready=False (ReadinessGatesNotReady) and not a ready endpoint while its network is NotReady")

	readyAndIn := func(msg string) {
		t.Helper()
		eventually(t, 60*time.Second, msg, func(ctx context.Context) (bool, error) {
			p, err := cs.CoreV1().Pods(ns.Name).Get(ctx, "gs-0", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if ready, reason := podCondition(p, corev1.PodReady); ready != corev1.ConditionTrue {
				return false, fmt.Errorf("Ready %q (%s)", ready, reason)
			}
			ready, listed, err := readyEndpoint(ctx, ns.Name, "lobby")
			if err != nil || !ready {
				return false, fmt.Errorf("endpoint listed %v ready %v (%v)", listed, ready, err)
			}
			return true, nil
		})
	}
	setNodePortQuota(t, ns.Name, 10)
	readyAndIn("pod Ready and a ready endpoint once its network is Ready")

	// The network breaks: the NodePort Service is gone and cannot come back under the quota;
	// the next update of the pod runs the plugin again.
	setNodePortQuota(t, ns.Name, 0)
	if err := cs.CoreV1().Services(ns.Name).Delete(ctx, "gs-0", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete the pod's NodePort Service: %v", err)
	}
	if _, err := cs.CoreV1().Pods(ns.Name).Patch(ctx, "gs-0", types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"touched":"yes"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("label the pod: %v", err)
	}
	notReadyAndOut("a once-Ready network that broke takes the pod out of Ready and of the ready endpoints")
	setNodePortQuota(t, ns.Name, 10)
	readyAndIn("pod Ready and a ready endpoint again once the network is repaired")
}
