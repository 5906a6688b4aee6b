package admission

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"

	policyv1alpha1 "github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
	"github.com/okg-extensions/network-plugin-policy/e2e/cluster"
	"github.com/okg-extensions/network-plugin-policy/pkg/eventrecorder"
	"github.com/okg-extensions/network-plugin-policy/pkg/networkretry"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// networkCondition returns the pod's game.kruise.io/network-ready condition, nil without one.
func networkCondition(p *corev1.Pod) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == policyv1alpha1.ReadinessGateNetworkReady {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// TestPendingTwiceItsWindowTurnsReadyWhenScheduled: a NodePort pod that cannot be scheduled
// (a nodeSelector no node matches) stays Pending for twice its 10s retry window: it is not
// exhausted, and its readiness-gate condition is False saying that the window starts at
// scheduling. Once a node gets the label the scheduler binds it, and the network is Ready
// within seconds of the binding, before the retry backoff would have tried again: the
// controller retries at once when a pod gets its node or IP.
func TestPendingTwiceItsWindowTurnsReadyWhenScheduled(t *testing.T) {
	const window = 10 * time.Second
	ns := newNamespace(t, "pending", nil)
	applyPolicy(t, fmt.Sprintf(`
apiVersion: policy.game.kruise.io/v1alpha1
kind: NetworkPluginPolicy
metadata: {name: pending-retry, namespace: %s}
spec:
  plugins: ["Kubernetes-NodePort"]
  readinessGate: true
  retry: {window: %s, interval: 2s, maxInterval: 1m, exhaustedAction: Event}
`, ns, window))
	waitForPolicy(t, ns, "pending-retry", "Kubernetes-NodePort")

	// A label key of this namespace, so that no other test's node label matches.
	label := "e2e.policy.game.kruise.io/" + ns
	node := cluster.NodeName(0)
	t.Cleanup(func() {
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, label)
		_, _ = cs.CoreV1().Nodes().Patch(context.Background(), node, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	})
	tmpl := gamePodTemplate("pending", "Kubernetes-NodePort", nodePortConf)
	tmpl.Spec.NodeSelector = map[string]string{label: "yes"}
	pod := &corev1.Pod{ObjectMeta: tmpl.ObjectMeta, Spec: tmpl.Spec}
	pod.Name, pod.Namespace = "pending-0", ns
	created, err := cs.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod: %v", err)
	}
	if rs := retryState(t, created); rs == nil || networkState(created) == networkstatus.NetworkReady {
		t.Fatalf("pod created with network %q and retry state %v, want it not Ready, with a retry state", networkState(created), rs)
	}

	// Twice the window, Pending: not exhausted, the condition says why.
	time.Sleep(2*window + 5*time.Second)
	p, err := cs.CoreV1().Pods(ns).Get(context.Background(), pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Spec.NodeName != "" {
		t.Fatalf("pod bound to %s, want it Pending", p.Spec.NodeName)
	}
	if rs := retryState(t, p); rs == nil || rs.Exhausted != nil {
		t.Fatalf("retry state %+v, want one that is not exhausted", rs)
	}
	if ok, err := hasEvent(context.Background(), ns, pod.Name, "NetworkRetryExhausted"); err != nil || ok {
		t.Fatalf("NetworkRetryExhausted event recorded for a Pending pod (err %v)", err)
	}
	if c := networkCondition(p); c == nil || c.Status != corev1.ConditionFalse || c.Reason != "NetworkNotReady" ||
		!strings.Contains(c.Message, "retry window starts when the pod is scheduled") {
		t.Errorf("network-ready condition = %+v, want False NetworkNotReady, the window starting at scheduling", c)
	}

	// Label the node just after a backoff stamp was recorded, so that the next one is at
	// least 8s away: a Ready network before then was the scheduling's retry.
	var backoffNext time.Time
	eventually(t, 2*time.Minute, "a retry recorded with the next one at least 8s away", func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		rs := retryState(t, p)
		if rs == nil {
			return false, fmt.Errorf("retry state gone from a Pending pod")
		}
		backoffNext = rs.NextAttempt()
		return time.Until(backoffNext) >= 8*time.Second, nil
	})
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:"yes"}}}`, label)
	if _, err := cs.CoreV1().Nodes().Patch(context.Background(), node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("label node %s: %v", node, err)
	}
	labeled := time.Now()
	var scheduled, ready time.Time
	eventually(t, 30*time.Second, "pod scheduled and its network Ready", func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if scheduled.IsZero() && p.Spec.NodeName != "" {
			scheduled = time.Now()
		}
		if networkState(p) != networkstatus.NetworkReady {
			return false, nil
		}
		ready = time.Now()
		return true, nil
	})
	t.Logf("labeled the node, scheduled after %s, network Ready %s after the scheduling (the backoff's next retry was %s after the labeling)",
		scheduled.Sub(labeled).Round(100*time.Millisecond), ready.Sub(scheduled).Round(100*time.Millisecond),
		backoffNext.Sub(labeled).Round(time.Second))
	if ready.After(backoffNext) {
		t.Errorf("network Ready at %s, after the backoff's next retry at %s: the scheduling did not trigger a retry",
			ready.Format(time.RFC3339Nano), backoffNext.Format(time.RFC3339))
	}
	eventually(t, 30*time.Second, "retry state cleared and the condition True", func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		_, retrying := p.Annotations[networkretry.Annotation]
		c := networkCondition(p)
		return !retrying && c != nil && c.Status == corev1.ConditionTrue, nil
	})
}

// podEvents lists the events.k8s.io Events about pod name in ns with reason.
func podEvents(ctx context.Context, ns, name, reason string) ([]eventsv1.Event, error) {
	evs, err := cs.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []eventsv1.Event
	for _, e := range evs.Items {
		if e.Regarding.Name == name && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out, nil
}

// TestEventSeriesAcrossPodUpdates: the events library, recording through
// eventrecorder.WithoutResourceVersion and eventrecorder.StableNameSink against the real
// apiserver, folds the same event into one Event object with a series: recorded before and
// after a pod update, by two replicas, and by a replica started afresh (a restart, or a
// series the library had finished). A plain recorder with the library's own sink, whose
// reference carries the resourceVersion, writes two objects for two recordings.
func TestEventSeriesAcrossPodUpdates(t *testing.T) {
	ns := newNamespace(t, "events", nil)
	ctx := context.Background()
	pod, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "series-0", Namespace: ns},
		Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []corev1.Container{{Name: "game", Image: "game-server:1.0"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	start := func(sink events.EventSink) events.EventBroadcaster {
		b := events.NewBroadcaster(sink)
		stop := make(chan struct{})
		b.StartRecordingToSink(stop)
		t.Cleanup(func() { close(stop); b.Shutdown() })
		return b
	}
	stableRecorder := func() events.EventRecorder {
		sink := eventrecorder.NewStableNameSink(cs.EventsV1())
		runCtx, cancel := context.WithCancel(ctx)
		t.Cleanup(cancel)
		go sink.Run(runCtx)
		return eventrecorder.WithoutResourceVersion(start(sink).NewRecorder(scheme.Scheme, "npp-e2e-series"), scheme.Scheme)
	}

	record := func(rec events.EventRecorder, reason string) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rec.Eventf(p, nil, corev1.EventTypeWarning, reason, "UPDATE", "Network plugin %s failed (apiCallError): exceeded quota", "Kubernetes-NodePort")
		// A retry stamp: the pod's resourceVersion changes between the two recordings.
		patch := fmt.Sprintf(`{"metadata":{"annotations":{"game.kruise.io/network-trigger-time":%q}}}`, time.Now().Format(time.RFC3339Nano))
		if _, err := cs.CoreV1().Pods(ns).Patch(ctx, pod.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	oneStable := func(what string, count int32) {
		t.Helper()
		eventually(t, 30*time.Second, what, func(ctx context.Context) (bool, error) {
			evs, err := podEvents(ctx, ns, pod.Name, "StableRef")
			if err != nil {
				return false, err
			}
			if len(evs) > 1 {
				return false, fmt.Errorf("%d StableRef Event objects, want 1", len(evs))
			}
			if len(evs) == 1 && evs[0].Name != eventrecorder.EventName(&evs[0]) {
				return false, fmt.Errorf("StableRef Event named %s, want %s", evs[0].Name, eventrecorder.EventName(&evs[0]))
			}
			return len(evs) == 1 && evs[0].Series != nil && evs[0].Series.Count >= count, nil
		})
	}
	replicaA := stableRecorder()
	plain := start(&events.EventSinkImpl{Interface: cs.EventsV1()}).NewRecorder(scheme.Scheme, "npp-e2e-plain")
	for range 2 {
		record(replicaA, "StableRef")
		record(plain, "PlainRef")
	}
	oneStable("one StableRef Event with series count 2", 2)
	// Another replica, and a replica started afresh: their occurrences come less than
	// SeriesObserveInterval after the stored Event was observed, so each reads it and counts
	// the occurrence in its memory: still the one Event.
	record(stableRecorder(), "StableRef")
	oneStable("still one StableRef Event (another replica)", 2)
	record(stableRecorder(), "StableRef")
	oneStable("still one StableRef Event (a restarted replica)", 2)

	eventually(t, 30*time.Second, "two PlainRef Event objects (the cause the recorder removes)", func(ctx context.Context) (bool, error) {
		evs, err := podEvents(ctx, ns, pod.Name, "PlainRef")
		return len(evs) == 2, err
	})
	// Nothing more arrives later.
	time.Sleep(2 * time.Second)
	if evs, err := podEvents(ctx, ns, pod.Name, "StableRef"); err != nil || len(evs) != 1 {
		t.Errorf("StableRef Event objects = %d (err %v), want 1", len(evs), err)
	}
}

// TestRepeatedRetryErrorIsOneEvent: a NodePort pod whose Service is refused by a
// services.nodeports quota of 0 fails the same way at every plugin run, served by both
// webhook replicas. The pod has one apiCallError Event object, with a series, however many
// runs either replica served, where every run used to write an Event object of its own, and
// later one per replica.
func TestRepeatedRetryErrorIsOneEvent(t *testing.T) {
	ns := newNamespace(t, "evseries", nil)
	setNodePortQuota(t, ns, 0)
	applyPolicy(t, fmt.Sprintf(`
apiVersion: policy.game.kruise.io/v1alpha1
kind: NetworkPluginPolicy
metadata: {name: fast-retry, namespace: %s}
spec:
  plugins: ["Kubernetes-NodePort"]
  retry: {window: 5m, interval: 1s, maxInterval: 1s, exhaustedAction: Event}
`, ns))
	waitForPolicy(t, ns, "fast-retry", "Kubernetes-NodePort")
	createStatefulSet(t, ns, "ev", 1, gamePodTemplate("ev", "Kubernetes-NodePort", nodePortConf))

	eventually(t, time.Minute, "the first failed attempt recorded", func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "ev-0", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		rs := retryState(t, p)
		return rs != nil && rs.LastError != nil && rs.LastError.Type == "apiCallError", nil
	})
	// The network controller's retries that would fail the same way are counted from its
	// caches without a plugin run; these updates of the pod run the plugin each time, through
	// either replica, as retries did before.
	const attempts = 8
	for i := range attempts {
		patch := fmt.Sprintf(`{"metadata":{"labels":{"touched":"%d"}}}`, i)
		if _, err := cs.CoreV1().Pods(ns).Patch(context.Background(), "ev-0", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatalf("update %d of pod ev-0: %v", i, err)
		}
	}
	time.Sleep(2 * time.Second) // the events library writes asynchronously
	evs, err := podEvents(context.Background(), ns, "ev-0", "apiCallError")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		count := int32(1)
		if e.Series != nil {
			count = e.Series.Count
		}
		t.Logf("Event %s: series count %d, reported by %s", e.Name, count, e.ReportingInstance)
	}
	if len(evs) != 1 {
		t.Fatalf("%d apiCallError Event objects after %d+ failed attempts on %d replicas, want 1", len(evs), attempts, len(mgr.Replicas))
	}
	if evs[0].Series == nil || evs[0].Series.Count < 2 {
		t.Errorf("the apiCallError Event has series %v, want the repeats counted", evs[0].Series)
	}
}

// TestOnceReadyNetworkThatBreaksTurnsConditionFalse: the readiness-gate condition follows the
// network both ways. A NodePort pod turns Ready (condition True); then its Service is deleted
// under a services.nodeports quota of 0 and the pod is updated, so the webhook's run fails:
// the condition turns False (NetworkNotReady, naming the error) while the network is retried,
// and True again once the quota allows the Service.
func TestOnceReadyNetworkThatBreaksTurnsConditionFalse(t *testing.T) {
	ns := newNamespace(t, "breaks", nil)
	applyPolicy(t, fmt.Sprintf(`
apiVersion: policy.game.kruise.io/v1alpha1
kind: NetworkPluginPolicy
metadata: {name: gated, namespace: %s}
spec:
  plugins: ["Kubernetes-NodePort"]
  readinessGate: true
  retry: {window: 5m, interval: 1s, maxInterval: 2s, exhaustedAction: Event}
`, ns))
	waitForPolicy(t, ns, "gated", "Kubernetes-NodePort")
	createStatefulSet(t, ns, "br", 1, gamePodTemplate("br", "Kubernetes-NodePort", nodePortConf))
	condition := func(status corev1.ConditionStatus, contains string) func(ctx context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			p, err := cs.CoreV1().Pods(ns).Get(ctx, "br-0", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			c := networkCondition(p)
			wantReady := status == corev1.ConditionTrue
			return c != nil && c.Status == status && strings.Contains(c.Message, contains) &&
				(networkState(p) == networkstatus.NetworkReady) == wantReady, nil
		}
	}
	eventually(t, time.Minute, "network Ready, condition True", condition(corev1.ConditionTrue, "is Ready"))

	setNodePortQuota(t, ns, 0)
	ctx := context.Background()
	if err := cs.CoreV1().Services(ns).Delete(ctx, "br-0", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete the pod's Service: %v", err)
	}
	eventually(t, 30*time.Second, "Service gone", func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Services(ns).Get(ctx, "br-0", metav1.GetOptions{})
		return ignoreNotFound(err) == nil && err != nil, ignoreNotFound(err)
	})
	if _, err := cs.CoreV1().Pods(ns).Patch(ctx, "br-0", types.MergePatchType, []byte(`{"metadata":{"labels":{"touched":"yes"}}}`),
		metav1.PatchOptions{}); err != nil {
		t.Fatalf("update the pod: %v", err)
	}
	eventually(t, 30*time.Second, "network broken, condition False naming the quota error",
		condition(corev1.ConditionFalse, "exceeded quota"))
	p, err := cs.CoreV1().Pods(ns).Get(ctx, "br-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := networkCondition(p); c.Reason != "NetworkNotReady" {
		t.Errorf("condition reason = %s, want NetworkNotReady", c.Reason)
	}

	setNodePortQuota(t, ns, 10)
	eventually(t, 30*time.Second, "network Ready again, condition True", condition(corev1.ConditionTrue, "is Ready"))
}
