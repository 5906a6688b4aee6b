package network

import (
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	policyv1alpha1 "github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
	"github.com/okg-extensions/network-plugin-policy/pkg/networkretry"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
	podwebhook "github.com/okg-extensions/network-plugin-policy/pkg/webhook/pod"
)

const (
	testNamespace = "game"
	testPodName   = "lobby-0"
	testPlugin    = "Kubernetes-NodePort"
	testPolicy    = "policy game/lb-async@1"
)

// t0 is the pod's creation and the retry state's since in the tests: whole seconds, because
// trigger times and retry-state times have second precision.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// at returns t0 + d.
func at(d time.Duration) time.Time { return t0.Add(d) }

// podBuilder builds a game-server pod with the game.kruise.io/network-type annotation.
type podBuilder struct{ pod *corev1.Pod }

func newPod() *podBuilder {
	return &podBuilder{pod: &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: testPodName, Namespace: testNamespace, UID: "uid-lobby-0", Generation: 1,
			CreationTimestamp: metav1.NewTime(t0),
			Annotations:       map[string]string{networkstatus.AnnotationNetworkType: testPlugin},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "lobby", UID: "uid-lobby",
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
		},
		// Bound to its node at creation (no PodScheduled condition): scheduled at t0.
		Spec: corev1.PodSpec{NodeName: "node-0", Containers: []corev1.Container{{Name: "game", Image: "game:1"}}},
	}}
}

// bare removes the pod's controller owner: nothing would recreate it.
func (b *podBuilder) bare() *podBuilder { b.pod.OwnerReferences = nil; return b }

// pending makes the pod unscheduled: no node, no IP.
func (b *podBuilder) pending() *podBuilder {
	b.pod.Spec.NodeName = ""
	b.pod.Status.PodIP = ""
	return b
}

// scheduledAt binds the pod to node-0 at t (a PodScheduled=True condition of that time).
func (b *podBuilder) scheduledAt(t time.Time) *podBuilder {
	b.pod.Spec.NodeName = "node-0"
	b.pod.Status.Conditions = append(b.pod.Status.Conditions, corev1.PodCondition{
		Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t)})
	return b
}

// podIP sets status.podIP.
func (b *podBuilder) podIP(ip string) *podBuilder { b.pod.Status.PodIP = ip; return b }

// uid sets the pod's UID (another incarnation of the same name).
func (b *podBuilder) uid(u types.UID) *podBuilder { b.pod.UID = u; return b }

func (b *podBuilder) annotation(k, v string) *podBuilder { b.pod.Annotations[k] = v; return b }

func (b *podBuilder) withoutAnnotation(k string) *podBuilder { delete(b.pod.Annotations, k); return b }

func (b *podBuilder) label(k, v string) *podBuilder {
	if b.pod.Labels == nil {
		b.pod.Labels = map[string]string{}
	}
	b.pod.Labels[k] = v
	return b
}

// network sets network-status with the given current state.
func (b *podBuilder) network(state networkstatus.NetworkState) *podBuilder {
	v, err := networkstatus.EncodeStatus(networkstatus.NetworkStatus{NetworkType: testPlugin, CurrentNetworkState: state,
		DesiredNetworkState: networkstatus.NetworkReady, CreateTime: metav1.NewTime(t0), LastTransitionTime: metav1.NewTime(t0)})
	if err != nil {
		panic(err)
	}
	// As the webhook writes it: with the digest that makes it the manager's.
	return b.annotation(networkstatus.AnnotationNetworkStatus, v).annotation(podwebhook.AnnotationStatusDigest, podwebhook.StatusDigest(v))
}

// unwritten removes the status digest: a network-status the manager did not write.
func (b *podBuilder) unwritten() *podBuilder {
	delete(b.pod.Annotations, podwebhook.AnnotationStatusDigest)
	return b
}

func (b *podBuilder) ready() *podBuilder    { return b.network(networkstatus.NetworkReady) }
func (b *podBuilder) notReady() *podBuilder { return b.network(networkstatus.NetworkNotReady) }

// retry sets the retry-state annotation to s.
func (b *podBuilder) retry(s *networkretry.State) *podBuilder {
	v, err := s.Encode()
	if err != nil {
		panic(err)
	}
	return b.annotation(networkretry.Annotation, v)
}

func (b *podBuilder) trigger(t time.Time) *podBuilder {
	return b.annotation(networkstatus.AnnotationNetworkTriggerTime, t.UTC().Format(time.RFC3339))
}

// gate adds the readiness gate game.kruise.io/network-ready.
func (b *podBuilder) gate() *podBuilder {
	b.pod.Spec.ReadinessGates = append(b.pod.Spec.ReadinessGates, corev1.PodReadinessGate{ConditionType: conditionNetworkReady})
	return b
}

// condition sets the network-ready condition.
func (b *podBuilder) condition(status corev1.ConditionStatus, reason string, since time.Time) *podBuilder {
	b.pod.Status.Conditions = append(b.pod.Status.Conditions, corev1.PodCondition{
		Type: conditionNetworkReady, Status: status, Reason: reason, LastTransitionTime: metav1.NewTime(since)})
	return b
}

// conditionMessage sets the network-ready condition with a message.
func (b *podBuilder) conditionMessage(status corev1.ConditionStatus, reason, message string, since time.Time) *podBuilder {
	b.pod.Status.Conditions = append(b.pod.Status.Conditions, corev1.PodCondition{
		Type: conditionNetworkReady, Status: status, Reason: reason, Message: message, LastTransitionTime: metav1.NewTime(since)})
	return b
}

// finalizer adds a finalizer, so that a delete leaves the pod terminating in the fake client.
func (b *podBuilder) finalizer() *podBuilder {
	b.pod.Finalizers = append(b.pod.Finalizers, "test.game.kruise.io/keep")
	return b
}

func (b *podBuilder) terminating() *podBuilder {
	b.finalizer()
	b.pod.DeletionTimestamp = ptrTime(metav1.NewTime(at(time.Minute)))
	return b
}

func (b *podBuilder) obj() *corev1.Pod { return b.pod.DeepCopy() }

func ptrTime(t metav1.Time) *metav1.Time { return &t }

// newState is the retry state after the first failed plugin run at t0: window 5m, interval
// 5s, maxInterval 1m, action Event; mods change it.
func newState(mods ...func(*networkretry.State)) *networkretry.State {
	s := networkretry.Record(nil, t0, testPlugin, testPolicy,
		&networkretry.Error{Type: "apiCallError", Message: "exceeded quota: services.nodeports=0"},
		5*time.Minute, 5*time.Second, time.Minute, policyv1alpha1.ExhaustedActionEvent)
	for _, m := range mods {
		m(s)
	}
	return s
}

// attempts sets Attempts to n and LastAttempt to last.
func attempts(n int32, last time.Time) func(*networkretry.State) {
	return func(s *networkretry.State) { s.Attempts, s.LastAttempt = n, metav1.NewTime(last) }
}

// onSchedule is a state whose 7th attempt ran at t0+4m15s: at t0+5m, when its 5m window
// closes, no attempt is overdue (the 8th is due at t0+5m15s).
var onSchedule = attempts(7, at(255*time.Second))

func window(d time.Duration) func(*networkretry.State) {
	return func(s *networkretry.State) { s.Window = metav1.Duration{Duration: d} }
}

func action(a policyv1alpha1.ExhaustedAction) func(*networkretry.State) {
	return func(s *networkretry.State) { s.ExhaustedAction = a }
}

// exhaustedAt marks the state exhausted at t for the test pod's UID.
func exhaustedAt(t time.Time) func(*networkretry.State) {
	return exhaustedFor(t, "uid-lobby-0")
}

// exhaustedFor marks the state exhausted at t for the pod incarnation uid.
func exhaustedFor(t time.Time, uid types.UID) func(*networkretry.State) {
	return func(s *networkretry.State) { s.Exhausted, s.ExhaustedUID = ptrTime(metav1.NewTime(t)), uid }
}

// harness is a Reconciler on a fake client holding one pod, with a fake clock, a fake event
// recorder and metrics in a private registry.
type harness struct {
	client   client.WithWatch
	clock    *clocktesting.FakeClock
	recorder *events.FakeRecorder
	registry *prometheus.Registry
	metrics  *Metrics
	r        *Reconciler
	// evictions are the delete options of every pod eviction requested (pods/eviction) and
	// of every plain delete, in order.
	evictions []metav1.DeleteOptions
}

// newHarness returns a harness at now with pods stored; funcs intercept the client's calls
// (evictions and deletes are recorded in h.evictions before funcs.SubResourceCreate or
// funcs.Delete, if any, runs).
func newHarness(t *testing.T, now time.Time, funcs interceptor.Funcs, pods ...*corev1.Pod) *harness {
	t.Helper()
	h := &harness{clock: clocktesting.NewFakeClock(now), recorder: events.NewFakeRecorder(100), registry: prometheus.NewRegistry()}
	var err error
	if h.metrics, err = NewMetrics(h.registry); err != nil {
		t.Fatal(err)
	}
	objs := make([]client.Object, 0, len(pods))
	for _, p := range pods {
		objs = append(objs, p)
	}
	del := funcs.Delete
	funcs.Delete = func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
		var o client.DeleteOptions
		o.ApplyOptions(opts)
		h.evictions = append(h.evictions, *o.AsDeleteOptions())
		if del != nil {
			return del(ctx, c, obj, opts...)
		}
		return c.Delete(ctx, obj, opts...)
	}
	create := funcs.SubResourceCreate
	funcs.SubResourceCreate = func(ctx context.Context, c client.Client, sub string, obj client.Object, subObj client.Object, opts ...client.SubResourceCreateOption) error {
		if ev, ok := subObj.(*policyv1.Eviction); ok && sub == "eviction" {
			o := metav1.DeleteOptions{}
			if ev.DeleteOptions != nil {
				o = *ev.DeleteOptions
			}
			h.evictions = append(h.evictions, o)
		}
		if create != nil {
			return create(ctx, c, sub, obj, subObj, opts...)
		}
		return c.SubResource(sub).Create(ctx, obj, subObj, opts...)
	}
	h.client = interceptor.NewClient(fake.NewClientBuilder().WithScheme(scheme.Scheme).
		WithStatusSubresource(&corev1.Pod{}).WithObjects(objs...).Build(), funcs)
	h.r = NewReconciler(h.client, h.recorder, Options{Clock: h.clock, Metrics: h.metrics})
	return h
}

// reconcile runs Reconcile for the test pod at the clock's time.
func (h *harness) reconcile(t *testing.T) (ctrl.Result, error) {
	t.Helper()
	return h.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: testNamespace, Name: testPodName}})
}

// mustReconcile is reconcile failing the test on an error.
func (h *harness) mustReconcile(t *testing.T) ctrl.Result {
	t.Helper()
	res, err := h.reconcile(t)
	if err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	return res
}

// pod returns the stored test pod, nil when it is gone.
func (h *harness) pod(t *testing.T) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{}
	err := h.client.Get(context.Background(), types.NamespacedName{Namespace: testNamespace, Name: testPodName}, p)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// state returns the stored pod's retry state (nil when it has none).
func (h *harness) state(t *testing.T) *networkretry.State {
	t.Helper()
	p := h.pod(t)
	if p == nil {
		t.Fatal("pod is gone")
	}
	s, err := networkretry.FromPod(p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// events drains the recorded events ("<type> <reason> <note>").
func (h *harness) events() []string {
	var out []string
	for {
		select {
		case e := <-h.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// histogram returns the sample count and sum of the histogram series name{labels}; zeros
// when the series does not exist.
func (h *harness) histogram(t *testing.T, name string, labels map[string]string) (uint64, float64) {
	t.Helper()
	families, err := h.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			if maps.Equal(got, labels) {
				return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
			}
		}
	}
	return 0, 0
}

// errInjected is the error of interceptors that make a call fail.
var errInjected = errors.New("injected failure")

// retries is npp_network_retries_total{plugin=testPlugin}.
func (h *harness) retries() float64 {
	return testutil.ToFloat64(h.metrics.retries.WithLabelValues(testPlugin))
}

// exhausted is npp_network_retry_windows_exhausted_total{plugin=testPlugin,action=a}.
func (h *harness) exhausted(a policyv1alpha1.ExhaustedAction) float64 {
	return testutil.ToFloat64(h.metrics.exhausted.WithLabelValues(testPlugin, string(a)))
}

// countWrites wraps the reconciler's client so that its pod metadata writes (Patch, Update;
// not the status subresource) are counted in the returned counter.
func (h *harness) countWrites() *int {
	n := new(int)
	h.r.client = interceptor.NewClient(h.client, interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			*n++
			return c.Patch(ctx, obj, patch, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			*n++
			return c.Update(ctx, obj, opts...)
		},
	})
	return n
}
