package policy

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
)

// summary is the comparable part of a Decision.
type summary struct {
	Mode          v1alpha1.FailureMode
	Timeout       time.Duration
	ReadinessGate bool
	Retry         RetrySchedule
	Sources       [4]string // failure, timeout, readinessGate, retry
	Losers        []string  // "ns/name@gen: reason[ condition]"
}

func summarize(d Decision) summary {
	e := d.Explanation
	s := summary{
		Mode: d.Mode, Timeout: d.Timeout, ReadinessGate: d.ReadinessGate, Retry: d.Retry,
		Sources: [4]string{e.Failure.String(), e.Timeout.String(), e.ReadinessGate.String(), e.Retry.String()},
	}
	for _, l := range e.Losers {
		entry := l.Policy.String() + ": " + string(l.Reason)
		if l.Condition != "" {
			entry += " " + l.Condition
		}
		s.Losers = append(s.Losers, entry)
	}
	return s
}

var defaultRetry = RetrySchedule{Window: DefaultWindow, Interval: DefaultInterval, MaxInterval: DefaultMaxInterval, ExhaustedAction: v1alpha1.ExhaustedActionEvent}

func defaults(m v1alpha1.FailureMode) summary {
	return summary{Mode: m, Timeout: DefaultTimeout, Retry: defaultRetry, Sources: [4]string{"default", "default", "default", "default"}}
}

func with(s summary, f func(*summary)) summary {
	f(&s)
	return s
}

func TestResolve(t *testing.T) {
	pod := newPod("game", "lobby-0", "app", "lobby")
	ns := newNamespace("game", "env", "prod")
	pluginErr := &PluginError{Type: "parameterError", Message: "bad port"}
	cases := map[string]struct {
		policies  []*v1alpha1.NetworkPluginPolicy
		plugin    Plugin
		pod       *corev1.Pod
		pluginErr *PluginError
		want      summary
		wantNotes []string // substrings of the notes; none means no notes
		wantEval  float64  // npp_cel_evaluation_errors_total of game/p
	}{
		"no policy: asynchronous plugin defaults": {
			plugin: nodePort,
			want:   defaults(v1alpha1.FailureModeAsynchronous),
		},
		"no policy: synchronous plugin defaults": {
			plugin: hostPort,
			want:   defaults(v1alpha1.FailureModeSynchronous),
		},
		"own namespace beats root": {
			policies: []*v1alpha1.NetworkPluginPolicy{
				newPolicy(testRoot, "root", mode(v1alpha1.FailureModeSynchronous), priority(100)),
				newPolicy("game", "own", mode(v1alpha1.FailureModeAsynchronous)),
			},
			plugin: hostPort,
			want: with(defaults(v1alpha1.FailureModeAsynchronous), func(s *summary) {
				s.Sources[0] = "game/own@1"
				s.Losers = []string{"npp-system/root@1: outranked"}
			}),
		},
		"other namespaces do not apply": {
			policies: []*v1alpha1.NetworkPluginPolicy{newPolicy("other", "p", timeout(time.Second))},
			plugin:   nodePort,
			want:     defaults(v1alpha1.FailureModeAsynchronous),
		},
		"podSelector beats none, non-matching podSelector loses": {
			policies: []*v1alpha1.NetworkPluginPolicy{
				newPolicy("game", "c-plain", timeout(1*time.Second)),
				newPolicy("game", "b-lobby", timeout(2*time.Second), podSelector("app", "lobby")),
				newPolicy("game", "a-arena", timeout(3*time.Second), podSelector("app", "arena")),
			},
			plugin: nodePort,
			want: with(defaults(v1alpha1.FailureModeAsynchronous), func(s *summary) {
				s.Timeout = 2 * time.Second
				s.Sources[1] = "game/b-lobby@1"
				s.Losers = []string{"game/a-arena@1: podSelector does not match", "game/c-plain@1: outranked"}
			}),
		},
		"name beats alias beats wildcard": {
			policies: []*v1alpha1.NetworkPluginPolicy{
				newPolicy("game", "a-any", plugins("*"), timeout(1*time.Second), readinessGate(true), priority(9)),
				newPolicy("game", "b-alias", plugins("NodePort-Network"), timeout(2*time.Second), retry(v1alpha1.RetryPolicy{Window: &metavDuration5m}), priority(5)),
				newPolicy("game", "c-name", plugins("Kubernetes-NodePort", "NodePort-Network"), timeout(3*time.Second)),
			},
			plugin: nodePort,
			want: with(defaults(v1alpha1.FailureModeAsynchronous), func(s *summary) {
				s.Timeout = 3 * time.Second
				s.ReadinessGate = true
				s.Retry.Window = 5 * time.Minute
				s.Sources = [4]string{"default", "game/c-name@1", "game/a-any@1", "game/b-alias@1"}
			}),
		},
		"priority breaks ties": {
			policies: []*v1alpha1.NetworkPluginPolicy{
				newPolicy("game", "a", timeout(1*time.Second)),
				newPolicy("game", "b", timeout(2*time.Second), priority(1)),
			},
			plugin: nodePort,
			want: with(defaults(v1alpha1.FailureModeAsynchronous), func(s *summary) {
				s.Timeout = 2 * time.Second
				s.Sources[1] = "game/b@1"
				s.Losers = []string{"game/a@1: outranked"}
			}),
		},
		"equal specificity and priority: ordered by name": {
			policies: []*v1alpha1.NetworkPluginPolicy{
				newPolicy("game", "zeta", timeout(1*time.Second)),
				newPolicy("game", "alpha", timeout(2*time.Second)),
				newPolicy("game", "mid", timeout(3*time.Second)),
			},
			plugin: nodePort,
			want: with(defaults(v1alpha1.FailureModeAsynchronous), func(s *summary) {
				s.Timeout = 2 * time.Second
				s.Sources[1] = "game/alpha@1"
				s.Losers = []string{"game/mid@1: outranked", "game/zeta@1: outranked"}
			}),
		},
		"groups merged from different policies": {
			policies: []*v1alpha1.NetworkPluginPolicy{
				newPolicy(testRoot, "root", mode(v1alpha1.FailureModeSynchronous), retry(v1alpha1.RetryPolicy{Interval: &metavDuration10s})),
				newPolicy("game", "own", timeout(4*time.Second)),
			},
			plugin: nodePort,
			want: with(defaults(v1alpha1.FailureModeSynchronous), func(s *summary) {
				s.Timeout = 4 * time.Second
				s.Retry.Interval = 10 * time.Second // window, maxInterval, exhaustedAction: defaults of the same group
				s.Sources = [4]string{"npp-system/root@1", "game/own@1", "default", "npp-system/root@1"}
			}),
		},
		"namespaceSelector on a root policy": {
			policies: []*v1alpha1.NetworkPluginPolicy{
				newPolicy(testRoot, "prod", timeout(1*time.Second), namespaceSelector("env", "prod")),
				newPolicy(testRoot, "staging", readinessGate(true), namespaceSelector("env", "staging")),
			},
			plugin: nodePort,
			want: with(defaults(v1alpha1.FailureModeAsynchronous), func(s *summary) {
				s.Timeout = 1 * time.Second
				s.Sources[1] = "npp-system/prod@1"
				s.Losers = []string{"npp-system/staging@1: namespaceSelector does not match"}
			}),
		},
		"matchCondition false": {
			policies: []*v1alpha1.NetworkPluginPolicy{
				newPolicy("game", "p", timeout(1*time.Second), matchCondition("is-arena", "object.metadata.labels.app == 'arena'")),
			},
			plugin: nodePort,
			want: with(defaults(v1alpha1.FailureModeAsynchronous), func(s *summary) {
				s.Losers = []string{"game/p@1: matchCondition is false is-arena"}
			}),
		},
		"matchConditions all true": {
			policies: []*v1alpha1.NetworkPluginPolicy{
				newPolicy("game", "p", timeout(1*time.Second),
					matchCondition("not-canary", "!('canary' in object.metadata.labels)"),
					matchCondition("prod", "namespaceObject.metadata.labels.env == 'prod' && plugin.name == 'Kubernetes-NodePort' && request.operation == 'CREATE'")),
			},
			plugin: nodePort,
			want: with(defaults(v1alpha1.FailureModeAsynchronous), func(s *summary) {
				s.Timeout = 1 * time.Second
				s.Sources[1] = "game/p@1"
			}),
		},
		"matchCondition runtime error: not matched and counted": {
			policies: []*v1alpha1.NetworkPluginPolicy{
				newPolicy("game", "p", timeout(1*time.Second), matchCondition("tier", "object.metadata.labels.tier == 'gold'")),
			},
			plugin: nodePort,
			want: with(defaults(v1alpha1.FailureModeAsynchronous), func(s *summary) {
				s.Losers = []string{"game/p@1: matchCondition failed tier"}
			}),
			wantEval: 1,
		},
		"failureModeExpression decides per error": {
			policies: []*v1alpha1.NetworkPluginPolicy{
				newPolicy("game", "p", mode(v1alpha1.FailureModeAsynchronous), modeExpr("error.type == 'parameterError' ? 'Synchronous' : 'Asynchronous'")),
			},
			plugin:    nodePort,
			pluginErr: pluginErr,
			want: with(defaults(v1alpha1.FailureModeSynchronous), func(s *summary) {
				s.Sources[0] = "game/p@1"
			}),
		},
		"failureModeExpression not evaluated without an error": {
			policies: []*v1alpha1.NetworkPluginPolicy{
				newPolicy("game", "p", mode(v1alpha1.FailureModeAsynchronous), modeExpr("error.type == 'parameterError' ? 'Synchronous' : 'Asynchronous'")),
			},
			plugin: nodePort,
			want: with(defaults(v1alpha1.FailureModeAsynchronous), func(s *summary) {
				s.Sources[0] = "game/p@1"
			}),
		},
		"failureModeExpression runtime error: static failureMode": {
			policies: []*v1alpha1.NetworkPluginPolicy{
				newPolicy("game", "p", mode(v1alpha1.FailureModeSynchronous), modeExpr("string(object.metadata.annotations['mode'])")),
			},
			plugin:    nodePort,
			pluginErr: pluginErr,
			want: with(defaults(v1alpha1.FailureModeSynchronous), func(s *summary) {
				s.Sources[0] = "game/p@1"
			}),
			wantNotes: []string{"failureModeExpression of game/p@1 failed", "no such key: mode", "failureMode Synchronous used"},
			wantEval:  1,
		},
		"failureModeExpression bad value: plugin default": {
			policies: []*v1alpha1.NetworkPluginPolicy{
				newPolicy("game", "p", modeExpr("'Deny'")),
			},
			plugin:    hostPort,
			pluginErr: pluginErr,
			want: with(defaults(v1alpha1.FailureModeSynchronous), func(s *summary) {
				s.Sources[0] = "game/p@1"
			}),
			wantNotes: []string{`returned "Deny", want Synchronous or Asynchronous`, "the plugin's built-in mode Synchronous used"},
			wantEval:  1,
		},
		"windowExpression": {
			policies: []*v1alpha1.NetworkPluginPolicy{
				newPolicy("game", "p", retry(v1alpha1.RetryPolicy{WindowExpression: ptr.To("error.type == 'parameterError' ? duration('10m') : duration('1m')")})),
			},
			plugin:    nodePort,
			pluginErr: pluginErr,
			want: with(defaults(v1alpha1.FailureModeAsynchronous), func(s *summary) {
				s.Retry.Window = 10 * time.Minute
				s.Sources[3] = "game/p@1"
			}),
		},
		"windowExpression runtime error: static window": {
			policies: []*v1alpha1.NetworkPluginPolicy{
				newPolicy("game", "p", retry(v1alpha1.RetryPolicy{Window: &metavDuration5m, WindowExpression: ptr.To("duration(object.metadata.annotations['window'])")})),
			},
			plugin:    nodePort,
			pluginErr: pluginErr,
			want: with(defaults(v1alpha1.FailureModeAsynchronous), func(s *summary) {
				s.Retry.Window = 5 * time.Minute
				s.Sources[3] = "game/p@1"
			}),
			wantNotes: []string{"retry.windowExpression of game/p@1 failed", "window 5m0s used"},
			wantEval:  1,
		},
		"windowExpression not longer than the interval: static window": {
			policies: []*v1alpha1.NetworkPluginPolicy{
				newPolicy("game", "p", retry(v1alpha1.RetryPolicy{Window: &metavDuration5m, WindowExpression: ptr.To("duration('5s')")})),
			},
			plugin:    nodePort,
			pluginErr: pluginErr,
			want: with(defaults(v1alpha1.FailureModeAsynchronous), func(s *summary) {
				s.Retry.Window = 5 * time.Minute
				s.Sources[3] = "game/p@1"
			}),
			wantNotes: []string{"retry.windowExpression of game/p@1 returned 5s, not longer than interval 5s", "window 5m0s used"},
			wantEval:  1,
		},
		"invalid policy is ignored, others apply": {
			policies: []*v1alpha1.NetworkPluginPolicy{
				newPolicy("game", "a-broken", timeout(1*time.Second), matchCondition("bad", "object.metadata.labels[")),
				newPolicy("game", "b-good", timeout(2*time.Second)),
			},
			plugin: nodePort,
			want: with(defaults(v1alpha1.FailureModeAsynchronous), func(s *summary) {
				s.Timeout = 2 * time.Second
				s.Sources[1] = "game/b-good@1"
			}),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			store := newTestStore(t, tc.policies...)
			p := tc.pod
			if p == nil {
				p = pod
			}
			d, err := NewResolver(store).Resolve(context.Background(), Input{
				Pod: p, Namespace: ns, Plugin: tc.plugin, Error: tc.pluginErr,
				Request: RequestInfo{Operation: "CREATE"},
			})
			if err != nil {
				t.Fatalf("Resolve(): %v", err)
			}
			if diff := cmp.Diff(tc.want, summarize(d)); diff != "" {
				t.Errorf("decision (-want,+got):\n%s\nexplanation: %s", diff, d.Explanation)
			}
			if len(tc.wantNotes) == 0 && len(d.Explanation.Notes) != 0 {
				t.Errorf("notes = %q, want none", d.Explanation.Notes)
			}
			for _, want := range tc.wantNotes {
				if !strings.Contains(d.Explanation.String(), want) {
					t.Errorf("explanation %q does not contain %q", d.Explanation, want)
				}
			}
			if got := testutil.ToFloat64(store.metrics.evalErrors.WithLabelValues("game", "p")); got != tc.wantEval {
				t.Errorf("npp_cel_evaluation_errors_total{game/p} = %v, want %v", got, tc.wantEval)
			}
		})
	}
}

// TestResolveOrderIsDeterministic feeds equally ranked policies in every insertion order.
func TestResolveOrderIsDeterministic(t *testing.T) {
	a := newPolicy("game", "a", timeout(1*time.Second))
	b := newPolicy("game", "b", timeout(2*time.Second))
	c := newPolicy("game", "c", timeout(3*time.Second))
	orders := map[string][]*v1alpha1.NetworkPluginPolicy{
		"abc": {a, b, c}, "acb": {a, c, b}, "bac": {b, a, c}, "bca": {b, c, a}, "cab": {c, a, b}, "cba": {c, b, a},
	}
	for name, order := range orders {
		t.Run(name, func(t *testing.T) {
			d, err := NewResolver(newTestStore(t, order...)).Resolve(context.Background(), Input{Pod: newPod("game", "x"), Plugin: nodePort})
			if err != nil {
				t.Fatalf("Resolve(): %v", err)
			}
			if diff := cmp.Diff("game/a@1", d.Explanation.Timeout.String()); diff != "" {
				t.Errorf("timeout source (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestResolveWithoutPod(t *testing.T) {
	if _, err := NewResolver(newTestStore(t)).Resolve(context.Background(), Input{Plugin: nodePort}); err != ErrNoPod {
		t.Errorf("Resolve() error = %v, want ErrNoPod", err)
	}
}

// TestFailedUsesTheSnapshotOfBegin: the decision for a failed call comes from the policies
// Begin resolved, even when the store has published a new generation meanwhile, and the
// error-dependent expressions share Begin's budget.
func TestFailedUsesTheSnapshotOfBegin(t *testing.T) {
	store := newTestStore(t, newPolicy("game", "p", modeExpr("error.type == 'apiCallError' ? 'Asynchronous' : 'Synchronous'")))
	res, err := NewResolver(store).Begin(context.Background(), Input{Pod: newPod("game", "x"), Plugin: hostPort})
	if err != nil {
		t.Fatalf("Begin(): %v", err)
	}
	store.Handler(context.Background()).OnUpdate(nil, newPolicy("game", "p", generation(2), modeExpr("'Synchronous'")))
	d := res.Failed(context.Background(), &PluginError{Type: "apiCallError"})
	if d.Mode != v1alpha1.FailureModeAsynchronous || d.Explanation.Failure.String() != "game/p@1" {
		t.Errorf("Failed() = %s by %s, want Asynchronous by game/p@1 (the generation Begin saw)", d.Mode, d.Explanation.Failure)
	}
	if res.act == nil || res.act.Budget().Remaining() >= res.budget {
		t.Errorf("failureModeExpression did not spend the resolution's budget")
	}
}
