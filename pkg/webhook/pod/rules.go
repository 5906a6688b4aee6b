package pod

import (
	"context"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
	"github.com/okg-extensions/network-plugin-policy/pkg/policy"
	policycel "github.com/okg-extensions/network-plugin-policy/pkg/policy/cel"
	"github.com/okg-extensions/network-plugin-policy/pkg/policyaudit"
)

// NetworkOf returns the CEL variable network for pod's network-conf as p reads it
// (plugin.NetworkViewer; a plugin without it shows only the raw parameters), and the
// view's map from its fields to the network-conf parameters. Errors: the network-conf is
// not JSON, or the plugin cannot read it (the error its run would return).
func NetworkOf(p plugin.Plugin, pod *corev1.Pod) (*policycel.Network, map[string][]string, error) {
	conf, err := networkstatus.ConfFromPod(pod)
	if err != nil {
		return nil, nil, err
	}
	var view plugin.NetworkView
	if v, ok := p.(plugin.NetworkViewer); ok {
		if view, err = v.NetworkView(pod); err != nil {
			return nil, nil, err
		}
	}
	n := &policycel.Network{LoadBalancerIDs: view.LoadBalancerIDs, Hosts: view.Hosts, Classes: view.Classes,
		CreatesCloudResources: view.CreatesCloudResources}
	for _, port := range view.Ports {
		n.Ports = append(n.Ports, policycel.Port{Port: port.Port, Protocol: port.Protocol})
	}
	for _, c := range conf {
		n.Parameters = append(n.Parameters, policycel.Parameter{Name: c.Name, Value: c.Value})
	}
	return n, view.Params, nil
}

// RuleError is the plugin error of the Enforce network-conf rules that do not hold (nil when
// none): a parameterError naming the parameters the rules read (params maps the network
// view's fields to them; the network-conf annotation when a rule reads none of them) and,
// in its message, each rule, its root policy and its message.
func RuleError(violations []policy.RuleViolation, params map[string][]string) *plugin.Error {
	var names, texts []string
	for _, v := range violations {
		if v.Audit {
			continue
		}
		texts = append(texts, "refused by "+v.String())
		for _, f := range v.Fields {
			for _, name := range params[f] {
				if !slices.Contains(names, name) {
					names = append(names, name)
				}
			}
		}
	}
	if len(texts) == 0 {
		return nil
	}
	if len(names) == 0 {
		names = []string{networkstatus.AnnotationNetworkConf}
	}
	return &plugin.Error{Type: plugin.ParameterError, Reason: plugin.ReasonNotAllowed, Param: strings.Join(names, ","), Message: strings.Join(texts, "; ")}
}

// checkRules evaluates the network-conf rules of the root policies that select the pod
// (policy.Resolution.CheckNetworkConf), before the plugin runs. It returns the parameterError
// of the Enforce rules that do not hold (RuleError; nil when they all hold), and live true
// when the pod keeps its live network all the same: an UPDATE that leaves the network's
// inputs alone, of a pod whose Ready network-status the manager wrote (WroteStatus: a status
// written by anyone else gets no exemption), with a warning in warnings. The caller then
// runs the plugin read-only, and takes the refusal if the run would write anything. A
// network-conf the plugin cannot read to describe it (plugin.NetworkViewer) is refused with
// that error, so that no rule is skipped. The Audit policies' rules refuse nothing: each is
// recorded in its policy's status.audit, differing when it would have refused (a kept live
// network counts as the same).
func (h *Handler) checkRules(ctx context.Context, res *policy.Resolution, p plugin.Plugin, op plugin.Operation, pod, old *corev1.Pod,
	dryRun bool, warnings *[]string) (refusal *plugin.Error, live bool) {
	if p == nil || !res.HasNetworkConfRules() {
		return nil, false
	}
	live = op == plugin.OperationUpdate && old != nil && WroteStatus(old) && networkstatus.IsReady(old) && !networkInputsChanged(old, pod)
	network, params, err := NetworkOf(p, pod)
	var violations []policy.RuleViolation
	if err != nil {
		refusal = plugin.AsError(err)
	} else {
		violations = res.CheckNetworkConf(ctx, network)
		refusal = RuleError(violations, params)
	}
	h.auditRules(ctx, res, violations, pod, op, dryRun, live)
	if refusal == nil {
		return nil, false
	}
	if live {
		*warnings = append(*warnings, WarningPrefix+p.Name()+": the network-conf is "+refusal.Message+
			"; the pod keeps its live network until its network-conf changes")
		ctrl.LoggerFrom(ctx).Info("Network-conf rules do not hold for a live network; kept", "violations", refusal.Message)
	}
	return refusal, live
}

// auditRules records, for each Audit root policy whose network-conf rules select the pod,
// whether they would have refused it (AuditDiffers, with a sample naming the rules) or not
// (AuditSame); same, when they would not change the outcome (same: a live network kept);
// a dry run records nothing.
func (h *Handler) auditRules(ctx context.Context, res *policy.Resolution, violations []policy.RuleViolation, pod *corev1.Pod, op plugin.Operation, dryRun, same bool) {
	for _, ref := range res.AuditRulePolicies() {
		var texts []string
		for _, v := range violations {
			if v.Audit && *v.Policy == ref {
				texts = append(texts, v.String())
			}
		}
		outcome, sample := policy.AuditSame, (*policyaudit.Sample)(nil)
		if len(texts) > 0 && !same {
			outcome = policy.AuditDiffers
			sample = &policyaudit.Sample{Pod: podKey(pod), Operation: string(op), Decision: "network-conf admitted",
				WouldDecide: "network-conf refused (parameterError): " + strings.Join(texts, "; ")}
			ctrl.LoggerFrom(ctx).Info("Audit policy's network-conf rules would have refused the pod", "auditPolicy", ref.String(), "rules", sample.WouldDecide)
		}
		if h.AuditRecorder != nil && !dryRun {
			h.AuditRecorder.Record(ref, outcome, sample)
		}
	}
}
