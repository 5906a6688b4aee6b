package alibabacloud_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/alibabacloud"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/lb"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// mnlbCase is one case of testdata/multinlbs-conformance/cases.json (or
// autonlbs-conformance/): OKG's own recording of AlibabaCloud-Multi-NLBs (AlibabaCloud-AutoNLBs),
// the inputs; out-okg.json holds OKG's outputs.
type mnlbCase struct {
	ID           string                     `json:"id"`
	Plugin       string                     `json:"plugin"`
	ProviderTOML string                     `json:"providerToml"`
	Objects      []map[string]any           `json:"objects"`
	Pod          json.RawMessage            `json:"pod"`
	Pods         map[string]json.RawMessage `json:"pods"`
	Steps        []struct {
		Op       string          `json:"op"`
		Pod      string          `json:"pod"`
		PodPatch json.RawMessage `json:"podPatch"`
		Kind     string          `json:"kind"`
		Name     string          `json:"name"`
		Patch    json.RawMessage `json:"patch"`
		Object   json.RawMessage `json:"object"`
	} `json:"steps"`
}

// mnlbOKG is OKG's recording of a case, run 1 (only the order of the readiness gates varies
// across runs: a Go map's order).
type mnlbOKG struct {
	ProviderRegistered bool `json:"providerRegistered"`
	Steps              []struct {
		Outcome string `json:"outcome"`
		Error   *struct {
			Type    string `json:"type"`
			Message string `json:"message"`
			Panic   string `json:"panic"`
		} `json:"error"`
		PodOut *struct {
			Annotations    map[string]string         `json:"annotations"`
			ReadinessGates []corev1.PodReadinessGate `json:"readinessGates"`
		} `json:"podOut"`
		// PodDiff holds, for AutoNLBs, the first container's ports as the step left them;
		// for AutoNLBs-V2, the finalizers and labels it wrote.
		PodDiff []struct {
			Path  string          `json:"path"`
			After json.RawMessage `json:"after"`
		} `json:"podDiff"`
		Services []map[string]any `json:"services"`
		// CustomResources are the operators' objects (AutoNLBs-V2: EIP, NLB) after the step.
		CustomResources []map[string]any `json:"customResources"`
	} `json:"steps"`
}

// mnlbDeliberate are the cases in which AlibabaCloud-Multi-NLBs does not do what OKG did, on
// purpose: the step from which the case is not compared (what follows differs as a
// consequence), and the test that holds the difference (docs/okg-compatibility.md,
// "AlibabaCloud-Multi-NLBs").
var mnlbDeliberate = map[string]struct {
	from int
	why  string
}{
	"mnlb-01-lifecycle":                   {2, "every line's Service is made in one run; OKG makes one per UPDATE (TestMultiNLBsLinesInOneRun)"},
	"mnlb-04-balanced-policy":             {12, "ports are chosen at CREATE: the fifth pod, for which no level has room, is refused there; OKG admits it and refuses its updates (TestMultiNLBsExhaustedAtCreate)"},
	"mnlb-10-fixed-gss":                   {14, "a Fixed Service's ports are freed when the Service is gone (the garbage collector, after its GameServerSet), never by a name's substring; OKG frees them at the DELETE admission of every pod whose key contains default/gs, gsx-0's too (TestMultiNLBsFixedReleaseIsExact)"},
	"mnlb-13-old-service-of-previous-pod": {4, "once the earlier pod's Service is gone, the new one is on the NLB the network-conf names; OKG reuses the allocation it rebuilt from the old Service at Init, without an NLB id (TestMultiNLBsEarlierPodsServiceIsWaitedFor)"},
	"mnlb-14-foreign-service-no-owner":    {2, "a Service of a line's name without owners is someone else's and is refused by name; OKG panics (TestMultiNLBsBadInput)"},
	"mnlb-16-invalid-conf-json":           {0, "a network-conf that is not JSON is a parameterError; OKG panics (TestMultiNLBsBadInput)"},
	"mnlb-17-conf-adds-port":              {3, "a network-conf that adds a port gets a new allocation with a port per entry; OKG keeps its one-port allocation and sends the port twice (TestMultiNLBsConfChangeReallocates)"},
	"mnlb-19-lowercase-protocol":          {0, "a lower-case protocol is a parameterError naming PortProtocols at CREATE; OKG sends a Service the API server refuses (TestMultiNLBsBadInput)"},
	"mnlb-20-nlbidnames-uppercase-name":   {0, "lines that differ only in case are a parameterError naming NlbIdNames; OKG gives both one Service name (TestMultiNLBsBadInput)"},
}

// TestMultiNLBsOKGConformance replays OKG's recorded AlibabaCloud-Multi-NLBs cases as OKG's
// recording drove them (a fake client; pods stored only when admitted, with OKG's uids; the
// cloud controller's and the garbage collector's writes as steps) and compares every step's
// outcome, the pod's network-status and readiness gates (as a set: OKG's order is a Go
// map's), and the Services (the config hash aside: docs/okg-compatibility.md says why), up to
// the deliberate differences. It prints how many steps it compared.
func TestMultiNLBsOKGConformance(t *testing.T) {
	replayOKG(t, "testdata/multinlbs-conformance/", mnlbDeliberate, replayOptions{})
}

// replayOptions are what a plugin's replay leaves out, each a deliberate difference named by
// its test.
type replayOptions struct {
	// objectsFromFirstUpdate compares the operators' objects only from a case's first
	// update: OKG makes some at its start (Init), this project at the game servers' updates.
	objectsFromFirstUpdate bool
	// ownServicesOnly leaves out OKG's Services that select a pod the case has not made:
	// OKG makes every slot's Service of an NLB at once, this project a game server's own.
	ownServicesOnly bool
}

// replayOKG replays the recorded cases of dir (cases.json, out-okg.json) step by step up to
// the step deliberate names for each case, comparing each step's outcome, the pod's
// network-status, readiness gates and first container's ports, and the Services.
func replayOKG(t *testing.T, dir string, deliberate map[string]struct {
	from int
	why  string
}, opts replayOptions) {
	var cases []mnlbCase
	var okg map[string]mnlbOKG
	for file, v := range map[string]any{"cases.json": &cases, "out-okg.json": &okg} {
		data, err := os.ReadFile(dir + file)
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
			h := newMNLBHarness(t, cs)
			if (h.p != nil) != res.ProviderRegistered {
				t.Fatalf("served %t, OKG registered the provider: %t", h.p != nil, res.ProviderRegistered)
			}
			if h.p == nil {
				return
			}
			from := len(cs.Steps)
			if d, ok := deliberate[cs.ID]; ok {
				from = d.from
			}
			seenUpdate := false
			for i := range cs.Steps[:from] {
				got := h.step(i)
				want := res.Steps[i]
				wantOutcome := want.Outcome
				if want.Error != nil {
					wantOutcome = "denied"
				}
				if strings.HasPrefix(wantOutcome, "gc") {
					wantOutcome = "gc"
				}
				if got.outcome != wantOutcome {
					t.Fatalf("step %d (%s): outcome %q (%v), OKG's %q (%+v)", i, cs.Steps[i].Op, got.outcome, got.err, wantOutcome, want.Error)
				}
				if want.PodOut != nil && got.pod != nil {
					if w, g := want.PodOut.Annotations[networkstatus.AnnotationNetworkStatus], got.pod.Annotations[networkstatus.AnnotationNetworkStatus]; w != g {
						t.Fatalf("step %d (%s): network-status\n OKG:  %s\n ours: %s", i, cs.Steps[i].Op, w, g)
					}
					if diff := cmp.Diff(gateSet(want.PodOut.ReadinessGates), gateSet(got.pod.Spec.ReadinessGates)); diff != "" {
						t.Fatalf("step %d (%s): readiness gates (-OKG +ours):\n%s", i, cs.Steps[i].Op, diff)
					}
					for _, d := range want.PodDiff {
						comparePodDiff(t, i, cs.Steps[i].Op, d.Path, d.After, got.pod)
					}
				}
				wantSvcs := normalizeMNLBOKG(t, want.Services)
				if opts.ownServicesOnly {
					wantSvcs = slices.DeleteFunc(wantSvcs, func(s mnlbService) bool {
						_, ok := h.pods[s.Selector[statefulSetPodName]]
						return !ok && !h.madeService(s.Name)
					})
				}
				if diff := cmp.Diff(wantSvcs, h.services()); diff != "" {
					t.Fatalf("step %d (%s): Services (-OKG +ours):\n%s", i, cs.Steps[i].Op, diff)
				}
				if seenUpdate = seenUpdate || cs.Steps[i].Op == "update"; seenUpdate || !opts.objectsFromFirstUpdate {
					if diff := cmp.Diff(normalizeObjects(t, want.CustomResources), h.customResources()); diff != "" {
						t.Fatalf("step %d (%s): operators' objects (-OKG +ours):\n%s", i, cs.Steps[i].Op, diff)
					}
				}
				compared++
			}
		})
	}
	t.Logf("compared %d of %d steps of %d cases with OKG's", compared, total, len(cases))
}

// statefulSetPodName is the label a per-pod Service selects its pod by.
const statefulSetPodName = "statefulset.kubernetes.io/pod-name"

// comparePodDiff compares what OKG's step wrote at path (the first container's ports, the
// finalizers, a label) with the pod the plugin returned.
func comparePodDiff(t *testing.T, i int, op, path string, after json.RawMessage, pod *corev1.Pod) {
	t.Helper()
	var want, got any
	switch {
	case path == "/spec/containers/0/ports":
		var ports []corev1.ContainerPort
		if err := json.Unmarshal(after, &ports); err != nil {
			t.Fatal(err)
		}
		want, got = ports, pod.Spec.Containers[0].Ports
	case path == "/metadata/finalizers":
		var f []string
		if err := json.Unmarshal(after, &f); err != nil {
			t.Fatal(err)
		}
		want, got = f, pod.Finalizers
	case strings.HasPrefix(path, "/metadata/labels/"):
		var v string
		if err := json.Unmarshal(after, &v); err != nil {
			t.Fatal(err)
		}
		want, got = v, pod.Labels[strings.ReplaceAll(strings.TrimPrefix(path, "/metadata/labels/"), "~1", "/")]
	default:
		return
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("step %d (%s): %s (-OKG +ours):\n%s", i, op, path, diff)
	}
}

// objectKinds are the operators' kinds the replay stores, by the recording's kind names.
var objectKinds = map[string]schema.GroupVersionKind{"EIP": alibabacloud.EIPGVK, "NLB": alibabacloud.NLBGVK}

// normalizeObjects is the operators' objects as the replay compares them: kind, name,
// labels, spec and status, as JSON, sorted.
func normalizeObjects(t *testing.T, raw []map[string]any) []string {
	var out []string
	for _, r := range raw {
		u := &unstructured.Unstructured{Object: r}
		status, _, _ := unstructured.NestedMap(r, "status")
		if len(status) == 0 {
			status = nil
		}
		b, err := json.Marshal(map[string]any{"kind": u.GetKind(), "name": u.GetName(), "labels": u.GetLabels(), "spec": r["spec"], "status": status})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(b))
	}
	sort.Strings(out)
	return out
}

// gateSet is the readiness gates' condition types, sorted.
func gateSet(gates []corev1.PodReadinessGate) []string {
	var out []string
	for _, g := range gates {
		out = append(out, string(g.ConditionType))
	}
	sort.Strings(out)
	return out
}

// mnlbService is the part of a line's Service both implementations decide.
type mnlbService struct {
	Name          string
	Annotations   map[string]string
	Labels        map[string]string
	Owners        []string
	Type          corev1.ServiceType
	Class         string
	ETP           corev1.ServiceExternalTrafficPolicy
	NoNodePorts   bool
	Selector      map[string]string
	Ports         []string
	Ingress       string
	FinalizerKeys []string
}

func normalizeMNLB(svc *corev1.Service) mnlbService {
	n := mnlbService{Name: svc.Name, Annotations: map[string]string{}, Labels: map[string]string{}, Type: svc.Spec.Type,
		ETP: svc.Spec.ExternalTrafficPolicy, Selector: svc.Spec.Selector, FinalizerKeys: svc.Finalizers}
	for k, v := range svc.Annotations {
		if k != lb.AnnotationConfigHash {
			n.Annotations[k] = v
		}
	}
	for k, v := range svc.Labels {
		n.Labels[k] = v
	}
	for _, o := range svc.OwnerReferences {
		n.Owners = append(n.Owners, o.Kind+"/"+o.Name+"/"+string(o.UID))
	}
	if svc.Spec.LoadBalancerClass != nil {
		n.Class = *svc.Spec.LoadBalancerClass
	}
	n.NoNodePorts = svc.Spec.AllocateLoadBalancerNodePorts != nil && !*svc.Spec.AllocateLoadBalancerNodePorts
	for _, p := range svc.Spec.Ports {
		n.Ports = append(n.Ports, fmt.Sprintf("%s %d/%s->%s", p.Name, p.Port, p.Protocol, p.TargetPort.String()))
	}
	for _, in := range svc.Status.LoadBalancer.Ingress {
		n.Ingress += in.IP + "," + in.Hostname + ";"
	}
	return n
}

func normalizeMNLBOKG(t *testing.T, raw []map[string]any) []mnlbService {
	var out []mnlbService
	for _, r := range raw {
		svc := &corev1.Service{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(r, svc); err != nil {
			t.Fatal(err)
		}
		out = append(out, normalizeMNLB(svc))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// mnlbHarness drives one case: a fake API server, the plugin as the manager registers it
// for the case's provider configuration, and the pods as the API server stores them.
type mnlbHarness struct {
	t       *testing.T
	cs      mnlbCase
	c       client.Client
	cfg     plugin.Config
	p       plugin.Plugin
	pods    map[string]*corev1.Pod
	created map[string]int // creations per pod name, for OKG's uids
}

func newMNLBHarness(t *testing.T, cs mnlbCase) *mnlbHarness {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	gv := schema.GroupVersion{Group: "game.kruise.io", Version: "v1alpha1"}
	scheme.AddKnownTypeWithName(gv.WithKind("GameServerSet"), &unstructured.Unstructured{})
	scheme.AddKnownTypeWithName(gv.WithKind("GameServerSetList"), &unstructured.UnstructuredList{})
	for _, gvk := range objectKinds {
		scheme.AddKnownTypeWithName(gvk, &unstructured.Unstructured{})
		scheme.AddKnownTypeWithName(gvk.GroupVersion().WithKind(gvk.Kind+"List"), &unstructured.UnstructuredList{})
	}
	b := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&corev1.Pod{}, &corev1.Service{})
	for _, obj := range cs.Objects {
		u := &unstructured.Unstructured{Object: obj}
		if u.GetKind() == "Service" {
			svc := &corev1.Service{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, svc); err != nil {
				t.Fatal(err)
			}
			b = b.WithObjects(svc)
			continue
		}
		b = b.WithObjects(u)
	}
	h := &mnlbHarness{t: t, cs: cs, c: b.Build(), pods: map[string]*corev1.Pod{}, created: map[string]int{}}
	if _, err := toml.Decode(cs.ProviderTOML, &h.cfg); err != nil {
		t.Fatal(err)
	}
	h.restart()
	return h
}

// restart makes the plugin anew, as the manager registers it for the case's provider
// configuration (none when it does not), and initialises it.
func (h *mnlbHarness) restart() {
	h.p = nil
	for _, p := range alibabacloud.Plugins(h.cfg) {
		if p.Name() == h.cs.Plugin {
			h.p = p
		}
	}
	if h.p == nil {
		return
	}
	if err := h.p.Init(context.Background(), h.c, h.cfg); err != nil {
		h.t.Fatal(err)
	}
}

// serviceWatcher is a plugin that counts Services itself (lb.Multi).
type serviceWatcher interface {
	ServiceSeen(*corev1.Service)
	ServiceGone(context.Context, client.Reader, *corev1.Service) error
}

type mnlbResult struct {
	outcome string
	err     error
	pod     *corev1.Pod
}

func (h *mnlbHarness) podName(i int) string {
	if n := h.cs.Steps[i].Pod; n != "" {
		return n
	}
	var pod corev1.Pod
	if err := json.Unmarshal(h.cs.Pod, &pod); err != nil {
		h.t.Fatal(err)
	}
	return pod.Name
}

func (h *mnlbHarness) step(i int) mnlbResult {
	ctx := context.Background()
	st := h.cs.Steps[i]
	name := h.podName(i)
	switch st.Op {
	case "create", "createObject":
		pod := &corev1.Pod{}
		raw := h.cs.Pod
		if own, ok := h.cs.Pods[name]; ok {
			raw = own
		}
		if st.Op == "createObject" {
			raw = st.Object // a pod stored without admission
		}
		if err := json.Unmarshal(raw, pod); err != nil {
			h.t.Fatal(err)
		}
		out := pod
		if st.Op == "create" {
			pod.Name = name
			var err error
			if out, err = h.p.OnPodAdded(ctx, h.c, pod); err != nil && !plugin.IsWarning(err) {
				return mnlbResult{outcome: "denied", err: err}
			}
		}
		// The API server gives the pod its uid after admission: OKG's recording's uids.
		h.created[out.Name]++
		out.UID = types.UID("uid-" + out.Name)
		if n := h.created[out.Name]; n > 1 {
			out.UID = types.UID(fmt.Sprintf("uid-%s-%d", out.Name, n))
		}
		if err := h.c.Create(ctx, out.DeepCopy()); err != nil {
			h.t.Fatal(err)
		}
		h.pods[out.Name] = out.DeepCopy()
		if st.Op == "createObject" {
			return mnlbResult{outcome: "created"}
		}
		return mnlbResult{outcome: "admitted", pod: out}
	case "update":
		pod, ok := h.pods[name]
		if !ok {
			return mnlbResult{outcome: "skipped: pod " + name + " does not exist"}
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
			return mnlbResult{outcome: "denied", err: err}
		}
		h.pods[name] = out.DeepCopy()
		return mnlbResult{outcome: "admitted", pod: out}
	case "delete":
		if pod, ok := h.pods[name]; ok {
			if err := h.c.Delete(ctx, pod); err != nil && !apierrors.IsNotFound(err) {
				h.t.Fatal(err)
			}
			delete(h.pods, name)
		}
		return mnlbResult{outcome: "admitted"}
	case "patchObject", "deleteObject":
		var obj client.Object = &corev1.Service{}
		if st.Kind != "Service" {
			u := &unstructured.Unstructured{}
			gvk, ok := objectKinds[st.Kind]
			if !ok {
				gvk = schema.GroupVersionKind{Group: "game.kruise.io", Version: "v1alpha1", Kind: st.Kind}
			}
			u.SetGroupVersionKind(gvk)
			obj = u
		}
		obj.SetNamespace("default")
		obj.SetName(st.Name)
		if st.Op == "deleteObject" {
			if err := h.c.Delete(ctx, obj); err != nil {
				return mnlbResult{outcome: "deleteFailed: " + err.Error()}
			}
			return mnlbResult{outcome: "deleted"}
		}
		if err := h.c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, st.Patch)); err != nil {
			return mnlbResult{outcome: "patchFailed: " + err.Error()}
		}
		if _, crd := objectKinds[st.Kind]; !crd && strings.Contains(string(st.Patch), `"status"`) {
			if err := h.c.Status().Patch(ctx, obj, client.RawPatch(types.MergePatchType, st.Patch)); err != nil {
				return mnlbResult{outcome: "patchFailed: " + err.Error()}
			}
		}
		if w, ok := h.p.(serviceWatcher); ok {
			if svc, ok := obj.(*corev1.Service); ok {
				w.ServiceSeen(svc)
			}
		}
		return mnlbResult{outcome: "patched"}
	case "gc":
		h.gc()
		return mnlbResult{outcome: "gc"}
	case "restart":
		h.restart()
		return mnlbResult{outcome: "restarted"}
	}
	h.t.Fatalf("step %d: op %q not driven", i, st.Op)
	return mnlbResult{}
}

// gc deletes the Services whose owner is gone (a pod of another uid, a GameServerSet that
// does not exist), as the garbage collector does, and tells the plugin (its Service
// informer's delete handler).
func (h *mnlbHarness) gc() {
	ctx := context.Background()
	var list corev1.ServiceList
	if err := h.c.List(ctx, &list); err != nil {
		h.t.Fatal(err)
	}
	for i := range list.Items {
		svc := &list.Items[i]
		gone := false
		for _, o := range svc.OwnerReferences {
			switch o.Kind {
			case "Pod":
				pod, ok := h.pods[o.Name]
				gone = !ok || pod.UID != o.UID
			case "GameServerSet":
				u := &unstructured.Unstructured{}
				u.SetGroupVersionKind(schema.GroupVersionKind{Group: "game.kruise.io", Version: "v1alpha1", Kind: "GameServerSet"})
				gone = apierrors.IsNotFound(h.c.Get(ctx, client.ObjectKey{Namespace: svc.Namespace, Name: o.Name}, u))
			}
		}
		if !gone {
			continue
		}
		if err := h.c.Delete(ctx, svc); err != nil {
			h.t.Fatal(err)
		}
		if w, ok := h.p.(serviceWatcher); ok {
			if err := w.ServiceGone(ctx, h.c, svc); err != nil {
				h.t.Fatal(err)
			}
		}
	}
}

// madeService reports whether the plugin made a Service of that name in this case.
func (h *mnlbHarness) madeService(name string) bool {
	return h.c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: name}, &corev1.Service{}) == nil
}

// customResources are the operators' objects in the fake API server, normalized.
func (h *mnlbHarness) customResources() []string {
	var raw []map[string]any
	for _, gvk := range objectKinds {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := h.c.List(context.Background(), list); err != nil {
			h.t.Fatal(err)
		}
		for _, u := range list.Items {
			raw = append(raw, u.Object)
		}
	}
	return normalizeObjects(h.t, raw)
}

func (h *mnlbHarness) services() []mnlbService {
	var list corev1.ServiceList
	if err := h.c.List(context.Background(), &list); err != nil {
		h.t.Fatal(err)
	}
	var out []mnlbService
	for i := range list.Items {
		out = append(out, normalizeMNLB(&list.Items[i]))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// anlbDeliberate are the cases in which AlibabaCloud-AutoNLBs does not do what OKG did, on
// purpose: the step from which the case is not compared, and the test that holds the
// difference (docs/okg-compatibility.md, "AlibabaCloud-AutoNLBs").
var anlbDeliberate = map[string]struct {
	from int
	why  string
}{
	"anlb-01-default-isp-uppercase": {0, "the default EipIspTypes, BGP, is lower-cased into the pool Services' names (gs-bgp-0); OKG's gs-BGP-0 is refused by the API server at its start and at every CREATE (TestAutoNLBsDefaultISP)"},
	"anlb-05-tcpudp-multi-ports":    {3, "a TCPUDP entry's two ports are found by their names and each has its addresses; OKG looks them up without the dash and finds none (TestAutoNLBsTCPUDP)"},
	"anlb-08-missing-zonemaps":      {0, "pool Services are made at a game server's CREATE and updates, not at the manager's start for every GameServerSet of the type (TestAutoNLBsPoolsAtCreate)"},
	"anlb-14-reserve-invalid":       {0, "a ReserveNlbNum that is not a number is a parameterError naming it; OKG reads it as 0 (TestAutoNLBsBadInput)"},
}

// TestAutoNLBsOKGConformance replays OKG's recorded AlibabaCloud-AutoNLBs cases, as
// TestMultiNLBsOKGConformance does, comparing the first container's ports too.
func TestAutoNLBsOKGConformance(t *testing.T) {
	replayOKG(t, "testdata/autonlbs-conformance/", anlbDeliberate, replayOptions{})
}
