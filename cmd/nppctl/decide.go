package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
	"github.com/okg-extensions/network-plugin-policy/pkg/policy"
	podwebhook "github.com/okg-extensions/network-plugin-policy/pkg/webhook/pod"
)

// engine decides for pods as the pod webhook does: the plugin from the registry by the
// pod's network-type (an unknown type is a parameterError of a synchronous plugin, as in the
// webhook), then policy.Resolver over a store of the given policies.
type engine struct {
	registry *plugin.Registry
	store    *policy.Store
	resolver *policy.Resolver
	// rejected are the policies left out of the store because they do not compile, with why.
	rejected []string
}

// newEngine builds an engine over policies, compiled as the manager's store compiles them.
func newEngine(ctx context.Context, g *globalOptions, registry *plugin.Registry, policies []*v1alpha1.NetworkPluginPolicy) (*engine, error) {
	store, err := policy.NewStoreFromPolicies(ctx, policy.StoreOptions{RootNamespace: g.rootNamespace,
		Lint: policy.LintOptions{Plugins: descriptors(registry)}}, policies)
	if err != nil {
		return nil, err
	}
	e := &engine{registry: registry, store: store, resolver: policy.NewResolver(store)}
	for _, p := range policies {
		if res, ok := store.Result(p.Namespace, p.Name); ok && !res.Accepted() {
			e.rejected = append(e.rejected, fmt.Sprintf("policy %s/%s is not in force (%s): %s", p.Namespace, p.Name, res.Reason, res.Errors.ToAggregate()))
		}
	}
	return e, nil
}

// request is what one decision depends on besides the pod and the policies.
type request struct {
	// operation is CREATE, UPDATE or DELETE.
	operation string
	// err is the simulated plugin failure; nil decides for a call that has not failed.
	err *policy.PluginError
}

// errNoNetworkType is returned for a pod the webhook does not handle.
var errNoNetworkType = errors.New("the pod has no " + networkstatus.AnnotationNetworkType +
	" annotation: the network webhook does not handle it (set the annotation to a plugin name)")

// errPassedThrough is returned for a pod whose network type is neither a registered plugin
// nor a near-miss of one: the pod webhook admits it untouched (OKG's own webhook owns such
// types, its cloud load balancers) and decides nothing.
var errPassedThrough = errors.New("no plugin of this manager has this network type, nor a name it is a near-miss of: " +
	"the webhook passes the pod through untouched and decides nothing (OKG's own webhook handles it)")

// explanation is one decision with everything that explains it; it is also the JSON and
// YAML output of explain.
type explanation struct {
	// Pod is namespace/name (namespace/generateName* for a Deployment's pod).
	Pod string `json:"pod"`
	// Source is where the pod came from: file:document, with the workload, or "cluster".
	Source string `json:"source"`
	// Operation is the admission operation decided for.
	Operation string `json:"operation"`
	// Plugin is the plugin of the pod's network-type.
	Plugin pluginInfo `json:"plugin"`
	// Error is the plugin failure decided for, if any.
	Error *pluginError `json:"error,omitempty"`
	// Decision is the resolved decision.
	Decision decisionInfo `json:"decision"`
	// NetworkDecision is the policy.game.kruise.io/network-decision annotation the webhook
	// writes on the admitted pod for this decision.
	NetworkDecision string `json:"networkDecision"`
	// Policies are the candidate policies (those naming the plugin, in the pod's namespace
	// or the root namespace): the ones that supplied a group, then the others in precedence
	// order with why they supplied nothing.
	Policies []policyRow `json:"policies"`
	// Audit are the Audit policies (spec.enforcement: Audit) that would have taken part,
	// with the decision each would have made had it been Enforce (policy.Resolution.Audit);
	// they change nothing of Decision.
	Audit []auditRow `json:"audit,omitempty"`
	// NetworkConfRules are the root policies' network-conf rules (spec.networkConfRules)
	// that do not hold for the pod's network-conf, each "rule NAME of root policy
	// NS/NAME@GEN: MESSAGE", an Audit policy's marked "(Audit)". An Enforce one makes the
	// webhook fail the call with a parameterError, as Error says.
	NetworkConfRules []string `json:"networkConfRules,omitempty"`
	// Notes are fallbacks, simulated errors and policies left out.
	Notes []string `json:"notes,omitempty"`
}

// auditRow is one Audit policy's would-be decision.
type auditRow struct {
	// Policy is namespace/name@generation.
	Policy string `json:"policy"`
	// Outcome is same, differs or not_evaluated (policy.AuditOutcome).
	Outcome policy.AuditOutcome `json:"outcome"`
	// WouldDecide is the decision it would have made; absent for not_evaluated.
	WouldDecide *decisionInfo `json:"wouldDecide,omitempty"`
}

// pluginError is a plugin failure (policy.PluginError, the CEL variable error) in explain's
// output and in a Test case.
type pluginError struct {
	// Type is apiCallError, internalError, parameterError, notImplementedError, retryError,
	// timeout or cloudError.
	Type string `json:"type"`
	// Message is the error text; empty means "simulated <type>".
	Message string `json:"message,omitempty"`
	// Reason is the failure's class (the CEL error.reason: PortsExhausted, QuotaExceeded,
	// CloudRefused, ...); empty means none.
	Reason string `json:"reason,omitempty"`
}

// pluginInfo describes the pod's plugin.
type pluginInfo struct {
	Name        string `json:"name"`
	Alias       string `json:"alias,omitempty"`
	Synchronous bool   `json:"synchronous"`
	// Registered is false for a network type no plugin has.
	Registered bool `json:"registered"`
}

// decisionInfo is policy.Decision with durations as Go duration strings and each group's
// source (namespace/name@generation or "default").
type decisionInfo struct {
	Mode              v1alpha1.FailureMode `json:"mode"`
	ModeFrom          string               `json:"modeFrom"`
	Timeout           string               `json:"timeout"`
	TimeoutFrom       string               `json:"timeoutFrom"`
	ReadinessGate     bool                 `json:"readinessGate"`
	ReadinessGateFrom string               `json:"readinessGateFrom"`
	Retry             retryInfo            `json:"retry"`
	RetryFrom         string               `json:"retryFrom"`
	// decision is the resolved decision, for diff.
	decision policy.Decision
}

// retryInfo is policy.RetrySchedule with duration strings.
type retryInfo struct {
	Window          string                   `json:"window"`
	Interval        string                   `json:"interval"`
	MaxInterval     string                   `json:"maxInterval"`
	ExhaustedAction v1alpha1.ExhaustedAction `json:"exhaustedAction"`
}

// policyRow is one candidate policy.
type policyRow struct {
	// Policy is namespace/name@generation.
	Policy string `json:"policy"`
	// Matched is true when the policy supplied at least one group.
	Matched bool `json:"matched"`
	// Supplied are the groups it supplied: failure, timeout, readinessGate, retry.
	Supplied []string `json:"supplied,omitempty"`
	// Reason says why an unmatched policy supplied nothing.
	Reason string `json:"reason,omitempty"`
}

// decide resolves the decision for src as the pod webhook does at admission.
func (e *engine) decide(ctx context.Context, src podSource, ns *corev1.Namespace, req request) (*explanation, error) {
	pod := src.pod
	networkType := pod.Annotations[networkstatus.AnnotationNetworkType]
	if networkType == "" {
		return nil, fmt.Errorf("pod %s (%s): %w", src.key(), src.where, errNoNetworkType)
	}
	if _, registered := e.registry.Get(networkType); !registered {
		if _, nearMiss := e.registry.NearMiss(networkType); !nearMiss {
			return nil, fmt.Errorf("pod %s (%s): network type %q: %w", src.key(), src.where, networkType, errPassedThrough)
		}
	}
	out := &explanation{Pod: src.key(), Source: src.where, Operation: req.operation}
	if req.err != nil {
		out.Error = &pluginError{Type: req.err.Type, Message: req.err.Message, Reason: req.err.Reason}
	}
	desc := policy.Plugin{Name: networkType, Synchronous: true}
	if p, err := e.registry.Lookup(networkType); err != nil {
		// As the webhook: a near-miss of a registered name is a parameterError of a
		// synchronous plugin named as the pod spells it.
		if req.err == nil && req.operation != string(plugin.OperationDelete) {
			perr := plugin.AsError(err)
			req.err = &policy.PluginError{Type: string(perr.Type), Message: strings.TrimPrefix(perr.Error(), string(perr.Type)+": "), Reason: string(perr.ReasonOf())}
			out.Error = &pluginError{Type: req.err.Type, Message: req.err.Message, Reason: req.err.Reason}
			out.Notes = append(out.Notes, "network type "+networkType+" is a near-miss of a registered plugin name: the webhook fails the call with this parameterError")
		}
	} else {
		desc = describePlugin(p)
		out.Plugin.Registered = true
	}
	out.Plugin.Name, out.Plugin.Alias, out.Plugin.Synchronous = desc.Name, desc.Alias, desc.Synchronous
	in := policy.Input{Pod: pod, Namespace: ns, Request: policy.RequestInfo{Operation: req.operation}, Plugin: desc, Error: req.err}
	if req.operation == string(plugin.OperationUpdate) {
		in.OldPod = pod
	}
	res, err := e.resolver.Begin(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("pod %s: %w", src.key(), err)
	}
	// The root policies' network-conf rules, as the webhook evaluates them before the plugin
	// runs: one that does not hold fails the call with a parameterError (unless the request
	// already says which failure to decide for).
	if p, ok := e.registry.Get(networkType); ok && res.HasNetworkConfRules() && req.operation != string(plugin.OperationDelete) {
		if network, params, err := podwebhook.NetworkOf(p, pod); err == nil {
			violations := res.CheckNetworkConf(ctx, network)
			for _, v := range violations {
				text := v.String()
				if v.Audit {
					text += " (Audit)"
				}
				out.NetworkConfRules = append(out.NetworkConfRules, text)
			}
			if perr := podwebhook.RuleError(violations, params); perr != nil && in.Error == nil {
				in.Error = &policy.PluginError{Type: string(perr.Type), Message: strings.TrimPrefix(perr.Error(), string(perr.Type)+": "), Reason: string(perr.ReasonOf())}
				out.Error = &pluginError{Type: in.Error.Type, Message: in.Error.Message, Reason: in.Error.Reason}
				out.Notes = append(out.Notes, "the network-conf does not hold the root policies' network-conf rules: the webhook fails the call with this parameterError before the plugin runs")
				if res, err = e.resolver.Begin(ctx, in); err != nil {
					return nil, fmt.Errorf("pod %s: %w", src.key(), err)
				}
			}
		}
	}
	d := res.Decision(ctx)
	// Root policies' bounds are applied by the resolver, as in the webhook: a capped value
	// is in d, its group's source says "(capped by root policy ...)", and each cap is a note.
	exp := d.Explanation
	out.Decision = newDecisionInfo(d)
	for _, a := range res.Audit(ctx, d) {
		row := auditRow{Policy: a.Policy.String(), Outcome: a.Outcome}
		if a.Outcome != policy.AuditNotEvaluated {
			info := newDecisionInfo(a.Decision)
			row.WouldDecide = &info
		}
		out.Audit = append(out.Audit, row)
	}
	out.NetworkDecision = networkDecision(d)
	out.Policies = candidates(exp)
	out.Notes = append(out.Notes, exp.Notes...)
	out.Notes = append(out.Notes, e.rejected...)
	return out, nil
}

// newDecisionInfo returns d with durations as strings and each group's source.
func newDecisionInfo(d policy.Decision) decisionInfo {
	exp := d.Explanation
	return decisionInfo{
		Mode: d.Mode, ModeFrom: exp.Failure.String(),
		Timeout: d.Timeout.String(), TimeoutFrom: exp.Timeout.String(),
		ReadinessGate: d.ReadinessGate, ReadinessGateFrom: exp.ReadinessGate.String(),
		Retry: retryInfo{Window: d.Retry.Window.String(), Interval: d.Retry.Interval.String(),
			MaxInterval: d.Retry.MaxInterval.String(), ExhaustedAction: d.Retry.ExhaustedAction},
		RetryFrom: exp.Retry.String(),
		decision:  d,
	}
}

// networkDecision is the value of the pod webhook's policy.game.kruise.io/network-decision
// annotation (pkg/webhook/pod AnnotationDecision) for d: "<mode> by policy
// <namespace>/<name>@<generation>" or "<mode> by built-in default", with ", capped by root
// policy <namespace>/<name>@<generation>" when a bound changed the mode. The e2e test
// e2e/admission/nppctl_test.go pins the two together.
func networkDecision(d policy.Decision) string {
	return fmt.Sprintf("%s by %s", d.Mode, d.Explanation.Failure.Describe())
}

// candidates lists the policies that supplied a group, in group order, then the losers.
func candidates(exp policy.Explanation) []policyRow {
	rows := []policyRow{}
	index := map[string]int{}
	for _, g := range []struct {
		name string
		src  policy.Source
	}{{"failure", exp.Failure}, {"timeout", exp.Timeout}, {"readinessGate", exp.ReadinessGate}, {"retry", exp.Retry}} {
		if g.src.Policy == nil {
			continue
		}
		ref := g.src.Policy.String()
		i, ok := index[ref]
		if !ok {
			i = len(rows)
			index[ref] = i
			rows = append(rows, policyRow{Policy: ref, Matched: true})
		}
		rows[i].Supplied = append(rows[i].Supplied, g.name)
	}
	for _, l := range exp.Losers {
		reason := strings.TrimPrefix(l.String(), l.Policy.String()+": ")
		rows = append(rows, policyRow{Policy: l.Policy.String(), Reason: reason})
	}
	return rows
}
