package pod

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	policyv1alpha1 "github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
	"github.com/okg-extensions/network-plugin-policy/pkg/networkretry"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
	"github.com/okg-extensions/network-plugin-policy/pkg/policy"
)

const (
	testRoot = "npp-system"
	testNS   = "game"
	syncName = "Test-Sync"
	asyncNm  = "Test-Async"
)

var testNow = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// fakePlugin is a network plugin whose behaviour a test sets: it applies mutate, writes a
// NotReady network-status (as a plugin does before the pod has an IP) and then returns err,
// panics or sleeps as told. OnPodDeleted panics, sleeps and returns err in the same way.
type fakePlugin struct {
	name  string
	sync  bool
	err   error
	panic bool
	sleep time.Duration
	ready bool
	// keep leaves the pod's network-status as it came (a plugin with nothing to do yet,
	// such as NodePort before the pod has a node).
	keep   bool
	mutate func(*corev1.Pod)
	calls  atomic.Int32
}

func (f *fakePlugin) Name() string                                             { return f.name }
func (f *fakePlugin) Alias() string                                            { return "Test-Family" }
func (f *fakePlugin) IsSynchronous() bool                                      { return f.sync }
func (f *fakePlugin) Init(context.Context, client.Client, plugin.Config) error { return nil }
func (f *fakePlugin) OnPodDeleted(ctx context.Context, _ client.Client, _ *corev1.Pod) error {
	f.calls.Add(1)
	if err := f.wait(ctx); err != nil {
		return err
	}
	return f.err
}
func (f *fakePlugin) OnPodAdded(ctx context.Context, c client.Client, pod *corev1.Pod) (*corev1.Pod, error) {
	return f.run(ctx, pod)
}
func (f *fakePlugin) OnPodUpdated(ctx context.Context, c client.Client, pod *corev1.Pod) (*corev1.Pod, error) {
	return f.run(ctx, pod)
}

// wait panics or sleeps as told; it returns the context's error when the deadline ends the
// sleep.
func (f *fakePlugin) wait(ctx context.Context) error {
	if f.panic {
		panic("boom")
	}
	if f.sleep > 0 {
		select {
		case <-time.After(f.sleep):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (f *fakePlugin) run(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
	f.calls.Add(1)
	if err := f.wait(ctx); err != nil {
		return pod, err
	}
	if f.mutate != nil {
		f.mutate(pod)
	}
	if f.keep {
		return pod, f.err
	}
	state := networkstatus.NetworkNotReady
	if f.ready {
		state = networkstatus.NetworkReady
	}
	if err := networkstatus.SetStatus(pod, nil, networkstatus.NetworkStatus{
		CurrentNetworkState: state, DesiredNetworkState: networkstatus.NetworkReady, NetworkType: f.name,
	}, testNow); err != nil {
		return pod, err
	}
	return pod, f.err
}

type env struct {
	handler  *Handler
	recorder *events.FakeRecorder
	sync     *fakePlugin
	async    *fakePlugin
}

func newEnv(t testing.TB, policies ...*policyv1alpha1.NetworkPluginPolicy) *env {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	e := &env{
		recorder: events.NewFakeRecorder(20),
		sync:     &fakePlugin{name: syncName, sync: true},
		async:    &fakePlugin{name: asyncNm},
	}
	reg, err := plugin.NewRegistry(e.sync, e.async)
	if err != nil {
		t.Fatal(err)
	}
	metrics, err := policy.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	store, err := policy.NewStore(policy.StoreOptions{RootNamespace: testRoot, Metrics: metrics})
	if err != nil {
		t.Fatal(err)
	}
	h := store.Handler(context.Background())
	for _, p := range policies {
		h.OnAdd(p, true)
		if r, ok := store.Result(p.Namespace, p.Name); !ok || len(r.Errors) > 0 {
			t.Fatalf("test policy %s/%s does not compile: %+v", p.Namespace, p.Name, r)
		}
	}
	wm, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNS, Labels: map[string]string{"tier": "prod"}}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(ns).Build()
	e.handler = &Handler{
		Client: c, Namespaces: c, Plugins: reg, Resolver: policy.NewResolver(store),
		Recorder: e.recorder, Metrics: wm, Decoder: admission.NewDecoder(scheme),
		Clock: clocktesting.NewFakePassiveClock(testNow),
	}
	return e
}

func npp(ns, name string, mutate func(*policyv1alpha1.NetworkPluginPolicySpec)) *policyv1alpha1.NetworkPluginPolicy {
	p := &policyv1alpha1.NetworkPluginPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: "uid-" + "name", Generation: 1},
		Spec:       policyv1alpha1.NetworkPluginPolicySpec{Plugins: []string{"*"}},
	}
	mutate(&p.Spec)
	return p
}

func gamePod(networkType string, annotations ...string) *corev1.Pod {
	p := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "gs-0", Annotations: map[string]string{networkstatus.AnnotationNetworkType: networkType}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "game", Image: "game:1"}}},
	}
	for i := 0; i+1 < len(annotations); i += 2 {
		p.Annotations[annotations[i]] = annotations[i+1]
	}
	return p
}

func request(t testing.TB, op admissionv1.Operation, pod, old *corev1.Pod, dryRun bool) admission.Request {
	t.Helper()
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "req-1", Operation: op, Namespace: testNS, Name: pod.Name, DryRun: ptr.To(dryRun),
		Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
	}}
	raw := func(p *corev1.Pod) runtime.RawExtension {
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		return runtime.RawExtension{Raw: b}
	}
	switch op {
	case admissionv1.Delete:
		req.OldObject = raw(pod)
	case admissionv1.Update:
		req.Object, req.OldObject = raw(pod), raw(old)
	default:
		req.Object = raw(pod)
	}
	return req
}

// admitted applies the response's patch to the request's pod.
func admitted(t *testing.T, req admission.Request, resp admission.Response) *corev1.Pod {
	t.Helper()
	if !resp.Allowed {
		t.Fatalf("denied: %v", resp.Result)
	}
	doc := map[string]any{}
	if err := json.Unmarshal(req.Object.Raw, &doc); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(resp.Patches)
	patched, err := applyJSONPatch(req.Object.Raw, b)
	if err != nil {
		t.Fatalf("apply patch %s: %v", b, err)
	}
	pod := &corev1.Pod{}
	if err := json.Unmarshal(patched, pod); err != nil {
		t.Fatal(err)
	}
	return pod
}

func drain(r *events.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func TestDeny(t *testing.T) {
	cases := map[string]struct {
		policies  []*policyv1alpha1.NetworkPluginPolicy
		plugin    func(e *env) string
		wantMsg   []string
		wantEvent string
	}{
		"near-miss network type with no policy": {
			plugin: func(*env) string { return "test-sync" },
			wantMsg: []string{"network plugin test-sync failed (parameterError)",
				`unknown network type "test-sync": did you mean Test-Sync?`, "denied by built-in default"},
			wantEvent: "Warning parameterError",
		},
		"synchronous plugin error with no policy": {
			plugin: func(e *env) string {
				e.sync.err = plugin.Errorf(plugin.InternalError, "no free host port: range 8000-8001 has 2 ports, 2 in use")
				return syncName
			},
			wantMsg:   []string{"network plugin Test-Sync failed (internalError): no free host port: range 8000-8001 has 2 ports, 2 in use", "denied by built-in default (Synchronous)"},
			wantEvent: "Warning internalError",
		},
		"panic becomes internalError": {
			plugin:    func(e *env) string { e.sync.panic = true; return syncName },
			wantMsg:   []string{"(internalError)", "panicked"},
			wantEvent: "Warning internalError",
		},
		"asynchronous plugin made Synchronous by a namespace policy": {
			policies: []*policyv1alpha1.NetworkPluginPolicy{npp(testNS, "strict", func(s *policyv1alpha1.NetworkPluginPolicySpec) {
				s.FailureMode = ptr.To(policyv1alpha1.FailureModeSynchronous)
			})},
			plugin: func(e *env) string {
				e.async.err = plugin.Errorf(plugin.APICallError, "services is forbidden: exceeded quota")
				return asyncNm
			},
			wantMsg:   []string{"(apiCallError)", "denied by policy game/strict@1 (Synchronous)"},
			wantEvent: "Warning apiCallError",
		},
		"failureModeExpression denies a parameterError": {
			policies: []*policyv1alpha1.NetworkPluginPolicy{npp(testNS, "by-error", func(s *policyv1alpha1.NetworkPluginPolicySpec) {
				s.FailureModeExpression = ptr.To("error.type == 'parameterError' ? 'Synchronous' : 'Asynchronous'")
			})},
			plugin: func(e *env) string {
				e.async.err = plugin.ParamErrorf("PortProtocols", "want <port>[/<PROTO>], got %q", "x")
				return asyncNm
			},
			wantMsg:   []string{"(parameterError)", "PortProtocols", "denied by policy game/by-error@1"},
			wantEvent: "Warning parameterError",
		},
		"plugin timeout decided by policy": {
			policies: []*policyv1alpha1.NetworkPluginPolicy{npp(testRoot, "fast", func(s *policyv1alpha1.NetworkPluginPolicySpec) {
				s.Timeout = &metav1.Duration{Duration: 50 * time.Millisecond}
				s.FailureMode = ptr.To(policyv1alpha1.FailureModeSynchronous)
			})},
			plugin:    func(e *env) string { e.async.sleep = 5 * time.Second; return asyncNm },
			wantMsg:   []string{"(timeout)", "did not finish CREATE within 50ms", "denied by policy npp-system/fast@1"},
			wantEvent: "Warning timeout",
		},
	}
	cases["plugin timeout capped by the webhook's own timeout"] = struct {
		policies  []*policyv1alpha1.NetworkPluginPolicy
		plugin    func(e *env) string
		wantMsg   []string
		wantEvent string
	}{
		plugin: func(e *env) string {
			e.sync.sleep = 5 * time.Second // the built-in 8s timeout would let it finish
			e.handler.MaxTimeout = 40 * time.Millisecond
			return syncName
		},
		wantMsg:   []string{"(timeout)", "did not finish CREATE within 40ms", "denied by built-in default"},
		wantEvent: "Warning timeout",
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, tc.policies...)
			pod := gamePod(tc.plugin(e))
			resp := e.handler.Handle(context.Background(), request(t, admissionv1.Create, pod, nil, false))
			if resp.Allowed {
				t.Fatalf("allowed, want denied; warnings %v", resp.Warnings)
			}
			for _, want := range tc.wantMsg {
				if !strings.Contains(resp.Result.Message, want) {
					t.Errorf("message %q does not contain %q", resp.Result.Message, want)
				}
			}
			evs := drain(e.recorder)
			if len(evs) != 1 || !strings.HasPrefix(evs[0], tc.wantEvent) {
				t.Errorf("events = %q, want one starting with %q", evs, tc.wantEvent)
			}
		})
	}
}

func TestAsynchronousAdmitsNotReadyWithRetryState(t *testing.T) {
	e := newEnv(t, npp(testNS, "hostport-async", func(s *policyv1alpha1.NetworkPluginPolicySpec) {
		s.Plugins = []string{syncName}
		s.FailureMode = ptr.To(policyv1alpha1.FailureModeAsynchronous)
		s.ReadinessGate = ptr.To(true)
		s.Retry = &policyv1alpha1.RetryPolicy{
			Window:          &metav1.Duration{Duration: 10 * time.Second},
			Interval:        &metav1.Duration{Duration: 2 * time.Second},
			MaxInterval:     &metav1.Duration{Duration: 4 * time.Second},
			ExhaustedAction: ptr.To(policyv1alpha1.ExhaustedActionRecreate),
		}
	}))
	e.sync.err = plugin.Errorf(plugin.InternalError, "no free host port")
	pod := gamePod(syncName, AnnotationTraceparent, "00-abc-def-01")
	req := request(t, admissionv1.Create, pod, nil, false)
	resp := e.handler.Handle(context.Background(), req)
	got := admitted(t, req, resp)

	if len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], "network plugin Test-Sync failed (internalError): no free host port") ||
		!strings.Contains(resp.Warnings[0], "admitted with network NotReady by policy game/hostport-async@1, retried for 10s") {
		t.Errorf("warnings = %q, want one naming plugin, error, policy and window", resp.Warnings)
	}
	st, err := networkstatus.StatusFromPod(got)
	if err != nil || st == nil || st.CurrentNetworkState != networkstatus.NetworkNotReady {
		t.Errorf("network-status = %+v, %v; want NotReady", st, err)
	}
	state, err := networkretry.FromPod(got)
	if err != nil || state == nil {
		t.Fatalf("retry state = %v, %v", state, err)
	}
	want := &networkretry.State{
		Plugin: syncName, Policy: "game/hostport-async@1",
		Since: metav1.NewTime(testNow), LastAttempt: metav1.NewTime(testNow), Attempts: 1,
		LastError: &networkretry.Error{Type: "internalError", Message: "no free host port", Reason: "Other"},
		Window:    metav1.Duration{Duration: 10 * time.Second}, Interval: metav1.Duration{Duration: 2 * time.Second},
		MaxInterval: metav1.Duration{Duration: 4 * time.Second}, ExhaustedAction: policyv1alpha1.ExhaustedActionRecreate,
	}
	if diff := cmp.Diff(want, state); diff != "" {
		t.Errorf("retry state (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff([]corev1.PodReadinessGate{{ConditionType: policyv1alpha1.ReadinessGateNetworkReady}}, got.Spec.ReadinessGates); diff != "" {
		t.Errorf("readiness gates (-want,+got):\n%s", diff)
	}
	if _, ok := got.Annotations[AnnotationTraceparent]; ok {
		t.Errorf("%s was not removed", AnnotationTraceparent)
	}
	if got, want := got.Annotations[AnnotationDecision], "Asynchronous by policy game/hostport-async@1"; got != want {
		t.Errorf("%s = %q, want %q", AnnotationDecision, got, want)
	}
	if resp.AuditAnnotations["failure-policy"] != "policy game/hostport-async@1" {
		t.Errorf("audit annotations = %v", resp.AuditAnnotations)
	}
	if evs := drain(e.recorder); len(evs) != 1 || !strings.Contains(evs[0], "admitted NotReady by policy game/hostport-async@1") {
		t.Errorf("events = %q", evs)
	}

	// The retry UPDATE (the controller stamped the trigger time) fails again: the window
	// start is kept and the attempt counted.
	e.handler.Clock = clocktesting.NewFakePassiveClock(testNow.Add(2 * time.Second))
	updated := got.DeepCopy()
	updated.Annotations[networkstatus.AnnotationNetworkTriggerTime] = testNow.Add(2 * time.Second).Format(time.RFC3339)
	req = request(t, admissionv1.Update, updated, got, false)
	again := admitted(t, req, e.handler.Handle(context.Background(), req))
	state, _ = networkretry.FromPod(again)
	if state.Attempts != 2 || !state.Since.Time.Equal(testNow) || !state.LastAttempt.Time.Equal(testNow.Add(2*time.Second)) {
		t.Errorf("after the retry: attempts %d since %s lastAttempt %s; want 2, %s, %s", state.Attempts, state.Since, state.LastAttempt, testNow, testNow.Add(2*time.Second))
	}
}

func TestFailureModeExpressionAdmitsAPIErrors(t *testing.T) {
	e := newEnv(t, npp(testNS, "by-error", func(s *policyv1alpha1.NetworkPluginPolicySpec) {
		s.FailureModeExpression = ptr.To("error.type == 'parameterError' ? 'Synchronous' : 'Asynchronous'")
		s.Retry = &policyv1alpha1.RetryPolicy{WindowExpression: ptr.To("error.type == 'apiCallError' ? duration('10m') : duration('1m')")}
	}))
	e.sync.err = plugin.Errorf(plugin.APICallError, "exceeded quota")
	req := request(t, admissionv1.Create, gamePod(syncName), nil, false)
	resp := e.handler.Handle(context.Background(), req)
	got := admitted(t, req, resp)
	state, err := networkretry.FromPod(got)
	if err != nil || state == nil || state.Window.Duration != 10*time.Minute {
		t.Errorf("retry state %+v, %v; want the 10m window of the windowExpression", state, err)
	}
}

func TestSuccess(t *testing.T) {
	t.Run("ready network has no retry state", func(t *testing.T) {
		e := newEnv(t)
		e.async.ready = true
		req := request(t, admissionv1.Create, gamePod(asyncNm), nil, false)
		resp := e.handler.Handle(context.Background(), req)
		got := admitted(t, req, resp)
		if _, ok := got.Annotations[networkretry.Annotation]; ok {
			t.Errorf("a Ready network got a retry state")
		}
		if len(got.Spec.ReadinessGates) != 0 {
			t.Errorf("readiness gate added without a policy asking for it")
		}
		if len(resp.Warnings) != 0 || len(drain(e.recorder)) != 0 {
			t.Errorf("warnings or events on success: %v", resp.Warnings)
		}
	})
	t.Run("not yet ready network starts the window with the default schedule", func(t *testing.T) {
		e := newEnv(t)
		req := request(t, admissionv1.Create, gamePod(asyncNm), nil, false)
		got := admitted(t, req, e.handler.Handle(context.Background(), req))
		state, err := networkretry.FromPod(got)
		if err != nil || state == nil {
			t.Fatalf("retry state %v, %v", state, err)
		}
		if state.LastError != nil || state.Policy != builtInDefault || state.Window.Duration != policy.DefaultWindow {
			t.Errorf("retry state %+v; want no error, built-in default, window %s", state, policy.DefaultWindow)
		}
	})
	t.Run("delete allowed without a run", func(t *testing.T) {
		e := newEnv(t)
		resp := e.handler.Handle(context.Background(), request(t, admissionv1.Delete, gamePod(asyncNm), nil, false))
		if !resp.Allowed || e.async.calls.Load() != 0 {
			t.Errorf("allowed %v, plugin calls %d; want allowed without a call", resp.Allowed, e.async.calls.Load())
		}
	})
}

func TestDryRunRunsNoPluginAndRecordsNoEvent(t *testing.T) {
	e := newEnv(t)
	e.sync.err = plugin.Errorf(plugin.InternalError, "would fail")
	req := request(t, admissionv1.Create, gamePod(syncName), nil, true)
	resp := e.handler.Handle(context.Background(), req)
	admitted(t, req, resp)
	if e.sync.calls.Load() != 0 {
		t.Errorf("plugin ran %d times on a dry run", e.sync.calls.Load())
	}
	if len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], "dry run") {
		t.Errorf("warnings = %v, want the dry-run warning", resp.Warnings)
	}
	if evs := drain(e.recorder); len(evs) != 0 {
		t.Errorf("events on a dry run: %v", evs)
	}
	// A near-miss network type is still denied on a dry run (no side effects, same answer).
	resp = e.handler.Handle(context.Background(), request(t, admissionv1.Create, gamePod("Test-Snyc"), nil, true))
	if resp.Allowed || len(drain(e.recorder)) != 0 {
		t.Errorf("dry run of a near-miss type: allowed %v, or events recorded", resp.Allowed)
	}
}

func TestPodWithoutNetworkTypeIsAllowedUntouched(t *testing.T) {
	e := newEnv(t)
	pod := gamePod("")
	delete(pod.Annotations, networkstatus.AnnotationNetworkType)
	resp := e.handler.Handle(context.Background(), request(t, admissionv1.Create, pod, nil, false))
	if !resp.Allowed || len(resp.Patches) != 0 {
		t.Errorf("allowed %v patches %v; want allowed without a patch", resp.Allowed, resp.Patches)
	}
}

func TestBadRequest(t *testing.T) {
	e := newEnv(t)
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: []byte(`{"spec": 3}`)},
	}}
	resp := e.handler.Handle(context.Background(), req)
	if resp.Allowed || resp.Result.Code != 400 || !strings.Contains(resp.Result.Message, "decode pod") {
		t.Errorf("response %+v, want a 400 naming the decode", resp.Result)
	}
	// A DELETE is never denied, not even an unreadable one.
	req = admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: admissionv1.Delete, OldObject: runtime.RawExtension{Raw: []byte(`{"spec": 3}`)},
	}}
	resp = e.handler.Handle(context.Background(), req)
	if !resp.Allowed {
		t.Errorf("DELETE of an unreadable pod: allowed %v, want allowed", resp.Allowed)
	}
}

func applyJSONPatch(doc, patch []byte) ([]byte, error) {
	p, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		return nil, err
	}
	return p.Apply(doc)
}

// TestDeleteIsNeverDenied: a DELETE that reaches the webhook (the configuration does not send
// them) is allowed without running the plugin, whatever the plugin or the policy would do,
// and records nothing: another admission controller may still refuse the delete, and the
// pod's network objects go by garbage collection once the pod is gone.
func TestDeleteIsNeverDenied(t *testing.T) {
	cases := map[string]struct {
		policies []*policyv1alpha1.NetworkPluginPolicy
		setup    func(e *env) *corev1.Pod
	}{
		"synchronous plugin that would fail": {
			setup: func(e *env) *corev1.Pod {
				e.sync.err = plugin.Errorf(plugin.APICallError, "delete service: etcdserver: request timed out")
				return gamePod(syncName)
			},
		},
		"asynchronous plugin made Synchronous by a policy": {
			policies: []*policyv1alpha1.NetworkPluginPolicy{npp(testNS, "strict", func(s *policyv1alpha1.NetworkPluginPolicySpec) {
				s.FailureMode = ptr.To(policyv1alpha1.FailureModeSynchronous)
			})},
			setup: func(e *env) *corev1.Pod {
				e.async.err = plugin.Errorf(plugin.APICallError, "services is forbidden")
				return gamePod(asyncNm)
			},
		},
		"plugin that would hang": {
			setup: func(e *env) *corev1.Pod { e.sync.sleep = 5 * time.Second; return gamePod(syncName) },
		},
		"plugin that would panic": {
			setup: func(e *env) *corev1.Pod { e.sync.panic = true; return gamePod(syncName) },
		},
		"plugin that would warn": {
			setup: func(e *env) *corev1.Pod { e.sync.err = fixedWarning; return gamePod(syncName) },
		},
		"unknown network type": {
			setup: func(e *env) *corev1.Pod { return gamePod("AlibabaCloud-SLB") },
		},
		"terminating pod": {
			setup: func(e *env) *corev1.Pod {
				pod := gamePod(asyncNm)
				pod.DeletionTimestamp = &metav1.Time{Time: testNow}
				return pod
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, tc.policies...)
			pod := tc.setup(e)
			resp := e.handler.Handle(context.Background(), request(t, admissionv1.Delete, pod, nil, false))
			if !resp.Allowed || len(resp.Patches) != 0 || len(resp.Warnings) != 0 {
				t.Fatalf("allowed %v, patches %v, warnings %q, result %v; want allowed untouched", resp.Allowed, resp.Patches, resp.Warnings, resp.Result)
			}
			if got := e.sync.calls.Load() + e.async.calls.Load(); got != 0 {
				t.Errorf("plugin calls = %d, want none", got)
			}
			if evs := drain(e.recorder); len(evs) != 0 {
				t.Errorf("events = %q, want none", evs)
			}
		})
	}
}

// TestTerminatingPodPassesThrough: an UPDATE of a pod with a deletionTimestamp runs no plugin
// and is allowed without a patch, even when the plugin would fail under a Synchronous
// decision or would succeed and write its status.
func TestTerminatingPodPassesThrough(t *testing.T) {
	for name, setup := range map[string]func(e *env) string{
		"failing synchronous plugin": func(e *env) string {
			e.sync.err = plugin.Errorf(plugin.InternalError, "no free host port")
			return syncName
		},
		"succeeding plugin": func(e *env) string { e.async.ready = true; return asyncNm },
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			old := gamePod(setup(e))
			terminating := old.DeepCopy()
			terminating.DeletionTimestamp = &metav1.Time{Time: testNow}
			terminating.DeletionGracePeriodSeconds = ptr.To[int64](30)
			terminating.Labels = map[string]string{"game.kruise.io/gs-state": "Deleting"}
			resp := e.handler.Handle(context.Background(), request(t, admissionv1.Update, terminating, old, false))
			if !resp.Allowed || len(resp.Patches) != 0 || resp.PatchType != nil {
				t.Errorf("allowed %v, patches %v; want allowed without a patch", resp.Allowed, resp.Patches)
			}
			if n := e.sync.calls.Load() + e.async.calls.Load(); n != 0 {
				t.Errorf("plugin ran %d times for a terminating pod", n)
			}
			if evs := drain(e.recorder); len(evs) != 0 || len(resp.Warnings) != 0 {
				t.Errorf("events %q, warnings %q; want none", evs, resp.Warnings)
			}
		})
	}
}

// TestSynchronousDeniesOnlyNetworkUpdates: under a Synchronous decision a failing plugin
// denies an UPDATE that changes network-type, network-conf or container ports; any other
// UPDATE is admitted with the network NotReady and the retry state, and the event and the
// warning say why the Synchronous mode did not apply.
func TestSynchronousDeniesOnlyNetworkUpdates(t *testing.T) {
	cases := map[string]struct {
		update     func(p *corev1.Pod)
		wantDenied bool
		byManager  bool // the request comes from the manager's own ServiceAccount
	}{
		"trigger stamp": {update: func(p *corev1.Pod) {
			p.Annotations[networkstatus.AnnotationNetworkTriggerTime] = "2026-11-30T12:00:00Z"
		}},
		"retry state write by the manager": {update: func(p *corev1.Pod) {
			p.Annotations[networkretry.Annotation] = `{"plugin":"Test-Sync","exhausted":true}`
		}, byManager: true},
		"labels": {update: func(p *corev1.Pod) { p.Labels = map[string]string{"version": "2"} }},
		"OKG state annotations and network-status": {update: func(p *corev1.Pod) {
			p.Annotations["game.kruise.io/gs-opsState"] = "Maintaining"
			p.Annotations[networkstatus.AnnotationNetworkStatus] = `{"currentNetworkState":"NotReady"}`
		}},
		"in-place image update": {update: func(p *corev1.Pod) { p.Spec.Containers[0].Image = "game:2" }},
		"port protocol spelled out as the default": {update: func(p *corev1.Pod) {
			p.Spec.Containers[0].Ports[1].Protocol = corev1.ProtocolTCP
		}},
		"network-type": {update: func(p *corev1.Pod) {
			p.Annotations[networkstatus.AnnotationNetworkType] = "Test-Snyc" // a near-miss: a parameterError
		}, wantDenied: true},
		"network-conf changed": {update: func(p *corev1.Pod) {
			p.Annotations[networkstatus.AnnotationNetworkConf] = `[{"name":"ContainerPorts","value":"game:7777/TCP"}]`
		}, wantDenied: true},
		"network-conf removed": {update: func(p *corev1.Pod) {
			delete(p.Annotations, networkstatus.AnnotationNetworkConf)
		}, wantDenied: true},
		"host port":      {update: func(p *corev1.Pod) { p.Spec.Containers[0].Ports[0].HostPort = 8001 }, wantDenied: true},
		"container port": {update: func(p *corev1.Pod) { p.Spec.Containers[0].Ports[1].ContainerPort = 9091 }, wantDenied: true},
		"port name":      {update: func(p *corev1.Pod) { p.Spec.Containers[0].Ports[1].Name = "stats" }, wantDenied: true},
		"port protocol":  {update: func(p *corev1.Pod) { p.Spec.Containers[0].Ports[0].Protocol = corev1.ProtocolTCP }, wantDenied: true},
		"port added": {update: func(p *corev1.Pod) {
			p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, corev1.ContainerPort{ContainerPort: 80})
		}, wantDenied: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			e.sync.err = plugin.Errorf(plugin.InternalError, "no free host port")
			old := gamePod(syncName, networkstatus.AnnotationNetworkConf, `[{"name":"ContainerPorts","value":"game:7777/UDP"}]`,
				networkstatus.AnnotationNetworkTriggerTime, "2026-11-30T11:59:00Z")
			old.Spec.Containers[0].Ports = []corev1.ContainerPort{
				{Name: "game", ContainerPort: 7777, HostPort: 8000, Protocol: corev1.ProtocolUDP},
				{Name: "metrics", ContainerPort: 9090},
			}
			updated := old.DeepCopy()
			tc.update(updated)
			req := request(t, admissionv1.Update, updated, old, false)
			if tc.byManager {
				e.handler.ManagerUsername = "system:serviceaccount:npp-system:npp-manager"
				req.UserInfo.Username = e.handler.ManagerUsername
			}
			resp := e.handler.Handle(context.Background(), req)
			evs := drain(e.recorder)
			if tc.wantDenied {
				if resp.Allowed || !strings.Contains(resp.Result.Message, "denied by built-in default (Synchronous)") {
					t.Errorf("allowed %v, result %v; want denied by the built-in Synchronous default", resp.Allowed, resp.Result)
				}
				if len(evs) != 1 || strings.Contains(evs[0], notANetworkChange) {
					t.Errorf("events = %q, want one denial", evs)
				}
				return
			}
			got := admitted(t, req, resp)
			if st, _ := networkretry.FromPod(got); st == nil || st.LastError == nil || st.LastError.Type != "internalError" {
				t.Errorf("retry state = %+v, want the internalError recorded", st)
			}
			if st, _ := networkstatus.StatusFromPod(got); st == nil || st.CurrentNetworkState != networkstatus.NetworkNotReady {
				t.Errorf("network-status = %+v, want NotReady", st)
			}
			want := "admitted NotReady by built-in default" + notANetworkChange
			if len(evs) != 1 || !strings.Contains(evs[0], want) {
				t.Errorf("events = %q, want one containing %q", evs, want)
			}
			if len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], "by built-in default"+notANetworkChange) {
				t.Errorf("warnings = %q, want one saying why the Synchronous mode did not apply", resp.Warnings)
			}
			if got, want := got.Annotations[AnnotationDecision], "Synchronous by built-in default"; got != want {
				t.Errorf("%s = %q, want %q (the mode in force, not the exception)", AnnotationDecision, got, want)
			}
			if diff := cmp.Diff(updated.Spec.Containers, got.Spec.Containers); diff != "" {
				t.Errorf("containers changed (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestAuthoredNetworkStatusDroppedAtCreate: a new pod's network-status is the plugin's to
// write; one its author wrote (a forged Ready, or a manifest copied from a running pod) is
// dropped with a warning, so that it neither publishes another pod's address nor opens a
// readiness gate with no network behind it. OKG keeps it (a deliberate difference).
func TestAuthoredNetworkStatusDroppedAtCreate(t *testing.T) {
	forged := `{"currentNetworkState":"Ready","externalAddresses":[{"ip":"203.0.113.7","ports":[{"name":"game","port":31000}]}]}`
	e := newEnv(t)
	req := request(t, admissionv1.Create, gamePod(asyncNm, networkstatus.AnnotationNetworkStatus, forged), nil, false)
	resp := e.handler.Handle(context.Background(), req)
	got := admitted(t, req, resp)
	if st, ok := got.Annotations[networkstatus.AnnotationNetworkStatus]; ok && st == forged {
		t.Errorf("the author's network-status was kept: %s", st)
	}
	if !slices.Contains(resp.Warnings, AuthoredStatusWarning) {
		t.Errorf("warnings %q, want %q", resp.Warnings, AuthoredStatusWarning)
	}
}

// TestReadyRunRemovesTheRetryState: a run that turns the network Ready removes the retry
// state in the same write, with the status digest, so the network controller does not write
// the pod again to end the retry; a Ready status the manager did not write (the request
// brought it and the plugin left it) and a dry run keep the state.
func TestReadyRunRemovesTheRetryState(t *testing.T) {
	e := newEnv(t)
	req := request(t, admissionv1.Create, gamePod(asyncNm), nil, false)
	created := admitted(t, req, e.handler.Handle(context.Background(), req))
	if _, ok := created.Annotations[networkretry.Annotation]; !ok {
		t.Fatal("a NotReady network at CREATE got no retry state")
	}
	stamped := func(from *corev1.Pod) *corev1.Pod {
		p := from.DeepCopy()
		p.Annotations[networkstatus.AnnotationNetworkTriggerTime] = testNow.Format(time.RFC3339)
		return p
	}

	t.Run("the plugin's Ready", func(t *testing.T) {
		e.async.ready, e.async.keep = true, false
		req := request(t, admissionv1.Update, stamped(created), created, false)
		got := admitted(t, req, e.handler.Handle(context.Background(), req))
		if !networkstatus.IsReady(got) || !WroteStatus(got) {
			t.Fatalf("network-status %q, want the manager's Ready", got.Annotations[networkstatus.AnnotationNetworkStatus])
		}
		if v, ok := got.Annotations[networkretry.Annotation]; ok {
			t.Errorf("retry state %s kept, want it removed with the Ready status", v)
		}
	})
	t.Run("a Ready status the manager did not write", func(t *testing.T) {
		e.async.ready, e.async.keep = false, true
		forged := stamped(created)
		forged.Annotations[networkstatus.AnnotationNetworkStatus] = `{"currentNetworkState":"Ready","networkType":"` + asyncNm + `"}`
		req := request(t, admissionv1.Update, forged, created, false)
		got := admitted(t, req, e.handler.Handle(context.Background(), req))
		if got.Annotations[networkretry.Annotation] != created.Annotations[networkretry.Annotation] {
			t.Errorf("retry state %q, want the stored %q: the status is not the manager's", got.Annotations[networkretry.Annotation], created.Annotations[networkretry.Annotation])
		}
	})
	t.Run("dry run", func(t *testing.T) {
		e.async.ready, e.async.keep = true, false
		req := request(t, admissionv1.Update, stamped(created), created, true)
		got := admitted(t, req, e.handler.Handle(context.Background(), req))
		if _, ok := got.Annotations[networkretry.Annotation]; !ok {
			t.Error("a dry run removed the retry state")
		}
	})
}
