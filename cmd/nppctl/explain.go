package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/policy"
)

// explainOptions are the flags of explain.
type explainOptions struct {
	policies     []string
	pods         []string
	namespaces   string
	operation    string
	errorType    string
	errorMessage string
	errorReason  string
	output       string
	live         bool
	kube         kubeFlags
}

func newExplainCommand(s *streams, g *globalOptions) *cobra.Command {
	o := &explainOptions{}
	cmd := &cobra.Command{
		Use:   "explain --policies PATH... --pod FILE | --live pod/NAME -n NAMESPACE",
		Short: "Print the decision the webhook makes for a pod, and which policy supplied each part of it",
		Long: `explain prints, for each pod, the Decision of the pod webhook (failure mode, plugin timeout,
readiness gate, retry window and schedule), the network-decision annotation the webhook
writes, and every candidate policy: matched or not and why, and which group each supplied.

Offline, policies come from --policies (files and directories; invalid ones are reported and
left out, as the apiserver and the webhook would reject them) and pods from --pod: Pods, or
the first pod of a Deployment, StatefulSet or OpenKruise Game GameServerSet template.
--namespace names a file of Namespace objects (for namespaceSelector and namespaceObject);
without it a pod's namespace has only the kubernetes.io/metadata.name label.

With --live, the policies, the pod and its namespace are read from the cluster: the
argument is pod/NAME and -n/--namespace is the pod's namespace, as in kubectl. Without
--provider-config, the manager's provider configuration is read from its ConfigMap
network-plugin-policy-provider-config in --root-namespace.

Exit code 0: decided; 1: an input is invalid or a pod has no network-type; 2: usage or I/O error.`,
		Example: `  nppctl explain --policies config/samples/gitops/policies --pod config/samples/gitops/pods.yaml \
      --namespace config/samples/gitops/namespaces.yaml --error-type apiCallError -o yaml
  kubectl npp explain --live pod/lobby-0 -n game-prod`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.check(args); err != nil {
				return err
			}
			if o.live {
				return runExplainLive(cmd, s, g, o, args[0])
			}
			return runExplain(cmd, s, g, o)
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&o.policies, "policies", nil, "Policy files or directories (repeat the flag or separate with commas).")
	f.StringSliceVar(&o.pods, "pod", nil, "Files of Pods, Deployments, StatefulSets or GameServerSets to decide for.")
	f.StringVarP(&o.namespaces, "namespace", "n", "", "Offline: a file of Namespace objects. With --live: the pod's namespace.")
	f.StringVar(&o.operation, "operation", "CREATE", "Admission operation: CREATE, UPDATE or DELETE.")
	f.StringVar(&o.errorType, "error-type", "", "Simulate a plugin failure of this type: apiCallError, internalError, parameterError, notImplementedError, retryError, timeout or cloudError.")
	f.StringVar(&o.errorMessage, "error-message", "", "The simulated failure's message (with --error-type).")
	f.StringVar(&o.errorReason, "error-reason", "", "The simulated failure's reason, the CEL error.reason (with --error-type): "+reasonList()+".")
	f.StringVarP(&o.output, "output", "o", "text", "Output format: text, json or yaml.")
	f.BoolVar(&o.live, "live", false, "Read the policies, the pod and its namespace from the cluster.")
	o.kube.bind(f)
	return cmd
}

// check validates flag combinations.
func (o *explainOptions) check(args []string) error {
	switch o.output {
	case "text", "json", "yaml":
	default:
		return usageError("--output %q: expected text, json or yaml", o.output)
	}
	if _, err := parseOperation(o.operation); err != nil {
		return err
	}
	if o.errorReason != "" && o.errorType == "" {
		return usageError("--error-reason needs --error-type")
	}
	if o.errorMessage != "" && o.errorType == "" {
		return usageError("--error-message needs --error-type")
	}
	if o.live {
		if len(args) != 1 || !strings.HasPrefix(args[0], "pod/") || len(args[0]) == len("pod/") {
			return usageError("--live takes one argument pod/NAME")
		}
		if len(o.policies) > 0 || len(o.pods) > 0 {
			return usageError("--live reads policies and pods from the cluster; drop --policies and --pod")
		}
		return nil
	}
	if len(args) > 0 {
		return usageError("unexpected arguments %v (pods are given with --pod; pod/NAME needs --live)", args)
	}
	if len(o.policies) == 0 || len(o.pods) == 0 {
		return usageError("--policies and --pod are required (or --live pod/NAME)")
	}
	return nil
}

// parseOperation checks an admission operation name.
func parseOperation(op string) (string, error) {
	switch plugin.Operation(op) {
	case plugin.OperationCreate, plugin.OperationUpdate, plugin.OperationDelete:
		return op, nil
	}
	return "", usageError("operation %q: expected CREATE, UPDATE or DELETE", op)
}

// pluginErrorTypes are the error types a policy's CEL sees in error.type: OKG's categories
// (pkg/plugin ErrorType) and timeout.
var pluginErrorTypes = []string{"apiCallError", "internalError", "parameterError", "notImplementedError", "retryError", "timeout", "cloudError"}

// simulatedError returns the plugin error to decide for, nil when typ is empty. reason, when
// set, is one of plugin.Reasons; empty, it is the reason the webhook gives a failure of that
// type without one (plugin.Error.ReasonOf: InvalidParameter for a parameterError,
// CloudRefused for a cloudError, Unavailable for a timeout, Other otherwise).
func simulatedError(typ, message, reason string) (*policy.PluginError, error) {
	if typ == "" {
		return nil, nil
	}
	if reason != "" && !slices.Contains(plugin.Reasons, plugin.Reason(reason)) {
		return nil, usageError("error reason %q: expected one of %s", reason, reasonList())
	}
	for _, t := range pluginErrorTypes {
		if t == typ {
			if message == "" {
				message = "simulated " + typ
			}
			if reason == "" {
				reason = string((&plugin.Error{Type: plugin.ErrorType(typ)}).ReasonOf())
			}
			return &policy.PluginError{Type: typ, Message: message, Reason: reason}, nil
		}
	}
	return nil, usageError("error type %q: expected one of %s", typ, strings.Join(pluginErrorTypes, ", "))
}

// reasonList is plugin.Reasons, comma-separated.
func reasonList() string {
	out := make([]string, len(plugin.Reasons))
	for i, r := range plugin.Reasons {
		out[i] = string(r)
	}
	return strings.Join(out, ", ")
}

func runExplain(cmd *cobra.Command, s *streams, g *globalOptions, o *explainOptions) error {
	ctx := cmd.Context()
	perr, err := simulatedError(o.errorType, o.errorMessage, o.errorReason)
	if err != nil {
		return err
	}
	loader, err := newPolicyLoader(ctx, g)
	if err != nil {
		return err
	}
	policyDocs, err := readPaths(o.policies, s.in)
	if err != nil {
		return err
	}
	set := loader.load(ctx, policyDocs)
	podPaths := o.pods
	if o.namespaces != "" {
		podPaths = append(append([]string{}, podPaths...), o.namespaces)
	}
	podDocs, err := readPaths(podPaths, s.in)
	if err != nil {
		return err
	}
	in := readInputs(podDocs, g.defaultNamespace)
	reg, err := newRegistry(ctx, g)
	if err != nil {
		return err
	}
	eng, err := newEngine(ctx, g, reg, set.policies)
	if err != nil {
		return err
	}
	invalid := len(set.problems) > 0 || len(in.problems) > 0
	reportInvalidPolicies(s.errOut, set)
	for _, l := range in.problems {
		fmt.Fprintln(s.errOut, l)
	}
	if len(in.pods) == 0 {
		return &exitError{code: exitInvalid, err: fmt.Errorf("no Pod, Deployment, StatefulSet or GameServerSet in %s", strings.Join(o.pods, ", "))}
	}
	var results []*explanation
	for _, src := range in.pods {
		exp, err := eng.decide(ctx, src, in.namespaceFor(src.pod.Namespace), request{operation: o.operation, err: perr})
		if err != nil {
			fmt.Fprintf(s.errOut, "Error: %v\n", err)
			invalid = true
			continue
		}
		results = append(results, exp)
	}
	if err := printExplanations(s.out, o.output, results); err != nil {
		return err
	}
	if invalid {
		return errInvalid
	}
	return nil
}

// reportInvalidPolicies prints the problems of a policy set to w, with a line saying that
// the policies at fault are left out.
func reportInvalidPolicies(w io.Writer, set *policySet) {
	if len(set.problems) == 0 {
		return
	}
	fmt.Fprintf(w, "%d invalid NetworkPluginPolicies are left out (the apiserver or the validating webhook would reject them):\n", set.invalid)
	for _, l := range set.problems {
		fmt.Fprintln(w, "  "+l.String())
	}
}

// printExplanations writes results as text, a JSON list or a YAML list.
func printExplanations(w io.Writer, format string, results []*explanation) error {
	if results == nil {
		results = []*explanation{}
	}
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(results)
	case "yaml":
		data, err := yaml.Marshal(results)
		if err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	}
	for i, r := range results {
		if i > 0 {
			fmt.Fprintln(w)
		}
		if err := printExplanation(w, r); err != nil {
			return err
		}
	}
	return nil
}

// printExplanation writes one explanation as text.
func printExplanation(w io.Writer, r *explanation) error {
	kind := "asynchronous by design"
	if r.Plugin.Synchronous {
		kind = "synchronous by design"
	}
	if !r.Plugin.Registered {
		kind = "not registered"
	}
	fmt.Fprintf(w, "Pod %s (%s)\n", r.Pod, r.Source)
	fmt.Fprintf(w, "Plugin %s (%s), %s", r.Plugin.Name, kind, r.Operation)
	if r.Error != nil {
		if r.Error.Reason != "" {
			fmt.Fprintf(w, ", failing with %s (reason %s): %s", r.Error.Type, r.Error.Reason, r.Error.Message)
		} else {
			fmt.Fprintf(w, ", failing with %s: %s", r.Error.Type, r.Error.Message)
		}
	}
	fmt.Fprintln(w)
	d := r.Decision
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DECISION\tVALUE\tFROM")
	fmt.Fprintf(tw, "mode\t%s\t%s\n", d.Mode, d.ModeFrom)
	fmt.Fprintf(tw, "timeout\t%s\t%s\n", d.Timeout, d.TimeoutFrom)
	fmt.Fprintf(tw, "readinessGate\t%t\t%s\n", d.ReadinessGate, d.ReadinessGateFrom)
	fmt.Fprintf(tw, "retry\twindow %s, interval %s, maxInterval %s, exhaustedAction %s\t%s\n",
		d.Retry.Window, d.Retry.Interval, d.Retry.MaxInterval, d.Retry.ExhaustedAction, d.RetryFrom)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "Annotation policy.game.kruise.io/network-decision: %s\n", r.NetworkDecision)
	if len(r.Policies) == 0 {
		fmt.Fprintln(w, "No policy decides for this plugin in the pod's namespace or the root namespace.")
	} else {
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "POLICY\tMATCHED\tSUPPLIED OR WHY NOT")
		for _, p := range r.Policies {
			if p.Matched {
				fmt.Fprintf(tw, "%s\tyes\t%s\n", p.Policy, strings.Join(p.Supplied, ", "))
			} else {
				fmt.Fprintf(tw, "%s\tno\t%s\n", p.Policy, p.Reason)
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	for _, rule := range r.NetworkConfRules {
		fmt.Fprintf(w, "Network-conf rule not held: %s\n", rule)
	}
	if len(r.Audit) > 0 {
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "AUDIT POLICY\tOUTCOME\tWOULD DECIDE (HAD IT BEEN ENFORCE)")
		for _, a := range r.Audit {
			would := "- (the request's CEL cost budget was spent first)"
			if d := a.WouldDecide; d != nil {
				would = fmt.Sprintf("mode %s, timeout %s, readinessGate %t, retry window %s, interval %s, maxInterval %s, exhaustedAction %s",
					d.Mode, d.Timeout, d.ReadinessGate, d.Retry.Window, d.Retry.Interval, d.Retry.MaxInterval, d.Retry.ExhaustedAction)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", a.Policy, a.Outcome, would)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "Note: %s\n", n)
	}
	return nil
}
