// Package suite holds what the e2e suites that run the manager as deployed share: the
// cluster of the suite (set once by the suite's TestMain with Use) and the helpers its tests
// create namespaces, workloads and policies with, and wait on the cluster with.
package suite

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

// LeaseDuration is controller-runtime's default LeaderElection LeaseDuration; the
// Deployment's flags set none.
const LeaseDuration = 15 * time.Second

// The suite's cluster, set by Use.
var (
	// CP is the control plane.
	CP *cluster.ControlPlane
	// Mgr is the manager, deployed as config/default deploys it.
	Mgr *cluster.Manager
	// CS is a clientset of the control plane's admin.
	CS kubernetes.Interface
)

// Use makes s the cluster of the helpers; a suite's TestMain calls it once, from
// cluster.RunSuite's ready function.
func Use(s *cluster.Suite) {
	CP, Mgr = s.ControlPlane, s.Manager
	CS = kubernetes.NewForConfigOrDie(CP.Config)
}

// NewNamespace creates a namespace for one test and deletes it, with its pods, at the end
// (the pods' DELETE admission frees their host ports for the next test).
func NewNamespace(t *testing.T, prefix string, labels map[string]string) string {
	t.Helper()
	ctx := context.Background()
	ns, err := CS.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-", Labels: labels},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() { DeleteWorkloads(t, ns.Name) })
	return ns.Name
}

// DeleteWorkloads deletes the StatefulSets and pods of ns and waits until the pods are gone,
// then deletes the namespace.
func DeleteWorkloads(t *testing.T, ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_ = CS.AppsV1().StatefulSets(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	_ = CS.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{})
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		pods, err := CS.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(pods.Items) == 0, nil
	})
	if err != nil {
		t.Errorf("pods of %s not gone: %v", ns, err)
	}
	_ = CS.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
}

// Kubectl runs kubectl against the cluster with stdin and returns its combined output.
func Kubectl(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("kubectl", args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+CP.KubeconfigPath)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// ApplyPolicy applies a NetworkPluginPolicy (YAML) with kubectl apply, as GitOps would.
func ApplyPolicy(t *testing.T, manifest string) {
	t.Helper()
	if out, err := Kubectl(t, manifest, "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
}

// GamePodTemplate is a game-server pod template with a network type and network-conf.
func GamePodTemplate(app, networkType, conf string) corev1.PodTemplateSpec {
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

// CreateStatefulSet creates a StatefulSet of replicas game-server pods (parallel pod
// management).
func CreateStatefulSet(t *testing.T, ns, name string, replicas int32, tmpl corev1.PodTemplateSpec) *appsv1.StatefulSet {
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
	sts, err := CS.AppsV1().StatefulSets(ns).Create(context.Background(), sts, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create StatefulSet %s/%s: %v", ns, name, err)
	}
	return sts
}

// Eventually polls cond every 250ms until it returns true, fails the test with msg after
// timeout, and returns how long it took.
func Eventually(t *testing.T, timeout time.Duration, msg string, cond func(ctx context.Context) (bool, error)) time.Duration {
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

// ListPods lists the pods of ns with label app=app.
func ListPods(ctx context.Context, ns, app string) ([]corev1.Pod, error) {
	pods, err := CS.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		return nil, err
	}
	return pods.Items, nil
}

// NetworkState is the pod's current network state, "" without a network-status.
func NetworkState(p *corev1.Pod) networkstatus.NetworkState {
	st, err := networkstatus.StatusFromPod(p)
	if err != nil || st == nil {
		return ""
	}
	return st.CurrentNetworkState
}

// RetryState is the pod's retry state, nil without one.
func RetryState(t *testing.T, p *corev1.Pod) *networkretry.State {
	t.Helper()
	st, err := networkretry.FromPod(p)
	if err != nil {
		t.Fatalf("pod %s: %v", p.Name, err)
	}
	return st
}

// HasEvent reports whether an event (core/v1 or events.k8s.io/v1) about the object named
// name in ns has the reason and a message containing every one of contains.
func HasEvent(ctx context.Context, ns, name, reason string, contains ...string) (bool, error) {
	evs, err := CS.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
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

// PodsSummary describes pods for a failure message: name, host port, network state.
func PodsSummary(pods []corev1.Pod) string {
	var b strings.Builder
	for i := range pods {
		fmt.Fprintf(&b, "%s(port %d, %s) ", pods[i].Name, HostPortOf(&pods[i]), NetworkState(&pods[i]))
	}
	return b.String()
}

// EventNotes lists the events of ns as "object reason: note" for a failure message.
func EventNotes(ctx context.Context, ns string) string {
	evs, err := CS.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, e := range evs.Items {
		fmt.Fprintf(&b, "[%s %s: %s] ", e.Regarding.Name, e.Reason, e.Note)
	}
	return b.String()
}

// WarningCollector collects the admission warnings the apiserver returns to a client.
type WarningCollector struct {
	mu       sync.Mutex
	warnings []string
}

// HandleWarningHeader records one warning (rest.WarningHandler).
func (w *WarningCollector) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.warnings = append(w.warnings, text)
}

// All returns the warnings recorded so far, in order.
func (w *WarningCollector) All() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.warnings...)
}

// ClientWithWarnings returns a clientset whose requests' warnings go to the collector.
func ClientWithWarnings(w *WarningCollector) kubernetes.Interface {
	cfg := rest.CopyConfig(CP.Config)
	cfg.WarningHandler = w
	return kubernetes.NewForConfigOrDie(cfg)
}

// IgnoreNotFound returns nil for a NotFound error.
func IgnoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// CurrentLeader returns the replica that leads the controllers, waiting up to a lease
// duration for one.
func CurrentLeader(t *testing.T) *cluster.Replica {
	t.Helper()
	var leader *cluster.Replica
	Eventually(t, LeaseDuration+10*time.Second, "a replica leads", func(ctx context.Context) (bool, error) {
		r, err := Mgr.Leader(ctx)
		leader = r
		return r != nil, err
	})
	return leader
}

// ScaleStatefulSet sets the replicas of StatefulSet ns/name through its scale subresource.
func ScaleStatefulSet(t *testing.T, ns, name string, replicas int32) {
	t.Helper()
	// A merge patch of the scale subresource carries no resourceVersion, so the StatefulSet
	// controller's concurrent status writes cannot make it conflict.
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)
	if _, err := CS.AppsV1().StatefulSets(ns).Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "scale"); err != nil {
		t.Fatalf("scale StatefulSet %s/%s to %d: %v", ns, name, replicas, err)
	}
}

// BuildNppctl builds nppctl from this checkout into a temporary directory of t and returns
// its path.
func BuildNppctl(t *testing.T) string {
	t.Helper()
	nppctl := filepath.Join(t.TempDir(), "nppctl")
	if out, err := exec.Command("go", "build", "-o", nppctl, "github.com/okg-extensions/network-plugin-policy/cmd/nppctl").CombinedOutput(); err != nil {
		t.Fatalf("go build nppctl: %v\n%s", err, out)
	}
	return nppctl
}

// HostPortOf returns the host port of the pod's game container, 0 if none.
func HostPortOf(p *corev1.Pod) int32 {
	for _, c := range p.Spec.Containers {
		for _, port := range c.Ports {
			if port.HostPort != 0 {
				return port.HostPort
			}
		}
	}
	return 0
}

// WaitForPolicy waits until the manager's webhook decides with the policy ns/name for
// networkType: a dry-run CREATE (no plugin runs, nothing is stored) shows the policy that
// supplied the failure mode (network-decision annotation) and the retry schedule (retry
// state). It is a barrier, so that a test does not race the informer.
func WaitForPolicy(t *testing.T, ns, name, networkType string) {
	t.Helper()
	Eventually(t, 30*time.Second, "policy "+ns+"/"+name+" in force", func(ctx context.Context) (bool, error) {
		got, err := CS.CoreV1().Pods(ns).Create(ctx, ProbePod(ns, networkType), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false, nil
		}
		return strings.Contains(got.Annotations["policy.game.kruise.io/network-decision"], "policy "+ns+"/"+name+"@") ||
			strings.Contains(got.Annotations["policy.game.kruise.io/network-retry"], `"policy":"`+ns+"/"+name+"@"), nil
	})
}

// ProbePod is a pod with the network type and no network-conf, for dry-run probes.
func ProbePod(ns, networkType string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-", Namespace: ns,
			Annotations: map[string]string{networkstatus.AnnotationNetworkType: networkType}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers:                    []corev1.Container{{Name: "game", Image: "game-server:1.0"}},
		},
	}
}
