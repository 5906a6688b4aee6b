//go:build faults

// Package faults runs the long faults of the fault campaign (docs/reliability.md) on a real
// local cluster with the manager as deployed (two replicas, its own ServiceAccount and RBAC,
// the Deployment's flags). They take minutes each, so they are behind the build tag
// "faults" and run by `make test-faults`, not by `make test`; the fast faults are in
// e2e/admission and e2e/replicas.
package faults

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/okg-extensions/network-plugin-policy/e2e/cluster"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

const (
	minPort, maxPort = 21000, 21099
	fakeNodes        = 2
	hostPortConf     = `[{"name":"ContainerPorts","value":"game:7777/UDP"}]`
	nodePortConf     = `[{"name":"PortProtocols","value":"7777/UDP"}]`
)

var (
	cp  *cluster.ControlPlane
	mgr *cluster.Manager
	cs  kubernetes.Interface
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	return cluster.RunSuite(m, cluster.SuiteOptions{
		Cluster:        cluster.Options{FakeNodes: fakeNodes},
		CRDDirs:        []string{"../../crds"},
		ProviderConfig: fmt.Sprintf("[kubernetes]\nenable = true\n[kubernetes.hostPort]\nmin_port = %d\nmax_port = %d\n", minPort, maxPort),
		// Every call of the manager to the API server goes through a fault proxy, off but for
		// the brownout.
		Manager: &cluster.ManagerOptions{Replicas: 2, ThroughFaultProxy: true},
	}, func(s *cluster.Suite) error {
		cp, mgr = s.ControlPlane, s.Manager
		cfg := rest.CopyConfig(cp.Config)
		cfg.QPS, cfg.Burst = 100, 200
		cs = kubernetes.NewForConfigOrDie(cfg)
		return nil
	})
}

// newNamespace creates a namespace for one test.
func newNamespace(t *testing.T, prefix string) string {
	t.Helper()
	ns, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{}) })
	// Pods are refused until the ServiceAccount controller has made the default
	// ServiceAccount, which lags after a fault that loaded the cluster.
	if err := cluster.WaitForDefaultServiceAccount(context.Background(), cs, ns.Name); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// gameServer is a game-server pod of networkType with network-conf conf, label app=app.
func gameServer(ns, app, networkType, conf string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: app + "-", Namespace: ns, Labels: map[string]string{"app": app},
			Annotations: map[string]string{networkstatus.AnnotationNetworkType: networkType, networkstatus.AnnotationNetworkConf: conf}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []corev1.Container{{Name: "game", Image: "game-server:1.0",
				Ports: []corev1.ContainerPort{{Name: "game", ContainerPort: 7777, Protocol: corev1.ProtocolUDP}}}},
		},
	}
}

// createStatefulSet creates a Parallel StatefulSet of replicas pods from the pod's template.
func createStatefulSet(t *testing.T, ns, name string, replicas int32, pod *corev1.Pod) {
	t.Helper()
	labels := map[string]string{"app": name}
	pod.Labels = labels
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(replicas), PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: pod.Annotations}, Spec: pod.Spec},
		},
	}
	if _, err := cs.AppsV1().StatefulSets(ns).Create(context.Background(), sts, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create StatefulSet %s/%s: %v", ns, name, err)
	}
}

// kubectl runs kubectl against the cluster with stdin and returns its combined output.
func kubectl(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("kubectl", args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cp.KubeconfigPath)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// eventually polls cond every 250ms until it returns true, and fails the test with msg after
// timeout. It returns how long it took.
func eventually(t *testing.T, timeout time.Duration, msg string, cond func(ctx context.Context) (bool, error)) time.Duration {
	t.Helper()
	start := time.Now()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		if err != nil {
			last = err
			return false, nil
		}
		return ok, nil
	})
	if err != nil {
		t.Fatalf("%s: not within %s (last error: %v)", msg, timeout, last)
	}
	return time.Since(start)
}

// setNodePortQuota creates or updates the ResourceQuota "nodeports" of ns to n
// services.nodeports and waits until the quota admission enforces it (its status is
// computed).
func setNodePortQuota(t *testing.T, ns string, n int64) {
	t.Helper()
	ctx := context.Background()
	hard := corev1.ResourceList{corev1.ResourceServicesNodePorts: *resource.NewQuantity(n, resource.DecimalSI)}
	q, err := cs.CoreV1().ResourceQuotas(ns).Get(ctx, "nodeports", metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = cs.CoreV1().ResourceQuotas(ns).Create(ctx, &corev1.ResourceQuota{
			ObjectMeta: metav1.ObjectMeta{Name: "nodeports"}, Spec: corev1.ResourceQuotaSpec{Hard: hard}}, metav1.CreateOptions{})
	case err == nil:
		q.Spec.Hard = hard
		_, err = cs.CoreV1().ResourceQuotas(ns).Update(ctx, q, metav1.UpdateOptions{})
	}
	if err != nil {
		t.Fatalf("set the services.nodeports quota of %s to %d: %v", ns, n, err)
	}
	// The quota controller recomputes the status; after an API server restart it may take
	// a while to resync.
	eventually(t, 2*time.Minute, "quota status computed", func(ctx context.Context) (bool, error) {
		q, err := cs.CoreV1().ResourceQuotas(ns).Get(ctx, "nodeports", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		got, ok := q.Status.Hard[corev1.ResourceServicesNodePorts]
		return ok && got.Value() == n, nil
	})
}

// applyNodePortPolicy applies, with kubectl as GitOps would, the NetworkPluginPolicy name of
// ns for Kubernetes-NodePort with spec (YAML lines below plugins, indented two spaces).
func applyNodePortPolicy(t *testing.T, ns, name, spec string) {
	t.Helper()
	manifest := fmt.Sprintf("apiVersion: policy.game.kruise.io/v1alpha1\nkind: NetworkPluginPolicy\nmetadata: {name: %s, namespace: %s}\nspec:\n  plugins: [\"Kubernetes-NodePort\"]\n%s\n", name, ns, spec)
	if out, err := kubectl(t, manifest, "apply", "-f", "-"); err != nil {
		t.Fatalf("apply policy %s/%s: %v\n%s", ns, name, err, out)
	}
}

// allNetworksReady reports whether ns holds exactly n pods, each with a Ready
// network-status.
func allNetworksReady(ctx context.Context, ns string, n int) (bool, error) {
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(pods.Items) != n {
		return false, err
	}
	for _, p := range pods.Items {
		if st, _ := networkstatus.StatusFromPod(&p); st == nil || st.CurrentNetworkState != networkstatus.NetworkReady {
			return false, nil
		}
	}
	return true, nil
}
