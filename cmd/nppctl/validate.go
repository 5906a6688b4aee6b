package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
	"github.com/okg-extensions/network-plugin-policy/pkg/policy"
	policycel "github.com/okg-extensions/network-plugin-policy/pkg/policy/cel"
)

func newValidateCommand(s *streams, g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "validate PATH...",
		Short: "Check NetworkPluginPolicies against the CRD schema and compile their CEL as the webhook does",
		Long: `validate reads YAML or JSON files and directories (multi-document; "-" reads stdin) and checks
every NetworkPluginPolicy as the apiserver and the validating webhook would on kubectl apply:
the CRD schema with its CEL rules, then every expression compiled with the webhook's CEL
environment and cost limits. Each problem is printed as "file:document: field.path: message";
documents of other kinds are skipped with a note on stderr.
Exit code 0: all valid; 1: a problem; 2: usage or I/O error.`,
		Example: `  nppctl validate config/samples/gitops/policies/
  kustomize build overlays/prod | nppctl validate -`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			docs, err := readPaths(args, s.in)
			if err != nil {
				return err
			}
			v, err := newPolicyLoader(cmd.Context(), g)
			if err != nil {
				return err
			}
			set := v.load(cmd.Context(), docs)
			set.report(s.out, s.errOut)
			fmt.Fprintf(s.errOut, "%d NetworkPluginPolicies, %d invalid\n", set.total, set.invalid)
			if set.invalid > 0 || len(set.problems) > 0 {
				return errInvalid
			}
			return nil
		},
	}
}

// policyLoader checks NetworkPluginPolicy documents as kubectl apply would have them
// checked: the apiserver's CRD validation, then the validating webhook's (policy.Compile
// with the NewExpressions CEL environment, and policy.Lint for warnings).
type policyLoader struct {
	g       *globalOptions
	schema  *crdSchema
	env     *policycel.Env
	plugins []policy.Plugin
}

func newPolicyLoader(ctx context.Context, g *globalOptions) (*policyLoader, error) {
	schema, err := newCRDSchema()
	if err != nil {
		return nil, err
	}
	env, err := policycel.Default()
	if err != nil {
		return nil, fmt.Errorf("build the CEL environment: %w", err)
	}
	reg, err := newRegistry(ctx, g)
	if err != nil {
		return nil, err
	}
	return &policyLoader{g: g, schema: schema, env: env, plugins: descriptors(reg)}, nil
}

// policySet is the outcome of loading documents: the valid policies and every finding.
type policySet struct {
	// policies are the valid NetworkPluginPolicies, in input order.
	policies []*v1alpha1.NetworkPluginPolicy
	// where maps a policy to the document it came from.
	where map[types.NamespacedName]string
	// problems are "file:document: field: message" lines (stdout); each makes the input invalid.
	problems []string
	// warnings and notes go to stderr.
	warnings, notes []string
	total, invalid  int
}

// report prints problems to out, warnings and notes to errOut.
func (p *policySet) report(out, errOut io.Writer) {
	for _, l := range p.problems {
		fmt.Fprintln(out, l)
	}
	for _, l := range p.warnings {
		fmt.Fprintln(errOut, l)
	}
	for _, l := range p.notes {
		fmt.Fprintln(errOut, l)
	}
}

// load checks every NetworkPluginPolicy document of docs; other documents get a note.
func (v *policyLoader) load(ctx context.Context, docs []*document) *policySet {
	set := &policySet{where: map[types.NamespacedName]string{}}
	for _, d := range docs {
		if d.err != nil {
			set.problems = append(set.problems, fmt.Sprintf("%s: %v", d.where(), d.err))
			continue
		}
		gvk := d.gvk()
		if gvk.Kind != "NetworkPluginPolicy" || gvk.Group != v1alpha1.GroupVersion.Group {
			set.notes = append(set.notes, fmt.Sprintf("%s: skipped %s: not a NetworkPluginPolicy", d.where(), d.describe()))
			continue
		}
		set.total++
		errs := v.check(ctx, d, set)
		if len(errs) > 0 {
			set.invalid++
		}
		for _, e := range errs {
			set.problems = append(set.problems, fmt.Sprintf("%s: %s", d.where(), fieldErrorText(e)))
		}
	}
	set.warnings = append(set.warnings, v.boundsWarnings(set)...)
	return set
}

// boundsWarnings returns, for every valid namespace policy of set, the warnings the
// validating webhook gives at apply when it exceeds a bound of a root policy of set
// (policy.BoundsWarnings), as "file:document: warning: ...". Offline, a namespace's only
// known label is kubernetes.io/metadata.name (the one the apiserver sets): a root policy
// whose namespaceSelector needs other labels does not select it here.
func (v *policyLoader) boundsWarnings(set *policySet) []string {
	var roots []v1alpha1.NetworkPluginPolicy
	for _, p := range set.policies {
		if p.Namespace == v.g.rootNamespace && p.Spec.Bounds != nil {
			roots = append(roots, *p)
		}
	}
	if len(roots) == 0 {
		return nil
	}
	var out []string
	for _, p := range set.policies {
		where := set.where[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}]
		nsLabels := map[string]string{corev1.LabelMetadataName: p.Namespace}
		for _, w := range policy.BoundsWarnings(p, v.g.rootNamespace, roots, nsLabels, v.plugins) {
			out = append(out, fmt.Sprintf("%s: warning: %s", where, w))
		}
	}
	return out
}

// check validates one NetworkPluginPolicy document and, when valid, adds it to set.
func (v *policyLoader) check(ctx context.Context, d *document, set *policySet) field.ErrorList {
	if gv := d.obj.GetAPIVersion(); gv != v1alpha1.GroupVersion.String() {
		return field.ErrorList{field.Invalid(field.NewPath("apiVersion"), gv, "must be "+v1alpha1.GroupVersion.String())}
	}
	obj := d.obj.DeepCopy()
	if obj.GetNamespace() == "" {
		obj.SetNamespace(v.g.defaultNamespace)
	}
	if errs := v.schema.validate(ctx, obj); len(errs) > 0 {
		return errs
	}
	p, err := toPolicy(obj)
	if err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	if p.Generation == 0 {
		p.Generation = offlineGeneration
	}
	key := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
	if prev, ok := set.where[key]; ok {
		return field.ErrorList{field.Duplicate(field.NewPath("metadata", "name"), key.String()+" (also at "+prev+")")}
	}
	_, res := policy.Compile(p, policy.CompileOptions{Env: v.env, EnvType: environment.NewExpressions, RootNamespace: v.g.rootNamespace})
	for _, w := range append(res.Warnings, policy.Lint(&p.Spec, policy.LintOptions{Plugins: v.plugins})...) {
		set.warnings = append(set.warnings, fmt.Sprintf("%s: warning: %s", d.where(), w))
	}
	if !res.Accepted() {
		return res.Errors
	}
	set.where[key] = d.where()
	set.policies = append(set.policies, p)
	return nil
}

// offlineGeneration is the metadata.generation of a policy read from a file without one: 1,
// what the apiserver gives a new object, so that policy references (namespace/name@1) match
// those the webhook writes for a newly applied policy.
const offlineGeneration = 1

// fieldErrorText formats a field error as "field.path: message", without repeating the
// invalid value (a CEL error shows the expression with a caret under the column); lines
// after the first are indented.
func fieldErrorText(e *field.Error) string {
	var msg string
	switch {
	case e.Type == field.ErrorTypeInvalid && e.Detail != "":
		msg = e.Detail
	default:
		msg = e.ErrorBody()
	}
	msg = strings.ReplaceAll(strings.TrimRight(msg, "\n"), "\n", "\n    ")
	if e.Field == "" || e.Field == "<nil>" {
		return msg
	}
	return e.Field + ": " + msg
}
