package policy

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/cel/environment"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
	"github.com/okg-extensions/network-plugin-policy/pkg/policy"
	policycel "github.com/okg-extensions/network-plugin-policy/pkg/policy/cel"
)

// Options configure the Validator.
type Options struct {
	// RootNamespace is the namespace whose policies are cluster-wide and may have a
	// namespaceSelector (the manager's --root-namespace). Required.
	RootNamespace string
	// Plugins are the registered network plugins, for the unknown-plugin and
	// Asynchronous-on-a-synchronous-plugin warnings; empty skips those warnings.
	Plugins []policy.Plugin
	// PodWebhookTimeout is the timeoutSeconds of the mutating pod webhook; a policy timeout
	// above it gets a warning. Zero skips the check.
	PodWebhookTimeout time.Duration
	// Env is the CEL environment; nil means policycel.Default().
	Env *policycel.Env
	// Reader reads the root namespace's policies and the policy's Namespace, for the
	// warnings about a namespace policy that decides beyond a root policy's bounds
	// (policy.BoundsWarnings). SetupWebhookWithManager sets the manager's cached client when
	// it is nil; nil in NewValidator skips those warnings.
	Reader client.Reader
}

// Validator validates NetworkPluginPolicy objects on CREATE and UPDATE.
type Validator struct {
	opts Options
}

var _ admission.Validator[*v1alpha1.NetworkPluginPolicy] = (*Validator)(nil)

// NewValidator returns a validator. Errors: a missing RootNamespace, or the CEL environment
// failing to build.
func NewValidator(opts Options) (*Validator, error) {
	if opts.RootNamespace == "" {
		return nil, fmt.Errorf("policy validator: root namespace is required")
	}
	if opts.Env == nil {
		env, err := policycel.Default()
		if err != nil {
			return nil, fmt.Errorf("policy validator: %w", err)
		}
		opts.Env = env
	}
	return &Validator{opts: opts}, nil
}

// +kubebuilder:webhook:path=/validate-policy-game-kruise-io-v1alpha1-networkpluginpolicy,mutating=false,failurePolicy=fail,sideEffects=None,admissionReviewVersions=v1,groups=policy.game.kruise.io,resources=networkpluginpolicies,verbs=create;update,versions=v1alpha1,name=vnetworkpluginpolicy.policy.game.kruise.io

// SetupWebhookWithManager registers the validating webhook at
// /validate-policy-game-kruise-io-v1alpha1-networkpluginpolicy on mgr's webhook server.
func SetupWebhookWithManager(mgr ctrl.Manager, opts Options) error {
	if opts.Reader == nil {
		opts.Reader = mgr.GetClient()
	}
	v, err := NewValidator(opts)
	if err != nil {
		return err
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &v1alpha1.NetworkPluginPolicy{}).WithValidator(v).Complete(); err != nil {
		return fmt.Errorf("set up NetworkPluginPolicy validating webhook: %w", err)
	}
	return nil
}

// ValidateCreate compiles every expression of obj with the NewExpressions environment.
func (v *Validator) ValidateCreate(ctx context.Context, obj *v1alpha1.NetworkPluginPolicy) (admission.Warnings, error) {
	return v.validate(ctx, obj, environment.NewExpressions)
}

// ValidateUpdate validates newObj like ValidateCreate; when the spec did not change (a
// metadata-only update) it compiles with the StoredExpressions environment, so a policy
// stored under a newer environment stays updatable.
func (v *Validator) ValidateUpdate(ctx context.Context, oldObj, newObj *v1alpha1.NetworkPluginPolicy) (admission.Warnings, error) {
	envType := environment.NewExpressions
	if equality.Semantic.DeepEqual(oldObj.Spec, newObj.Spec) {
		envType = environment.StoredExpressions
	}
	return v.validate(ctx, newObj, envType)
}

// ValidateDelete allows every delete.
func (v *Validator) ValidateDelete(context.Context, *v1alpha1.NetworkPluginPolicy) (admission.Warnings, error) {
	return nil, nil
}

// validate returns an apierrors Invalid error listing every problem with its field path, or
// the warnings of an acceptable policy (CEL cost estimates and policy.Lint findings).
func (v *Validator) validate(ctx context.Context, obj *v1alpha1.NetworkPluginPolicy, envType environment.Type) (admission.Warnings, error) {
	_, res := policy.Compile(obj, policy.CompileOptions{Env: v.opts.Env, EnvType: envType, RootNamespace: v.opts.RootNamespace})
	warnings := append(admission.Warnings{}, res.Warnings...)
	warnings = append(warnings, policy.Lint(&obj.Spec, policy.LintOptions{Plugins: v.opts.Plugins, WebhookTimeout: v.opts.PodWebhookTimeout})...)
	if res.Accepted() {
		warnings = append(warnings, v.boundsWarnings(ctx, obj)...)
	}
	if !res.Accepted() {
		ctrl.LoggerFrom(ctx).V(1).Info("Rejecting NetworkPluginPolicy", "reason", res.Reason, "errors", res.Errors.ToAggregate().Error())
		return warnings, apierrors.NewInvalid(v1alpha1.GroupVersion.WithKind("NetworkPluginPolicy").GroupKind(), obj.Name, res.Errors)
	}
	if len(warnings) == 0 {
		return nil, nil
	}
	return warnings, nil
}

// boundsWarnings returns policy.BoundsWarnings for obj, a namespace policy, against the
// policies of the root namespace as Reader has them. A failed read is itself a warning: the
// policy is not rejected for it, since the resolver caps at decision time anyway.
func (v *Validator) boundsWarnings(ctx context.Context, obj *v1alpha1.NetworkPluginPolicy) []string {
	if v.opts.Reader == nil || obj.Namespace == v.opts.RootNamespace {
		return nil
	}
	var roots v1alpha1.NetworkPluginPolicyList
	if err := v.opts.Reader.List(ctx, &roots, client.InNamespace(v.opts.RootNamespace)); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Cannot list the root namespace's policies to check their bounds", "rootNamespace", v.opts.RootNamespace)
		return []string{fmt.Sprintf("the bounds of the root namespace's policies were not checked: list policies in %s: %v", v.opts.RootNamespace, err)}
	}
	var nsLabels map[string]string
	ns := &corev1.Namespace{}
	if err := v.opts.Reader.Get(ctx, client.ObjectKey{Name: obj.Namespace}, ns); err == nil {
		nsLabels = ns.Labels
	} else if !apierrors.IsNotFound(err) {
		ctrl.LoggerFrom(ctx).Error(err, "Cannot read the policy's namespace to check root policies' namespaceSelector", "namespace", obj.Namespace)
	}
	return policy.BoundsWarnings(obj, v.opts.RootNamespace, roots.Items, nsLabels, v.opts.Plugins)
}
