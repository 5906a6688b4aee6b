package policystatus

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
	"github.com/okg-extensions/network-plugin-policy/pkg/policy"
)

// Limits of NetworkPluginPolicyStatus from its CRD schema and of metav1.Condition.
const (
	maxWarnings      = 16
	maxWarningLength = 1024
	// maxMessageLength is metav1.Condition's message MaxLength.
	maxMessageLength = 32768
)

// DefaultStaleRequeue is how long Reconcile waits for the Store to compile a generation it
// has not seen yet.
const DefaultStaleRequeue = 500 * time.Millisecond

// Results is the part of policy.Store the reconciler reads.
type Results interface {
	// Result returns the compile result of the stored generation of policy namespace/name.
	Result(namespace, name string) (policy.CompileResult, bool)
}

// Reconciler writes each policy's status from its compile result in the Store.
type Reconciler struct {
	// Client reads policies and writes their status subresource.
	Client client.Client
	// Results are the Store's compile results.
	Results Results
	// StaleRequeue is the requeue delay while the Store lags behind the policy's generation;
	// zero means DefaultStaleRequeue.
	StaleRequeue time.Duration
}

// SetupWithManager registers the reconciler, named policystatus, for NetworkPluginPolicy.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := ctrl.NewControllerManagedBy(mgr).For(&v1alpha1.NetworkPluginPolicy{}).Named("policystatus").Complete(r); err != nil {
		return fmt.Errorf("set up policystatus controller: %w", err)
	}
	return nil
}

// +kubebuilder:rbac:groups=policy.game.kruise.io,resources=networkpluginpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=policy.game.kruise.io,resources=networkpluginpolicies/status,verbs=update

// Reconcile sets status.observedGeneration, the Ready condition and status.warnings of the
// policy from the Store's compile result of the same UID and generation, removes
// status.audit once the policy is not Audit (the replicas write it, package policyaudit),
// and writes the
// status only when it changed. While the Store has not compiled that generation yet, and
// after a write conflict, it requeues after StaleRequeue.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	var p v1alpha1.NetworkPluginPolicy
	if err := r.Client.Get(ctx, req.NamespacedName, &p); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	res, ok := r.Results.Result(p.Namespace, p.Name)
	if !ok || res.UID != p.UID || res.Generation != p.Generation {
		log.V(1).Info("Policy store has not compiled this generation yet", "generation", p.Generation)
		return ctrl.Result{RequeueAfter: r.staleRequeue()}, nil
	}

	updated := p.DeepCopy()
	changed := meta.SetStatusCondition(&updated.Status.Conditions, readyCondition(res))
	if updated.Status.ObservedGeneration != p.Generation {
		updated.Status.ObservedGeneration = p.Generation
		changed = true
	}
	if warnings := boundedWarnings(res.Warnings); !slices.Equal(warnings, updated.Status.Warnings) {
		updated.Status.Warnings = warnings
		changed = true
	}
	// status.audit is for Audit policies: once Enforce, the counts say nothing more.
	if updated.Status.Audit != nil && (p.Spec.Enforcement == nil || *p.Spec.Enforcement != v1alpha1.EnforcementAudit) {
		updated.Status.Audit = nil
		changed = true
	}
	if !changed {
		return ctrl.Result{}, nil
	}
	if err := r.Client.Status().Update(ctx, updated); err != nil {
		if apierrors.IsConflict(err) {
			return ctrl.Result{RequeueAfter: r.staleRequeue()}, nil
		}
		return ctrl.Result{}, fmt.Errorf("update status of policy %s: %w", req.NamespacedName, err)
	}
	log.V(1).Info("Updated policy status", "reason", res.Reason, "generation", p.Generation)
	return ctrl.Result{}, nil
}

func (r *Reconciler) staleRequeue() time.Duration {
	if r.StaleRequeue == 0 {
		return DefaultStaleRequeue
	}
	return r.StaleRequeue
}

// readyCondition is the Ready condition for res.
func readyCondition(res policy.CompileResult) metav1.Condition {
	c := metav1.Condition{
		Type:               v1alpha1.ConditionReady,
		Status:             metav1.ConditionTrue,
		Reason:             v1alpha1.ReasonAccepted,
		Message:            "every expression compiled; the policy is in force",
		ObservedGeneration: res.Generation,
	}
	if !res.Accepted() {
		c.Status = metav1.ConditionFalse
		c.Reason = res.Reason
		c.Message = truncate("the webhook ignores this policy: "+res.Errors.ToAggregate().Error(), maxMessageLength)
		if res.BoundsWithoutConditions {
			c.Message = truncate("the webhook ignores this generation but applies its bounds without its expressions (matchConditions, failureModeExpression, windowExpression) to every pod its plugins and selectors select: "+
				res.Errors.ToAggregate().Error(), maxMessageLength)
		}
		if res.KeptGeneration != 0 {
			c.Message = truncate(fmt.Sprintf("the webhook ignores this generation; the bounds and selection of generation %d, the last that compiled, stay in force: %s",
				res.KeptGeneration, res.Errors.ToAggregate().Error()), maxMessageLength)
		}
	}
	return c
}

// boundedWarnings fits warnings into the CRD's limits: at most 16, each at most 1024
// characters; nil when there are none.
func boundedWarnings(warnings []string) []string {
	if len(warnings) == 0 {
		return nil
	}
	out := make([]string, 0, min(len(warnings), maxWarnings))
	for i, w := range warnings {
		if i == maxWarnings-1 && len(warnings) > maxWarnings {
			out = append(out, fmt.Sprintf("and %d more warnings", len(warnings)-i))
			break
		}
		out = append(out, truncate(w, maxWarningLength))
	}
	return out
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n-3], "") + "..."
}
