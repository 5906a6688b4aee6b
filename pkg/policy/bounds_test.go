package policy

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
)

func bound(b v1alpha1.PolicyBounds) policyOption {
	return func(p *v1alpha1.NetworkPluginPolicy) { p.Spec.Bounds = &b }
}

func dur(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }

func TestResolveBounds(t *testing.T) {
	pod := newPod("game", "lobby-0", "app", "lobby")
	ns := newNamespace("game", "env", "prod")
	sync, async := v1alpha1.FailureModeSynchronous, v1alpha1.FailureModeAsynchronous
	event, recreate := v1alpha1.ExhaustedActionEvent, v1alpha1.ExhaustedActionRecreate
	required := v1alpha1.ReadinessGateRequired
	greedy := retry(v1alpha1.RetryPolicy{Window: dur(8760 * time.Hour), Interval: dur(time.Millisecond), MaxInterval: dur(time.Second),
		ExhaustedAction: &recreate})
	allBounds := bound(v1alpha1.PolicyBounds{FailureModes: []v1alpha1.FailureMode{sync}, MinInterval: dur(time.Second),
		MaxWindow: dur(10 * time.Minute), ExhaustedActions: []v1alpha1.ExhaustedAction{event}, ReadinessGate: &required})
	cases := map[string]struct {
		policies  []*v1alpha1.NetworkPluginPolicy
		pluginErr *PluginError
		namespace string
		unknownNS bool // the pod's Namespace could not be read
		want      summary
		wantCaps  []string
		wantNotes []string // substrings of the explanation's notes
	}{
		"tenant beyond every bound is capped": {
			policies: []*v1alpha1.NetworkPluginPolicy{
				newPolicy(testRoot, "bounds", plugins("Kubernetes-HostPort"), allBounds),
				newPolicy("game", "p", mode(async), readinessGate(false), greedy),
			},
			want: summary{Mode: sync, Timeout: DefaultTimeout, ReadinessGate: true,
				Retry: RetrySchedule{Window: 10 * time.Minute, Interval: time.Second, MaxInterval: time.Second, ExhaustedAction: event},
				Sources: [4]string{"game/p@1 (capped by root policy npp-system/bounds@1)", "default",
					"game/p@1 (capped by root policy npp-system/bounds@1)", "game/p@1 (capped by root policy npp-system/bounds@1)"}},
			wantCaps: []string{
				"failureMode Asynchronous of game/p@1 capped to Synchronous by root policy npp-system/bounds@1",
				"readinessGate false of game/p@1 capped to true by root policy npp-system/bounds@1",
				"retry.window 8760h0m0s of game/p@1 capped to 10m0s by root policy npp-system/bounds@1",
				"retry.interval 1ms of game/p@1 capped to 1s by root policy npp-system/bounds@1",
				"retry.exhaustedAction Recreate of game/p@1 capped to Event by root policy npp-system/bounds@1",
			},
		},
		"failureModeExpression result is capped": {
			policies: []*v1alpha1.NetworkPluginPolicy{
				newPolicy(testRoot, "bounds", bound(v1alpha1.PolicyBounds{FailureModes: []v1alpha1.FailureMode{sync}})),
				newPolicy("game", "p", modeExpr("'Asynchronous'")),
			},
			pluginErr: &PluginError{Type: "apiCallError"},
			want: with(defaults(sync), func(s *summary) {
				s.Sources[0] = "game/p@1 (capped by root policy npp-system/bounds@1)"
			}),
			wantCaps: []string{"failureMode Asynchronous of game/p@1 capped to Synchronous by root policy npp-system/bounds@1"},
		},
		"within bounds: nothing capped": {
			policies: []*v1alpha1.NetworkPluginPolicy{
				newPolicy(testRoot, "bounds", allBounds),
				newPolicy("game", "p", mode(sync), readinessGate(true), retry(v1alpha1.RetryPolicy{Window: dur(5 * time.Minute)})),
			},
			want: with(defaults(sync), func(s *summary) {
				s.ReadinessGate = true
				s.Retry.Window = 5 * time.Minute
				s.Sources = [4]string{"game/p@1", "default", "game/p@1", "game/p@1"}
			}),
		},
		"root policies and defaults are not capped": {
			policies: []*v1alpha1.NetworkPluginPolicy{
				newPolicy(testRoot, "bounds", allBounds),
				newPolicy(testRoot, "root", mode(async), retry(v1alpha1.RetryPolicy{Window: dur(time.Hour)})),
			},
			want: with(defaults(async), func(s *summary) {
				s.Retry.Window = time.Hour
				s.Sources = [4]string{"npp-system/root@1", "default", "default", "npp-system/root@1"}
			}),
		},
		"bounds of a root policy naming another plugin do not apply": {
			policies: []*v1alpha1.NetworkPluginPolicy{
				newPolicy(testRoot, "bounds", plugins("Kubernetes-NodePort"), allBounds),
				newPolicy("game", "p", mode(async)),
			},
			want: with(defaults(async), func(s *summary) { s.Sources[0] = "game/p@1" }),
		},
		"bounds of a root policy whose podSelector does not match do not apply": {
			policies: []*v1alpha1.NetworkPluginPolicy{
				newPolicy(testRoot, "bounds", podSelector("app", "arena"), allBounds),
				newPolicy("game", "p", mode(async)),
			},
			want: with(defaults(async), func(s *summary) { s.Sources[0] = "game/p@1" }),
		},
		"bounds with a false matchCondition do not apply": {
			policies: []*v1alpha1.NetworkPluginPolicy{
				newPolicy(testRoot, "bounds", matchCondition("prod", "namespaceObject.metadata.labels.env == 'dev'"), allBounds),
				newPolicy("game", "p", mode(async)),
			},
			want: with(defaults(async), func(s *summary) { s.Sources[0] = "game/p@1" }),
		},
		"bounds whose matchCondition errors apply (fail closed)": {
			// The pod has no label tier: the condition fails at runtime (no such key), and
			// the pod's author controls that label.
			policies: []*v1alpha1.NetworkPluginPolicy{
				newPolicy(testRoot, "bounds", matchCondition("not-dev", "object.metadata.labels['tier'] != 'dev'"),
					bound(v1alpha1.PolicyBounds{ExhaustedActions: []v1alpha1.ExhaustedAction{event}})),
				newPolicy("game", "p", mode(async), retry(v1alpha1.RetryPolicy{ExhaustedAction: &recreate})),
			},
			want: with(defaults(async), func(s *summary) {
				s.Sources[0] = "game/p@1"
				s.Sources[3] = "game/p@1 (capped by root policy npp-system/bounds@1)"
			}),
			wantCaps:  []string{"retry.exhaustedAction Recreate of game/p@1 capped to Event by root policy npp-system/bounds@1"},
			wantNotes: []string{"bounds of root policy npp-system/bounds@1 applied although its matchConditions could not be evaluated (matchCondition failed: matchCondition not-dev: ", "bounds fail closed"},
		},
		"bounds whose matchConditions error and are false do not apply": {
			// Admission semantics: a false condition excludes the pod whatever another
			// condition's error says.
			policies: []*v1alpha1.NetworkPluginPolicy{
				newPolicy(testRoot, "bounds", matchCondition("not-dev", "object.metadata.labels['tier'] != 'dev'"),
					matchCondition("prod", "namespaceObject.metadata.labels.env == 'dev'"),
					bound(v1alpha1.PolicyBounds{ExhaustedActions: []v1alpha1.ExhaustedAction{event}})),
				newPolicy("game", "p", mode(async), retry(v1alpha1.RetryPolicy{ExhaustedAction: &recreate})),
			},
			want: with(defaults(async), func(s *summary) {
				s.Retry.ExhaustedAction = recreate
				s.Sources[0] = "game/p@1"
				s.Sources[3] = "game/p@1"
			}),
		},
		"window capped below the tenant's interval: interval within the cap": {
			policies: []*v1alpha1.NetworkPluginPolicy{
				newPolicy(testRoot, "bounds", bound(v1alpha1.PolicyBounds{MaxWindow: dur(20 * time.Second)})),
				newPolicy("game", "p", retry(v1alpha1.RetryPolicy{Window: dur(time.Hour), Interval: dur(30 * time.Second), MaxInterval: dur(time.Minute)})),
			},
			want: with(defaults(sync), func(s *summary) {
				s.Retry = RetrySchedule{Window: 20 * time.Second, Interval: 10 * time.Second, MaxInterval: 20 * time.Second, ExhaustedAction: event}
				s.Sources[3] = "game/p@1 (capped by root policy npp-system/bounds@1)"
			}),
			wantCaps: []string{"retry.window 1h0m0s of game/p@1 capped to 20s by root policy npp-system/bounds@1"},
		},
		"two bounds: both apply, the most specific last": {
			policies: []*v1alpha1.NetworkPluginPolicy{
				newPolicy(testRoot, "a-all", bound(v1alpha1.PolicyBounds{MaxWindow: dur(10 * time.Minute), FailureModes: []v1alpha1.FailureMode{async}})),
				newPolicy(testRoot, "b-lobby", podSelector("app", "lobby"), bound(v1alpha1.PolicyBounds{MinInterval: dur(2 * time.Second), FailureModes: []v1alpha1.FailureMode{sync}})),
				newPolicy("game", "p", mode(async), greedy),
			},
			want: with(defaults(sync), func(s *summary) {
				s.Retry = RetrySchedule{Window: 10 * time.Minute, Interval: 2 * time.Second, MaxInterval: 2 * time.Second, ExhaustedAction: recreate}
				s.Sources[0] = "game/p@1 (capped by root policy npp-system/b-lobby@1)"
				s.Sources[3] = "game/p@1 (capped by root policy npp-system/b-lobby@1)"
			}),
			wantCaps: []string{
				"retry.window 8760h0m0s of game/p@1 capped to 10m0s by root policy npp-system/a-all@1",
				"failureMode Asynchronous of game/p@1 capped to Synchronous by root policy npp-system/b-lobby@1",
				"retry.interval 1ms of game/p@1 capped to 2s by root policy npp-system/b-lobby@1",
				"retry.maxInterval 1s of game/p@1 capped to 2s by root policy npp-system/b-lobby@1",
			},
		},
		"bounds whose namespaceSelector cannot be matched apply (fail closed)": {
			// The Namespace could not be read (a lagging cache, RBAC): the root bound that
			// selects prod namespaces applies, while a root default of the same selector
			// does not match, and the tenant's policy is capped.
			unknownNS: true,
			policies: []*v1alpha1.NetworkPluginPolicy{
				newPolicy(testRoot, "bounds", namespaceSelector("env", "prod"),
					bound(v1alpha1.PolicyBounds{ExhaustedActions: []v1alpha1.ExhaustedAction{event}})),
				newPolicy(testRoot, "prod-default", namespaceSelector("env", "prod"), timeout(3*time.Second)),
				newPolicy("game", "p", mode(async), retry(v1alpha1.RetryPolicy{ExhaustedAction: &recreate})),
			},
			want: with(defaults(async), func(s *summary) {
				s.Sources[0] = "game/p@1"
				s.Sources[3] = "game/p@1 (capped by root policy npp-system/bounds@1)"
			}),
			wantCaps:  []string{"retry.exhaustedAction Recreate of game/p@1 capped to Event by root policy npp-system/bounds@1"},
			wantNotes: []string{"bounds of root policy npp-system/bounds@1 applied although its namespaceSelector could not be evaluated (namespaceSelector not evaluated: the pod's Namespace could not be read)", "bounds fail closed"},
		},
		"pod in the root namespace: its policies are not capped": {
			namespace: testRoot,
			policies: []*v1alpha1.NetworkPluginPolicy{
				newPolicy(testRoot, "bounds", allBounds),
				newPolicy(testRoot, "p", podSelector("app", "lobby"), mode(async)),
			},
			want: with(defaults(async), func(s *summary) { s.Sources[0] = "npp-system/p@1" }),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			store := newTestStore(t, tc.policies...)
			for _, p := range tc.policies {
				if res, _ := store.Result(p.Namespace, p.Name); !res.Accepted() {
					t.Fatalf("policy %s/%s not accepted: %v", p.Namespace, p.Name, res.Errors)
				}
			}
			p, n := pod, ns
			if tc.namespace != "" {
				p = newPod(tc.namespace, "lobby-0", "app", "lobby")
				n = newNamespace(tc.namespace)
			}
			if tc.unknownNS {
				n = nil
			}
			d, err := NewResolver(store).Resolve(context.Background(), Input{Pod: p, Namespace: n, NamespaceUnknown: tc.unknownNS, Plugin: hostPort,
				Error: tc.pluginErr, Request: RequestInfo{Operation: "CREATE"}})
			if err != nil {
				t.Fatalf("Resolve(): %v", err)
			}
			got := summarize(d)
			got.Losers = nil
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("decision (-want,+got):\n%s\nexplanation: %s", diff, d.Explanation)
			}
			var caps []string
			for _, c := range d.Explanation.Caps {
				caps = append(caps, c.String())
			}
			if diff := cmp.Diff(tc.wantCaps, caps); diff != "" {
				t.Errorf("caps (-want,+got):\n%s", diff)
			}
			for _, c := range caps {
				if !strings.Contains(d.Explanation.String(), c) {
					t.Errorf("explanation %q does not say %q", d.Explanation, c)
				}
			}
			notes := strings.Join(d.Explanation.Notes, "\n")
			for _, n := range tc.wantNotes {
				if !strings.Contains(notes, n) {
					t.Errorf("explanation notes %q do not say %q", notes, n)
				}
			}
		})
	}
}

// TestEmptyPodSelectorCountsAsUnset: a policy with podSelector {} is not more specific than
// one without: the higher priority wins.
func TestEmptyPodSelectorCountsAsUnset(t *testing.T) {
	empty := newPolicy("game", "a-empty", timeout(time.Second), func(p *v1alpha1.NetworkPluginPolicy) {
		p.Spec.PodSelector = &metav1.LabelSelector{}
	})
	plain := newPolicy("game", "b-plain", timeout(2*time.Second), priority(1))
	d, err := NewResolver(newTestStore(t, empty, plain)).Resolve(context.Background(), Input{Pod: newPod("game", "x"), Plugin: nodePort})
	if err != nil {
		t.Fatalf("Resolve(): %v", err)
	}
	if diff := cmp.Diff("game/b-plain@1", d.Explanation.Timeout.String()); diff != "" {
		t.Errorf("timeout source (-want,+got):\n%s", diff)
	}
}

func TestCompileBoundsOnlyInRoot(t *testing.T) {
	_, res := Compile(newPolicy("game", "p", bound(v1alpha1.PolicyBounds{MaxWindow: dur(time.Minute)})),
		CompileOptions{RootNamespace: testRoot, EnvType: environment.NewExpressions})
	if res.Reason != v1alpha1.ReasonInvalidSpec || len(res.Errors) != 1 || res.Errors[0].Field != "spec.bounds" {
		t.Fatalf("Compile() = %s %v, want InvalidSpec at spec.bounds", res.Reason, res.Errors)
	}
	if _, res := Compile(newPolicy(testRoot, "p", bound(v1alpha1.PolicyBounds{MaxWindow: dur(time.Minute)})),
		CompileOptions{RootNamespace: testRoot}); !res.Accepted() {
		t.Fatalf("Compile() in the root namespace = %s %v, want Accepted", res.Reason, res.Errors)
	}
}

// TestRootBoundsOutliveACompileFailure: bounds fail closed across generations. A root policy
// with bounds whose next generation does not compile keeps the bounds and selection of its
// last good generation (reported as KeptGeneration, with the new generation's errors); the
// decision groups it set are no longer supplied. A tenant policy, or a root policy without
// bounds, that stops compiling is dropped as before; a kept generation goes with the policy.
func TestRootBoundsOutliveACompileFailure(t *testing.T) {
	ctx := context.Background()
	event, recreate := v1alpha1.ExhaustedActionEvent, v1alpha1.ExhaustedActionRecreate
	root := newPolicy(testRoot, "bounds", matchCondition("all", "true"), timeout(7*time.Second),
		bound(v1alpha1.PolicyBounds{ExhaustedActions: []v1alpha1.ExhaustedAction{event}}))
	plain := newPolicy(testRoot, "plain", readinessGate(true))
	tenant := newPolicy("game", "p", retry(v1alpha1.RetryPolicy{ExhaustedAction: &recreate}))
	store := newTestStore(t, root, plain, tenant)
	resolve := func() Decision {
		t.Helper()
		d, err := NewResolver(store).Resolve(ctx, Input{Pod: newPod("game", "gs-0"), Namespace: newNamespace("game"), Plugin: nodePort,
			Request: RequestInfo{Operation: "CREATE"}})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if d := resolve(); d.Retry.ExhaustedAction != event || d.Timeout != 7*time.Second || !d.ReadinessGate {
		t.Fatalf("before: exhaustedAction %s, timeout %s, readinessGate %t; want Event (capped), 7s, true", d.Retry.ExhaustedAction, d.Timeout, d.ReadinessGate)
	}

	h := store.Handler(ctx)
	broken := func(p *v1alpha1.NetworkPluginPolicy) *v1alpha1.NetworkPluginPolicy {
		b := p.DeepCopy()
		b.Generation = 2
		matchCondition("bad", "object.metadata.labels[")(b)
		h.OnUpdate(p, b)
		return b
	}
	brokenRoot, brokenPlain, brokenTenant := broken(root), broken(plain), broken(tenant)

	res, _ := store.Result(testRoot, "bounds")
	if res.Accepted() || res.Reason != v1alpha1.ReasonInvalidExpression || res.KeptGeneration != 1 || res.Generation != 2 {
		t.Errorf("root with bounds: result %+v, want InvalidExpression for generation 2 with KeptGeneration 1", res)
	}
	for _, key := range [][2]string{{testRoot, "plain"}, {"game", "p"}} {
		if res, _ := store.Result(key[0], key[1]); res.Accepted() || res.KeptGeneration != 0 {
			t.Errorf("%s/%s: result %+v, want not accepted and nothing kept", key[0], key[1], res)
		}
	}
	def := defaultDecision(nodePort)
	d := resolve()
	if d.Retry.ExhaustedAction != def.Retry.ExhaustedAction || d.Timeout != def.Timeout || d.ReadinessGate != def.ReadinessGate {
		// The tenant policy and the plain root policy are gone: built-in defaults.
		t.Errorf("after: exhaustedAction %s, timeout %s, readinessGate %t; want the defaults", d.Retry.ExhaustedAction, d.Timeout, d.ReadinessGate)
	}
	// The tenant policy compiles again; the root's bounds of generation 1 still cap it.
	fixed := tenant.DeepCopy()
	fixed.Generation = 3
	h.OnUpdate(brokenTenant, fixed)
	d = resolve()
	if d.Retry.ExhaustedAction != event || !strings.Contains(d.Explanation.String(), "capped to Event by root policy "+testRoot+"/bounds@1") {
		t.Errorf("tenant fixed: exhaustedAction %s, explanation %q; want Event capped by root policy %s/bounds@1", d.Retry.ExhaustedAction, d.Explanation, testRoot)
	}
	if d.Timeout != def.Timeout {
		t.Errorf("timeout %s: the broken root policy's groups must not be supplied by its kept bounds, want %s", d.Timeout, def.Timeout)
	}
	// Deleted: nothing is kept.
	h.OnDelete(brokenRoot)
	h.OnDelete(brokenPlain)
	if d := resolve(); d.Retry.ExhaustedAction != recreate {
		t.Errorf("root deleted: exhaustedAction %s, want Recreate (no bounds left)", d.Retry.ExhaustedAction)
	}
}

// TestRootBoundsOfABrokenPolicyAfterARestart: a process that never saw a good generation of
// a root policy with bounds (it started after the broken generation was stored, as after an
// upgrade that changed the CEL environment) applies that generation's bounds without its
// expressions, to every pod its plugins and selectors select, and reports it.
func TestRootBoundsOfABrokenPolicyAfterARestart(t *testing.T) {
	event, recreate := v1alpha1.ExhaustedActionEvent, v1alpha1.ExhaustedActionRecreate
	broken := newPolicy(testRoot, "bounds", plugins("Kubernetes-NodePort"), matchCondition("bad", "object.metadata.labels["),
		bound(v1alpha1.PolicyBounds{ExhaustedActions: []v1alpha1.ExhaustedAction{event}}))
	tenant := newPolicy("game", "p", retry(v1alpha1.RetryPolicy{ExhaustedAction: &recreate}))
	store := newTestStore(t, broken, tenant)
	res, _ := store.Result(testRoot, "bounds")
	if res.Accepted() || !res.BoundsWithoutConditions || res.KeptGeneration != 0 {
		t.Errorf("result %+v, want not accepted, BoundsWithoutConditions", res)
	}
	for _, pl := range []Plugin{nodePort, hostPort} {
		d, err := NewResolver(store).Resolve(context.Background(), Input{Pod: newPod("game", "gs-0"), Namespace: newNamespace("game"), Plugin: pl,
			Request: RequestInfo{Operation: "CREATE"}})
		if err != nil {
			t.Fatal(err)
		}
		want := event // capped: the bound's plugins select NodePort
		if pl == hostPort {
			want = recreate // not selected by the bound's plugins
		}
		if d.Retry.ExhaustedAction != want {
			t.Errorf("%s: exhaustedAction %s, want %s", pl.Name, d.Retry.ExhaustedAction, want)
		}
	}
}
