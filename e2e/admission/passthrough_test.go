package admission

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/okg-extensions/network-plugin-policy/pkg/client/clientset/versioned"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// passedThrough is npp_admission_decisions_total{plugin="unknown",outcome="passed_through"}
// summed over the replicas.
func passedThrough(t *testing.T) float64 {
	t.Helper()
	v, err := mgr.Metric(context.Background(), "npp_admission_decisions_total", `plugin="unknown"`, `outcome="passed_through"`)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// noRawPluginLabel fails the test when a replica's metrics carry one of the raw network
// types as a plugin label.
func noRawPluginLabel(t *testing.T, networkTypes ...string) {
	t.Helper()
	for _, r := range mgr.Replicas {
		if !r.Running() {
			continue
		}
		body, err := r.Scrape(context.Background(), "")
		if err != nil {
			t.Fatal(err)
		}
		for _, nt := range networkTypes {
			if label := fmt.Sprintf(`plugin=%q`, nt); strings.Contains(body, label) {
				t.Errorf("replica %s exports a series with %s; want the label unknown", r.Name, label)
			}
		}
	}
}

// TestCloudNetworkTypePassesThrough: a pod of OKG's cloud type AmazonWebServices-NLB,
// which OKG's own webhook owns, is admitted untouched with no policy in force and under a
// Synchronous policy that names the type: no network-status, no retry state, no decision
// annotation, no readiness gate, no event, and none later (the catch-up controller leaves
// it alone too); an UPDATE passes through too. It is counted with plugin label unknown. The
// policy that names the type gets a warning in its status saying that it has no effect.
func TestCloudNetworkTypePassesThrough(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "passthrough", nil)
	before := passedThrough(t)

	annotations := map[string]string{
		networkstatus.AnnotationNetworkType: "AmazonWebServices-NLB",
		networkstatus.AnnotationNetworkConf: `[{"name":"ClbIds","value":"lb-xxx"},{"name":"PortProtocols","value":"7777/UDP"}]`,
		"game.kruise.io/traceparent":        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
	}
	slbPod := func(name string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": "slb"}, Annotations: maps.Clone(annotations)},
			Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptr.To[int64](0),
				Containers: []corev1.Container{{Name: "game", Image: "game-server:1.0",
					Ports: []corev1.ContainerPort{{Name: "game", ContainerPort: 7777, Protocol: corev1.ProtocolUDP}}}}},
		}
	}
	untouched := func(p *corev1.Pod, extra map[string]string) {
		t.Helper()
		want := maps.Clone(annotations)
		maps.Copy(want, extra)
		if !maps.Equal(want, p.Annotations) {
			t.Errorf("pod %s annotations = %v, want exactly %v", p.Name, p.Annotations, want)
		}
		if len(p.Spec.ReadinessGates) != 0 || p.Spec.Containers[0].Ports[0].HostPort != 0 {
			t.Errorf("pod %s spec changed: readiness gates %v, ports %v", p.Name, p.Spec.ReadinessGates, p.Spec.Containers[0].Ports)
		}
	}

	warnings := &warningCollector{}
	created, err := clientWithWarnings(warnings).CoreV1().Pods(ns).Create(ctx, slbPod("slb-0"), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create a AmazonWebServices-NLB pod with no policy: %v, want it admitted", err)
	}
	untouched(created, nil)
	if w := warnings.All(); len(w) != 0 {
		t.Errorf("admission warnings %q, want none", w)
	}

	// A label patch (an UPDATE through the webhook's async entry) passes through as well.
	patched, err := cs.CoreV1().Pods(ns).Patch(ctx, "slb-0", types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"game.kruise.io/opsState":"Maintaining"}}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("label patch: %v", err)
	}
	untouched(patched, nil)

	// Under a Synchronous policy that names the type: still untouched, and the policy warns.
	applyPolicy(t, `
apiVersion: policy.game.kruise.io/v1alpha1
kind: NetworkPluginPolicy
metadata: {name: slb, namespace: `+ns+`}
spec:
  plugins: ["AmazonWebServices-NLB"]
  failureMode: Synchronous
  readinessGate: true
`)
	pc := versioned.NewForConfigOrDie(cp.Config)
	eventually(t, 30*time.Second, "status warning on the policy naming AmazonWebServices-NLB", func(ctx context.Context) (bool, error) {
		p, err := pc.PolicyV1alpha1().NetworkPluginPolicies(ns).Get(ctx, "slb", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, w := range p.Status.Warnings {
			if strings.Contains(w, `spec.plugins[0]: no registered network plugin has the name or alias "AmazonWebServices-NLB"`) &&
				strings.Contains(w, "no effect") {
				return p.Status.ObservedGeneration == p.Generation, nil
			}
		}
		return false, nil
	})
	second, err := cs.CoreV1().Pods(ns).Create(ctx, slbPod("slb-1"), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create a AmazonWebServices-NLB pod under a Synchronous policy naming it: %v, want it admitted", err)
	}
	untouched(second, nil)

	// Scheduled and Running, and past the catch-up controller's first stamps (0 and 5 s): no
	// manager has written anything on either pod.
	eventually(t, time.Minute, "both pods Running", func(ctx context.Context) (bool, error) {
		pods, err := listPods(ctx, ns, "slb")
		if err != nil || len(pods) != 2 {
			return false, err
		}
		for _, p := range pods {
			if p.Status.Phase != corev1.PodRunning {
				return false, nil
			}
		}
		return true, nil
	})
	time.Sleep(7 * time.Second)
	pods, err := listPods(ctx, ns, "slb")
	if err != nil {
		t.Fatal(err)
	}
	for i := range pods {
		untouched(&pods[i], nil)
	}
	evs, err := cs.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Items {
		if strings.HasPrefix(e.ReportingController, "network-plugin-policy") || strings.HasPrefix(e.ReportingController, "policy.game.kruise.io") {
			t.Errorf("event %s %s on %s by %s: %s; want none from the manager", e.Type, e.Reason, e.Regarding.Name, e.ReportingController, e.Note)
		}
	}

	// CREATE, label patch, CREATE; the DELETEs of the cleanup come later.
	if got := passedThrough(t) - before; got < 3 {
		t.Errorf("npp_admission_decisions_total{plugin=unknown,outcome=passed_through} rose by %v, want at least 3", got)
	}
	noRawPluginLabel(t, "AmazonWebServices-NLB")
}

// TestNearMissNetworkTypeIsDenied: a network type that is a near-miss of a
// registered name, by case or by a typo, is a parameterError that the built-in
// Synchronous default denies, suggesting the registered name; the metrics label it unknown.
func TestNearMissNetworkTypeIsDenied(t *testing.T) {
	ns := newNamespace(t, "nearmiss", nil)
	for _, networkType := range []string{"kubernetes-hostport", "Kubernetes-HostPrt"} {
		pod := probePod(ns, networkType)
		pod.Annotations[networkstatus.AnnotationNetworkConf] = hostPortConf
		for _, dryRun := range [][]string{nil, {metav1.DryRunAll}} {
			_, err := cs.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{DryRun: dryRun})
			if err == nil || !strings.Contains(err.Error(), "network plugin "+networkType+" failed (parameterError)") ||
				!strings.Contains(err.Error(), "did you mean Kubernetes-HostPort?") || !strings.Contains(err.Error(), "denied by built-in default") {
				t.Errorf("CREATE of a %s pod (dry run %v): %v, want a parameterError suggesting Kubernetes-HostPort, denied by built-in default",
					networkType, dryRun != nil, err)
			}
		}
	}
	noRawPluginLabel(t, "kubernetes-hostport", "Kubernetes-HostPrt")
}

// TestWarningLevelParameterAdmits: a HostPort pod whose network-conf carries an
// extra OKG parameter (Fixed, which HostPort does not read) is admitted under the built-in
// Synchronous default with an admission warning naming the parameter and a
// NetworkPluginWarning event, gets its host port, and becomes network-Ready with no retry
// state left.
func TestWarningLevelParameterAdmits(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "warning", nil)
	pod := probePod(ns, "Kubernetes-HostPort")
	pod.Name, pod.GenerateName = "fixed-0", ""
	pod.Annotations[networkstatus.AnnotationNetworkConf] = `[{"name":"ContainerPorts","value":"game:7777/UDP"},{"name":"Fixed","value":"true"}]`
	pod.Spec.Containers = []corev1.Container{{Name: "game", Image: "game-server:1.0",
		Ports: []corev1.ContainerPort{{Name: "game", ContainerPort: 7777, Protocol: corev1.ProtocolUDP}}}}

	warnings := &warningCollector{}
	created, err := clientWithWarnings(warnings).CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create a HostPort pod with an extra Fixed parameter: %v, want it admitted", err)
	}
	found := false
	for _, w := range warnings.All() {
		if strings.Contains(w, "network plugin Kubernetes-HostPort warns (parameterError)") && strings.Contains(w, "Fixed") {
			found = true
		}
	}
	if !found {
		t.Errorf("admission warnings %q, want one naming Kubernetes-HostPort and Fixed", warnings.All())
	}
	if hostPortOf(created) == 0 {
		t.Errorf("pod admitted without a host port: the plugin's changes were dropped")
	}
	if got, want := created.Annotations["policy.game.kruise.io/network-decision"], "Synchronous by built-in default"; got != want {
		t.Errorf("network-decision = %q, want %q", got, want)
	}

	eventually(t, 2*time.Minute, "pod Running with a Ready network and no retry state", func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		_, retrying := p.Annotations["policy.game.kruise.io/network-retry"]
		return p.Status.Phase == corev1.PodRunning && networkState(p) == networkstatus.NetworkReady && !retrying, nil
	})
	eventually(t, 30*time.Second, "NetworkPluginWarning event naming Fixed", func(ctx context.Context) (bool, error) {
		return hasEvent(ctx, ns, pod.Name, "NetworkPluginWarning", "Fixed")
	})
}
