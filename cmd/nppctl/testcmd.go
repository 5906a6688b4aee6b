package main

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
	"github.com/okg-extensions/network-plugin-policy/pkg/policy"
)

// testAPIVersion and testKind identify a test manifest.
const (
	testAPIVersion = "nppctl.game.kruise.io/v1alpha1"
	testKind       = "Test"
)

// testManifest is a Test: policies, pods and namespaces, and the expected decision per case.
// docs/nppctl.md documents it; it is decoded strictly (an unknown field is an error).
type testManifest struct {
	metav1.TypeMeta `json:",inline"`
	// Metadata.Name names the test in the output.
	Metadata metav1.ObjectMeta `json:"metadata"`
	// RootNamespace overrides --root-namespace for this test.
	RootNamespace string `json:"rootNamespace,omitempty"`
	// Policies are files or directories of NetworkPluginPolicies, relative to the manifest.
	Policies []string `json:"policies"`
	// Pods are files of Pods, Deployments, StatefulSets or GameServerSets, relative to the
	// manifest; cases name their pods as explain does (namespace/name).
	Pods []string `json:"pods"`
	// Namespaces are files of Namespace objects, relative to the manifest.
	Namespaces []string `json:"namespaces,omitempty"`
	// Cluster is the in-memory cluster that a case's plugin runs against when the case
	// checks expect.message, expect.patchedPod or expect.objects.
	Cluster *testCluster `json:"cluster,omitempty"`
	// Cases are the decisions to check.
	Cases []testCase `json:"cases"`
}

// testCluster is the cluster state of a Test's plugin runs (simulator).
type testCluster struct {
	// Objects are files of the objects the plugins read, relative to the manifest: Nodes
	// (their addresses), Services and Ingresses that exist, IngressClasses, ResourceQuotas,
	// and Pods (those holding host ports count against the HostPort range).
	Objects []string `json:"objects,omitempty"`
	// Now is the time of the simulated admissions, written into network-status and the
	// retry state; default 2026-01-01T00:00:00Z.
	Now *metav1.Time `json:"now,omitempty"`
}

// testCase is one decision to check.
type testCase struct {
	// Name names the case in the output. Required.
	Name string `json:"name"`
	// Pod is namespace/name of a pod of the manifest's pods (a Deployment's pod is
	// namespace/NAME-*). Required.
	Pod string `json:"pod"`
	// Operation is CREATE (default), UPDATE or DELETE.
	Operation string `json:"operation,omitempty"`
	// Error is the simulated plugin failure; none decides for a call that has not failed.
	Error *pluginError `json:"error,omitempty"`
	// EveryReplica, for the pod 0 of a StatefulSet or GameServerSet, checks the case for
	// every replica NAME-0 ... NAME-(spec.replicas-1), each named and labelled as its
	// controller makes it. A single replica can also be named as pod (NAMESPACE/NAME-3).
	EveryReplica bool `json:"everyReplica,omitempty"`
	// OldPod is a file with the Pod before an UPDATE, relative to the manifest; default the
	// pod itself (an update that leaves the network's inputs alone, as the network
	// controller's retries are). Only a plugin run (expect.message, patchedPod, objects)
	// reads it.
	OldPod string `json:"oldPod,omitempty"`
	// Expect is the expected decision; unset fields are not checked.
	Expect testExpectation `json:"expect"`
}

// testExpectation is the part of a Decision a case checks.
type testExpectation struct {
	// Mode is Synchronous or Asynchronous.
	Mode v1alpha1.FailureMode `json:"mode,omitempty"`
	// Window is the retry window, a duration such as 10m.
	Window *metav1.Duration `json:"window,omitempty"`
	// Timeout is the plugin timeout.
	Timeout *metav1.Duration `json:"timeout,omitempty"`
	// ReadinessGate is whether the readiness gate is added.
	ReadinessGate *bool `json:"readinessGate,omitempty"`
	// DecidedBy is the policy that supplied the failure mode, namespace/name (or
	// namespace/name@generation), or "default" for the built-in default.
	DecidedBy string `json:"decidedBy,omitempty"`
	// Interval and MaxInterval are the retry schedule's first delay and its cap.
	Interval    *metav1.Duration `json:"interval,omitempty"`
	MaxInterval *metav1.Duration `json:"maxInterval,omitempty"`
	// ExhaustedAction is Event or Recreate.
	ExhaustedAction v1alpha1.ExhaustedAction `json:"exhaustedAction,omitempty"`
	// CappedBy is the root policy (namespace/name or namespace/name@generation) whose bounds
	// changed a value of the decision, or "none" when no bound changed anything.
	CappedBy string `json:"cappedBy,omitempty"`
	// Outcome is what the webhook does with the pod: admitted (the call did not fail, or a
	// DELETE), admittedNotReady (it failed and the decision is Asynchronous) or denied (it
	// failed and the decision is Synchronous). An UPDATE case decides as an update that
	// changes the pod's network inputs; one that does not is never denied.
	Outcome testOutcome `json:"outcome,omitempty"`
	// Audit are the expected would-be decisions of Audit policies (spec.enforcement:
	// Audit): each named policy must be an Audit policy that takes part with that outcome.
	Audit []auditExpectation `json:"audit,omitempty"`

	// The fields below run the manager's pod webhook handler, with its plugins, over the
	// Test's cluster (simulator): the case's error, when set, is what the plugin returns;
	// without one the plugin runs for real against the cluster objects.

	// Message is text that the denial message contains (outcome denied) or that one of the
	// admission warnings contains (admitted).
	Message string `json:"message,omitempty"`
	// PatchedPod is a file with the admitted pod, relative to the manifest: the request's pod
	// with the webhook's patch applied, compared field by field (metadata.resourceVersion,
	// creationTimestamp and status aside).
	PatchedPod string `json:"patchedPod,omitempty"`
	// Objects are files with the objects the plugin creates or changes, as they are after
	// the admission, relative to the manifest; [] expects none. Compared as patchedPod is.
	Objects []string `json:"objects,omitempty"`
}

// runsPlugin reports whether the expectation needs a plugin run (simulator).
func (e testExpectation) runsPlugin() bool {
	return e.Message != "" || e.PatchedPod != "" || e.Objects != nil
}

// testOutcome is the webhook's answer to a case's admission.
type testOutcome string

// The outcomes a case may expect.
const (
	outcomeAdmitted         testOutcome = "admitted"
	outcomeAdmittedNotReady testOutcome = "admittedNotReady"
	outcomeDenied           testOutcome = "denied"
)

// auditExpectation is one Audit policy's expected would-be decision.
type auditExpectation struct {
	// Policy is namespace/name or namespace/name@generation. Required.
	Policy string `json:"policy"`
	// Outcome is same, differs or not_evaluated (policy.AuditOutcome). Required.
	Outcome policy.AuditOutcome `json:"outcome"`
}

// caseResult is the outcome of one case.
type caseResult struct {
	test, name, file string
	failures         []string
}

func newTestCommand(s *streams, g *globalOptions) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "test PATH... [-o text|junit|json]",
		Short: "Run the cases of Test manifests (nppctl.game.kruise.io/v1alpha1) and check each decision",
		Long: `test finds every Test manifest (apiVersion nppctl.game.kruise.io/v1alpha1, kind Test) in the
given files and directories, decides each case as explain does, and prints one PASS or FAIL
line per case and a summary "N passed, N failed". docs/nppctl.md documents the manifest.
-o junit prints JUnit XML instead; -o json one JSON object: {"passed", "failed", "cases"},
each case {"test", "name", "file", "passed", "failures"}.
Exit code 0: all passed; 1: a case failed or a manifest is invalid; 2: usage or I/O error.`,
		Example: `  nppctl test config/samples/gitops/
  nppctl test --output junit tests/ > report.xml
  nppctl test -o json tests/ | jq '.cases[] | select(.passed | not)'`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "text" && output != "junit" && output != "json" {
				return usageError("--output %q: expected text, junit or json", output)
			}
			docs, err := readPaths(args, s.in)
			if err != nil {
				return err
			}
			var results []caseResult
			found := 0
			for _, d := range docs {
				if d.err != nil || d.obj.GetAPIVersion() != testAPIVersion {
					continue // policies and pods live beside the manifests
				}
				found++
				rs, err := runTestManifest(cmd.Context(), s, g, d)
				if err != nil {
					var name string
					if d.obj != nil {
						name = d.obj.GetName()
					}
					rs = []caseResult{{test: name, name: "(manifest)", file: d.where(), failures: []string{err.Error()}}}
				}
				results = append(results, rs...)
			}
			if found == 0 {
				return usageError("no Test manifest (apiVersion %s, kind %s) in %s", testAPIVersion, testKind, strings.Join(args, ", "))
			}
			failed := 0
			for _, r := range results {
				if len(r.failures) > 0 {
					failed++
				}
			}
			switch output {
			case "junit":
				if err := writeJUnit(s.out, results); err != nil {
					return err
				}
			case "json":
				if err := writeTestJSON(s.out, results, failed); err != nil {
					return err
				}
			default:
				printResults(s.out, results)
			}
			fmt.Fprintf(s.errOut, "%d passed, %d failed\n", len(results)-failed, failed)
			if failed > 0 {
				return errInvalid
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "Output format: text, junit (JUnit XML for CI systems) or json.")
	return cmd
}

// runTestManifest decodes a Test strictly and runs its cases. An error means the manifest or
// its inputs are invalid (every case fails).
func runTestManifest(ctx context.Context, s *streams, g *globalOptions, d *document) ([]caseResult, error) {
	t := &testManifest{}
	if err := yaml.UnmarshalStrict(d.raw, t); err != nil {
		return nil, fmt.Errorf("%s: decode Test: %w", d.where(), err)
	}
	if t.Kind != testKind {
		return nil, fmt.Errorf("%s: kind %q: expected %s", d.where(), t.Kind, testKind)
	}
	if t.Metadata.Name == "" || len(t.Policies) == 0 || len(t.Pods) == 0 || len(t.Cases) == 0 {
		return nil, fmt.Errorf("%s: metadata.name, policies, pods and cases are required", d.where())
	}
	opts := *g
	if t.RootNamespace != "" {
		opts.rootNamespace = t.RootNamespace
	}
	base := "."
	if d.file != "<stdin>" {
		base = filepath.Dir(d.file)
	}
	rel := func(paths []string) []string {
		out := make([]string, len(paths))
		for i, p := range paths {
			if filepath.IsAbs(p) {
				out[i] = p
			} else {
				out[i] = filepath.Join(base, p)
			}
		}
		return out
	}
	loader, err := newPolicyLoader(ctx, &opts)
	if err != nil {
		return nil, err
	}
	policyDocs, err := readPaths(rel(t.Policies), s.in)
	if err != nil {
		return nil, err
	}
	set := loader.load(ctx, policyDocs)
	if len(set.problems) > 0 {
		return nil, fmt.Errorf("invalid policies:\n%s", strings.Join(lines(set.problems), "\n"))
	}
	podDocs, err := readPaths(append(rel(t.Pods), rel(t.Namespaces)...), s.in)
	if err != nil {
		return nil, err
	}
	in := readInputs(podDocs, opts.defaultNamespace)
	if len(in.problems) > 0 {
		return nil, fmt.Errorf("invalid pods or namespaces:\n%s", strings.Join(in.problems, "\n"))
	}
	reg, err := newRegistry(ctx, &opts)
	if err != nil {
		return nil, err
	}
	eng, err := newEngine(ctx, &opts, reg, set.policies)
	if err != nil {
		return nil, err
	}
	pods := map[string]podSource{}
	for _, p := range in.pods {
		if prev, dup := pods[p.key()]; dup {
			return nil, fmt.Errorf("pods: %s is given twice, by %s and by %s: a case could not tell which it names", p.key(), prev.where, p.where)
		}
		pods[p.key()] = p
	}
	env := &caseEnv{eng: eng, in: in, rel: rel, stdin: s.in}
	if slices.ContainsFunc(t.Cases, func(c testCase) bool { return c.Expect.runsPlugin() }) {
		now := defaultSimulationNow
		var clusterDocs []*document
		if t.Cluster != nil {
			if t.Cluster.Now != nil {
				now = t.Cluster.Now.UTC()
			}
			if len(t.Cluster.Objects) > 0 {
				if clusterDocs, err = readPaths(rel(t.Cluster.Objects), s.in); err != nil {
					return nil, fmt.Errorf("cluster.objects: %w", err)
				}
			}
		}
		if env.sim, err = newSimulator(&opts, eng, clusterDocs, in.namespaces, now); err != nil {
			return nil, err
		}
	}
	var results []caseResult
	for i, c := range t.Cases {
		r := caseResult{test: t.Metadata.Name, name: c.Name, file: d.where()}
		if r.name == "" {
			r.name = fmt.Sprintf("cases[%d]", i)
		}
		r.failures = runCase(ctx, env, pods, c)
		results = append(results, r)
	}
	return results, nil
}

// caseEnv is what every case of a Test decides with.
type caseEnv struct {
	eng *engine
	in  *inputs
	// sim runs plugins; nil when no case checks a plugin run.
	sim *simulator
	// rel resolves paths relative to the manifest; stdin is read for "-".
	rel   func([]string) []string
	stdin io.Reader
}

// objectsOf reads the objects of files (relative to the manifest), typed.
func (e *caseEnv) objectsOf(field string, files []string) ([]client.Object, error) {
	if len(files) == 0 {
		return nil, nil
	}
	docs, err := readPaths(e.rel(files), e.stdin)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	var out []client.Object
	count := map[string]int{}
	for _, d := range docs {
		obj, err := decodeTyped(d)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", field, d.where(), err)
		}
		count[d.file]++
		out = append(out, obj)
	}
	for _, f := range e.rel(files) {
		if fi, err := os.Stat(f); err == nil && !fi.IsDir() && count[f] == 0 && f != stdinPath {
			return nil, fmt.Errorf("%s %s: the file holds no object (write objects: [] to expect none)", field, f)
		}
	}
	return out, nil
}

// podOf reads the one Pod of file (relative to the manifest).
func (e *caseEnv) podOf(field, file string) (*corev1.Pod, error) {
	objs, err := e.objectsOf(field, []string{file})
	if err != nil {
		return nil, err
	}
	if len(objs) != 1 {
		return nil, fmt.Errorf("%s %s: expected one Pod, found %d objects", field, file, len(objs))
	}
	pod, ok := objs[0].(*corev1.Pod)
	if !ok {
		return nil, fmt.Errorf("%s %s: expected a Pod, found a %s", field, file, objs[0].GetObjectKind().GroupVersionKind().Kind)
	}
	return pod, nil
}

// checkRun runs the plugin for src as the webhook does (simulator) and returns what differs
// from the expectation's message, patchedPod and objects.
func (e *caseEnv) checkRun(ctx context.Context, src podSource, c testCase, op string, perr *policy.PluginError) []string {
	want := c.Expect
	var old, wantPod *corev1.Pod
	var wantObjects []client.Object
	var err error
	if c.OldPod != "" && op != "UPDATE" {
		return []string{fmt.Sprintf("oldPod: only an UPDATE has a pod before the change, this case is a %s", op)}
	}
	if op == "DELETE" && (want.PatchedPod != "" || want.Message != "") {
		return []string{"expect.patchedPod, expect.message: a DELETE is admitted untouched, without a plugin run: check objects only"}
	}
	if c.OldPod != "" {
		if old, err = e.podOf("oldPod", c.OldPod); err != nil {
			return []string{err.Error()}
		}
	}
	if want.PatchedPod != "" {
		if wantPod, err = e.podOf("expect.patchedPod", want.PatchedPod); err != nil {
			return []string{err.Error()}
		}
	}
	if wantObjects, err = e.objectsOf("expect.objects", want.Objects); err != nil {
		return []string{err.Error()}
	}
	run, err := e.sim.run(ctx, src.pod, old, op, perr)
	if err != nil {
		return []string{"plugin run: " + err.Error()}
	}
	var fails []string
	if want.Message != "" {
		switch {
		case !run.allowed && !strings.Contains(run.message, want.Message):
			fails = append(fails, fmt.Sprintf("message: expected the denial to contain %q, got %q", want.Message, run.message))
		case run.allowed && !slices.ContainsFunc(run.warnings, func(w string) bool { return strings.Contains(w, want.Message) }):
			fails = append(fails, fmt.Sprintf("message: expected an admission warning containing %q, got warnings %q", want.Message, run.warnings))
		}
	}
	if wantPod != nil {
		if !run.allowed {
			fails = append(fails, fmt.Sprintf("patchedPod: the pod is denied: %s", run.message))
		} else if d := diffObjects(wantPod, run.pod); d != "" {
			fails = append(fails, fmt.Sprintf("patchedPod: the admitted pod differs (-expected +got):\n%s", d))
		}
	}
	if want.Objects != nil {
		fails = append(fails, compareObjects("objects", wantObjects, run.written)...)
		for _, k := range run.deleted {
			fails = append(fails, fmt.Sprintf("objects: the plugin deleted %s", k))
		}
	}
	return fails
}

// runCase decides one case, for one pod or every replica of a workload, and returns what
// differs from its expectation (prefixed with the replica's name for everyReplica).
func runCase(ctx context.Context, env *caseEnv, pods map[string]podSource, c testCase) []string {
	src, ok := findPod(pods, c.Pod)
	if !ok {
		return []string{fmt.Sprintf("pod %q: not among the pods of the manifest %v (a StatefulSet's or GameServerSet's replicas: NAMESPACE/NAME-INDEX)", c.Pod, slices.Sorted(maps.Keys(pods)))}
	}
	if !c.EveryReplica {
		return checkCase(ctx, env, src, c)
	}
	if c.Expect.PatchedPod != "" || c.Expect.Objects != nil {
		return []string{"everyReplica: expect.patchedPod and expect.objects name one pod's objects: check a replica by name (pod: NAMESPACE/NAME-INDEX) instead"}
	}
	if src.replicas == 0 || !strings.HasSuffix(src.pod.Name, "-0") {
		return []string{fmt.Sprintf("everyReplica: pod %q is not the pod 0 of a StatefulSet or GameServerSet", c.Pod)}
	}
	if src.replicas > maxReplicas {
		return []string{fmt.Sprintf("everyReplica: %d replicas, at most %d are checked", src.replicas, maxReplicas)}
	}
	var fails []string
	for i := range src.replicas {
		r := src.replica(i)
		for _, f := range checkCase(ctx, env, r, c) {
			fails = append(fails, r.pod.Name+": "+f)
		}
	}
	return fails
}

// findPod returns the pod named key (namespace/name): one of pods, or replica i of the
// StatefulSet or GameServerSet whose pod 0 is namespace/NAME-0 when key is
// namespace/NAME-i and i is below its replicas.
func findPod(pods map[string]podSource, key string) (podSource, bool) {
	if src, ok := pods[key]; ok {
		return src, true
	}
	i := strings.LastIndex(key, "-")
	if i < 0 {
		return podSource{}, false
	}
	n, err := strconv.ParseInt(key[i+1:], 10, 32)
	if err != nil || n < 0 || key[i+1:] != strconv.FormatInt(n, 10) {
		return podSource{}, false
	}
	src, ok := pods[key[:i]+"-0"]
	if !ok || int32(n) >= src.replicas {
		return podSource{}, false
	}
	return src.replica(int32(n)), true
}

// checkCase decides case c for src and returns what differs from its expectation.
func checkCase(ctx context.Context, env *caseEnv, src podSource, c testCase) []string {
	op := c.Operation
	if op == "" {
		op = "CREATE"
	}
	if _, err := parseOperation(op); err != nil {
		return []string{err.Error()}
	}
	if errs := checkExpectation(c.Expect); len(errs) > 0 {
		return errs
	}
	var perr *policy.PluginError
	if c.Error != nil {
		var err error
		if perr, err = simulatedError(c.Error.Type, c.Error.Message, c.Error.Reason); err != nil {
			return []string{err.Error()}
		}
	}
	exp, err := env.eng.decide(ctx, src, env.in.namespaceFor(src.pod.Namespace), request{operation: op, err: perr})
	if err != nil {
		return []string{err.Error()}
	}
	if perr == nil && exp.Error != nil {
		// No simulated failure, but the webhook fails the call all the same (a root
		// policy's network-conf rule, a near-miss type): the outcome is that failure's.
		perr = &policy.PluginError{Type: exp.Error.Type, Message: exp.Error.Message, Reason: exp.Error.Reason}
	}
	d := exp.Decision.decision
	var fails []string
	want := c.Expect
	if want.Mode != "" && want.Mode != d.Mode {
		fails = append(fails, fmt.Sprintf("mode: expected %s, got %s (from %s)", want.Mode, d.Mode, exp.Decision.ModeFrom))
	}
	if want.Window != nil && want.Window.Duration != d.Retry.Window {
		fails = append(fails, fmt.Sprintf("window: expected %s, got %s (from %s)", want.Window.Duration, d.Retry.Window, exp.Decision.RetryFrom))
	}
	if want.Timeout != nil && want.Timeout.Duration != d.Timeout {
		fails = append(fails, fmt.Sprintf("timeout: expected %s, got %s (from %s)", want.Timeout.Duration, d.Timeout, exp.Decision.TimeoutFrom))
	}
	if want.ReadinessGate != nil && *want.ReadinessGate != d.ReadinessGate {
		fails = append(fails, fmt.Sprintf("readinessGate: expected %t, got %t (from %s)", *want.ReadinessGate, d.ReadinessGate, exp.Decision.ReadinessGateFrom))
	}
	if want.DecidedBy != "" && !decidedBy(want.DecidedBy, d.Explanation.Failure) {
		fails = append(fails, fmt.Sprintf("decidedBy: expected %s, got %s", want.DecidedBy, exp.Decision.ModeFrom))
	}
	if want.Interval != nil && want.Interval.Duration != d.Retry.Interval {
		fails = append(fails, fmt.Sprintf("interval: expected %s, got %s (from %s)", want.Interval.Duration, d.Retry.Interval, exp.Decision.RetryFrom))
	}
	if want.MaxInterval != nil && want.MaxInterval.Duration != d.Retry.MaxInterval {
		fails = append(fails, fmt.Sprintf("maxInterval: expected %s, got %s (from %s)", want.MaxInterval.Duration, d.Retry.MaxInterval, exp.Decision.RetryFrom))
	}
	if want.ExhaustedAction != "" && want.ExhaustedAction != d.Retry.ExhaustedAction {
		fails = append(fails, fmt.Sprintf("exhaustedAction: expected %s, got %s (from %s)", want.ExhaustedAction, d.Retry.ExhaustedAction, exp.Decision.RetryFrom))
	}
	if want.CappedBy != "" {
		if got := cappedBy(d.Explanation); !slices.ContainsFunc(got, func(r policy.PolicyRef) bool { return refNames(want.CappedBy, r) }) &&
			(want.CappedBy != "none" || len(got) > 0) {
			fails = append(fails, fmt.Sprintf("cappedBy: expected %s, got %s", want.CappedBy, refList(got)))
		}
	}
	if want.Outcome != "" {
		got := caseOutcome(op, perr, d.Mode)
		if want.Outcome != got {
			fails = append(fails, fmt.Sprintf("outcome: expected %s, got %s (mode %s from %s)", want.Outcome, got, d.Mode, exp.Decision.ModeFrom))
		}
	}
	for _, a := range want.Audit {
		i := slices.IndexFunc(exp.Audit, func(r auditRow) bool {
			return r.Policy == a.Policy || strings.SplitN(r.Policy, "@", 2)[0] == a.Policy
		})
		switch {
		case i < 0:
			fails = append(fails, fmt.Sprintf("audit %s: expected %s, but it is not an Audit policy taking part in this decision", a.Policy, a.Outcome))
		case exp.Audit[i].Outcome != a.Outcome:
			fails = append(fails, fmt.Sprintf("audit %s: expected %s, got %s", a.Policy, a.Outcome, exp.Audit[i].Outcome))
		}
	}
	if want.runsPlugin() {
		fails = append(fails, env.checkRun(ctx, src, c, op, perr)...)
	}
	return fails
}

// checkExpectation returns what is wrong with the values of want, each naming the field
// and what was expected.
func checkExpectation(want testExpectation) []string {
	var errs []string
	switch want.Outcome {
	case "", outcomeAdmitted, outcomeAdmittedNotReady, outcomeDenied:
	default:
		errs = append(errs, fmt.Sprintf("expect.outcome %q: expected admitted, admittedNotReady or denied", want.Outcome))
	}
	switch want.ExhaustedAction {
	case "", v1alpha1.ExhaustedActionEvent, v1alpha1.ExhaustedActionRecreate:
	default:
		errs = append(errs, fmt.Sprintf("expect.exhaustedAction %q: expected Event or Recreate", want.ExhaustedAction))
	}
	for i, a := range want.Audit {
		if a.Policy == "" {
			errs = append(errs, fmt.Sprintf("expect.audit[%d].policy: required (namespace/name)", i))
		}
		switch a.Outcome {
		case policy.AuditSame, policy.AuditDiffers, policy.AuditNotEvaluated:
		default:
			errs = append(errs, fmt.Sprintf("expect.audit[%d].outcome %q: expected same, differs or not_evaluated", i, a.Outcome))
		}
	}
	return errs
}

// caseOutcome is what the webhook does with a pod decided with mode for operation op whose
// plugin call failed with perr (nil: it did not fail).
func caseOutcome(op string, perr *policy.PluginError, mode v1alpha1.FailureMode) testOutcome {
	switch {
	case perr == nil || op == "DELETE":
		return outcomeAdmitted
	case mode == v1alpha1.FailureModeSynchronous:
		return outcomeDenied
	}
	return outcomeAdmittedNotReady
}

// cappedBy returns the root policies whose bounds changed a group of the decision explained
// by exp, each once, in group order.
func cappedBy(exp policy.Explanation) []policy.PolicyRef {
	var out []policy.PolicyRef
	for _, s := range []policy.Source{exp.Failure, exp.Timeout, exp.ReadinessGate, exp.Retry} {
		if s.CappedBy != nil && !slices.Contains(out, *s.CappedBy) {
			out = append(out, *s.CappedBy)
		}
	}
	return out
}

// refNames reports whether want (namespace/name or namespace/name@generation) names r.
func refNames(want string, r policy.PolicyRef) bool {
	if strings.Contains(want, "@") {
		return want == r.String()
	}
	return want == r.Namespace+"/"+r.Name
}

// refList returns refs as "a, b", or "none".
func refList(refs []policy.PolicyRef) string {
	if len(refs) == 0 {
		return "none"
	}
	out := make([]string, len(refs))
	for i, r := range refs {
		out[i] = r.String()
	}
	return strings.Join(out, ", ")
}

// decidedBy reports whether want ("default", namespace/name or namespace/name@generation)
// names the source of the failure mode.
func decidedBy(want string, src policy.Source) bool {
	if src.Policy == nil {
		return want == "default"
	}
	return refNames(want, *src.Policy)
}

// printResults prints one line per case, and the failures of failed cases indented.
func printResults(w io.Writer, results []caseResult) {
	for _, r := range results {
		status := "PASS"
		if len(r.failures) > 0 {
			status = "FAIL"
		}
		fmt.Fprintf(w, "%s  %s: %s\n", status, r.test, r.name)
		for _, f := range r.failures {
			fmt.Fprintf(w, "      %s\n", strings.ReplaceAll(f, "\n", "\n      "))
		}
	}
}

// JUnit XML, the subset CI systems read (testsuites > testsuite > testcase > failure).
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string `xml:"name,attr"`
	Tests    int    `xml:"tests,attr"`
	Failures int    `xml:"failures,attr"`
	// Time is always 0: nppctl does not time cases.
	Time  string      `xml:"time,attr"`
	Cases []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	File      string        `xml:"file,attr,omitempty"`
	Failure   *junitFailure `xml:"failure,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}

// writeJUnit writes results as JUnit XML, one testsuite per Test manifest.
func writeJUnit(w io.Writer, results []caseResult) error {
	out := junitSuites{}
	index := map[string]int{}
	for _, r := range results {
		key := r.file + "\x00" + r.test
		i, ok := index[key]
		if !ok {
			i = len(out.Suites)
			index[key] = i
			out.Suites = append(out.Suites, junitSuite{Name: r.test, Time: "0"})
		}
		s := &out.Suites[i]
		c := junitCase{Name: r.name, Classname: "nppctl." + r.test, File: r.file}
		s.Tests++
		out.Tests++
		if len(r.failures) > 0 {
			s.Failures++
			out.Failures++
			c.Failure = &junitFailure{Message: r.failures[0], Text: strings.Join(r.failures, "\n")}
		}
		s.Cases = append(s.Cases, c)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(out); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// testReport is what test prints with -o json.
type testReport struct {
	// Passed and Failed count the cases.
	Passed int `json:"passed"`
	Failed int `json:"failed"`
	// Cases are every case, in input order; never null.
	Cases []testCaseReport `json:"cases"`
}

// testCaseReport is one case of testReport.
type testCaseReport struct {
	// Test is the Test manifest's name, Name the case's ("(manifest)" when the manifest
	// itself is invalid), File where the manifest is ("file:N").
	Test string `json:"test"`
	Name string `json:"name"`
	File string `json:"file"`
	// Passed is true when Failures is empty; Failures are what did not match; never null.
	Passed   bool     `json:"passed"`
	Failures []string `json:"failures"`
}

// writeTestJSON writes results as one indented JSON testReport.
func writeTestJSON(w io.Writer, results []caseResult, failed int) error {
	r := testReport{Passed: len(results) - failed, Failed: failed, Cases: []testCaseReport{}}
	for _, c := range results {
		f := c.failures
		if f == nil {
			f = []string{}
		}
		r.Cases = append(r.Cases, testCaseReport{Test: c.test, Name: c.name, File: c.file, Passed: len(c.failures) == 0, Failures: f})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(r)
}
