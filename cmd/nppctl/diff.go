package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// diffOptions are the flags of diff.
type diffOptions struct {
	policies, base, pods []string
	namespaces           string
	operation            string
	errorType, errorMsg  string
	errorReason          string
	output               string
	live                 bool
	kube                 kubeFlags
}

// change is one field of one pod's decision that the proposed policies change.
type change struct {
	Pod      string `json:"pod"`
	Field    string `json:"field"`
	Current  string `json:"current"`
	Proposed string `json:"proposed"`
}

func newDiffCommand(s *streams, g *globalOptions) *cobra.Command {
	o := &diffOptions{}
	cmd := &cobra.Command{
		Use:   "diff --policies PATH... (--live | --pods FILE... [--base PATH...])",
		Short: "List the pods whose failure mode, timeout or retry window the proposed policies would change",
		Long: `diff decides, for every pod that carries a game.kruise.io/network-type, under the current
policies and under the proposed ones, and lists only the pods whose mode, timeout or retry
window would change, with the policy each value comes from.

The proposed policies are the current ones with the --policies files applied as kubectl
apply would: added, or replacing the policy of the same namespace and name (its generation
incremented when its spec changes); nothing is deleted.

With --live the current policies, the pods (unless --pods is given) and the namespaces come
from the cluster. Offline, the current policies come from --base (none: built-in defaults
only) and the pods from --pods.
Exit code 0: no change; 1: changes, or invalid input; 2: usage or I/O error (like kubectl diff).`,
		Example: `  kubectl npp diff --live --policies policies/
  nppctl diff --base main/policies --policies policies/ --pods workloads/`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDiff(cmd.Context(), s, g, o)
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&o.policies, "policies", nil, "Proposed policy files or directories.")
	f.StringSliceVar(&o.base, "base", nil, "Offline: the current policy files or directories.")
	f.StringSliceVar(&o.pods, "pods", nil, "Files of Pods, Deployments, StatefulSets or GameServerSets (with --live: instead of the cluster's pods).")
	f.StringVarP(&o.namespaces, "namespace", "n", "", "Offline: a file of Namespace objects.")
	f.StringVar(&o.operation, "operation", "CREATE", "Admission operation: CREATE, UPDATE or DELETE.")
	f.StringVar(&o.errorType, "error-type", "", "Compare decisions for a plugin failure of this type (failureModeExpression and windowExpression see it).")
	f.StringVar(&o.errorMsg, "error-message", "", "The simulated failure's message (with --error-type).")
	f.StringVar(&o.errorReason, "error-reason", "", "The simulated failure's reason, the CEL error.reason (with --error-type): "+reasonList()+".")
	f.StringVarP(&o.output, "output", "o", "text", "Output format: text or json.")
	f.BoolVar(&o.live, "live", false, "Read the current policies, pods and namespaces from the cluster.")
	o.kube.bind(f)
	return cmd
}

func runDiff(ctx context.Context, s *streams, g *globalOptions, o *diffOptions) error {
	if o.output != "text" && o.output != "json" {
		return usageError("--output %q: expected text or json", o.output)
	}
	if len(o.policies) == 0 {
		return usageError("--policies is required")
	}
	if !o.live && len(o.pods) == 0 {
		return usageError("--pods is required without --live")
	}
	if o.live && (len(o.base) > 0 || o.namespaces != "") {
		return usageError("--live reads the current policies and namespaces from the cluster; drop --base and --namespace")
	}
	if _, err := parseOperation(o.operation); err != nil {
		return err
	}
	perr, err := simulatedError(o.errorType, o.errorMsg, o.errorReason)
	if err != nil {
		return err
	}
	loader, err := newPolicyLoader(ctx, g)
	if err != nil {
		return err
	}
	proposedDocs, err := readPaths(o.policies, s.in)
	if err != nil {
		return err
	}
	proposedSet := loader.load(ctx, proposedDocs)
	invalid := len(proposedSet.problems) > 0
	reportInvalidPolicies(s.errOut, proposedSet)

	var current []*v1alpha1.NetworkPluginPolicy
	in := &inputs{namespaces: map[string]*corev1.Namespace{}}
	if o.live {
		c, err := o.kube.connect()
		if err != nil {
			return err
		}
		if current, err = c.livePolicies(ctx); err != nil {
			return err
		}
		nsList, err := c.core.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			return &ioError{fmt.Errorf("list namespaces: %w", err)}
		}
		for i := range nsList.Items {
			in.namespaces[nsList.Items[i].Name] = &nsList.Items[i]
		}
		if len(o.pods) == 0 {
			pods, err := c.core.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
			if err != nil {
				return &ioError{fmt.Errorf("list pods: %w", err)}
			}
			for i := range pods.Items {
				in.pods = append(in.pods, podSource{pod: &pods.Items[i], where: "cluster"})
			}
		}
	} else if len(o.base) > 0 {
		baseDocs, err := readPaths(o.base, s.in)
		if err != nil {
			return err
		}
		baseSet := loader.load(ctx, baseDocs)
		reportInvalidPolicies(s.errOut, baseSet)
		invalid = invalid || len(baseSet.problems) > 0
		current = baseSet.policies
	}
	if len(o.pods) > 0 || o.namespaces != "" {
		paths := o.pods
		if o.namespaces != "" {
			paths = append(append([]string{}, paths...), o.namespaces)
		}
		docs, err := readPaths(paths, s.in)
		if err != nil {
			return err
		}
		fileInputs := readInputs(docs, g.defaultNamespace)
		for _, l := range fileInputs.problems {
			fmt.Fprintln(s.errOut, l)
		}
		invalid = invalid || len(fileInputs.problems) > 0
		in.pods = append(in.pods, fileInputs.pods...)
		for k, v := range fileInputs.namespaces {
			in.namespaces[k] = v
		}
	}

	reg, err := newRegistry(ctx, g)
	if err != nil {
		return err
	}
	before, err := newEngine(ctx, g, reg, current)
	if err != nil {
		return err
	}
	after, err := newEngine(ctx, g, reg, applyPolicies(current, proposedSet.policies))
	if err != nil {
		return err
	}
	var changes []change
	compared := 0
	for _, src := range in.pods {
		if src.pod.Annotations[networkstatus.AnnotationNetworkType] == "" {
			continue
		}
		ns := in.namespaceFor(src.pod.Namespace)
		req := request{operation: o.operation, err: perr}
		b, err := before.decide(ctx, src, ns, req)
		if errors.Is(err, errPassedThrough) {
			continue // no policy decides for it, current or proposed
		}
		if err != nil {
			return &exitError{code: exitInvalid, err: err}
		}
		compared++
		a, err := after.decide(ctx, src, ns, req)
		if err != nil {
			return &exitError{code: exitInvalid, err: err}
		}
		changes = append(changes, compareDecisions(src.key(), b.Decision, a.Decision)...)
	}
	if err := printChanges(s.out, o.output, changes, compared); err != nil {
		return err
	}
	if invalid || len(changes) > 0 {
		return errInvalid
	}
	return nil
}

// applyPolicies returns current with proposed applied as kubectl apply would: a proposed
// policy is added, or replaces the current one of the same namespace and name, taking the
// current generation when the spec is unchanged and the next one otherwise.
func applyPolicies(current, proposed []*v1alpha1.NetworkPluginPolicy) []*v1alpha1.NetworkPluginPolicy {
	byKey := map[types.NamespacedName]int{}
	out := make([]*v1alpha1.NetworkPluginPolicy, 0, len(current)+len(proposed))
	for _, p := range current {
		byKey[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}] = len(out)
		out = append(out, p)
	}
	for _, p := range proposed {
		key := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
		i, ok := byKey[key]
		if !ok {
			byKey[key] = len(out)
			out = append(out, p)
			continue
		}
		next := p.DeepCopy()
		next.UID = out[i].UID
		next.Generation = out[i].Generation
		if !equality.Semantic.DeepEqual(out[i].Spec, p.Spec) {
			next.Generation++
		}
		out[i] = next
	}
	return out
}

// compareDecisions returns the changes of mode, timeout and retry window between two
// decisions for pod.
func compareDecisions(pod string, b, a decisionInfo) []change {
	var out []change
	add := func(field, bv, bFrom, av, aFrom string) {
		if bv != av {
			out = append(out, change{Pod: pod, Field: field, Current: bv + " (" + bFrom + ")", Proposed: av + " (" + aFrom + ")"})
		}
	}
	add("mode", string(b.Mode), b.ModeFrom, string(a.Mode), a.ModeFrom)
	add("timeout", b.Timeout, b.TimeoutFrom, a.Timeout, a.TimeoutFrom)
	add("window", b.Retry.Window, b.RetryFrom, a.Retry.Window, a.RetryFrom)
	return out
}

// printChanges writes the changes as a table (or JSON) and a summary line.
func printChanges(w io.Writer, format string, changes []change, compared int) error {
	if format == "json" {
		if changes == nil {
			changes = []change{}
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(changes)
	}
	pods := map[string]bool{}
	if len(changes) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "POD\tFIELD\tCURRENT\tPROPOSED")
		for _, c := range changes {
			pods[c.Pod] = true
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Pod, c.Field, c.Current, c.Proposed)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	noun := "pods"
	if compared == 1 {
		noun = "pod"
	}
	fmt.Fprintf(w, "%d %s with a network-type compared, %d would change\n", compared, noun, len(pods))
	return nil
}
