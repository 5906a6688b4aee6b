package policyapi

import (
	"context"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
)

var nppResource = schema.GroupVersionResource{Group: "policy.game.kruise.io", Version: "v1alpha1", Resource: "networkpluginpolicies"}

// TestSchemaValidation creates policies through the dynamic client (so that values the Go
// types cannot hold, such as "1d", reach the apiserver) and checks that the CRD's schema
// accepts the valid ones and rejects the invalid ones with the field path and reason.
func TestSchemaValidation(t *testing.T) {
	ctx := context.Background()
	dyn := dynamic.NewForConfigOrDie(cp.Config)
	ns := createNamespace(t, "schema")

	longExpr := "object.metadata.name == '" + strings.Repeat("x", 4100) + "'"
	var manyPlugins []string
	for i := range 33 {
		manyPlugins = append(manyPlugins, fmt.Sprintf("%q", fmt.Sprintf("Plugin-%d", i)))
	}

	cases := map[string]struct {
		spec string
		// wantErr lists substrings of the error; empty means the policy must be accepted.
		wantErr []string
	}{
		"minimal": {spec: `{plugins: ["Kubernetes-HostPort"]}`},
		"every field": {spec: `
plugins: ["Kubernetes-NodePort", "NLB-Network", "*"]
podSelector: {matchLabels: {game.kruise.io/owner-gss: lobby}}
namespaceSelector: {matchExpressions: [{key: tier, operator: In, values: [prod]}]}
matchConditions:
- {name: not-canary, expression: "!('canary' in object.metadata.labels)"}
- {name: create-only, expression: "request.operation == 'CREATE'"}
priority: -5
failureMode: Asynchronous
failureModeExpression: "error.type == 'parameterError' ? 'Synchronous' : 'Asynchronous'"
timeout: 30s
readinessGate: true
retry: {window: 5m, windowExpression: "duration('10m')", interval: 5s, maxInterval: 1m, exhaustedAction: Recreate}
`},
		"window equal to interval": {
			spec:    `{plugins: ["*"], retry: {window: 5s, interval: 5s, maxInterval: 5s}}`,
			wantErr: []string{"spec.retry.interval", "interval must be shorter than window"},
		},
		"interval alone above the default maxInterval and window": {
			spec:    `{plugins: ["*"], retry: {interval: 2m}}`,
			wantErr: []string{"spec.retry.interval", "interval must not be longer than maxInterval (unset, maxInterval is 60s", "interval must be shorter than window"},
		},
		"interval 2m with maxInterval and window": {spec: `{plugins: ["*"], retry: {interval: 2m, maxInterval: 5m, window: 30m}}`},
		"missing plugins":                         {spec: `{failureMode: Synchronous}`, wantErr: []string{"spec.plugins", "Required value"}},
		"empty plugins":                           {spec: `{plugins: []}`, wantErr: []string{"spec.plugins", "at least 1 items"}},
		"duplicate plugin": {
			spec:    `{plugins: ["Kubernetes-HostPort", "Kubernetes-HostPort"]}`,
			wantErr: []string{"spec.plugins[1]", "Duplicate value"},
		},
		"too many plugins": {
			spec:    fmt.Sprintf(`{plugins: [%s]}`, strings.Join(manyPlugins, ", ")),
			wantErr: []string{"spec.plugins", "Too many", "must have at most 32 items"},
		},
		"plugin name too long": {
			spec:    fmt.Sprintf(`{plugins: [%q]}`, strings.Repeat("p", 64)),
			wantErr: []string{"spec.plugins[0]", "Too long"},
		},
		"plugin name with space": {
			spec:    `{plugins: ["Kubernetes HostPort"]}`,
			wantErr: []string{"spec.plugins[0]", "should match"},
		},
		"bad failureMode enum": {
			spec:    `{plugins: ["*"], failureMode: Sometimes}`,
			wantErr: []string{"spec.failureMode", "Unsupported value", `"Synchronous"`, `"Asynchronous"`},
		},
		"bad exhaustedAction enum": {
			spec:    `{plugins: ["*"], retry: {exhaustedAction: Delete}}`,
			wantErr: []string{"spec.retry.exhaustedAction", "Unsupported value", `"Event"`, `"Recreate"`},
		},
		"timeout in days": {
			spec:    `{plugins: ["*"], timeout: 1d}`,
			wantErr: []string{"spec.timeout", "type conversion error", "timeout must be a duration more than 0s and at most 30s"},
		},
		"timeout above 30s": {
			spec:    `{plugins: ["*"], timeout: 45s}`,
			wantErr: []string{"spec.timeout", "timeout must be a duration more than 0s and at most 30s"},
		},
		"zero timeout": {
			spec:    `{plugins: ["*"], timeout: 0s}`,
			wantErr: []string{"spec.timeout", "timeout must be a duration more than 0s"},
		},
		"zero interval": {
			spec:    `{plugins: ["*"], retry: {interval: 0s}}`,
			wantErr: []string{"spec.retry.interval", "interval must be a positive duration"},
		},
		"negative window": {
			spec:    `{plugins: ["*"], retry: {window: -1m}}`,
			wantErr: []string{"spec.retry.window", "window must be a positive duration"},
		},
		"maxInterval below interval": {
			spec:    `{plugins: ["*"], retry: {interval: 10s, maxInterval: 5s}}`,
			wantErr: []string{"spec.retry.interval", "interval must not be longer than maxInterval"},
		},
		"window below interval": {
			spec:    `{plugins: ["*"], retry: {window: 3s, interval: 5s}}`,
			wantErr: []string{"spec.retry.interval", "interval must be shorter than window"},
		},
		"bounds": {spec: `{plugins: ["Kubernetes-HostPort"], bounds: {failureModes: [Synchronous], minInterval: 1s, maxWindow: 10m, exhaustedActions: [Event], readinessGate: Required}}`},
		"empty bounds": {
			spec:    `{plugins: ["*"], bounds: {}}`,
			wantErr: []string{"spec.bounds", "at least 1 properties"},
		},
		"bounds minInterval not below maxWindow": {
			spec:    `{plugins: ["*"], bounds: {minInterval: 10m, maxWindow: 10m}}`,
			wantErr: []string{"spec.bounds.minInterval", "minInterval must be shorter than maxWindow"},
		},
		"bounds zero maxWindow": {
			spec:    `{plugins: ["*"], bounds: {maxWindow: 0s}}`,
			wantErr: []string{"spec.bounds.maxWindow", "maxWindow must be a positive duration"},
		},
		"bounds bad failure mode": {
			spec:    `{plugins: ["*"], bounds: {failureModes: [Never]}}`,
			wantErr: []string{"spec.bounds.failureModes[0]", "Unsupported value"},
		},
		"bounds duplicate exhausted action": {
			spec:    `{plugins: ["*"], bounds: {exhaustedActions: [Event, Event]}}`,
			wantErr: []string{"spec.bounds.exhaustedActions[1]", "Duplicate value"},
		},
		"bounds bad readinessGate": {
			spec:    `{plugins: ["*"], bounds: {readinessGate: Always}}`,
			wantErr: []string{"spec.bounds.readinessGate", "Unsupported value"},
		},
		"duplicate matchCondition name": {
			spec: `
plugins: ["*"]
matchConditions:
- {name: a, expression: "true"}
- {name: a, expression: "false"}
`,
			wantErr: []string{"spec.matchConditions[1]", "Duplicate value", `"name":"a"`},
		},
		"too many matchConditions": {
			spec:    fmt.Sprintf(`{plugins: ["*"], matchConditions: [%s]}`, manyConditions(17)),
			wantErr: []string{"spec.matchConditions", "must have at most 16 items"},
		},
		"matchCondition name not qualified": {
			spec:    `{plugins: ["*"], matchConditions: [{name: "-bad", expression: "true"}]}`,
			wantErr: []string{"spec.matchConditions[0].name", "should match"},
		},
		"too-long expression": {
			spec:    fmt.Sprintf(`{plugins: ["*"], matchConditions: [{name: long, expression: %q}]}`, longExpr),
			wantErr: []string{"spec.matchConditions[0].expression", "Too long", "4096"},
		},
		"too-long failureModeExpression": {
			spec:    fmt.Sprintf(`{plugins: ["*"], failureModeExpression: %q}`, longExpr),
			wantErr: []string{"spec.failureModeExpression", "Too long"},
		},
		"empty windowExpression": {
			spec:    `{plugins: ["*"], retry: {windowExpression: ""}}`,
			wantErr: []string{"spec.retry.windowExpression", "at least 1 chars"},
		},
	}
	i := 0
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			i++
			spec := map[string]any{}
			if err := yaml.Unmarshal([]byte(tc.spec), &spec); err != nil {
				t.Fatalf("bad test spec: %v", err)
			}
			obj := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "policy.game.kruise.io/v1alpha1",
				"kind":       "NetworkPluginPolicy",
				"metadata":   map[string]any{"name": fmt.Sprintf("case-%d", i), "namespace": ns},
				"spec":       spec,
			}}
			_, err := dyn.Resource(nppResource).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{})
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("valid policy rejected: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("invalid policy accepted; want an error with %q", tc.wantErr)
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("error is %v (reason %s), want reason Invalid", err, apierrors.ReasonForError(err))
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
		})
	}
}

func manyConditions(n int) string {
	var parts []string
	for i := range n {
		parts = append(parts, fmt.Sprintf(`{name: c%d, expression: "true"}`, i))
	}
	return strings.Join(parts, ", ")
}

// createNamespace creates a namespace named after prefix with a random suffix.
func createNamespace(t *testing.T, prefix string) string {
	t.Helper()
	cs := kubernetes.NewForConfigOrDie(cp.Config)
	ns, err := cs.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	return ns.Name
}
