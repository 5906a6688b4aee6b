package policy

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
	"github.com/okg-extensions/network-plugin-policy/pkg/policy"
)

const testRoot = "npp-system"

func newPolicy(namespace string, mutate func(*v1alpha1.NetworkPluginPolicySpec)) *v1alpha1.NetworkPluginPolicy {
	p := &v1alpha1.NetworkPluginPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "p", Generation: 1},
		Spec:       v1alpha1.NetworkPluginPolicySpec{Plugins: []string{"Kubernetes-NodePort"}},
	}
	if mutate != nil {
		mutate(&p.Spec)
	}
	return p
}

func newValidator(t *testing.T) *Validator {
	t.Helper()
	v, err := NewValidator(Options{
		RootNamespace: testRoot,
		Plugins: []policy.Plugin{
			{Name: "Kubernetes-HostPort", Synchronous: true},
			{Name: "Kubernetes-NodePort"},
			{Name: "Kubernetes-Ingress"},
		},
		PodWebhookTimeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatalf("NewValidator(): %v", err)
	}
	return v
}

func TestValidateCreate(t *testing.T) {
	async := v1alpha1.FailureModeAsynchronous
	cases := map[string]struct {
		policy       *v1alpha1.NetworkPluginPolicy
		wantFields   []string // field paths of the causes of an Invalid error
		wantWarnings []string // substrings, one per warning
	}{
		"valid": {
			policy: newPolicy("game", func(s *v1alpha1.NetworkPluginPolicySpec) {
				s.MatchConditions = []v1alpha1.MatchCondition{{Name: "not-canary", Expression: "!('canary' in object.metadata.labels)"}}
				expr := "error.type == 'parameterError' ? 'Synchronous' : 'Asynchronous'"
				s.FailureModeExpression = &expr
			}),
		},
		"invalid expressions with field paths": {
			policy: newPolicy("game", func(s *v1alpha1.NetworkPluginPolicySpec) {
				s.MatchConditions = []v1alpha1.MatchCondition{
					{Name: "ok", Expression: "true"},
					{Name: "bad", Expression: "object.spec.hostNetwork"},
				}
				window := "'5m'"
				s.Retry = &v1alpha1.RetryPolicy{WindowExpression: &window}
			}),
			wantFields: []string{"spec.matchConditions[1].expression", "spec.retry.windowExpression"},
		},
		"namespaceSelector outside the root namespace": {
			policy: newPolicy("game", func(s *v1alpha1.NetworkPluginPolicySpec) {
				s.NamespaceSelector = &metav1.LabelSelector{}
			}),
			wantFields: []string{"spec.namespaceSelector"},
		},
		"interval alone beyond the defaulted maxInterval and window": {
			policy: newPolicy("game", func(s *v1alpha1.NetworkPluginPolicySpec) {
				s.Retry = &v1alpha1.RetryPolicy{Interval: &metav1.Duration{Duration: 2 * time.Minute}}
			}),
			wantFields: []string{"spec.retry.interval", "spec.retry.interval"},
		},
		"bounds outside the root namespace": {
			policy: newPolicy("game", func(s *v1alpha1.NetworkPluginPolicySpec) {
				s.Bounds = &v1alpha1.PolicyBounds{MaxWindow: &metav1.Duration{Duration: time.Minute}}
			}),
			wantFields: []string{"spec.bounds"},
		},
		"namespaceSelector in the root namespace": {
			policy: newPolicy(testRoot, func(s *v1alpha1.NetworkPluginPolicySpec) {
				s.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}
			}),
		},
		"warnings": {
			policy: newPolicy("game", func(s *v1alpha1.NetworkPluginPolicySpec) {
				s.Plugins = []string{"Kubernetes-HostPort", "Kubernetes-Hostport"}
				s.FailureMode = &async
				s.Timeout = &metav1.Duration{Duration: 20 * time.Second}
			}),
			wantWarnings: []string{
				`spec.plugins[1]: no registered network plugin has the name or alias "Kubernetes-Hostport"`,
				"spec.failureMode: Asynchronous on Kubernetes-HostPort",
				"spec.timeout: 20s is above the pod webhook's timeout of 10s",
			},
		},
	}
	v := newValidator(t)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			warnings, err := v.ValidateCreate(context.Background(), tc.policy)
			var gotFields []string
			if err != nil {
				statusErr, ok := err.(*apierrors.StatusError)
				if !ok || !apierrors.IsInvalid(err) {
					t.Fatalf("ValidateCreate() error = %v, want an Invalid StatusError", err)
				}
				for _, c := range statusErr.ErrStatus.Details.Causes {
					gotFields = append(gotFields, c.Field)
				}
			}
			if diff := cmp.Diff(tc.wantFields, gotFields); diff != "" {
				t.Errorf("invalid fields (-want,+got):\n%s\nerror: %v", diff, err)
			}
			if len(warnings) != len(tc.wantWarnings) {
				t.Fatalf("warnings = %q, want %d: %q", warnings, len(tc.wantWarnings), tc.wantWarnings)
			}
			for i := range warnings {
				if !strings.Contains(warnings[i], tc.wantWarnings[i]) {
					t.Errorf("warning %d = %q, want it to contain %q", i, warnings[i], tc.wantWarnings[i])
				}
			}
		})
	}
}

func TestValidateUpdateAndDelete(t *testing.T) {
	v := newValidator(t)
	broken := newPolicy("game", func(s *v1alpha1.NetworkPluginPolicySpec) {
		s.MatchConditions = []v1alpha1.MatchCondition{{Name: "bad", Expression: "1 +"}}
	})
	if _, err := v.ValidateUpdate(context.Background(), newPolicy("game", nil), broken); !apierrors.IsInvalid(err) {
		t.Errorf("ValidateUpdate() to a broken spec: error = %v, want Invalid", err)
	}
	if _, err := v.ValidateUpdate(context.Background(), newPolicy("game", nil), newPolicy("game", nil)); err != nil {
		t.Errorf("ValidateUpdate() without spec change: %v", err)
	}
	if _, err := v.ValidateDelete(context.Background(), broken); err != nil {
		t.Errorf("ValidateDelete(): %v", err)
	}
}

func TestNewValidatorNeedsRootNamespace(t *testing.T) {
	if _, err := NewValidator(Options{}); err == nil {
		t.Errorf("NewValidator() without a root namespace succeeded")
	}
}

// TestValidateCreateWarnsBeyondBounds: a namespace policy beyond a root policy's bounds is
// admitted with a warning per bound, naming the root policy; a root policy with bounds is
// itself not warned, and a namespace policy within the bounds gets no warning.
func TestValidateCreateWarnsBeyondBounds(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = v1alpha1.AddToScheme(scheme)
	_ = corev1.AddToScheme(scheme)
	sync := v1alpha1.FailureModeSynchronous
	root := newPolicy(testRoot, func(s *v1alpha1.NetworkPluginPolicySpec) {
		s.Plugins = []string{"Kubernetes-HostPort"}
		s.Bounds = &v1alpha1.PolicyBounds{FailureModes: []v1alpha1.FailureMode{sync},
			MinInterval: &metav1.Duration{Duration: time.Second}, MaxWindow: &metav1.Duration{Duration: 10 * time.Minute}}
	})
	root.Name = "platform"
	reader := fake.NewClientBuilder().WithScheme(scheme).WithObjects(root,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "game"}}).Build()
	v := newValidator(t)
	v.opts.Reader = reader

	async := v1alpha1.FailureModeAsynchronous
	recreate := v1alpha1.ExhaustedActionRecreate
	beyond := newPolicy("game", func(s *v1alpha1.NetworkPluginPolicySpec) {
		s.Plugins = []string{"*"}
		s.FailureMode = &async
		s.Retry = &v1alpha1.RetryPolicy{Window: &metav1.Duration{Duration: 8760 * time.Hour}, Interval: &metav1.Duration{Duration: time.Millisecond},
			MaxInterval: &metav1.Duration{Duration: time.Second}, ExhaustedAction: &recreate}
	})
	warnings, err := v.ValidateCreate(context.Background(), beyond)
	if err != nil {
		t.Fatalf("ValidateCreate(): %v", err)
	}
	want := []string{
		"spec.failureMode: Asynchronous is outside failureModes [Synchronous] of root policy npp-system/platform for Kubernetes-HostPort",
		"spec.retry.window: 8760h0m0s is above maxWindow 10m0s of root policy npp-system/platform for Kubernetes-HostPort",
		"spec.retry.interval: 1ms is below minInterval 1s of root policy npp-system/platform for Kubernetes-HostPort",
	}
	var bounded []string
	for _, w := range warnings {
		if strings.Contains(w, "root policy") {
			bounded = append(bounded, w)
		}
	}
	if len(bounded) != len(want) {
		t.Fatalf("warnings = %q, want %d about bounds", warnings, len(want))
	}
	for i := range want {
		if !strings.Contains(bounded[i], want[i]) {
			t.Errorf("warning %d = %q, want it to contain %q", i, bounded[i], want[i])
		}
	}

	within := newPolicy("game", func(s *v1alpha1.NetworkPluginPolicySpec) {
		s.Plugins = []string{"Kubernetes-HostPort"}
		s.FailureMode = &sync
	})
	if warnings, err := v.ValidateCreate(context.Background(), within); err != nil || len(warnings) != 0 {
		t.Errorf("ValidateCreate(within bounds) = %q, %v; want no warning", warnings, err)
	}
	if warnings, err := v.ValidateCreate(context.Background(), root); err != nil || len(warnings) != 0 {
		t.Errorf("ValidateCreate(root policy) = %q, %v; want no warning", warnings, err)
	}
}
