package main

import (
	"context"
	"encoding/json"
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
	var output string
	cmd := &cobra.Command{
		Use:   "validate PATH... [-o text|json]",
		Short: "Check NetworkPluginPolicies against the CRD schema and compile their CEL as the webhook does",
		Long: `validate reads YAML or JSON files and directories (multi-document; "-" reads stdin) and checks
every NetworkPluginPolicy as the apiserver and the validating webhook would on kubectl apply:
the CRD schema with its CEL rules, then every expression compiled with the webhook's CEL
environment and cost limits. Each problem is printed as "file:document: field.path: message";
documents of other kinds are skipped with a note on stderr. With -o json, one JSON object on
stdout instead: {"policies", "invalid", "valid", "problems", "warnings", "notes"}, each
docFinding {"document": "file:N", "message"}.
Exit code 0: all valid; 1: a problem; 2: usage or I/O error.`,
		Example: `  nppctl validate config/samples/gitops/policies/
  kustomize build overlays/prod | nppctl validate -
  nppctl validate -o json policies/ | jq '.problems[].message'`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "text" && output != "json" {
				return usageError("--output %q: expected text or json", output)
			}
			docs, err := readPaths(args, s.in)
			if err != nil {
				return err
			}
			v, err := newPolicyLoader(cmd.Context(), g)
			if err != nil {
				return err
			}
			set := v.load(cmd.Context(), docs)
			if output == "json" {
				enc := json.NewEncoder(s.out)
				enc.SetIndent("", "  ")
				enc.SetEscapeHTML(false)
				if err := enc.Encode(set.jsonReport()); err != nil {
					return err
				}
			} else {
				set.report(s.out, s.errOut)
				fmt.Fprintf(s.errOut, "%d NetworkPluginPolicies, %d invalid\n", set.total, set.invalid)
			}
			if set.invalid > 0 || len(set.problems) > 0 {
				return errInvalid
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "Output format: text (problems on stdout, warnings and notes on stderr) or json (one report on stdout).")
	return cmd
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

// policySet is the outcome of loading documents: the valid policies and every docFinding.
type policySet struct {
	// policies are the valid NetworkPluginPolicies, in input order.
	policies []*v1alpha1.NetworkPluginPolicy
	// where maps a policy to the document it came from.
	where map[types.NamespacedName]string
	// problems each make the input invalid: printed "file:document: field: message" (stdout).
	problems []docFinding
	// warnings ("file:document: warning: message") and notes go to stderr.
	warnings, notes []docFinding
	total, invalid  int
}

// docFinding is one problem, warning or note about an input document.
type docFinding struct {
	// Document is where: "<file>:<document number>" ("-" for stdin).
	Document string `json:"document"`
	// Message is what: for a problem "field.path: message".
	Message string `json:"message"`
	// warning prefixes the text form's message with "warning: ".
	warning bool
}

// String is the docFinding's text form, "<document>: [warning: ]<message>".
func (f docFinding) String() string {
	if f.warning {
		return f.Document + ": warning: " + f.Message
	}
	return f.Document + ": " + f.Message
}

// lines returns the text forms of fs.
func lines(fs []docFinding) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.String()
	}
	return out
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

// validateReport is what validate prints with -o json.
type validateReport struct {
	// Policies counts the NetworkPluginPolicy documents read, Invalid those with a problem.
	Policies int `json:"policies"`
	Invalid  int `json:"invalid"`
	// Valid is true when no document has a problem (the exit code is then 0).
	Valid bool `json:"valid"`
	// Problems, Warnings and Notes are the findings, in input order; never null.
	Problems []docFinding `json:"problems"`
	Warnings []docFinding `json:"warnings"`
	Notes    []docFinding `json:"notes"`
}

// jsonReport returns p as validate -o json prints it.
func (p *policySet) jsonReport() validateReport {
	nonNil := func(fs []docFinding) []docFinding {
		if fs == nil {
			return []docFinding{}
		}
		return fs
	}
	return validateReport{Policies: p.total, Invalid: p.invalid, Valid: p.invalid == 0 && len(p.problems) == 0,
		Problems: nonNil(p.problems), Warnings: nonNil(p.warnings), Notes: nonNil(p.notes)}
}

// load checks every NetworkPluginPolicy document of docs; other documents get a note.
func (v *policyLoader) load(ctx context.Context, docs []*document) *policySet {
	set := &policySet{where: map[types.NamespacedName]string{}}
	for _, d := range docs {
		if d.err != nil {
			set.problems = append(set.problems, docFinding{Document: d.where(), Message: d.err.Error()})
			continue
		}
		gvk := d.gvk()
		if gvk.Kind != "NetworkPluginPolicy" || gvk.Group != v1alpha1.GroupVersion.Group {
			set.notes = append(set.notes, docFinding{Document: d.where(), Message: "skipped " + d.describe() + ": not a NetworkPluginPolicy"})
			continue
		}
		set.total++
		errs := v.check(ctx, d, set)
		if len(errs) > 0 {
			set.invalid++
		}
		for _, e := range errs {
			set.problems = append(set.problems, docFinding{Document: d.where(), Message: fieldErrorText(e)})
		}
	}
	set.warnings = append(set.warnings, v.boundsWarnings(set)...)
	return set
}

// boundsWarnings returns, for every valid namespace policy of set, the warnings the
// validating webhook gives at apply when it exceeds a bound of a root policy of set
// (policy.BoundsWarnings). Offline, a namespace's only
// known label is kubernetes.io/metadata.name (the one the apiserver sets): a root policy
// whose namespaceSelector needs other labels does not select it here.
func (v *policyLoader) boundsWarnings(set *policySet) []docFinding {
	var roots []v1alpha1.NetworkPluginPolicy
	for _, p := range set.policies {
		if p.Namespace == v.g.rootNamespace && p.Spec.Bounds != nil {
			roots = append(roots, *p)
		}
	}
	if len(roots) == 0 {
		return nil
	}
	var out []docFinding
	for _, p := range set.policies {
		where := set.where[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}]
		nsLabels := map[string]string{corev1.LabelMetadataName: p.Namespace}
		for _, w := range policy.BoundsWarnings(p, v.g.rootNamespace, roots, nsLabels, v.plugins) {
			out = append(out, docFinding{Document: where, Message: w, warning: true})
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
		set.warnings = append(set.warnings, docFinding{Document: d.where(), Message: w, warning: true})
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
