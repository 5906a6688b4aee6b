package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestStateGaugesOnEveryReplica: two NodePort game servers stuck on a services.nodeports
// quota of 0 show, on every replica's secured /metrics (not only the leader's), as Retrying in
// npp_network_pods, in npp_network_not_ready_pods_by_namespace for their namespace and in
// npp_network_not_ready_oldest_seconds; and `nppctl status --live` lists the namespace's
// two Retrying pods with the quota error and the time left in their window, and the leader.
func TestStateGaugesOnEveryReplica(t *testing.T) {
	ns := newNamespace(t, "state-gauges", nil)
	stuckNodePorts(t, ns, "10m", "stuck", 2)

	for _, r := range mgr.Replicas {
		eventually(t, time.Minute, r.Name+": the two pods Retrying in its state gauges", func(ctx context.Context) (bool, error) {
			byNS, err := r.Metric(ctx, "npp_network_not_ready_pods_by_namespace", fmt.Sprintf("namespace=%q", ns), `plugin="Kubernetes-NodePort"`)
			if err != nil || byNS != 2 {
				return false, err
			}
			retrying, err := r.Metric(ctx, "npp_network_pods", `plugin="Kubernetes-NodePort"`, `state="Retrying"`)
			if err != nil || retrying < 2 {
				return false, err
			}
			oldest, err := r.Metric(ctx, "npp_network_not_ready_oldest_seconds", `plugin="Kubernetes-NodePort"`)
			return err == nil && oldest > 0, err
		})
	}

	nppctl := buildNppctl(t)
	out, err := exec.Command(nppctl, "status", "-n", ns, "--kubeconfig", cp.KubeconfigPath, "--root-namespace", rootNS, "-o", "json").Output()
	if err != nil {
		t.Fatalf("nppctl status: %v\n%s", err, out)
	}
	var st struct {
		Networks []struct {
			Namespace, Plugin string
			Retrying          int
		}
		Retrying []struct {
			Pod, LastError, WindowLeft string
		}
		Manager *struct{ Leader string }
	}
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatalf("nppctl status -o json: %v\n%s", err, out)
	}
	if len(st.Networks) != 1 || st.Networks[0].Retrying != 2 || st.Networks[0].Plugin != "Kubernetes-NodePort" {
		t.Errorf("nppctl status networks = %+v, want one row of 2 Retrying Kubernetes-NodePort pods", st.Networks)
	}
	if len(st.Retrying) != 2 {
		t.Fatalf("nppctl status retrying = %+v, want stuck-0 and stuck-1", st.Retrying)
	}
	for _, r := range st.Retrying {
		if r.WindowLeft == "" || r.WindowLeft == "closed" || !strings.Contains(r.LastError, "apiCallError") || !strings.Contains(r.LastError, "services.nodeports") {
			t.Errorf("nppctl status: %+v, want the quota error and time left in the window", r)
		}
	}
	if st.Manager == nil || st.Manager.Leader == "" {
		t.Errorf("nppctl status: manager %+v, want the Lease's holder", st.Manager)
	}
}

// queriedMetricsFile lists every metric the Grafana dashboard and the alert rules name
// (hack/observability keeps it exact with the PromQL parser).
const queriedMetricsFile = "../../hack/observability/testdata/queried-metrics.txt"

// TestDashboardAndAlertQueriesOnRealMetrics: every metric the Grafana dashboard and the alert
// rules query is on the real /metrics of the manager's replicas (through the secured
// endpoint) or of the kube-apiserver, except Prometheus's own `up`; and every panel query of
// config/grafana's dashboard, evaluated by a real Prometheus (Debian's package, installed by
// `make controlplane`) that scrapes both replicas through their secured endpoints with the
// metrics-reader token and the kube-apiserver, returns data, and every alert expression
// evaluates without an error. Labelled counters and histograms appear only once observed,
// so the test first makes each happen: NodePort retries counted from the caches and real
// ones, a window that is exhausted, a network that turns Ready after retries, and a webhook
// the API server cannot call (one entry failing open, one failing closed).
//
// With NPP_DASHBOARD_RESULTS set to a file name, it also writes each panel's series over the
// run (query_range, 2s steps) there as JSON, which `make dashboard-picture` renders into
// docs/dashboard.svg.
func TestDashboardAndAlertQueriesOnRealMetrics(t *testing.T) {
	ctx := context.Background()
	raw, err := os.ReadFile(queriedMetricsFile)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, l := range strings.Split(string(raw), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") && l != "up" {
			want = append(want, l)
		}
	}
	if len(want) < 20 {
		t.Fatalf("%s lists %d metrics, want the dashboard's and the rules'", queriedMetricsFile, len(want))
	}
	prom := startPrometheus(t)
	begin := time.Now()

	// A window that closes, and a network that turns Ready after retries.
	stuck := newNamespace(t, "metrics-stuck", nil)
	stuckNodePorts(t, stuck, "8s", "stuck", 2)
	late := newNamespace(t, "metrics-late", nil)
	stuckNodePorts(t, late, "5m", "late", 3)
	eventually(t, time.Minute, "late-0 retrying", func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(late).Get(ctx, "late-0", metav1.GetOptions{})
		if err != nil {
			return false, ignoreNotFound(err)
		}
		rs := retryState(t, p)
		return rs != nil && rs.Attempts >= 2, nil
	})
	time.Sleep(10 * time.Second) // a stretch of not-Ready networks on the graphs
	setNodePortQuota(t, late, 3)

	// The API server counts calls to a webhook it cannot reach: one that fails open, one that
	// fails closed.
	failOpenFailClosed(t)

	missing := want
	eventually(t, 2*time.Minute, "every queried metric exported", func(ctx context.Context) (bool, error) {
		exported := map[string]bool{}
		for _, r := range mgr.Replicas {
			if !r.Running() {
				continue
			}
			body, err := r.Scrape(ctx, "")
			if err != nil {
				return false, err
			}
			addSampleNames(exported, body)
		}
		body, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
		if err != nil {
			return false, err
		}
		addSampleNames(exported, string(body))
		missing = nil
		for _, n := range want {
			if !exported[n] {
				missing = append(missing, n)
			}
		}
		return len(missing) == 0, nil
	})
	if len(missing) > 0 {
		t.Errorf("queried but not exported: %v", missing)
	}

	// Every panel's query returns data from the real Prometheus; every alert evaluates.
	panels := dashboardPanels(t)
	for _, p := range panels {
		for _, expr := range p.exprs {
			var n int
			eventually(t, time.Minute, fmt.Sprintf("panel %q: %s returns data", p.title, expr), func(ctx context.Context) (bool, error) {
				res, err := prom.query(ctx, expr)
				if err != nil {
					return false, err
				}
				n = len(res)
				return n > 0, nil
			})
		}
	}
	for alert, expr := range alertExprs(t) {
		if _, err := prom.query(ctx, expr); err != nil {
			t.Errorf("alert %s: %v", alert, err)
		}
	}
	if out := os.Getenv("NPP_DASHBOARD_RESULTS"); out != "" {
		time.Sleep(20 * time.Second) // the retries' tail and the Ready networks
		prom.writeRanges(t, out, panels, begin, time.Now())
	}
}

// addSampleNames adds the sample names of a Prometheus text exposition to names.
func addSampleNames(names map[string]bool, body string) {
	for _, line := range strings.Split(body, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			names[line[:i]] = true
		}
	}
}

// failOpenFailClosed installs a MutatingWebhookConfiguration of two entries that point at a
// closed loopback port, one failurePolicy Ignore and one Fail, each selecting its own pod
// label, creates a pod for each (the first is admitted, the second refused), and removes the
// configuration.
func failOpenFailClosed(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	ns := newNamespace(t, "metrics-webhook", nil)
	url := "https://127.0.0.1:1/unreachable"
	none := admissionregistrationv1.SideEffectClassNone
	entry := func(name, label string, policy admissionregistrationv1.FailurePolicyType) admissionregistrationv1.MutatingWebhook {
		return admissionregistrationv1.MutatingWebhook{
			Name: name, ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
			}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
			ObjectSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{label: "true"}},
			FailurePolicy:           &policy,
			SideEffects:             &none,
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](2),
		}
	}
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "npp-e2e-unreachable-" + ns},
		Webhooks: []admissionregistrationv1.MutatingWebhook{
			entry("open.unreachable.e2e.test", "fail-open", admissionregistrationv1.Ignore),
			entry("closed.unreachable.e2e.test", "fail-closed", admissionregistrationv1.Fail),
		},
	}
	if _, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, mwc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, mwc.Name, metav1.DeleteOptions{})
	}()
	pod := func(name, label string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{label: "true"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
		}
	}
	eventually(t, 30*time.Second, "a pod admitted through the failing-open entry", func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Pods(ns).Create(ctx, pod("open", "fail-open"), metav1.CreateOptions{})
		return err == nil, nil
	})
	eventually(t, 30*time.Second, "a pod refused by the failing-closed entry", func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Pods(ns).Create(ctx, pod("closed", "fail-closed"), metav1.CreateOptions{})
		return err != nil && strings.Contains(err.Error(), "closed.unreachable.e2e.test"), nil
	})
}

// TestOnePodsStoryInTheLogs: the replicas' logs about one pod, found by its name as
// `kubectl logs | grep NAME` finds them, hold the webhook's line of the failed plugin run
// (with the admission request's ID) and the network controller's line of the exhausted
// window (with its reconcile ID and the pod's UID), both with the pod under the key "pod" and
// the same decision (the network-decision annotation's value) under the key "decision".
func TestOnePodsStoryInTheLogs(t *testing.T) {
	ns := newNamespace(t, "story", nil)
	stuckNodePorts(t, ns, "8s", "story", 1)
	var pod *corev1.Pod
	eventually(t, time.Minute, "story-0's window exhausted", func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "story-0", metav1.GetOptions{})
		if err != nil {
			return false, ignoreNotFound(err)
		}
		pod = p
		rs := retryState(t, p)
		return rs != nil && rs.Exhausted != nil, nil
	})
	decision := pod.Annotations[annotationDecision]

	type line struct {
		Msg         string `json:"msg"`
		Pod         struct{ Name, Namespace string }
		PodUID      string `json:"podUID"`
		Decision    string `json:"decision"`
		RequestID   string `json:"requestID"`
		ReconcileID string `json:"reconcileID"`
	}
	var webhook, controller *line
	var story []string
	eventually(t, 30*time.Second, "the webhook's and the controller's lines about story-0", func(ctx context.Context) (bool, error) {
		story = nil
		for _, r := range mgr.Replicas {
			p := r.Process()
			if p == nil {
				continue
			}
			raw, err := os.ReadFile(p.LogPath)
			if err != nil {
				return false, err
			}
			for _, text := range strings.Split(string(raw), "\n") {
				if !strings.Contains(text, `"story-0"`) || !strings.Contains(text, ns) {
					continue
				}
				story = append(story, text)
				var l line
				if json.Unmarshal([]byte(text), &l) != nil || l.Pod.Name != "story-0" || l.Pod.Namespace != ns {
					continue
				}
				switch {
				case l.Msg == "Network plugin failed" && l.RequestID != "":
					webhook = &l
				case l.Msg == "Network retry window exhausted" && l.ReconcileID != "":
					controller = &l
				}
			}
		}
		return webhook != nil && controller != nil, nil
	})
	if webhook == nil || controller == nil {
		t.Fatalf("the logs about story-0 lack the webhook's or the controller's line:\n%s", strings.Join(story, "\n"))
	}
	if webhook.Decision != decision || controller.Decision != decision {
		t.Errorf("decision logged by the webhook %q and the controller %q, want the annotation's %q", webhook.Decision, controller.Decision, decision)
	}
	if controller.PodUID != string(pod.UID) {
		t.Errorf("controller logged podUID %q, want %q", controller.PodUID, pod.UID)
	}
}
