package policy

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/utils/ptr"

	"github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
)

func TestCompilePolicy(t *testing.T) {
	type wantErr struct{ Field, Detail string }
	cases := map[string]struct {
		policy     *v1alpha1.NetworkPluginPolicy
		wantReason string
		wantErrs   []wantErr // Detail is a substring
	}{
		"accepted": {
			policy: newPolicy("game", "p", mode(v1alpha1.FailureModeAsynchronous), modeExpr("error.type == 'timeout' ? 'Synchronous' : 'Asynchronous'"),
				matchCondition("a", "object.metadata.labels.app == 'lobby'"),
				retry(v1alpha1.RetryPolicy{WindowExpression: ptr.To("duration('5m')")})),
			wantReason: v1alpha1.ReasonAccepted,
		},
		"namespaceSelector in the root namespace": {
			policy:     newPolicy(testRoot, "p", namespaceSelector("env", "prod")),
			wantReason: v1alpha1.ReasonAccepted,
		},
		"errors carry field paths": {
			policy: newPolicy("game", "p",
				matchCondition("a", "true"),
				matchCondition("b", "error.type == 'timeout'"),
				modeExpr("1"),
				retry(v1alpha1.RetryPolicy{WindowExpression: ptr.To("nope")})),
			wantReason: v1alpha1.ReasonInvalidExpression,
			wantErrs: []wantErr{
				{"spec.matchConditions[1].expression", "only in failureModeExpression and retry.windowExpression"},
				{"spec.failureModeExpression", "must evaluate to string but evaluates to int"},
				{"spec.retry.windowExpression", "undeclared reference to 'nope'"},
			},
		},
		"namespaceSelector outside the root namespace": {
			policy:     newPolicy("game", "p", namespaceSelector("env", "prod"), matchCondition("x", "1")),
			wantReason: v1alpha1.ReasonInvalidSpec,
			wantErrs: []wantErr{
				{"spec.namespaceSelector", `allowed only on policies in the root namespace "npp-system"`},
				{"spec.matchConditions[0].expression", "must evaluate to bool"},
			},
		},
		"interval alone above the default maxInterval and window": {
			policy:     newPolicy("game", "p", retry(v1alpha1.RetryPolicy{Interval: &metav1.Duration{Duration: 2 * time.Minute}})),
			wantReason: v1alpha1.ReasonInvalidSpec,
			wantErrs: []wantErr{
				{"spec.retry.interval", "interval 2m0s is longer than maxInterval 1m0s (the default)"},
				{"spec.retry.interval", "interval 2m0s is not shorter than window 1m0s (the default)"},
			},
		},
		"interval equal to window": {
			policy: newPolicy("game", "p", retry(v1alpha1.RetryPolicy{Window: &metav1.Duration{Duration: 5 * time.Second},
				MaxInterval: &metav1.Duration{Duration: 5 * time.Second}})),
			wantReason: v1alpha1.ReasonInvalidSpec,
			wantErrs:   []wantErr{{"spec.retry.interval", "interval 5s (the default) is not shorter than window 5s"}},
		},
		"interval 2m with maxInterval and window set": {
			policy: newPolicy("game", "p", retry(v1alpha1.RetryPolicy{Interval: &metav1.Duration{Duration: 2 * time.Minute},
				MaxInterval: &metav1.Duration{Duration: 5 * time.Minute}, Window: &metav1.Duration{Duration: 30 * time.Minute}})),
			wantReason: v1alpha1.ReasonAccepted,
		},
		"selector that does not parse": {
			policy: newPolicy("game", "p", func(p *v1alpha1.NetworkPluginPolicy) {
				p.Spec.PodSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Near"}}}
			}),
			wantReason: v1alpha1.ReasonInvalidSpec,
			wantErrs:   []wantErr{{"spec.podSelector", "not a valid label selector operator"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			compiled, res := Compile(tc.policy, CompileOptions{RootNamespace: testRoot, EnvType: environment.NewExpressions})
			if diff := cmp.Diff(tc.wantReason, res.Reason); diff != "" {
				t.Errorf("reason (-want,+got):\n%s", diff)
			}
			if (compiled != nil) != res.Accepted() {
				t.Errorf("compiled = %v with reason %s", compiled, res.Reason)
			}
			var got []wantErr
			for i, e := range res.Errors {
				w := wantErr{Field: e.Field}
				if i < len(tc.wantErrs) && strings.Contains(e.Error(), tc.wantErrs[i].Detail) {
					w.Detail = tc.wantErrs[i].Detail
				} else {
					w.Detail = e.Error()
				}
				got = append(got, w)
			}
			if diff := cmp.Diff(tc.wantErrs, got); diff != "" {
				t.Errorf("errors (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestLint(t *testing.T) {
	known := []Plugin{hostPort, nodePort, {Name: "Kubernetes-Ingress"}}
	recreate := v1alpha1.ExhaustedActionRecreate
	cases := map[string]struct {
		spec *v1alpha1.NetworkPluginPolicy
		want []string // substrings, one per warning
	}{
		"clean": {
			spec: newPolicy("game", "p", plugins("Kubernetes-NodePort", "NodePort-Network"), mode(v1alpha1.FailureModeAsynchronous)),
		},
		"unknown plugin": {
			spec: newPolicy("game", "p", plugins("Kubernetes-NodePort", "Kubernetes-Hostport")),
			want: []string{`spec.plugins[1]: no registered network plugin has the name or alias "Kubernetes-Hostport"`},
		},
		"asynchronous on a synchronous plugin": {
			spec: newPolicy("game", "p", plugins("*"), mode(v1alpha1.FailureModeAsynchronous)),
			want: []string{"spec.failureMode: Asynchronous on Kubernetes-HostPort"},
		},
		"asynchronous on a synchronous plugin with Recreate": {
			spec: newPolicy("game", "p", plugins("Kubernetes-HostPort"), mode(v1alpha1.FailureModeAsynchronous), retry(v1alpha1.RetryPolicy{ExhaustedAction: &recreate})),
		},
		"timeout above the webhook's": {
			spec: newPolicy("game", "p", timeout(25e9)),
			want: []string{"spec.timeout: 25s is above the pod webhook's timeout of 10s"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Lint(&tc.spec.Spec, LintOptions{Plugins: known, WebhookTimeout: 10e9})
			if len(got) != len(tc.want) {
				t.Fatalf("Lint() = %q, want %d warning(s) %q", got, len(tc.want), tc.want)
			}
			for i := range got {
				if !strings.Contains(got[i], tc.want[i]) {
					t.Errorf("warning %d = %q, want it to contain %q", i, got[i], tc.want[i])
				}
			}
		})
	}
}
