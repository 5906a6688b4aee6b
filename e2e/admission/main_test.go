// Package admission runs the end-to-end scenarios of policy-driven pod admission on a real
// cluster: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok fake nodes
// (e2e/cluster), and the manager built from ./cmd/manager deployed as config/default deploys
// it: two replicas on this machine under the manager's own ServiceAccount and RBAC, with the
// Deployment's flags (leader election, secured metrics, certificate rotation), behind a
// round-robin proxy that stands in for the webhook Service, and the webhook configurations of
// config/default pointed at it. The tests share the cluster and the manager's HostPort range
// and run one after another; each uses its own namespaces.
package admission

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/okg-extensions/network-plugin-policy/e2e/cluster"
	"github.com/okg-extensions/network-plugin-policy/pkg/networkretry"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

const (
	// The manager's HostPort range: 4 ports, each shared by at most 2 pods (on different
	// nodes), so 8 pods fill it on the 2 fake nodes.
	minPort, maxPort, podsPerPort = 8000, 8003, 2
	fakeNodes                     = 2
	// leaseDuration is controller-runtime's default LeaderElection LeaseDuration; the
	// Deployment's flags set none.
	leaseDuration = 15 * time.Second
)

var (
	cp  *cluster.ControlPlane
	mgr *cluster.Manager
	cs  kubernetes.Interface
	// rootNS is the manager's namespace, the root namespace of its policies.
	rootNS string
	// managerStarted is when the manager's replicas were all ready.
	managerStarted time.Time
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	return cluster.RunSuite(m, cluster.SuiteOptions{
		Cluster: cluster.Options{FakeNodes: fakeNodes},
		// The project's CRD, OKG's GameServerSet (reduced) for the Fixed load-balancer
		// Services a GameServerSet owns, and stand-ins for Alibaba's PodEIP and PodDNAT.
		CRDDirs: []string{"../../crds", "../takeover/testdata/crds", "../cloudbox/testdata/crds"},
		// allowed_ingress_classes = []: the shared-cluster restriction docs/security.md
		// recommends (the cluster's default IngressClass only), which
		// TestIngressClassNotAllowedRefused exercises.
		ProviderConfig: fmt.Sprintf("[kubernetes]\nenable = true\n[kubernetes.hostPort]\nmin_port = %d\nmax_port = %d\nmax_pods_per_port = %d\n[kubernetes.ingress]\nallowed_ingress_classes = []\n",
			minPort, maxPort, podsPerPort) + cloudProviderConfig,
		Manager: &cluster.ManagerOptions{},
	}, func(s *cluster.Suite) error {
		cp, mgr = s.ControlPlane, s.Manager
		managerStarted = time.Now()
		cs = kubernetes.NewForConfigOrDie(cp.Config)
		rootNS = mgr.Namespace
		return nil
	})
}

// newNamespace creates a namespace for one test and deletes it, with its pods, at the end
// (the pods' DELETE admission frees their host ports for the next test).
func newNamespace(t *testing.T, prefix string, labels map[string]string) string {
	t.Helper()
	ctx := context.Background()
	ns, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-", Labels: labels},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() { deleteWorkloads(t, ns.Name) })
	return ns.Name
}

// deleteWorkloads deletes the StatefulSets and pods of ns and waits until the pods are gone,
// then deletes the namespace.
func deleteWorkloads(t *testing.T, ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_ = cs.AppsV1().StatefulSets(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	_ = cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{})
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(pods.Items) == 0, nil
	})
	if err != nil {
		t.Errorf("pods of %s not gone: %v", ns, err)
	}
	_ = cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
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

// applyPolicy applies a NetworkPluginPolicy (YAML) with kubectl apply, as GitOps would.
func applyPolicy(t *testing.T, manifest string) {
	t.Helper()
	if out, err := kubectl(t, manifest, "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
}

// gamePodTemplate is a game-server pod template with a network type and network-conf.
func gamePodTemplate(app, networkType, conf string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{
			Labels: map[string]string{"app": app},
			Annotations: map[string]string{
				networkstatus.AnnotationNetworkType: networkType,
				networkstatus.AnnotationNetworkConf: conf,
			},
		},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []corev1.Container{{
				Name: "game", Image: "game-server:1.0",
				Ports: []corev1.ContainerPort{{Name: "game", ContainerPort: 7777, Protocol: corev1.ProtocolUDP}},
			}},
		},
	}
}

// createStatefulSet creates a StatefulSet of replicas game-server pods (parallel pod
// management).
func createStatefulSet(t *testing.T, ns, name string, replicas int32, tmpl corev1.PodTemplateSpec) *appsv1.StatefulSet {
	t.Helper()
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To(replicas),
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector:            &metav1.LabelSelector{MatchLabels: tmpl.Labels},
			Template:            tmpl,
		},
	}
	sts, err := cs.AppsV1().StatefulSets(ns).Create(context.Background(), sts, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create StatefulSet %s/%s: %v", ns, name, err)
	}
	return sts
}

// eventually polls cond every 250ms until it returns true, fails the test with msg after
// timeout, and returns how long it took.
func eventually(t *testing.T, timeout time.Duration, msg string, cond func(ctx context.Context) (bool, error)) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	var lastErr error
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		// An error of the deadline itself (also a client's rate limiter refusing to wait past
		// it) says nothing: keep the one before it.
		if err != nil && ctx.Err() == nil && !strings.Contains(err.Error(), "context deadline") {
			lastErr = err
			return false, nil
		}
		return ok, nil
	})
	if err != nil {
		t.Fatalf("%s: not within %s (last error: %v)", msg, timeout, lastErr)
	}
	return time.Since(start)
}

// listPods lists the pods of ns with label app=app.
func listPods(ctx context.Context, ns, app string) ([]corev1.Pod, error) {
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		return nil, err
	}
	return pods.Items, nil
}

// networkState is the pod's current network state, "" without a network-status.
func networkState(p *corev1.Pod) networkstatus.NetworkState {
	st, err := networkstatus.StatusFromPod(p)
	if err != nil || st == nil {
		return ""
	}
	return st.CurrentNetworkState
}

// retryState is the pod's retry state, nil without one.
func retryState(t *testing.T, p *corev1.Pod) *networkretry.State {
	t.Helper()
	st, err := networkretry.FromPod(p)
	if err != nil {
		t.Fatalf("pod %s: %v", p.Name, err)
	}
	return st
}

// hasEvent reports whether an event (core/v1 or events.k8s.io/v1) about the object named
// name in ns has the reason and a message containing every one of contains.
func hasEvent(ctx context.Context, ns, name, reason string, contains ...string) (bool, error) {
	evs, err := cs.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err
	}
	match := func(n, r, note string) bool {
		if n != name || r != reason {
			return false
		}
		for _, c := range contains {
			if !strings.Contains(note, c) {
				return false
			}
		}
		return true
	}
	for _, e := range evs.Items {
		if match(e.Regarding.Name, e.Reason, e.Note) {
			return true, nil
		}
	}
	return false, nil
}

// podsSummary describes pods for a failure message: name, host port, network state.
func podsSummary(pods []corev1.Pod) string {
	var b strings.Builder
	for i := range pods {
		fmt.Fprintf(&b, "%s(port %d, %s) ", pods[i].Name, hostPortOf(&pods[i]), networkState(&pods[i]))
	}
	return b.String()
}

// eventNotes lists the events of ns as "object reason: note" for a failure message.
func eventNotes(ctx context.Context, ns string) string {
	evs, err := cs.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, e := range evs.Items {
		fmt.Fprintf(&b, "[%s %s: %s] ", e.Regarding.Name, e.Reason, e.Note)
	}
	return b.String()
}

// warningCollector collects the admission warnings the apiserver returns to a client.
type warningCollector struct {
	mu       sync.Mutex
	warnings []string
}

func (w *warningCollector) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.warnings = append(w.warnings, text)
}

func (w *warningCollector) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.warnings...)
}

// clientWithWarnings returns a clientset whose requests' warnings go to the collector.
func clientWithWarnings(w *warningCollector) kubernetes.Interface {
	cfg := rest.CopyConfig(cp.Config)
	cfg.WarningHandler = w
	return kubernetes.NewForConfigOrDie(cfg)
}

// ignoreNotFound returns nil for a NotFound error.
func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// currentLeader returns the replica that leads the controllers, waiting up to a lease
// duration for one.
func currentLeader(t *testing.T) *cluster.Replica {
	t.Helper()
	var leader *cluster.Replica
	eventually(t, leaseDuration+10*time.Second, "a replica leads", func(ctx context.Context) (bool, error) {
		r, err := mgr.Leader(ctx)
		leader = r
		return r != nil, err
	})
	return leader
}

// scaleStatefulSet sets the replicas of StatefulSet ns/name through its scale subresource.
func scaleStatefulSet(t *testing.T, ns, name string, replicas int32) {
	t.Helper()
	// A merge patch of the scale subresource carries no resourceVersion, so the StatefulSet
	// controller's concurrent status writes cannot make it conflict.
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)
	if _, err := cs.AppsV1().StatefulSets(ns).Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "scale"); err != nil {
		t.Fatalf("scale StatefulSet %s/%s to %d: %v", ns, name, replicas, err)
	}
}

// buildNppctl builds nppctl from this checkout into a temporary directory of t and returns
// its path.
func buildNppctl(t *testing.T) string {
	t.Helper()
	nppctl := filepath.Join(t.TempDir(), "nppctl")
	if out, err := exec.Command("go", "build", "-o", nppctl, "github.com/okg-extensions/network-plugin-policy/cmd/nppctl").CombinedOutput(); err != nil {
		t.Fatalf("go build nppctl: %v\n%s", err, out)
	}
	return nppctl
}
