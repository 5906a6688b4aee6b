package pod

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	policyv1alpha1 "github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// gameServerPod is a pod as the apiserver hands it to the webhook at CREATE: a game server
// of an OKG GameServerSet with a sidecar, defaults filled in, the service account token
// volume injected.
func gameServerPod(networkType, conf string) *corev1.Pod {
	term := int64(30)
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "lobby-3", GenerateName: "lobby-", Namespace: testNS,
			Labels: map[string]string{
				"app": "lobby", "game.kruise.io/owner-gss": "lobby", "apps.kruise.io/controller-revision-hash": "lobby-5d8f7c9b6",
				"statefulset.kubernetes.io/pod-name": "lobby-3", "apps.kruise.io/pod-index": "3",
			},
			Annotations: map[string]string{
				networkstatus.AnnotationNetworkType: networkType,
				networkstatus.AnnotationNetworkConf: conf,
				AnnotationTraceparent:               "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
				"game.kruise.io/gs-template":        `{"metadata":{},"spec":{"containers":null}}`,
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps.kruise.io/v1beta1", Kind: "StatefulSet", Name: "lobby", UID: "7d1c2a4e-8b1f-4a8e-9c3d-2f6e5b4a3c21",
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "game", Image: "registry.example.com/games/lobby:1.42.0", ImagePullPolicy: corev1.PullIfNotPresent,
				Args: []string{"--port=7777", "--query-port=27015", "--max-players=64"},
				Ports: []corev1.ContainerPort{
					{Name: "game", ContainerPort: 7777, Protocol: corev1.ProtocolUDP},
					{Name: "query", ContainerPort: 27015, Protocol: corev1.ProtocolTCP},
				},
				Env: []corev1.EnvVar{
					{Name: "REGION", Value: "eu-west"},
					{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}},
					{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "status.podIP"}}},
				},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi")},
					Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("2Gi")},
				},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "config", MountPath: "/etc/game"},
					{Name: "kube-api-access-x7k2p", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true},
				},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(27015)}},
					PeriodSeconds: 5, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3},
				TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile,
			}, {
				Name: "log-shipper", Image: "registry.example.com/infra/fluent-bit:3.1", ImagePullPolicy: corev1.PullIfNotPresent,
				Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 2020, Protocol: corev1.ProtocolTCP}},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
				},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "kube-api-access-x7k2p", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true},
				},
				TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile,
			}},
			Volumes: []corev1.Volume{
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "lobby-config"}, DefaultMode: ptr.To[int32](420)}}},
				{Name: "kube-api-access-x7k2p", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
					DefaultMode: ptr.To[int32](420),
					Sources: []corev1.VolumeProjection{
						{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: ptr.To[int64](3607), Path: "token"}},
						{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
							Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
					},
				}}},
			},
			RestartPolicy: corev1.RestartPolicyAlways, TerminationGracePeriodSeconds: &term, DNSPolicy: corev1.DNSClusterFirst,
			ServiceAccountName: "default", DeprecatedServiceAccount: "default", SchedulerName: corev1.DefaultSchedulerName,
			SecurityContext: &corev1.PodSecurityContext{}, Priority: ptr.To[int32](0), EnableServiceLinks: ptr.To(true),
			PreemptionPolicy: ptr.To(corev1.PreemptLowerPriority), Hostname: "lobby-3", Subdomain: "lobby",
			Tolerations: []corev1.Toleration{
				{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
				{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
			},
		},
		Status: corev1.PodStatus{Phase: corev1.PodPending, QOSClass: corev1.PodQOSBurstable},
	}
}

// checkPatch fails unless directPatch covers orig -> mutated and its operations, applied to
// the JSON of orig, give exactly the JSON of mutated, and the same document as the
// operations of admission.PatchResponseFromRaw.
func checkPatch(t testing.TB, orig, mutated *corev1.Pod) []jsonpatch.JsonPatchOperation {
	t.Helper()
	ops, ok := directPatch(orig, mutated)
	if !ok {
		t.Fatalf("directPatch fell back for a change of the fields it covers")
	}
	raw, err := json.Marshal(orig)
	if err != nil {
		t.Fatal(err)
	}
	want, err := json.Marshal(mutated)
	if err != nil {
		t.Fatal(err)
	}
	got := applyOps(t, raw, ops)
	if diff := cmp.Diff(jsonValue(t, want), jsonValue(t, got)); diff != "" {
		t.Fatalf("direct patch %s applied to the original (-want mutated,+got):\n%s", mustJSON(t, ops), diff)
	}
	fromRaw := admission.PatchResponseFromRaw(raw, want)
	if diff := cmp.Diff(jsonValue(t, applyOps(t, raw, fromRaw.Patches)), jsonValue(t, got)); diff != "" {
		t.Fatalf("direct patch and PatchResponseFromRaw disagree (-raw diff,+direct):\n%s", diff)
	}
	return ops
}

func applyOps(t testing.TB, doc []byte, ops []jsonpatch.JsonPatchOperation) []byte {
	t.Helper()
	if len(ops) == 0 {
		return doc
	}
	b := mustJSON(t, ops)
	out, err := applyJSONPatch(doc, b)
	if err != nil {
		t.Fatalf("apply %s: %v", b, err)
	}
	return out
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func jsonValue(t testing.TB, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return v
}

// TestDirectPatch: for changes of annotations, labels, container ports and readiness gates,
// the direct operations turn the original into exactly the mutated pod, as the whole-pod
// diff does.
func TestDirectPatch(t *testing.T) {
	cases := map[string]struct {
		orig    func(p *corev1.Pod)
		mutate  func(p *corev1.Pod)
		wantOps []string // "op path", in order; nil: not checked
	}{
		"nothing changed": {mutate: func(*corev1.Pod) {}, wantOps: []string{}},
		"annotations added, replaced, removed, keys escaped": {
			orig: func(p *corev1.Pod) { p.Annotations["a~b/c"] = "old" },
			mutate: func(p *corev1.Pod) {
				p.Annotations["a~b/c"] = "new"
				p.Annotations["policy.game.kruise.io/network-decision"] = "Synchronous by built-in default"
				delete(p.Annotations, AnnotationTraceparent)
			},
			wantOps: []string{"replace /metadata/annotations/a~0b~1c", "remove /metadata/annotations/game.kruise.io~1traceparent",
				"add /metadata/annotations/policy.game.kruise.io~1network-decision"},
		},
		"annotations on a pod without any": {
			orig:    func(p *corev1.Pod) { p.Annotations = nil },
			mutate:  func(p *corev1.Pod) { p.Annotations = map[string]string{"k": "v"} },
			wantOps: []string{"add /metadata/annotations"},
		},
		"annotations on a pod with an empty map": {
			orig:    func(p *corev1.Pod) { p.Annotations = map[string]string{} },
			mutate:  func(p *corev1.Pod) { p.Annotations["k"] = "v" },
			wantOps: []string{"add /metadata/annotations"},
		},
		"every label removed": {
			mutate:  func(p *corev1.Pod) { p.Labels = map[string]string{} },
			wantOps: []string{"remove /metadata/labels"},
		},
		"label added to a pod without labels": {
			orig:    func(p *corev1.Pod) { p.Labels = nil },
			mutate:  func(p *corev1.Pod) { p.Labels = map[string]string{"statefulset.kubernetes.io/pod-name": p.Name} },
			wantOps: []string{"add /metadata/labels"},
		},
		"label value with JSON specials": {
			mutate:  func(p *corev1.Pod) { p.Labels["x"] = "\"quoted\"\n\\ ~/ é" },
			wantOps: []string{"add /metadata/labels/x"},
		},
		"host ports of one container of two": {
			mutate: func(p *corev1.Pod) {
				p.Spec.Containers[0].Ports[0].HostPort = 8000
				p.Spec.Containers[0].Ports[1].HostPort = 8001
			},
			wantOps: []string{"add /spec/containers/0/ports"},
		},
		"ports added to a container without any": {
			orig: func(p *corev1.Pod) { p.Spec.Containers[1].Ports = nil },
			mutate: func(p *corev1.Pod) {
				p.Spec.Containers[1].Ports = []corev1.ContainerPort{{ContainerPort: 1, HostPort: 2}}
			},
			wantOps: []string{"add /spec/containers/1/ports"},
		},
		"ports removed": {
			mutate:  func(p *corev1.Pod) { p.Spec.Containers[1].Ports = []corev1.ContainerPort{} },
			wantOps: []string{"remove /spec/containers/1/ports"},
		},
		"empty ports become nil": {
			orig:    func(p *corev1.Pod) { p.Spec.Containers[1].Ports = []corev1.ContainerPort{} },
			mutate:  func(p *corev1.Pod) { p.Spec.Containers[1].Ports = nil },
			wantOps: []string{},
		},
		"readiness gate added": {
			mutate:  addReadinessGate,
			wantOps: []string{"add /spec/readinessGates"},
		},
		"readiness gate appended": {
			orig:    func(p *corev1.Pod) { p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "other"}} },
			mutate:  addReadinessGate,
			wantOps: []string{"add /spec/readinessGates"},
		},
		"readiness gates removed": {
			orig:    func(p *corev1.Pod) { p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "other"}} },
			mutate:  func(p *corev1.Pod) { p.Spec.ReadinessGates = nil },
			wantOps: []string{"remove /spec/readinessGates"},
		},
		"everything at once": {
			mutate: func(p *corev1.Pod) {
				p.Annotations[networkstatus.AnnotationNetworkStatus] = `{"currentNetworkState":"NotReady","createTime":null}`
				p.Labels["app"] = "lobby-2"
				delete(p.Labels, "apps.kruise.io/pod-index")
				p.Spec.Containers[1].Ports[0].HostPort = 9000
				addReadinessGate(p)
			},
			wantOps: []string{"add /metadata/annotations/game.kruise.io~1network-status", "replace /metadata/labels/app",
				"remove /metadata/labels/apps.kruise.io~1pod-index", "add /spec/containers/1/ports", "add /spec/readinessGates"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			orig := gameServerPod("Kubernetes-HostPort", `[{"name":"ContainerPorts","value":"game:7777/UDP"}]`)
			if tc.orig != nil {
				tc.orig(orig)
			}
			mutated := orig.DeepCopy()
			tc.mutate(mutated)
			ops := checkPatch(t, orig, mutated)
			if tc.wantOps == nil {
				return
			}
			got := make([]string, 0, len(ops))
			for _, o := range ops {
				got = append(got, o.Operation+" "+o.Path)
			}
			if diff := cmp.Diff(tc.wantOps, got); diff != "" {
				t.Errorf("operations (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestDirectPatchFallsBack: a change anywhere but the covered fields is reported, so that the
// caller diffs the whole pod.
func TestDirectPatchFallsBack(t *testing.T) {
	for name, mutate := range map[string]func(p *corev1.Pod){
		"env":                  func(p *corev1.Pod) { p.Spec.Containers[0].Env[0].Value = "us-east" },
		"container added":      func(p *corev1.Pod) { p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "x"}) },
		"node selector":        func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"pool": "game"} },
		"host network":         func(p *corev1.Pod) { p.Spec.HostNetwork = true },
		"owner reference":      func(p *corev1.Pod) { p.OwnerReferences = nil },
		"finalizer":            func(p *corev1.Pod) { p.Finalizers = []string{"example.com/f"} },
		"status":               func(p *corev1.Pod) { p.Status.PodIP = "10.0.0.1" },
		"init container ports": func(p *corev1.Pod) { p.Spec.InitContainers = []corev1.Container{{Name: "i"}} },
		"kind":                 func(p *corev1.Pod) { p.Kind = "" },
		"resources": func(p *corev1.Pod) {
			p.Spec.Containers[1].Resources.Limits = corev1.ResourceList{"cpu": resource.MustParse("1")}
		},
		"tolerations nil": func(p *corev1.Pod) { p.Spec.Tolerations = nil },
	} {
		t.Run(name, func(t *testing.T) {
			orig := gameServerPod("Kubernetes-NodePort", `[{"name":"PortProtocols","value":"7777/UDP"}]`)
			mutated := orig.DeepCopy()
			mutated.Annotations["k"] = "v"
			mutate(mutated)
			if ops, ok := directPatch(orig, mutated); ok {
				t.Errorf("directPatch = %v, true; want a fall-back", ops)
			}
		})
	}
}

// TestHandlerPatch: the handler answers with the direct operations, keeping fields of the
// request it does not know; when the plugin changes anything else, with the whole-pod
// diff, so that the change is not lost.
func TestHandlerPatch(t *testing.T) {
	hostPorts := func(p *corev1.Pod) { p.Spec.Containers[0].Ports[0].HostPort = 8000 }
	t.Run("direct operations", func(t *testing.T) {
		e := newEnv(t, npp(testNS, "gate", func(s *policyv1alpha1.NetworkPluginPolicySpec) { s.ReadinessGate = ptr.To(true) }))
		e.sync.mutate, e.sync.ready = hostPorts, true
		pod := gameServerPod(syncName, "")
		req := request(t, admissionv1.Create, pod, nil, false)
		// A field this client-go does not know (a newer apiserver's): kept, where the
		// whole-pod diff of the typed pod would remove it.
		req.Object.Raw = []byte(strings.Replace(string(req.Object.Raw), `"spec":{`, `"spec":{"futureField":{"a":1},`, 1))
		resp := e.handler.Handle(context.Background(), req)
		var got []string
		for _, o := range resp.Patches {
			got = append(got, o.Operation+" "+o.Path)
		}
		want := []string{
			"remove /metadata/annotations/game.kruise.io~1traceparent",
			"add /metadata/annotations/game.kruise.io~1network-status",
			"add /metadata/annotations/policy.game.kruise.io~1network-decision",
			"add /metadata/annotations/policy.game.kruise.io~1network-status-digest",
			"add /spec/containers/0/ports",
			"add /spec/readinessGates",
		}
		if diff := cmp.Diff(want, got, sortStrings); diff != "" {
			t.Errorf("operations (-want,+got):\n%s", diff)
		}
		if resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch {
			t.Errorf("patch type = %v, want JSONPatch", resp.PatchType)
		}
		patched := applyOps(t, req.Object.Raw, resp.Patches)
		if !strings.Contains(string(patched), `"futureField":{"a":1}`) {
			t.Errorf("the unknown field was lost: %s", patched)
		}
		admittedPod := admitted(t, req, resp)
		if admittedPod.Spec.Containers[0].Ports[0].HostPort != 8000 || len(admittedPod.Spec.ReadinessGates) != 1 {
			t.Errorf("admitted pod lacks the host port or the readiness gate: %+v", admittedPod.Spec)
		}
	})
	t.Run("whole-pod diff when the plugin changes another field", func(t *testing.T) {
		e := newEnv(t)
		e.sync.mutate = func(p *corev1.Pod) {
			hostPorts(p)
			p.Spec.Containers[0].Env = append(p.Spec.Containers[0].Env, corev1.EnvVar{Name: "HOST_PORT", Value: "8000"})
		}
		pod := gameServerPod(syncName, "")
		req := request(t, admissionv1.Create, pod, nil, false)
		resp := e.handler.Handle(context.Background(), req)
		got := admitted(t, req, resp)
		if env := got.Spec.Containers[0].Env; len(env) != 4 || env[3].Name != "HOST_PORT" {
			t.Errorf("env = %+v, want the plugin's HOST_PORT kept", env)
		}
		if got.Spec.Containers[0].Ports[0].HostPort != 8000 {
			t.Errorf("host port lost")
		}
	})
}

var sortStrings = cmpopts.SortSlices(func(a, b string) bool { return a < b })
