package kubernetes

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// conformanceCase is one file of testdata/okg-conformance (its README describes the
// fields): an input, the steps, and what OKG's own plugin made of them.
type conformanceCase struct {
	Name    string            `json:"name"`
	Plugin  string            `json:"plugin"`
	Objects []json.RawMessage `json:"objects"`
	Pod     json.RawMessage   `json:"pod"`
	Steps   []struct {
		Op       string          `json:"op"`
		PodPatch json.RawMessage `json:"podPatch"`
		Kind     string          `json:"kind"`
		Name     string          `json:"name"`
		Patch    json.RawMessage `json:"patch"`
		OKG      struct {
			Outcome string `json:"outcome"`
			Error   *struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			} `json:"error"`
		} `json:"okg"`
	} `json:"steps"`
	OKG                   conformanceResult `json:"okg"`
	DeliberateDifferences []string          `json:"deliberateDifferences"`
}

// conformanceResult is the final state of a case: the pod (nil when it was never
// stored), and every Service and Ingress, in the recording's shape.
type conformanceResult struct {
	Pod       *conformancePod     `json:"pod"`
	Services  []conformanceObject `json:"services"`
	Ingresses []conformanceObject `json:"ingresses"`
}

type conformancePod struct {
	Annotations map[string]string `json:"annotations"`
	Labels      map[string]string `json:"labels"`
	Containers  []struct {
		Name  string                 `json:"name"`
		Ports []corev1.ContainerPort `json:"ports"`
	} `json:"containers"`
}

// conformanceObject is a Service or an Ingress as the recording writes it: metadata
// fields and the spec fields flattened (a Service) or under "spec" (an Ingress).
type conformanceObject struct {
	Name                     string                    `json:"name"`
	Annotations              map[string]string         `json:"annotations"`
	Labels                   map[string]string         `json:"labels"`
	OwnerReferences          []metav1.OwnerReference   `json:"ownerReferences"`
	Type                     corev1.ServiceType        `json:"type,omitempty"`
	Ports                    []corev1.ServicePort      `json:"ports,omitempty"`
	Selector                 map[string]string         `json:"selector,omitempty"`
	PublishNotReadyAddresses bool                      `json:"publishNotReadyAddresses,omitempty"`
	Spec                     *networkingv1.IngressSpec `json:"spec,omitempty"`
}

// difference is a deliberate difference from OKG: its name (a heading of
// docs/okg-compatibility.md) and how it changes OKG's result into this project's.
type difference struct {
	name  string
	apply func(c *conformanceCase, want *conformanceResult)
}

// differences are every deliberate difference a conformance case may name. Each one is a
// "### <name>" heading of docs/okg-compatibility.md (TestOKGConformanceDifferencesDocumented).
var differences = map[string]difference{
	"pod-name-label": {
		// NodePort and Ingress pods get statefulset.kubernetes.io/pod-name when they lack
		// it, so their Service selects them even outside a StatefulSet.
		name: "The pod-name label is added when missing",
		apply: func(c *conformanceCase, want *conformanceResult) {
			if want.Pod == nil {
				return
			}
			if want.Pod.Labels == nil {
				want.Pod.Labels = map[string]string{}
			}
			if _, ok := want.Pod.Labels[SelectorPodNameLabel]; !ok {
				want.Pod.Labels[SelectorPodNameLabel] = podNameOf(c)
			}
		},
	},
	"matching-object-kept-whatever-hash": {
		// An existing Service whose spec already matches is kept with the hash it carries;
		// OKG rewrites it with its own hash.
		name: "An object that already matches is kept whatever its hash",
		apply: func(c *conformanceCase, want *conformanceResult) {
			for _, raw := range c.Objects {
				var o struct {
					Kind     string            `json:"kind"`
					Metadata metav1.ObjectMeta `json:"metadata"`
				}
				_ = json.Unmarshal(raw, &o)
				if o.Kind != "Service" {
					continue
				}
				for i := range want.Services {
					if want.Services[i].Name == o.Metadata.Name {
						want.Services[i].Annotations[AnnotationServiceHash] = o.Metadata.Annotations[AnnotationServiceHash]
					}
				}
			}
		},
	},
	"same-name-create-admitted": {
		// A CREATE while a pod of the same name still exists is admitted with its own host
		// port (the old pod keeps 8000); OKG denies it.
		name: "A CREATE while a same-named pod exists is admitted",
		apply: func(c *conformanceCase, _ *conformanceResult) {
			// The plugin admits it; the API server then refuses it (AlreadyExists), as it
			// does for any pod, and nothing is stored.
			c.Steps[0].OKG.Outcome = "admitted"
			c.Steps[0].OKG.Error = nil
		},
	},
}

func podNameOf(c *conformanceCase) string {
	var p corev1.Pod
	_ = json.Unmarshal(c.Pod, &p)
	return p.Name
}

func loadConformanceCases(t *testing.T) []*conformanceCase {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "okg-conformance", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no conformance cases: %v", err)
	}
	var out []*conformanceCase
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		c := &conformanceCase{}
		if err := json.Unmarshal(b, c); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out = append(out, c)
	}
	return out
}

// conformanceScheme is client-go's scheme plus OKG's GameServerSet as an unstructured kind.
func conformanceScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	s.AddKnownTypeWithName(gameServerSetGVK, &unstructured.Unstructured{})
	s.AddKnownTypeWithName(gameServerSetGVK.GroupVersion().WithKind("GameServerSetList"), &unstructured.UnstructuredList{})
	return s
}

// nodePortAllocator hands out node ports as an API server does for the recording:
// 30001 upwards, never one in use.
type nodePortAllocator struct {
	next int32
	used map[int32]bool
}

func (a *nodePortAllocator) fill(svc *corev1.Service) {
	if svc.Spec.Type != corev1.ServiceTypeNodePort {
		return
	}
	for i := range svc.Spec.Ports {
		if p := svc.Spec.Ports[i].NodePort; p != 0 {
			a.used[p] = true
			continue
		}
		for a.used[a.next] {
			a.next++
		}
		svc.Spec.Ports[i].NodePort = a.next
		a.used[a.next] = true
	}
}

// defaultPod applies the API server's container-port protocol default.
func defaultPod(pod *corev1.Pod) {
	for i := range pod.Spec.Containers {
		for j := range pod.Spec.Containers[i].Ports {
			if pod.Spec.Containers[i].Ports[j].Protocol == "" {
				pod.Spec.Containers[i].Ports[j].Protocol = corev1.ProtocolTCP
			}
		}
	}
}

// TestOKGConformance replays every case of testdata/okg-conformance through this
// project's plugins and compares the outcome of each step and the final pod (network-status
// bytes, annotations, labels, container ports), Services and Ingresses with what OKG's
// own plugin made, but for the deliberate differences the case names. Objects that existed
// before the first step must not be written at all unless a difference says so.
func TestOKGConformance(t *testing.T) {
	for _, c := range loadConformanceCases(t) {
		t.Run(c.Name, func(t *testing.T) {
			runConformanceCase(t, c)
		})
	}
}

func runConformanceCase(t *testing.T, c *conformanceCase) {
	ctx := context.Background()
	want := c.OKG
	for _, name := range c.DeliberateDifferences {
		d, ok := differences[name]
		if !ok {
			t.Fatalf("case names unknown deliberate difference %q", name)
		}
		d.apply(c, &want)
	}

	alloc := &nodePortAllocator{next: 30001, used: map[int32]bool{}}
	var initial []client.Object
	for _, raw := range c.Objects {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw); err != nil {
			t.Fatal(err)
		}
		obj, err := typedObject(u)
		if err != nil {
			t.Fatal(err)
		}
		if svc, ok := obj.(*corev1.Service); ok {
			alloc.fill(svc)
		}
		initial = append(initial, obj)
	}
	cl := fake.NewClientBuilder().WithScheme(conformanceScheme()).WithObjects(initial...).WithIndex(&networkingv1.Ingress{}, IngressHostIndex, IngressHosts).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if svc, ok := obj.(*corev1.Service); ok {
				alloc.fill(svc)
			}
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if svc, ok := obj.(*corev1.Service); ok {
				alloc.fill(svc)
			}
			return c.Update(ctx, obj, opts...)
		},
		// The plugins write existing objects with controllerutil.CreateOrPatch (a JSON
		// merge patch computed from obj when the patch is sent): allocate as the API
		// server does on a patch.
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if svc, ok := obj.(*corev1.Service); ok {
				alloc.fill(svc)
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
	}).Build()
	before := map[string]string{} // "Kind/name" -> resourceVersion of objects that existed
	for _, obj := range initial {
		switch obj.(type) {
		case *corev1.Service, *networkingv1.Ingress:
			if err := cl.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
				t.Fatal(err)
			}
			before[typeName(obj)+"/"+obj.GetName()] = obj.GetResourceVersion()
		}
	}

	var p plugin.Plugin
	switch c.Plugin {
	case HostPortName:
		h := NewHostPort()
		if err := h.Init(ctx, cl, plugin.DefaultConfig()); err != nil {
			t.Fatal(err)
		}
		// The pod informer's initial list: the pods that already hold host ports.
		for _, obj := range initial {
			if pod, ok := obj.(*corev1.Pod); ok {
				hostPortEvents{alloc: h.allocator()}.OnAdd(pod, true)
			}
		}
		p = h
	case NodePortName:
		p = NewNodePort()
	case IngressName:
		// OKG writes Ingresses without Host (ing-03, ing-05); this project refuses such a
		// catch-all unless the provider config allows it (TestIngressGuardrails), so the
		// recordings are replayed with allow_catch_all_host = true. OKG writes any
		// IngressClassName (ing-01's "nginx"), and so does this project without
		// allowed_ingress_classes (the default): the recorded cluster has no IngressClass, so
		// ing-01 passes with a warning that the class does not exist
		// (TestIngressClassAllowlist).
		ing := NewIngress()
		ing.guard.AllowCatchAllHost = true
		p = ing
	default:
		t.Fatalf("unknown plugin %q", c.Plugin)
	}

	input := &corev1.Pod{}
	if err := json.Unmarshal(c.Pod, input); err != nil {
		t.Fatal(err)
	}
	defaultPod(input)
	var stored *corev1.Pod // nil until the pod is stored
	// store writes the pod to the fake client and keeps it as the stored pod; the fake
	// client ignores status on writes (a subresource), so the kept copy carries it.
	store := func(pod *corev1.Pod) bool {
		t.Helper()
		status := pod.Status
		if stored == nil {
			if pod.Name == "" && pod.GenerateName != "" {
				pod.Name = pod.GenerateName + "x1"
			}
			pod.UID = types.UID("uid-" + pod.Name)
			if err := cl.Create(ctx, pod); err != nil {
				if apierrors.IsAlreadyExists(err) {
					return false
				}
				t.Fatalf("store pod: %v", err)
			}
		} else if err := cl.Update(ctx, pod); err != nil {
			t.Fatalf("store pod: %v", err)
		}
		pod.Status = status
		stored = pod.DeepCopy()
		if h, ok := p.(*HostPort); ok {
			hostPortEvents{alloc: h.allocator()}.OnAdd(stored, false)
		}
		return true
	}
	var createdPod *corev1.Pod // the pod as stored by the CREATE (for a pod with generateName)
	for i, step := range c.Steps {
		var outcome string
		var err error
		switch step.Op {
		case "create":
			var out *corev1.Pod
			out, err = p.OnPodAdded(ctx, cl, input.DeepCopy())
			if isFatal(err) {
				outcome = "denied"
				break
			}
			outcome = "stored"
			if !store(out) {
				outcome = "admitted" // the API server refused it: a pod of that name exists
				break
			}
			createdPod = stored.DeepCopy()
		case "adopt":
			outcome = "adopted"
			store(input.DeepCopy())
		case "update":
			pod, perr := mergePatch(stored, step.PodPatch)
			if perr != nil {
				t.Fatalf("step %d: %v", i, perr)
			}
			var out *corev1.Pod
			out, err = p.OnPodUpdated(ctx, cl, pod)
			outcome = "stored"
			store(out)
		case "patchObject":
			outcome = "patched"
			if step.Kind != "Ingress" {
				t.Fatalf("step %d: patchObject of %s", i, step.Kind)
			}
			ing := &networkingv1.Ingress{}
			if err := cl.Get(ctx, client.ObjectKey{Namespace: input.Namespace, Name: step.Name}, ing); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
			if err := cl.Patch(ctx, ing, client.RawPatch(types.MergePatchType, step.Patch)); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
		default:
			t.Fatalf("step %d: unknown op %q", i, step.Op)
		}
		if outcome != step.OKG.Outcome {
			t.Errorf("step %d (%s): outcome %s (error %v), OKG: %s", i, step.Op, outcome, err, step.OKG.Outcome)
		}
		if step.OKG.Error == nil && isFatal(err) {
			t.Errorf("step %d (%s): error %v, OKG: none", i, step.Op, err)
		}
		if step.OKG.Error != nil && (err == nil || string(plugin.AsError(err).Type) != step.OKG.Error.Type) {
			t.Errorf("step %d (%s): error %v, OKG: %s %q", i, step.Op, err, step.OKG.Error.Type, step.OKG.Error.Message)
		}
	}

	final := stored
	if c.Name == "hp-20-generate-name" { // the recording's final pod is the stored CREATE
		final = createdPod
	}
	comparePod(t, want.Pod, final)
	compareObjects(t, ctx, cl, want, before)
}

// typedObject converts a recorded object into its typed form (GameServerSets stay
// unstructured).
func typedObject(u *unstructured.Unstructured) (client.Object, error) {
	var obj client.Object
	switch u.GetKind() {
	case "Node":
		obj = &corev1.Node{}
	case "Pod":
		obj = &corev1.Pod{}
	case "Service":
		obj = &corev1.Service{}
	case "Ingress":
		obj = &networkingv1.Ingress{}
	default:
		return u, nil
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
		return nil, err
	}
	if pod, ok := obj.(*corev1.Pod); ok {
		defaultPod(pod)
	}
	return obj, nil
}

// mergePatch returns a copy of pod with the JSON merge patch applied.
func mergePatch(pod *corev1.Pod, patch json.RawMessage) (*corev1.Pod, error) {
	orig, err := json.Marshal(pod)
	if err != nil {
		return nil, err
	}
	patched, err := jsonpatch.MergePatch(orig, patch)
	if err != nil {
		return nil, err
	}
	out := &corev1.Pod{}
	return out, json.Unmarshal(patched, out)
}

// comparePod compares the final pod with OKG's: every annotation OKG's pod has (the
// network-status bytes exactly) and network-status's absence, labels and container ports.
func comparePod(t *testing.T, want *conformancePod, got *corev1.Pod) {
	t.Helper()
	if want == nil {
		if got != nil {
			t.Errorf("pod stored, OKG stored none")
		}
		return
	}
	if got == nil {
		t.Fatalf("pod never stored, OKG stored it")
	}
	keys := []string{networkstatus.AnnotationNetworkStatus}
	for k := range want.Annotations {
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		w, wok := want.Annotations[k]
		g, gok := got.Annotations[k]
		if w != g || wok != gok {
			t.Errorf("annotation %s:\n  got  %q (present %t)\n  OKG  %q (present %t)", k, g, gok, w, wok)
		}
	}
	if diff := cmp.Diff(emptyToNil(want.Labels), emptyToNil(got.Labels)); diff != "" {
		t.Errorf("labels (-OKG,+got):\n%s", diff)
	}
	type ctr struct {
		Name  string
		Ports []corev1.ContainerPort
	}
	var w, g []ctr
	for _, c := range want.Containers {
		w = append(w, ctr{c.Name, emptyPortsToNil(c.Ports)})
	}
	for _, c := range got.Spec.Containers {
		g = append(g, ctr{c.Name, emptyPortsToNil(c.Ports)})
	}
	if diff := cmp.Diff(w, g); diff != "" {
		t.Errorf("containers (-OKG,+got):\n%s", diff)
	}
}

func emptyToNil(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}

func emptyPortsToNil(p []corev1.ContainerPort) []corev1.ContainerPort {
	if len(p) == 0 {
		return nil
	}
	return p
}

// compareObjects compares every Service and Ingress with OKG's: type, ports, selector,
// publishNotReadyAddresses, owners, labels, annotations (the hash annotations by
// presence, and by value on objects that existed before the first step), the Ingress
// spec. An object that existed before must have the same resourceVersion (not written).
func compareObjects(t *testing.T, ctx context.Context, cl client.Client, want conformanceResult, before map[string]string) {
	t.Helper()
	svcs := &corev1.ServiceList{}
	if err := cl.List(ctx, svcs); err != nil {
		t.Fatal(err)
	}
	var got []conformanceObject
	for _, s := range svcs.Items {
		if rv, ok := before["service/"+s.Name]; ok && rv != s.ResourceVersion {
			t.Errorf("Service %s existed before and was written (resourceVersion %s -> %s)", s.Name, rv, s.ResourceVersion)
		}
		got = append(got, conformanceObject{Name: s.Name, Annotations: s.Annotations, Labels: s.Labels, OwnerReferences: s.OwnerReferences,
			Type: s.Spec.Type, Ports: s.Spec.Ports, Selector: s.Spec.Selector, PublishNotReadyAddresses: s.Spec.PublishNotReadyAddresses})
	}
	compareList(t, "Service", want.Services, got, AnnotationServiceHash, before)

	ings := &networkingv1.IngressList{}
	if err := cl.List(ctx, ings); err != nil {
		t.Fatal(err)
	}
	got = nil
	for _, i := range ings.Items {
		if rv, ok := before["ingress/"+i.Name]; ok && rv != i.ResourceVersion {
			t.Errorf("Ingress %s existed before and was written (resourceVersion %s -> %s)", i.Name, rv, i.ResourceVersion)
		}
		got = append(got, conformanceObject{Name: i.Name, Annotations: i.Annotations, Labels: i.Labels, OwnerReferences: i.OwnerReferences, Spec: &i.Spec})
	}
	compareList(t, "Ingress", want.Ingresses, got, AnnotationIngressHash, before)
}

func compareList(t *testing.T, kind string, want, got []conformanceObject, hashKey string, before map[string]string) {
	t.Helper()
	norm := func(list []conformanceObject) []conformanceObject {
		out := slices.Clone(list)
		sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
		for i := range out {
			o := &out[i]
			o.Annotations = emptyToNil(copyMap(o.Annotations))
			o.Labels = emptyToNil(o.Labels)
			if _, existed := before[strings.ToLower(kind)+"/"+o.Name]; !existed && o.Annotations != nil {
				if _, ok := o.Annotations[hashKey]; ok {
					o.Annotations[hashKey] = "(present)"
				}
			}
			o.Ports = slices.Clone(o.Ports)
			for j := range o.Ports {
				// The recording writes target ports as strings ("80").
				if tp := o.Ports[j].TargetPort; tp.Type == intstr.String {
					if n, err := strconv.Atoi(tp.StrVal); err == nil {
						o.Ports[j].TargetPort = intstr.FromInt(n)
					}
				}
				o.Ports[j].TargetPort = targetPortOf(o.Ports[j])
				o.Ports[j].Protocol = defaultProtocol(o.Ports[j].Protocol)
			}
		}
		return out
	}
	if diff := cmp.Diff(norm(want), norm(got), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("%ss (-OKG,+got):\n%s", kind, diff)
	}
}

// copyMap returns a copy of m.
func copyMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// TestOKGConformanceDifferencesDocumented: every deliberate difference is a heading of
// docs/okg-compatibility.md, and every case names only known differences.
func TestOKGConformanceDifferencesDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "okg-compatibility.md"))
	if err != nil {
		t.Fatal(err)
	}
	for key, d := range differences {
		if !strings.Contains(string(doc), "\n### "+d.name+"\n") {
			t.Errorf("difference %q (%s) has no heading %q in docs/okg-compatibility.md", key, d.name, "### "+d.name)
		}
	}
	for _, c := range loadConformanceCases(t) {
		for _, n := range c.DeliberateDifferences {
			if _, ok := differences[n]; !ok {
				t.Errorf("%s names unknown difference %q", c.Name, n)
			}
		}
	}
}
