package admission

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/okg-extensions/network-plugin-policy/e2e/cluster"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/kubernetes"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

const nodePortConf = `[{"name":"PortProtocols","value":"7777/UDP"}]`

// setNodePortQuota creates or updates the namespace's ResourceQuota of services.nodeports.
func setNodePortQuota(t *testing.T, ns string, n int64) {
	t.Helper()
	ctx := context.Background()
	q := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "nodeports", Namespace: ns},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
			corev1.ResourceServicesNodePorts: *resource.NewQuantity(n, resource.DecimalSI),
		}},
	}
	existing, err := cs.CoreV1().ResourceQuotas(ns).Get(ctx, q.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = cs.CoreV1().ResourceQuotas(ns).Create(ctx, q, metav1.CreateOptions{})
	case err == nil:
		existing.Spec = q.Spec
		_, err = cs.CoreV1().ResourceQuotas(ns).Update(ctx, existing, metav1.UpdateOptions{})
	}
	if err != nil {
		t.Fatalf("set services.nodeports quota of %s to %d: %v", ns, n, err)
	}
	// The quota admission plugin needs the quota's status to enforce it.
	eventually(t, 30*time.Second, "quota status computed", func(ctx context.Context) (bool, error) {
		q, err := cs.CoreV1().ResourceQuotas(ns).Get(ctx, q.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		hard := q.Status.Hard[corev1.ResourceServicesNodePorts]
		return hard.Value() == n, nil
	})
}

// stuckNodePorts makes ns a namespace whose NodePort game servers cannot get their Service
// (a services.nodeports quota of 0), applies nodePortPolicy(ns, window), waits until it is in
// force, and creates the StatefulSet name of replicas such pods.
func stuckNodePorts(t *testing.T, ns, window, name string, replicas int32) {
	t.Helper()
	setNodePortQuota(t, ns, 0)
	applyPolicy(t, nodePortPolicy(ns, window))
	waitForPolicy(t, ns, "nodeport-retry", "Kubernetes-NodePort")
	createStatefulSet(t, ns, name, replicas, gamePodTemplate(name, "Kubernetes-NodePort", nodePortConf))
}

func nodePortPolicy(ns, window string) string {
	return fmt.Sprintf(`
apiVersion: policy.game.kruise.io/v1alpha1
kind: NetworkPluginPolicy
metadata: {name: nodeport-retry, namespace: %s}
spec:
  plugins: ["Kubernetes-NodePort"]
  retry: {window: %s, interval: 2s, maxInterval: 4s, exhaustedAction: Event}
`, ns, window)
}

// Scenario 4: NodePort under a ResourceQuota of services.nodeports 0: pods are admitted with
// their network NotReady and a warning; raising the quota makes them Ready within one retry
// interval. Scenario 7: the manager is killed in the middle and restarted: the retries resume
// from the pod's state and the window is not reset.
func TestNodePortQuotaRetriesAcrossManagerRestart(t *testing.T) {
	ns := newNamespace(t, "nodeport", nil)
	stuckNodePorts(t, ns, "5m", "np", 2)

	eventually(t, time.Minute, "pods admitted NotReady with the quota's apiCallError recorded", func(ctx context.Context) (bool, error) {
		pods, err := listPods(ctx, ns, "np")
		if err != nil || len(pods) != 2 {
			return false, err
		}
		for i := range pods {
			rs := retryState(t, &pods[i])
			if networkState(&pods[i]) != networkstatus.NetworkNotReady || rs == nil || rs.LastError == nil ||
				rs.LastError.Type != "apiCallError" || !strings.Contains(rs.LastError.Message, "exceeded quota") {
				return false, nil
			}
		}
		return hasEvent(ctx, ns, "np-0", "apiCallError", "Kubernetes-NodePort", "admitted NotReady")
	})

	// A user's own update of such a pod is admitted, with the warning.
	warnings := &warningCollector{}
	if _, err := clientWithWarnings(warnings).CoreV1().Pods(ns).Patch(context.Background(), "np-0", types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"touched":"yes"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("update of a pod whose NodePort fails was not admitted: %v", err)
	}
	if w := warnings.All(); len(w) != 1 || !strings.Contains(w[0], "network plugin Kubernetes-NodePort failed (apiCallError)") ||
		!strings.Contains(w[0], "admitted with network NotReady by built-in default, retried for 5m0s") {
		t.Errorf("admission warnings = %q, want one naming plugin, error, deciding source and window", w)
	}

	// Scenario 7: the leader (the replica whose network controller stamps the retries) is
	// killed mid-retry, without releasing its Lease: the other replica takes over once the
	// lease expires and the retries go on, Since kept. Then the killed replica comes back.
	before, err := cs.CoreV1().Pods(ns).Get(context.Background(), "np-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stateBefore := retryState(t, before)
	leader := currentLeader(t)
	killed := time.Now()
	leader.Kill()
	var next *cluster.Replica
	// The bound is generous: under load (CI shares two cores with the whole cluster) the
	// takeover takes longer than the lease duration plus a retry period; the figure is logged,
	// not asserted.
	eventually(t, leaseDuration+45*time.Second, "another replica leads", func(ctx context.Context) (bool, error) {
		r, err := mgr.Leader(ctx)
		next = r
		return r != nil && r != leader, err
	})
	t.Logf("replica %s took the lead %s after %s was killed (lease duration %s)",
		next.Name, time.Since(killed).Round(time.Second), leader.Name, leaseDuration)
	t.Cleanup(func() {
		if err := leader.Start(context.Background()); err != nil {
			t.Errorf("restart replica %s: %v", leader.Name, err)
		}
	})
	// Each retry fails as the last one (the quota is still 0), so the leader counts it from
	// its caches without writing the pod (npp_network_retries_from_cache_total), or, when the
	// state on the pod is overdue by more than networkretry.PauseSlack, runs it for real.
	eventually(t, time.Minute, "retries resumed under the new leader", func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "np-1", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if rs := retryState(t, p); rs != nil && rs.LastAttempt.After(stateBefore.LastAttempt.Time) {
			return true, nil
		}
		counted, err := next.Metric(ctx, "npp_network_retries_from_cache_total")
		return err == nil && counted > 0, nil
	})
	after, _ := cs.CoreV1().Pods(ns).Get(context.Background(), "np-1", metav1.GetOptions{})
	stateAfter := retryState(t, after)
	if !stateAfter.Since.Equal(&stateBefore.Since) {
		t.Errorf("the retry window restarted: since %s before the manager restart, %s after", stateBefore.Since, stateAfter.Since)
	}

	// Raise the quota: the next retry creates the Services and the networks turn Ready.
	raised := time.Now()
	setNodePortQuota(t, ns, 10)
	took := eventually(t, time.Minute, "networks Ready after the quota was raised", func(ctx context.Context) (bool, error) {
		pods, err := listPods(ctx, ns, "np")
		if err != nil || len(pods) != 2 {
			return false, err
		}
		for i := range pods {
			if networkState(&pods[i]) != networkstatus.NetworkReady {
				return false, nil
			}
		}
		return hasEvent(ctx, ns, "np-0", "NetworkReady")
	})
	t.Logf("quota raised -> both NodePort networks Ready in %s (maxInterval 4s)", time.Since(raised).Round(100*time.Millisecond))
	_ = took
}

// Scenario 4, continued: with the quota left at 0, the window closes with
// NetworkRetryExhausted.
func TestNodePortQuotaWindowCloses(t *testing.T) {
	ns := newNamespace(t, "nodeport-stuck", nil)
	stuckNodePorts(t, ns, "8s", "stuck", 1)
	eventually(t, time.Minute, "NetworkRetryExhausted after the 8s window", func(ctx context.Context) (bool, error) {
		ok, err := hasEvent(ctx, ns, "stuck-0", "NetworkRetryExhausted", "Kubernetes-NodePort", "apiCallError")
		if !ok || err != nil {
			return false, err
		}
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "stuck-0", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		rs := retryState(t, p)
		return rs != nil && rs.Exhausted != nil && networkState(p) == networkstatus.NetworkNotReady, nil
	})
}

// The NodePort plugin refuses a Service create over quota from its cache: the pod's retry
// state records the API server's own refusal of that Service, byte for byte, the retries
// after it are counted from the caches without a pod write, and the API server's
// ResourceQuota admission refuses only the creates that confirm the cache: the first, and
// then at most one a replica every kubernetes.QuotaConfirmInterval (between them the API
// server is not called, so it allocates no ClusterIP and no node port).
func TestNodePortQuotaRefusedFromTheCache(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "nodeport-cached", nil)
	setNodePortQuota(t, ns, 0)
	// The API server's refusal of the Service the plugin would create for pod cached-0. Its
	// quota admission reads the ResourceQuota from an informer of its own, which may not
	// have it yet although its status is computed: a Service made meanwhile is deleted and
	// the create tried again.
	var err error
	eventually(t, 30*time.Second, "the API server's quota admission refusing a NodePort Service", func(ctx context.Context) (bool, error) {
		_, err = cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "cached-0", Namespace: ns},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: map[string]string{"app": "cached"},
				Ports: []corev1.ServicePort{{Name: "7777", Port: 7777, Protocol: corev1.ProtocolUDP}}},
		}, metav1.CreateOptions{})
		if err == nil {
			return false, cs.CoreV1().Services(ns).Delete(ctx, "cached-0", metav1.DeleteOptions{})
		}
		return true, nil
	})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "exceeded quota") {
		t.Fatalf("create a NodePort Service under a services.nodeports quota of 0: %v, want the API server's exceeded-quota refusal", err)
	}
	want := "create or patch Service " + ns + "/cached-0: " + err.Error()

	applyPolicy(t, nodePortPolicy(ns, "5m"))
	waitForPolicy(t, ns, "nodeport-retry", "Kubernetes-NodePort")
	rejected := quotaRejections(t)
	since := time.Now()
	createStatefulSet(t, ns, "cached", 1, gamePodTemplate("cached", "Kubernetes-NodePort", nodePortConf))
	var recorded string
	var got string
	eventually(t, time.Minute, "the pod's network NotReady with the quota's apiCallError recorded", func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "cached-0", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		rs := retryState(t, p)
		if rs == nil || rs.LastError == nil {
			return false, nil
		}
		recorded = p.Annotations["policy.game.kruise.io/network-retry"]
		got = rs.LastError.Type + ": " + rs.LastError.Message
		return true, nil
	})
	if got != "apiCallError: "+want {
		t.Errorf("last error of the retries:\n  %s\nwant the API server's refusal as the plugin wraps it:\n  apiCallError: %s", got, want)
	}
	// Every further retry would fail the same way, and the leader's caches show it: the
	// retries are counted without a write (npp_network_retries_from_cache_total).
	counted := func(ctx context.Context) float64 {
		v, err := mgr.Metric(ctx, "npp_network_retries_from_cache_total")
		if err != nil {
			return -1
		}
		return v
	}
	start := counted(ctx)
	eventually(t, 2*time.Minute, "three more retries (interval 2s, maxInterval 4s), counted from the caches", func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "cached-0", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if now := p.Annotations["policy.game.kruise.io/network-retry"]; now != recorded {
			// A real run happened (the state is written at least every --retry-state-refresh,
			// or on any change): the comparison starts again from it.
			recorded, start = now, counted(ctx)
		}
		return counted(ctx) >= start+3, nil
	})
	// The cache refuses only while the API server itself refused recently: at most one
	// create a replica (two here) and kubernetes.QuotaConfirmInterval reaches it, and at
	// least the first.
	limit := float64(2 * (int(time.Since(since)/kubernetes.QuotaConfirmInterval) + 1))
	if n := quotaRejections(t) - rejected; n < 1 || n > limit {
		t.Errorf("the API server's ResourceQuota admission refused %v creates while the pod was retried for %s, want 1 to %v (the plugin refuses from its cache between)",
			n, time.Since(since).Round(time.Second), limit)
	}
}

// quotaRejections is the number of requests the API server's ResourceQuota admission plugin
// has refused since it started (apiserver_admission_controller_admission_duration_seconds_count
// with name="ResourceQuota" and rejected="true", read from the API server's /metrics).
func quotaRejections(t *testing.T) float64 {
	t.Helper()
	const metric = "apiserver_admission_controller_admission_duration_seconds_count"
	body, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatalf("read the API server's /metrics: %v", err)
	}
	var sum float64
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, metric+"{") || !strings.Contains(line, `name="ResourceQuota"`) || !strings.Contains(line, `rejected="true"`) {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			t.Fatalf("parse the API server's metric line %q: %v", line, err)
		}
		sum += v
	}
	return sum
}

// Scenario 5: a failureModeExpression that denies parameterError and admits apiCallError: a
// pod with a malformed network-conf is denied, a pod hitting the quota is admitted.
func TestFailureModeExpressionByErrorType(t *testing.T) {
	ns := newNamespace(t, "by-error", nil)
	setNodePortQuota(t, ns, 0)
	applyPolicy(t, fmt.Sprintf(`
apiVersion: policy.game.kruise.io/v1alpha1
kind: NetworkPluginPolicy
metadata: {name: by-error, namespace: %s}
spec:
  plugins: ["Kubernetes-NodePort"]
  failureModeExpression: "error.type == 'parameterError' ? 'Synchronous' : 'Asynchronous'"
  retry: {window: 1m, interval: 2s, maxInterval: 4s}
`, ns))
	waitForPolicy(t, ns, "by-error", "Kubernetes-NodePort")

	bad := probePod(ns, "Kubernetes-NodePort")
	bad.Annotations[networkstatus.AnnotationNetworkConf] = `[{"name":"PortProtocols","value":"7777/udp"}]`
	_, err := cs.CoreV1().Pods(ns).Create(context.Background(), bad, metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "network plugin Kubernetes-NodePort failed (parameterError)") ||
		!strings.Contains(err.Error(), "PortProtocols") || !strings.Contains(err.Error(), "denied by policy "+ns+"/by-error@1") {
		t.Errorf("pod with a malformed network-conf: error %v, want a denial naming the plugin, parameterError, PortProtocols and the policy", err)
	}

	good := probePod(ns, "Kubernetes-NodePort")
	good.Annotations[networkstatus.AnnotationNetworkConf] = nodePortConf
	created, err := cs.CoreV1().Pods(ns).Create(context.Background(), good, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("pod with a valid network-conf denied: %v", err)
	}
	eventually(t, time.Minute, "the quota's apiCallError admitted (Asynchronous by the expression)", func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, created.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		rs := retryState(t, p)
		return rs != nil && rs.LastError != nil && rs.LastError.Type == "apiCallError" && rs.Attempts >= 2, nil
	})
}
