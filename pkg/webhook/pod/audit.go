package pod

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	policyv1alpha1 "github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/policy"
	"github.com/okg-extensions/network-plugin-policy/pkg/policyaudit"
)

// AuditSink takes Audit results for the policies' status.audit: policyaudit.Recorder.
type AuditSink interface {
	// Record queues one result of the policy ref, with sample for an AuditDiffers one; it
	// never blocks.
	Record(ref policy.PolicyRef, outcome policy.AuditOutcome, sample *policyaudit.Sample)
}

// auditPolicies computes, once the decision in force for the plugin call on pod is final,
// the decision each Audit policy (spec.enforcement: Audit) would have made
// (policy.Resolution.Audit, which counts npp_policy_audit_decisions_total), hands each
// result to the AuditRecorder (for the policy's status.audit), and logs each one that
// differs with both decisions as AuditOutcomeText gives them; perr is the plugin's failure,
// nil when it succeeded. A dry run (dryRun) is counted and logged but not recorded: status.audit
// is a write. It changes nothing of the admission.
func (h *Handler) auditPolicies(ctx context.Context, res *policy.Resolution, inForce policy.Decision, pod, old *corev1.Pod, op plugin.Operation,
	networkType string, perr *plugin.Error, dryRun bool) {
	var errType string
	if perr != nil {
		errType = string(perr.Type)
	}
	neverDenied := op == plugin.OperationUpdate && !networkInputsChanged(old, pod)
	record := func(ref policy.PolicyRef, outcome policy.AuditOutcome, sample *policyaudit.Sample) {
		if h.AuditRecorder != nil && !dryRun {
			h.AuditRecorder.Record(ref, outcome, sample)
		}
	}
	for _, r := range res.Audit(ctx, inForce) {
		if r.Outcome != policy.AuditDiffers {
			record(*r.Policy, r.Outcome, nil)
			continue
		}
		sample := &policyaudit.Sample{Pod: podKey(pod), Operation: string(op),
			Decision: AuditOutcomeText(inForce, errType, neverDenied), WouldDecide: AuditOutcomeText(r.Decision, errType, neverDenied)}
		record(*r.Policy, r.Outcome, sample)
		ctrl.LoggerFrom(ctx).Info("Audit policy would have decided otherwise", "plugin", networkType,
			"auditPolicy", r.Policy.String(), "errorType", errType, "decision", sample.Decision, "wouldBe", sample.WouldDecide)
	}
}

// podKey is namespace/name of pod, namespace/generateName when it has no name yet.
func podKey(pod *corev1.Pod) string {
	name := pod.Name
	if name == "" {
		name = pod.GenerateName
	}
	return pod.Namespace + "/" + name
}

// AuditOutcomeText describes what decision d does to a pod whose plugin call failed with
// an error of type errType ("" when it succeeded): "denied (Synchronous)" or "admitted
// NotReady (Asynchronous, retried for WINDOW, then EXHAUSTEDACTION)" for a failure,
// "admitted" for a success, followed by the timeout, the readiness gate and the retry
// intervals, for example "admitted NotReady (Asynchronous, retried for 5m0s, then Event);
// timeout 8s; readinessGate false; retry interval 5s, maxInterval 1m0s". neverDenied is
// true for an UPDATE that leaves the network's inputs alone, which the webhook admits
// NotReady even when Synchronous ("admitted NotReady (Synchronous, but this update leaves
// the network alone; retried for ...)"). The webhook's audit samples and log lines use it.
func AuditOutcomeText(d policy.Decision, errType string, neverDenied bool) string {
	var what string
	switch {
	case errType == "":
		what = "admitted"
	case d.Mode == policyv1alpha1.FailureModeSynchronous && neverDenied:
		what = fmt.Sprintf("admitted NotReady (%s, but this update leaves the network alone; retried for %s, then %s)", d.Mode, d.Retry.Window, d.Retry.ExhaustedAction)
	case d.Mode == policyv1alpha1.FailureModeSynchronous:
		what = fmt.Sprintf("denied (%s)", d.Mode)
	default:
		what = fmt.Sprintf("admitted NotReady (%s, retried for %s, then %s)", d.Mode, d.Retry.Window, d.Retry.ExhaustedAction)
	}
	return fmt.Sprintf("%s; timeout %s; readinessGate %t; retry interval %s, maxInterval %s", what,
		d.Timeout.Round(time.Millisecond), d.ReadinessGate, d.Retry.Interval, d.Retry.MaxInterval)
}
