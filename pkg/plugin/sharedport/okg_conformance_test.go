package sharedport_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllertest"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/alibabacloud"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/lb"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/sharedport"
)

// spCase is one case of testdata/okg-conformance/cases.json: OKG's own recording of
// AlibabaCloud-SLB-SharedPort or -NLB-SharedPort (the inputs; out-okg.json holds OKG's
// outputs).
type spCase struct {
	ID           string           `json:"id"`
	Plugin       string           `json:"plugin"`
	ProviderTOML string           `json:"providerToml"`
	Objects      []map[string]any `json:"objects"`
	Pod          json.RawMessage  `json:"pod"`
	// Pods are the pods of other names, when they differ from Pod.
	Pods  map[string]json.RawMessage `json:"pods"`
	Steps []struct {
		Op       string          `json:"op"`
		Pod      string          `json:"pod"`
		PodPatch json.RawMessage `json:"podPatch"`
		Object   map[string]any  `json:"object"`
		Kind     string          `json:"kind"`
		Name     string          `json:"name"`
		Patch    json.RawMessage `json:"patch"`
	} `json:"steps"`
}

// spOKG is OKG's recording of a case (run 1; none of these cases varies across runs).
type spOKG struct {
	ProviderRegistered bool `json:"providerRegistered"`
	Steps              []struct {
		Outcome string `json:"outcome"`
		Error   *struct {
			Type    string `json:"type"`
			Message string `json:"message"`
			Panic   string `json:"panic"`
		} `json:"error"`
		StoreError *string `json:"storeError"`
		PodOut     *struct {
			Annotations map[string]string `json:"annotations"`
			Labels      map[string]string `json:"labels"`
		} `json:"podOut"`
		Services []map[string]any `json:"services"`
	} `json:"steps"`
}

// spDeliberate are the cases in which these plugins do not do what OKG did, on purpose: the
// step from which the case is not compared (what follows differs as a consequence), and the
// test that holds the difference (docs/okg-compatibility.md, "Shared-port load balancers").
var spDeliberate = map[string]struct {
	from int
	why  string
}{
	"slbsp-01-lifecycle-with-gss":                 {6, "a disabled network stays NotReady at every UPDATE; OKG reports Ready at the second one, and re-enabled writes an empty-key label the API server refuses (TestDisabledStaysNotReady)"},
	"nlbsp-01-lifecycle-with-gss":                 {6, "a disabled network stays NotReady at every UPDATE; OKG reports Ready at the second one (TestDisabledStaysNotReady)"},
	"slbsp-02-no-gss-create-denied":               {0, "the shared Service has no owner, so a pod without a GameServerSet is admitted; OKG makes the pod its owner, which the API server refuses at CREATE (TestSharedServiceHasNoOwner)"},
	"nlbsp-02-no-gss-create-denied":               {0, "the shared Service has no owner (TestSharedServiceHasNoOwner)"},
	"slbsp-19-gss-deleted-gc-recreate":            {5, "the shared Service has no owner: deleting a GameServerSet does not garbage-collect it under the other game servers (TestSharedServiceHasNoOwner)"},
	"slbsp-04-backend-limit-200":                  {0, "backends are the game servers of the type the pod informer shows with the load balancer's label; OKG also counts other pods that carry the label (TestBackendsCountedFromGameServers)"},
	"slbsp-05-restart-before-and-after-ccm-label": {5, "a restart keeps every pod's load balancer (recorded at CREATE, counted from the pods); OKG counts from a label the cloud controller writes later and moves pods (TestBackendsCountedFromGameServers)"},
	"slbsp-08-multi-ports":                        {0, "an unparsable PortProtocols entry is a parameterError naming it; OKG skips it (TestSharedPortBadInput)"},
	"slbsp-11-selector-without-equals":            {0, "a ManagedServiceSelector without '=' is a parameterError naming it; OKG panics (TestSharedPortBadInput)"},
	"nlbsp-10-invalid-conf-json":                  {0, "a network-conf that is not JSON is a parameterError; OKG panics (TestSharedPortBadInput)"},
	"slbsp-14-same-name-service-foreign":          {0, "a Service of the load balancer's name that is not a shared Service is refused by name; OKG takes it over (TestForeignServiceNotTakenOver)"},
	"slbsp-10-managed-service-missing":            {3, "AllowNotReadyContainers is not acted on for a shared Service (a warning names it): OKG's publishNotReadyAddresses would change the Service of every game server behind the load balancer (TestAllowNotReadyContainersNotActedOn)"},
	"nlbsp-13-allow-not-ready-containers":         {3, "AllowNotReadyContainers is not acted on for a shared Service (TestAllowNotReadyContainersNotActedOn)"},
}

// TestSharedPortOKGConformance replays OKG's recorded cases of AlibabaCloud-SLB-SharedPort
// and AlibabaCloud-NLB-SharedPort as OKG's recording drove them (a fake client; pods stored
// only when admitted; the cloud controller's and the garbage collector's writes as steps),
// and compares every step's outcome, the pod's labels and network-status, and the Services
// (owners and the config hash aside: docs/okg-compatibility.md says why), up to the
// deliberate differences. It prints how many steps it compared.
func TestSharedPortOKGConformance(t *testing.T) {
	var cases []spCase
	var okg map[string]spOKG
	for file, v := range map[string]any{"cases.json": &cases, "out-okg.json": &okg} {
		data, err := os.ReadFile("testdata/okg-conformance/" + file)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, v); err != nil {
			t.Fatal(err)
		}
	}
	compared, total := 0, 0
	for _, cs := range cases {
		total += len(cs.Steps)
		t.Run(cs.ID, func(t *testing.T) {
			res := okg[cs.ID]
			h := newSPHarness(t, cs)
			if (h.p != nil) != res.ProviderRegistered {
				t.Fatalf("served %t, OKG registered the provider: %t", h.p != nil, res.ProviderRegistered)
			}
			if h.p == nil {
				return
			}
			from := len(cs.Steps)
			if d, ok := spDeliberate[cs.ID]; ok {
				from = d.from
			}
			for i := range cs.Steps[:from] {
				got := h.step(i)
				want := res.Steps[i]
				wantOutcome := want.Outcome
				if want.Error != nil && want.Error.Panic == "" {
					wantOutcome = "denied"
				}
				if want.StoreError != nil {
					wantOutcome = "storeError"
				}
				if got.outcome != wantOutcome {
					t.Fatalf("step %d (%s): outcome %q (%v), OKG's %q (%+v)", i, cs.Steps[i].Op, got.outcome, got.err, wantOutcome, want.Error)
				}
				if want.PodOut != nil && got.pod != nil {
					if diff := cmp.Diff(want.PodOut.Labels, got.pod.Labels, cmp.Comparer(emptyMapsEqual)); diff != "" {
						t.Fatalf("step %d (%s): pod labels (-OKG +ours):\n%s", i, cs.Steps[i].Op, diff)
					}
					if w, g := want.PodOut.Annotations[networkstatus.AnnotationNetworkStatus], got.pod.Annotations[networkstatus.AnnotationNetworkStatus]; w != g {
						t.Fatalf("step %d (%s): network-status\n OKG:  %s\n ours: %s", i, cs.Steps[i].Op, w, g)
					}
				}
				if diff := cmp.Diff(normalizeOKG(t, want.Services), h.services()); diff != "" {
					t.Fatalf("step %d (%s): Services (-OKG +ours):\n%s", i, cs.Steps[i].Op, diff)
				}
				compared++
			}
		})
	}
	t.Logf("compared %d of %d steps of %d cases with OKG's", compared, total, len(cases))
}

func emptyMapsEqual(a, b map[string]string) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return cmp.Equal(a, b)
}

// spService is the part of a shared Service both implementations decide.
type spService struct {
	Name        string
	Annotations map[string]string
	Labels      map[string]string
	Type        corev1.ServiceType
	Class       string
	Selector    map[string]string
	Ports       []string
	Ingress     string
}

func normalize(svc *corev1.Service) spService {
	n := spService{Name: svc.Name, Annotations: map[string]string{}, Labels: map[string]string{}, Type: svc.Spec.Type, Selector: svc.Spec.Selector}
	for k, v := range svc.Annotations {
		if k != lb.AnnotationConfigHash {
			n.Annotations[k] = v
		}
	}
	for k, v := range svc.Labels {
		n.Labels[k] = v
	}
	if svc.Spec.LoadBalancerClass != nil {
		n.Class = *svc.Spec.LoadBalancerClass
	}
	for _, p := range svc.Spec.Ports {
		proto := p.Protocol
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		n.Ports = append(n.Ports, fmt.Sprintf("%s %d/%s->%s", p.Name, p.Port, proto, p.TargetPort.String()))
	}
	for _, in := range svc.Status.LoadBalancer.Ingress {
		n.Ingress += in.IP + in.Hostname + ";"
	}
	return n
}

func normalizeOKG(t *testing.T, raw []map[string]any) []spService {
	var out []spService
	for _, r := range raw {
		svc := &corev1.Service{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(r, svc); err != nil {
			t.Fatal(err)
		}
		out = append(out, normalize(svc))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

type spHarness struct {
	t        *testing.T
	cs       spCase
	c        client.Client
	p        *sharedport.Plugin
	informer *controllertest.FakeInformer
	pods     map[string]*corev1.Pod
}

func schemaGV(group, version string) schema.GroupVersion {
	return schema.GroupVersion{Group: group, Version: version}
}

func newSPHarness(t *testing.T, cs spCase) *spHarness {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	gv := schemaGV("game.kruise.io", "v1alpha1")
	scheme.AddKnownTypeWithName(gv.WithKind("GameServerSet"), &unstructured.Unstructured{})
	scheme.AddKnownTypeWithName(gv.WithKind("GameServerSetList"), &unstructured.UnstructuredList{})
	b := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&corev1.Pod{}, &corev1.Service{})
	h := &spHarness{t: t, cs: cs, pods: map[string]*corev1.Pod{}}
	for _, obj := range cs.Objects {
		u := &unstructured.Unstructured{Object: obj}
		switch u.GetKind() {
		case "Service":
			svc := &corev1.Service{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, svc); err != nil {
				t.Fatal(err)
			}
			b = b.WithObjects(svc)
		case "Pod":
			pod := &corev1.Pod{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, pod); err != nil {
				t.Fatal(err)
			}
			b = b.WithObjects(pod)
			h.pods[pod.Name] = pod
		default:
			b = b.WithObjects(u)
		}
	}
	h.c = b.Build()
	h.restart()
	return h
}

func (h *spHarness) restart() {
	var cfg plugin.Config
	if _, err := toml.Decode(h.cs.ProviderTOML, &cfg); err != nil {
		h.t.Fatal(err)
	}
	h.p = nil
	for _, p := range alibabacloud.Plugins(cfg) {
		if sp, ok := p.(*sharedport.Plugin); ok && p.Name() == h.cs.Plugin {
			h.p = sp
		}
	}
	if h.p == nil {
		return
	}
	h.informer = controllertest.NewFakeInformer(controllertest.Synced)
	if _, err := h.p.UsePodInformer(context.Background(), h.informer); err != nil {
		h.t.Fatal(err)
	}
	for _, pod := range h.pods {
		h.informer.Add(pod)
	}
}

type spResult struct {
	outcome string
	err     error
	pod     *corev1.Pod
}

func (h *spHarness) podName(i int) string {
	if n := h.cs.Steps[i].Pod; n != "" {
		return n
	}
	var pod corev1.Pod
	if err := json.Unmarshal(h.cs.Pod, &pod); err != nil {
		h.t.Fatal(err)
	}
	return pod.Name
}

// store keeps the admitted pod, as the API server would, unless its labels are invalid
// (OKG's empty-key label: storeError).
func (h *spHarness) store(pod *corev1.Pod, created bool) string {
	for k := range pod.Labels {
		if k == "" {
			return "storeError"
		}
	}
	if created {
		pod.UID = types.UID("uid-" + pod.Name)
		h.informer.Add(pod.DeepCopy())
	} else {
		h.informer.Update(h.pods[pod.Name], pod.DeepCopy())
	}
	h.pods[pod.Name] = pod.DeepCopy()
	return "admitted"
}

func (h *spHarness) step(i int) spResult {
	ctx := context.Background()
	st := h.cs.Steps[i]
	name := h.podName(i)
	switch st.Op {
	case "create":
		pod := &corev1.Pod{}
		raw := h.cs.Pod
		if own, ok := h.cs.Pods[name]; ok {
			raw = own
		}
		if err := json.Unmarshal(raw, pod); err != nil {
			h.t.Fatal(err)
		}
		pod.Name = name
		if pod.Labels["statefulset.kubernetes.io/pod-name"] != "" {
			pod.Labels["statefulset.kubernetes.io/pod-name"] = name
		}
		out, err := h.p.OnPodAdded(ctx, h.c, pod)
		if err != nil && !plugin.IsWarning(err) {
			return spResult{outcome: "denied", err: err}
		}
		return spResult{outcome: h.store(out, true), pod: out}
	case "update":
		pod, ok := h.pods[name]
		if !ok {
			return spResult{outcome: "skipped: pod " + name + " does not exist"}
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
			return spResult{outcome: "denied", err: err}
		}
		return spResult{outcome: h.store(out, false), pod: out}
	case "delete":
		if pod, ok := h.pods[name]; ok {
			h.informer.Delete(pod)
			delete(h.pods, name)
		}
		return spResult{outcome: "admitted"}
	case "createObject":
		u := &unstructured.Unstructured{Object: st.Object}
		if u.GetKind() == "Pod" {
			pod := &corev1.Pod{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(st.Object, pod); err != nil {
				h.t.Fatal(err)
			}
			pod.UID = types.UID("uid-" + pod.Name)
			h.pods[pod.Name] = pod
			h.informer.Add(pod.DeepCopy())
			return spResult{outcome: "created"}
		}
		obj := u.DeepCopy()
		if u.GetKind() == "Service" {
			svc := &corev1.Service{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(st.Object, svc); err != nil {
				h.t.Fatal(err)
			}
			if err := h.c.Create(ctx, svc); err != nil {
				return spResult{outcome: "createFailed: " + err.Error()}
			}
			return spResult{outcome: "created"}
		}
		if err := h.c.Create(ctx, obj); err != nil {
			return spResult{outcome: "createFailed: " + err.Error()}
		}
		return spResult{outcome: "created"}
	case "patchObject":
		var obj client.Object
		switch st.Kind {
		case "Service":
			obj = &corev1.Service{}
		default:
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(schemaGV("game.kruise.io", "v1alpha1").WithKind(st.Kind))
			obj = u
		}
		obj.SetNamespace("default")
		obj.SetName(st.Name)
		if err := h.c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, st.Patch)); err != nil {
			return spResult{outcome: "patchFailed: " + err.Error()}
		}
		if strings.Contains(string(st.Patch), `"status"`) {
			if err := h.c.Status().Patch(ctx, obj, client.RawPatch(types.MergePatchType, st.Patch)); err != nil {
				return spResult{outcome: "patchFailed: " + err.Error()}
			}
		}
		return spResult{outcome: "patched"}
	case "deleteObject":
		var obj client.Object = &corev1.Service{}
		if st.Kind != "Service" {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(schemaGV("game.kruise.io", "v1alpha1").WithKind(st.Kind))
			obj = u
		}
		obj.SetNamespace("default")
		obj.SetName(st.Name)
		if err := h.c.Delete(ctx, obj); err != nil {
			return spResult{outcome: "deleteFailed: " + err.Error()}
		}
		return spResult{outcome: "deleted"}
	case "gc":
		// The shared Services have no owners here: the garbage collector deletes none.
		return spResult{outcome: "gc: deleted "}
	case "restart":
		h.restart()
		return spResult{outcome: "restarted"}
	}
	h.t.Fatalf("step %d: op %q not driven", i, st.Op)
	return spResult{}
}

func (h *spHarness) services() []spService {
	var list corev1.ServiceList
	if err := h.c.List(context.Background(), &list); err != nil {
		h.t.Fatal(err)
	}
	var out []spService
	for i := range list.Items {
		out = append(out, normalize(&list.Items[i]))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
