package webhookconfig

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apiserver/pkg/admission"
	celplugin "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/cel/environment"
	"sigs.k8s.io/yaml"

	"github.com/okg-extensions/network-plugin-policy/pkg/policy"
	podwebhook "github.com/okg-extensions/network-plugin-policy/pkg/webhook/pod"
)

// builtInModes are the modes of the built-in defaults: of the registered plugins only
// Kubernetes-HostPort is synchronous; every other type goes to the async entry.
var builtInModes = policy.NetworkTypeModes{Synchronous: []string{"Kubernetes-HostPort"},
	Asynchronous: []string{"Kubernetes-Ingress", "Kubernetes-NodePort"}}

// npSyncModes are the modes with a Synchronous NodePort policy.
var npSyncModes = policy.NetworkTypeModes{Synchronous: []string{"Kubernetes-HostPort", "Kubernetes-NodePort"},
	Asynchronous: []string{"Kubernetes-Ingress"}}

// npInGameModes are the modes with a Synchronous NodePort policy in namespace game.
var npInGameModes = policy.NetworkTypeModes{Synchronous: []string{"Kubernetes-HostPort"},
	Asynchronous:  []string{"Kubernetes-Ingress", "Kubernetes-NodePort"},
	SynchronousIn: map[string][]string{"Kubernetes-NodePort": {"game", "tenant-2"}}}

// allInGameModes are the modes under a root catch-all Asynchronous policy and a
// Synchronous "*" policy in namespace game.
var allInGameModes = policy.NetworkTypeModes{Asynchronous: []string{"Kubernetes-HostPort", "Kubernetes-Ingress", "Kubernetes-NodePort"},
	SynchronousIn: map[string][]string{"Kubernetes-HostPort": {"game"}, "Kubernetes-Ingress": {"game"}, "Kubernetes-NodePort": {"game"}}}

// allAsyncModes are the modes under a root catch-all Asynchronous policy.
var allAsyncModes = policy.NetworkTypeModes{Asynchronous: []string{"Kubernetes-HostPort", "Kubernetes-Ingress", "Kubernetes-NodePort"}}

// matcher compiles conds as the apiserver compiles a mutating webhook's matchConditions
// (k8s.io/apiserver's webhook accessors), with the libraries of Kubernetes 1.30, the first
// release with matchConditions GA, as new expressions (what the apiserver checks on write).
func matcher(t *testing.T, name string, policy admissionregistrationv1.FailurePolicyType, conds []admissionregistrationv1.MatchCondition) matchconditions.Matcher {
	t.Helper()
	accessors := make([]celplugin.ExpressionAccessor, len(conds))
	for i, c := range conds {
		accessors[i] = &matchconditions.MatchCondition{Name: c.Name, Expression: c.Expression}
	}
	evaluator := celplugin.NewConditionCompiler(environment.MustBaseEnvSet(version.MajorMinor(1, 30))).CompileCondition(accessors,
		celplugin.OptionalVariableDeclarations{HasAuthorizer: true}, environment.NewExpressions)
	if errs := evaluator.CompilationErrors(); len(errs) > 0 {
		t.Fatalf("compile the matchConditions of %s: %v", name, errs)
	}
	return matchconditions.NewMatcher(evaluator, &policy, "webhook", "admit", name)
}

func pod(annotations map[string]string) *corev1.Pod {
	return &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Namespace: "game", Name: "gs-0", Annotations: annotations, Labels: map[string]string{"app": "gs"}}}
}

func annotations(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

const (
	typeKey = "game.kruise.io/network-type"
	confKey = "game.kruise.io/network-conf"
	hostP   = "Kubernetes-HostPort"
	nodeP   = "Kubernetes-NodePort"

	retryKey    = "policy.game.kruise.io/network-retry"
	decisionKey = "policy.game.kruise.io/network-decision"
)

// TestMatchConditionsExclusive evaluates both entries' conditions with the apiserver's own
// matcher: for every request at most the expected entry matches, and no condition errors (an
// error under failurePolicy Fail would block the pod).
func TestMatchConditionsExclusive(t *testing.T) {
	hostPortPod := pod(annotations(typeKey, hostP, confKey, `[{"name":"ContainerPorts","value":"gs:7777/UDP"}]`))
	cases := map[string]struct {
		modes     *policy.NetworkTypeModes
		op        admission.Operation
		object    *corev1.Pod
		oldObject *corev1.Pod
		namespace string // of the request; "game" (the pod's) when empty
		want      string // "sync", "async" or "" (neither)
	}{
		"CREATE HostPort":                                                    {op: admission.Create, object: hostPortPod, want: "sync"},
		"CREATE NodePort":                                                    {op: admission.Create, object: pod(annotations(typeKey, nodeP)), want: "async"},
		"CREATE NodePort made Synchronous":                                   {modes: &npSyncModes, op: admission.Create, object: pod(annotations(typeKey, nodeP)), want: "sync"},
		"CREATE NodePort, Synchronous in its namespace":                      {modes: &npInGameModes, op: admission.Create, object: pod(annotations(typeKey, nodeP)), want: "sync"},
		"CREATE NodePort, Synchronous in another namespace":                  {modes: &npInGameModes, namespace: "lobby", op: admission.Create, object: pod(annotations(typeKey, nodeP)), want: "async"},
		"CREATE Ingress, NodePort Synchronous in its namespace":              {modes: &npInGameModes, op: admission.Create, object: pod(annotations(typeKey, "Kubernetes-Ingress")), want: "async"},
		"CREATE unknown type, all Synchronous in its namespace":              {modes: &allInGameModes, op: admission.Create, object: pod(annotations(typeKey, "AlibabaCloud-SLB")), want: "async"},
		"CREATE HostPort, all Synchronous in its namespace":                  {modes: &allInGameModes, op: admission.Create, object: hostPortPod, want: "sync"},
		"CREATE HostPort, all Synchronous in another namespace":              {modes: &allInGameModes, namespace: "lobby", op: admission.Create, object: hostPortPod, want: "async"},
		"UPDATE NodePort network-conf changed, Synchronous in its namespace": {modes: &npInGameModes, op: admission.Update, oldObject: pod(annotations(typeKey, nodeP)), object: pod(annotations(typeKey, nodeP, confKey, "[]")), want: "sync"},
		"CREATE HostPort, no synchronous type":                               {modes: &allAsyncModes, op: admission.Create, object: hostPortPod, want: "async"},
		"CREATE unknown type (passed through)":                               {op: admission.Create, object: pod(annotations(typeKey, "AlibabaCloud-SLB")), want: "async"},
		"CREATE unknown type, all Asynchronous":                              {modes: &allAsyncModes, op: admission.Create, object: pod(annotations(typeKey, "AlibabaCloud-SLB")), want: "async"},
		"CREATE near-miss of HostPort (case)":                                {op: admission.Create, object: pod(annotations(typeKey, "kubernetes-hostport")), want: "async"},
		"CREATE near-miss of HostPort (typo)":                                {op: admission.Create, object: pod(annotations(typeKey, "Kubernetes-HostPrt")), want: "async"},
		"UPDATE unknown type network-conf changed":                           {op: admission.Update, oldObject: pod(annotations(typeKey, "AlibabaCloud-SLB")), object: pod(annotations(typeKey, "AlibabaCloud-SLB", confKey, "[]")), want: "async"},
		"UPDATE unknown type to HostPort":                                    {op: admission.Update, oldObject: pod(annotations(typeKey, "AlibabaCloud-SLB")), object: pod(annotations(typeKey, hostP)), want: "sync"},
		"DELETE unknown type (never intercepted)":                            {op: admission.Delete, oldObject: pod(annotations(typeKey, "AlibabaCloud-SLB")), want: ""},
		"CREATE empty type":                                                  {op: admission.Create, object: pod(annotations(typeKey, "")), want: "async"},
		"CREATE Ingress":                                                     {op: admission.Create, object: pod(annotations(typeKey, "Kubernetes-Ingress")), want: "async"},
		"CREATE without annotations":                                         {op: admission.Create, object: pod(nil), want: ""},
		"CREATE without network-type":                                        {op: admission.Create, object: pod(annotations("a", "b")), want: ""},
		"UPDATE HostPort labels only":                                        {op: admission.Update, oldObject: hostPortPod, object: hostPortPod, want: "async"},
		"UPDATE HostPort trigger time":                                       {op: admission.Update, oldObject: hostPortPod, object: pod(annotations(typeKey, hostP, confKey, hostPortPod.Annotations[confKey], "game.kruise.io/network-trigger-time", "2025-01-01T00:00:00Z")), want: "async"},
		"UPDATE HostPort network-conf changed":                               {op: admission.Update, oldObject: hostPortPod, object: pod(annotations(typeKey, hostP, confKey, "[]")), want: "sync"},
		"UPDATE HostPort network-conf removed":                               {op: admission.Update, oldObject: hostPortPod, object: pod(annotations(typeKey, hostP)), want: "sync"},
		"UPDATE network-type HostPort added":                                 {op: admission.Update, oldObject: pod(nil), object: hostPortPod, want: "sync"},
		"UPDATE NodePort to HostPort":                                        {op: admission.Update, oldObject: pod(annotations(typeKey, nodeP)), object: pod(annotations(typeKey, hostP)), want: "sync"},
		"UPDATE HostPort to NodePort":                                        {op: admission.Update, oldObject: hostPortPod, object: pod(annotations(typeKey, nodeP)), want: "async"},
		"UPDATE NodePort network-conf changed":                               {op: admission.Update, oldObject: pod(annotations(typeKey, nodeP)), object: pod(annotations(typeKey, nodeP, confKey, "[]")), want: "async"},
		"UPDATE network-type removed":                                        {op: admission.Update, oldObject: hostPortPod, object: pod(nil), want: ""},
		"UPDATE without annotations":                                         {op: admission.Update, oldObject: pod(nil), object: pod(nil), want: ""},
		"CREATE without network-type, with a retry state":                    {op: admission.Create, object: pod(annotations(retryKey, "{}")), want: "async"},
		"UPDATE network-type removed, retry state forged":                    {op: admission.Update, oldObject: hostPortPod, object: pod(annotations(retryKey, "{}")), want: "async"},
		"UPDATE without network-type, decision changed":                      {op: admission.Update, oldObject: pod(annotations(decisionKey, "a")), object: pod(annotations(decisionKey, "b")), want: "async"},
		"UPDATE without network-type, decision removed":                      {op: admission.Update, oldObject: pod(annotations(decisionKey, "a")), object: pod(nil), want: "async"},
		"UPDATE without network-type, owned annotations unchanged":           {op: admission.Update, oldObject: pod(annotations(decisionKey, "a")), object: pod(annotations(decisionKey, "a", "x", "y")), want: ""},
		"UPDATE HostPort labels only, retry state forged":                    {op: admission.Update, oldObject: hostPortPod, object: pod(annotations(typeKey, hostP, confKey, hostPortPod.Annotations[confKey], retryKey, "{}")), want: "async"},
		"DELETE HostPort (never intercepted)":                                {op: admission.Delete, oldObject: hostPortPod, want: ""},
		"DELETE NodePort made Synchronous (never intercepted)":               {modes: &npSyncModes, op: admission.Delete, oldObject: pod(annotations(typeKey, nodeP)), want: ""},
		"DELETE without annotations":                                         {op: admission.Delete, oldObject: pod(nil), want: ""},
		"DELETE without old object (collection)":                             {op: admission.Delete, want: ""},
		"CONNECT (not in the rules) HostPort":                                {op: admission.Connect, object: hostPortPod, want: "async"},
		"CREATE HostPort, type with a quote in it":                           {modes: &policy.NetworkTypeModes{Synchronous: []string{hostP, `it's`}}, op: admission.Create, object: pod(annotations(typeKey, `it's`)), want: "sync"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			modes := builtInModes
			if tc.modes != nil {
				modes = *tc.modes
			}
			syncConds, asyncConds := MatchConditions(modes)
			var object, oldObject runtime.Object
			if tc.object != nil {
				object = tc.object
			}
			if tc.oldObject != nil {
				oldObject = tc.oldObject
			}
			gvk := corev1.SchemeGroupVersion.WithKind("Pod")
			namespace := tc.namespace
			if namespace == "" {
				namespace = "game"
			}
			attr := admission.NewAttributesRecord(object, oldObject, gvk, namespace, "gs-0", corev1.SchemeGroupVersion.WithResource("pods"), "",
				tc.op, nil, false, nil)
			versioned, err := admission.NewVersionedAttributes(attr, gvk, nil)
			if err != nil {
				t.Fatalf("NewVersionedAttributes(): %v", err)
			}
			var got []string
			for _, entry := range []struct {
				name   string
				policy admissionregistrationv1.FailurePolicyType
				conds  []admissionregistrationv1.MatchCondition
			}{
				{"sync", admissionregistrationv1.Fail, syncConds},
				{"async", admissionregistrationv1.Fail, asyncConds}, // Fail here, so that an error shows
			} {
				res := matcher(t, entry.name, entry.policy, entry.conds).Match(context.Background(), versioned, nil, nil)
				if res.Error != nil {
					t.Errorf("%s entry: condition error: %v", entry.name, res.Error)
				}
				if res.Matches {
					got = append(got, entry.name)
				}
			}
			var want []string
			if tc.want != "" {
				want = []string{tc.want}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("matching entries (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestStaticPatchHasNoSynchronousType: config/webhook/mutating_patch.yaml, installed before
// the manager runs, holds what the controller writes for no synchronous type (every pod
// with a network type to the async entry, failurePolicy Ignore, until the OKG guard's first
// look), under the same condition names (so that the controller replaces them), and the same
// namespaceSelector in both entries.
func TestStaticPatchHasNoSynchronousType(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "config", "webhook", "mutating_patch.yaml"))
	if err != nil {
		t.Fatalf("read the static patch: %v", err)
	}
	var cfg admissionregistrationv1.MutatingWebhookConfiguration
	if err := yaml.UnmarshalStrict(raw, &cfg); err != nil {
		t.Fatalf("decode the static patch: %v", err)
	}
	syncConds, asyncConds := MatchConditions(policy.NetworkTypeModes{})
	want := map[string][]admissionregistrationv1.MatchCondition{
		podwebhook.SyncWebhookName:  syncConds,
		podwebhook.AsyncWebhookName: asyncConds,
	}
	got := map[string][]admissionregistrationv1.MatchCondition{}
	for _, w := range cfg.Webhooks {
		if w.Name == podwebhook.StatusWebhookName {
			// Not the reconciler's: its one condition is static.
			if len(w.MatchConditions) != 1 || w.MatchConditions[0].Name != ConditionChangesGuarded {
				t.Errorf("matchConditions of %s: %+v, want %s", w.Name, w.MatchConditions, ConditionChangesGuarded)
			}
		} else {
			got[w.Name] = w.MatchConditions
		}
		wantSelector := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"kube-system", "network-plugin-policy-system"},
		}}}
		if diff := cmp.Diff(wantSelector, w.NamespaceSelector); diff != "" {
			t.Errorf("namespaceSelector of %s (-want,+got):\n%s", w.Name, diff)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("static matchConditions (-want,+got):\n%s", diff)
	}
}
