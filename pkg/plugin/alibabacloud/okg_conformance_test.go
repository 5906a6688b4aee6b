package alibabacloud_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/alibabacloud"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// resultCase is one case of testdata/okg-conformance/cases.json: OKG's own recording of
// AlibabaCloud-EIP or AlibabaCloud-NATGW (the inputs; out-okg.json holds OKG's outputs).
type resultCase struct {
	ID           string          `json:"id"`
	Plugin       string          `json:"plugin"`
	ProviderTOML string          `json:"providerToml"`
	Objects      []any           `json:"objects"`
	Pod          json.RawMessage `json:"pod"`
	Steps        []struct {
		Op       string          `json:"op"`
		Pod      string          `json:"pod"`
		PodPatch json.RawMessage `json:"podPatch"`
		Object   map[string]any  `json:"object"`
		Kind     string          `json:"kind"`
		Name     string          `json:"name"`
		Patch    json.RawMessage `json:"patch"`
	} `json:"steps"`
}

// resultOKG is OKG's recording of a case (run 1; none of these cases varies across runs).
type resultOKG struct {
	ProviderRegistered bool `json:"providerRegistered"`
	Steps              []struct {
		Outcome string `json:"outcome"`
		Error   *struct {
			Type  string `json:"type"`
			Panic string `json:"panic"`
		} `json:"error"`
		PodOut *struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"podOut"`
	} `json:"steps"`
}

// resultDeliberate are the cases in which these plugins do not do what OKG did, on purpose,
// and the step from which they are not compared, with the test that holds the difference.
var resultDeliberate = map[string]struct {
	from int
	why  string
}{
	"eip-05-invalid-conf-json": {0, "a network-conf that is not JSON is a parameterError at CREATE and UPDATE; OKG panics (TestResultPluginsBadInput)"},
}

// TestResultPluginsOKGConformance replays OKG's recorded cases of AlibabaCloud-EIP and
// AlibabaCloud-NATGW against this project's plugins, as OKG's recording drove them (a fake
// client; pods stored only when admitted; Terway's PodEIP and the DNAT controller's PodDNAT
// written as steps), and compares each step's outcome and the pod's annotations, network-status
// included. It prints how many steps it compared.
func TestResultPluginsOKGConformance(t *testing.T) {
	var cases []resultCase
	var okg map[string]resultOKG
	for file, v := range map[string]any{"cases.json": &cases, "out-okg.json": &okg} {
		data, err := os.ReadFile("testdata/okg-conformance/" + file)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, v); err != nil {
			t.Fatal(err)
		}
	}
	compared := 0
	for _, cs := range cases {
		t.Run(cs.ID, func(t *testing.T) {
			res := okg[cs.ID]
			var cfg plugin.Config
			if _, err := toml.Decode(cs.ProviderTOML, &cfg); err != nil {
				t.Fatal(err)
			}
			served := false
			for _, p := range alibabacloud.Plugins(cfg) {
				served = served || p.Name() == cs.Plugin
			}
			if served != res.ProviderRegistered {
				t.Fatalf("served %t, OKG registered the provider: %t", served, res.ProviderRegistered)
			}
			if !served {
				return
			}
			from := len(cs.Steps)
			if d, ok := resultDeliberate[cs.ID]; ok {
				from = d.from
			}
			h := newResultHarness(t, cs)
			for i, st := range cs.Steps[:from] {
				got := h.step(i)
				want := res.Steps[i]
				if want.Error != nil || want.Outcome != got.outcome {
					t.Fatalf("step %d (%s): outcome %q (%v), OKG's %q (%+v)", i, st.Op, got.outcome, got.err, want.Outcome, want.Error)
				}
				if want.PodOut != nil {
					wantAnn := want.PodOut.Annotations
					delete(got.annotations, networkstatus.AnnotationNetworkConf)
					if diff := cmp.Diff(wantAnn, got.annotations); diff != "" {
						t.Fatalf("step %d (%s): pod annotations (-OKG +ours):\n%s", i, st.Op, diff)
					}
				}
				compared++
			}
		})
	}
	t.Logf("compared %d steps of %d cases with OKG's", compared, len(cases))
}

// resultHarness drives one case.
type resultHarness struct {
	t    *testing.T
	cs   resultCase
	c    client.Client
	p    plugin.Plugin
	pods map[string]*corev1.Pod
}

func resultScheme(t *testing.T) *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{alibabacloud.PodEIPKind, alibabacloud.PodDNATKind} {
		s.AddKnownTypeWithName(alibabacloud.GroupVersion.WithKind(kind), &unstructured.Unstructured{})
		s.AddKnownTypeWithName(alibabacloud.GroupVersion.WithKind(kind+"List"), &unstructured.UnstructuredList{})
	}
	return s
}

func newResultHarness(t *testing.T, cs resultCase) *resultHarness {
	b := fake.NewClientBuilder().WithScheme(resultScheme(t))
	for _, obj := range cs.Objects {
		m, ok := obj.(map[string]any)
		if !ok {
			t.Fatalf("object %v is not a JSON object", obj)
		}
		b = b.WithObjects(&unstructured.Unstructured{Object: m})
	}
	h := &resultHarness{t: t, cs: cs, c: b.Build(), pods: map[string]*corev1.Pod{}}
	h.restart()
	return h
}

func (h *resultHarness) restart() {
	var cfg plugin.Config
	if _, err := toml.Decode(h.cs.ProviderTOML, &cfg); err != nil {
		h.t.Fatal(err)
	}
	for _, p := range alibabacloud.Plugins(cfg) {
		if p.Name() == h.cs.Plugin {
			h.p = p
		}
	}
}

type stepResult struct {
	outcome     string
	err         error
	annotations map[string]string
}

// step runs step i of the case.
func (h *resultHarness) step(i int) stepResult {
	ctx := context.Background()
	st := h.cs.Steps[i]
	name := st.Pod
	if name == "" {
		var pod corev1.Pod
		if err := json.Unmarshal(h.cs.Pod, &pod); err != nil {
			h.t.Fatal(err)
		}
		name = pod.Name
	}
	switch st.Op {
	case "create":
		pod := &corev1.Pod{}
		if err := json.Unmarshal(h.cs.Pod, pod); err != nil {
			h.t.Fatal(err)
		}
		pod.Name = name
		if pod.Labels != nil && pod.Labels["statefulset.kubernetes.io/pod-name"] != "" {
			pod.Labels["statefulset.kubernetes.io/pod-name"] = name
		}
		out, err := h.p.OnPodAdded(ctx, h.c, pod)
		if err != nil && !plugin.IsWarning(err) {
			return stepResult{outcome: "denied", err: err}
		}
		out.UID = types.UID("uid-" + name)
		h.pods[name] = out
		return stepResult{outcome: "admitted", annotations: maps.Clone(out.Annotations)}
	case "update":
		pod, ok := h.pods[name]
		if !ok {
			return stepResult{outcome: "skipped: pod " + name + " does not exist"}
		}
		cur, err := json.Marshal(pod)
		if err != nil {
			h.t.Fatal(err)
		}
		if len(st.PodPatch) > 0 {
			if cur, err = jsonpatch.MergePatch(cur, st.PodPatch); err != nil {
				h.t.Fatal(err)
			}
		}
		next := &corev1.Pod{}
		if err := json.Unmarshal(cur, next); err != nil {
			h.t.Fatal(err)
		}
		out, err := h.p.OnPodUpdated(ctx, h.c, next)
		if err != nil && !plugin.IsWarning(err) {
			return stepResult{outcome: "denied", err: err}
		}
		h.pods[name] = out
		return stepResult{outcome: "admitted", annotations: maps.Clone(out.Annotations)}
	case "delete":
		delete(h.pods, name)
		return stepResult{outcome: "admitted"}
	case "createObject":
		u := &unstructured.Unstructured{Object: st.Object}
		if u.GetKind() == "Pod" {
			pod := &corev1.Pod{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(st.Object, pod); err != nil {
				h.t.Fatal(err)
			}
			h.pods[pod.Name] = pod
			return stepResult{outcome: "created"}
		}
		if err := h.c.Create(ctx, u.DeepCopy()); err != nil {
			h.t.Fatal(err)
		}
		return stepResult{outcome: "created"}
	case "patchObject":
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(alibabacloud.GroupVersion.WithKind(st.Kind))
		u.SetNamespace("default")
		u.SetName(st.Name)
		if err := h.c.Patch(ctx, u, client.RawPatch(types.MergePatchType, st.Patch)); err != nil {
			h.t.Fatal(err)
		}
		return stepResult{outcome: "patched"}
	case "deleteObject":
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(alibabacloud.GroupVersion.WithKind(st.Kind))
		u.SetNamespace("default")
		u.SetName(st.Name)
		if err := h.c.Delete(ctx, u); err != nil {
			h.t.Fatal(err)
		}
		return stepResult{outcome: "deleted"}
	case "restart":
		h.restart()
		return stepResult{outcome: "restarted"}
	}
	h.t.Fatalf("step %d: op %q not driven", i, st.Op)
	return stepResult{}
}

// TestResultPluginsBadInput: a network-conf that is not JSON is a parameterError naming
// game.kruise.io/network-conf at CREATE and UPDATE (OKG panics at both: eip-05), and a parameter the plugin does not pass on is a warning naming it (OKG
// ignores it silently: eip-02's Unknown).
func TestResultPluginsBadInput(t *testing.T) {
	for _, p := range []plugin.Plugin{alibabacloud.NewEIP(), alibabacloud.NewNATGW()} {
		t.Run(p.Name(), func(t *testing.T) {
			pod := &corev1.Pod{}
			pod.Namespace, pod.Name = "default", "gs-0"
			pod.Annotations = map[string]string{networkstatus.AnnotationNetworkType: p.Name(), networkstatus.AnnotationNetworkConf: "nope"}
			c := fake.NewClientBuilder().WithScheme(resultScheme(t)).Build()
			for op, run := range map[string]func() error{
				"CREATE": func() error { _, err := p.OnPodAdded(context.Background(), c, pod.DeepCopy()); return err },
				"UPDATE": func() error { _, err := p.OnPodUpdated(context.Background(), c, pod.DeepCopy()); return err },
			} {
				err := run()
				if plugin.TypeOf(err) != plugin.ParameterError || !strings.Contains(err.Error(), networkstatus.AnnotationNetworkConf) {
					t.Errorf("%s of a network-conf that is not JSON: %v, want a parameterError naming %s", op, err, networkstatus.AnnotationNetworkConf)
				}
			}
			pod.Annotations[networkstatus.AnnotationNetworkConf] = `[{"name":"Unknown","value":"x"}]`
			_, err := p.OnPodAdded(context.Background(), c, pod.DeepCopy())
			if !plugin.IsWarning(err) || !strings.Contains(err.Error(), "Unknown") {
				t.Errorf("an unknown parameter: %v, want a warning naming it", err)
			}
		})
	}
}

// readyEIPPod is an AlibabaCloud-EIP pod whose network is Ready.
func readyEIPPod() *corev1.Pod {
	pod := &corev1.Pod{}
	pod.Namespace, pod.Name = "default", "gs-0"
	pod.Status.PodIP = "10.244.1.7"
	pod.Annotations = map[string]string{networkstatus.AnnotationNetworkType: alibabacloud.EIPName, networkstatus.AnnotationNetworkConf: `[]`,
		networkstatus.AnnotationNetworkStatus: `{"internalAddresses":[{"ip":"10.244.1.7"}],"externalAddresses":[{"ip":"203.0.113.7"}],"currentNetworkState":"Ready","createTime":null,"lastTransitionTime":null}`}
	return pod
}

// TestResultReadFailureKeepsReady: a PodEIP that cannot be read, because the API server does
// not serve the kind (Terway's CRD missing or being reinstalled) or the read fails, is an
// Unknown apiCallError that leaves a Ready network as it was (KeepsReady: the webhook keeps
// it, unknown is not broken); the missing kind is named, with reason Unavailable.
func TestResultReadFailureKeepsReady(t *testing.T) {
	for name, readErr := range map[string]error{
		"kind not served": &meta.NoKindMatchError{GroupKind: alibabacloud.GroupVersion.WithKind(alibabacloud.PodEIPKind).GroupKind()},
		"read failed":     apierrors.NewServiceUnavailable("etcd leader changed"),
	} {
		t.Run(name, func(t *testing.T) {
			c := interceptor.NewClient(fake.NewClientBuilder().WithScheme(resultScheme(t)).Build(), interceptor.Funcs{
				Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
					return readErr
				},
			})
			pod := readyEIPPod()
			out, err := alibabacloud.NewEIP().OnPodUpdated(context.Background(), c, pod.DeepCopy())
			var perr *plugin.Error
			if !errors.As(err, &perr) || !perr.KeepsReady() || perr.ReasonOf() != plugin.ReasonUnavailable {
				t.Fatalf("error %v, want an Unknown apiCallError of reason Unavailable that keeps a Ready network", err)
			}
			if name == "kind not served" && !strings.Contains(err.Error(), alibabacloud.PodEIPKind) {
				t.Errorf("error %q does not name %s", err, alibabacloud.PodEIPKind)
			}
			if got := out.Annotations[networkstatus.AnnotationNetworkStatus]; got != pod.Annotations[networkstatus.AnnotationNetworkStatus] {
				t.Errorf("network-status %s, want the Ready one kept", got)
			}
		})
	}
}

// TestResultReadThroughTheCache: with a reader given (UseResultReader: the manager's cache),
// the answer is read through it, not through the client of the run, which for unstructured
// objects goes to the API server.
func TestResultReadThroughTheCache(t *testing.T) {
	podEIP := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"eipAddress": "203.0.113.9", "privateIPAddress": "10.244.1.7"}}}
	podEIP.SetGroupVersionKind(alibabacloud.GroupVersion.WithKind(alibabacloud.PodEIPKind))
	podEIP.SetNamespace("default")
	podEIP.SetName("gs-0")
	cache := fake.NewClientBuilder().WithScheme(resultScheme(t)).WithObjects(podEIP).Build()
	live := interceptor.NewClient(fake.NewClientBuilder().WithScheme(resultScheme(t)).Build(), interceptor.Funcs{
		Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
			t.Error("the answer was read through the run's client, not the cache")
			return apierrors.NewServiceUnavailable("not here")
		},
	})
	p := alibabacloud.NewEIP()
	p.UseResultReader(cache)
	pod := readyEIPPod()
	pod.Annotations[networkstatus.AnnotationNetworkStatus] = `{"currentNetworkState":"Waiting","createTime":null,"lastTransitionTime":null}`
	out, err := p.OnPodUpdated(context.Background(), live, pod)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := networkstatus.StatusFromPod(out); st == nil || st.CurrentNetworkState != networkstatus.NetworkReady || st.ExternalAddresses[0].IP != "203.0.113.9" {
		t.Errorf("status %+v, want Ready with the cached PodEIP's address", st)
	}
}
