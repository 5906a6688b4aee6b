package aws_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

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
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/aws"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/lb"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// nlbCase is one case of testdata/okg-conformance/cases.json: OKG's own recording of
// AmazonWebServices-NLB (the inputs; out-okg.json holds OKG's outputs).
type nlbCase struct {
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
	} `json:"steps"`
}

// nlbOKG is OKG's recording of a case (run 1; no case varies across runs).
type nlbOKG struct {
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
		Services        []map[string]any `json:"services"`
		CustomResources []map[string]any `json:"customResources"`
	} `json:"steps"`
}

// nlbDeliberate are the cases in which AmazonWebServices-NLB does not do what OKG did, on
// purpose: the step from which the case is no longer compared, or the steps that are not
// (skip: the replay goes on and agrees again after them), and the test that holds the
// difference (docs/okg-compatibility.md, "AmazonWebServices-NLB"). Every case has one more
// difference, not listed: where OKG reports Ready before any binding exists, the plugin is
// NotReady until the Listener is synced and the TargetGroupBinding reconciled (the replay
// accepts exactly that: TestNLBReadyWhenBound).
var nlbDeliberate = map[string]struct {
	from int
	skip []int
	why  string
}{
	"awsnlb-01-lifecycle":                 {skip: []int{10, 11}, why: "a network enabled again makes its bindings in the run; OKG re-flags the TargetGroup for its watcher (TestNLBDisableEnable)"},
	"awsnlb-02-multi-ports-tcpudp":        {from: 2, why: "TCPUDP is a parameterError naming PortProtocols; OKG writes TargetGroups of protocol TCPUDP and then has its Service refused (TestNLBBadInput)"},
	"awsnlb-04-fixed-gss":                 {from: 12, why: "a Fixed Service's ports are freed when the Service is gone, never by a substring of its name; OKG frees gsx-0's port too (TestNLBFixedReleaseIsExact)"},
	"awsnlb-05-health-check-and-vpc":      {from: 2, why: "a NlbHealthCheck entry without ':' or with a value that is not a number is a parameterError; OKG skips it (TestNLBBadInput, TestNLBHealthCheck)"},
	"awsnlb-07-conf-change":               {from: 4, why: "a network-conf that adds a port gets its listener and TargetGroup; OKG panics (TestNLBConfChange)"},
	"awsnlb-10-network-status-unparsable": {from: 1, why: "an unparsable network-status is replaced by a NotReady one, as every load-balancer plugin does; OKG's AWS plugin alone refuses the update (TestNLBBadInput)"},
	"awsnlb-11-no-arns":                   {from: 2, why: "a network-conf without NlbARNs is a parameterError naming it; OKG reports no NLB with room (TestNLBBadInput)"},
	"awsnlb-14-tg-status-error":           {from: 6, why: "a False ACK.ResourceSynced without a message is waited on; OKG's watcher panics (TestNLBTargetGroupFailure)"},
	"awsnlb-16-lowercase-protocol":        {from: 2, why: "a lower-case protocol is a parameterError naming PortProtocols; OKG writes it and has its Service refused (TestNLBBadInput)"},
}

// TestNLBOKGConformance replays OKG's recorded AmazonWebServices-NLB cases as OKG's
// recording drove them (a fake client; pods stored only when admitted, with OKG's uids; the
// ACK controller's answers as object patches; the garbage collector as a step). OKG's
// TargetGroup watcher (the targetGroupEvents step) is this manager's network controller
// here: a run of every pod, the Listener's and the binding's controllers answering, and one
// run more. Every step's outcome, the pod's network-status, the Services and the
// TargetGroups, Listeners and TargetGroupBindings (their status: the TargetGroups' only, the
// ones OKG's recording wrote) are compared, up to the deliberate differences. It prints how
// many steps it compared.
func TestNLBOKGConformance(t *testing.T) {
	var cases []nlbCase
	var okg map[string]nlbOKG
	for file, v := range map[string]any{"cases.json": &cases, "out-okg.json": &okg} {
		data, err := os.ReadFile("testdata/okg-conformance/" + file)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, v); err != nil {
			t.Fatal(err)
		}
	}
	compared, total, readyLater := 0, 0, 0
	for _, cs := range cases {
		total += len(cs.Steps)
		t.Run(cs.ID, func(t *testing.T) {
			res := okg[cs.ID]
			h := newNLBHarness(t, cs)
			if (h.p != nil) != res.ProviderRegistered {
				t.Fatalf("served %t, OKG registered the provider: %t", h.p != nil, res.ProviderRegistered)
			}
			if h.p == nil {
				return
			}
			from := len(cs.Steps)
			d, deliberate := nlbDeliberate[cs.ID]
			if deliberate && d.from > 0 {
				from = d.from
			}
			for i := range cs.Steps[:from] {
				got := h.step(i)
				if slices.Contains(d.skip, i) {
					continue
				}
				want := res.Steps[i]
				wantOutcome, _, _ := strings.Cut(want.Outcome, ":")
				if want.Error != nil {
					wantOutcome = "denied"
				}
				if got.outcome != wantOutcome {
					t.Fatalf("step %d (%s): outcome %q (%v), OKG's %q (%+v)", i, cs.Steps[i].Op, got.outcome, got.err, wantOutcome, want.Error)
				}
				if want.Error != nil && string(plugin.TypeOf(got.err)) != want.Error.Type {
					t.Fatalf("step %d (%s): error %v, OKG's %+v", i, cs.Steps[i].Op, got.err, want.Error)
				}
				if want.PodOut != nil && got.pod != nil {
					w, g := want.PodOut.Annotations[networkstatus.AnnotationNetworkStatus], got.pod.Annotations[networkstatus.AnnotationNetworkStatus]
					if w != g && !h.readyLater(h.podName(i), w, g) {
						t.Fatalf("step %d (%s): network-status\n OKG:  %s\n ours: %s", i, cs.Steps[i].Op, w, g)
					} else if w != g {
						readyLater++
					}
				}
				if diff := cmp.Diff(normalizeServices(t, want.Services), h.services()); diff != "" {
					t.Fatalf("step %d (%s): Services (-OKG +ours):\n%s", i, cs.Steps[i].Op, diff)
				}
				if diff := cmp.Diff(normalizeObjects(t, want.CustomResources), h.objects()); diff != "" {
					t.Fatalf("step %d (%s): TargetGroups, Listeners, TargetGroupBindings (-OKG +ours):\n%s", i, cs.Steps[i].Op, diff)
				}
				compared++
			}
		})
	}
	t.Logf("compared %d of %d steps of %d cases with OKG's (%d of them NotReady where OKG was Ready before any binding)", compared, total, len(cases), readyLater)
}

// nlbHarness drives one case: a fake API server, the plugin as the manager registers it for
// the case's provider configuration, and the pods as the API server stores them.
type nlbHarness struct {
	t       *testing.T
	cs      nlbCase
	c       client.Client
	cfg     plugin.Config
	p       *lb.Plugin
	pods    map[string]*corev1.Pod
	created map[string]int // creations per pod name, for OKG's uids
}

// kinds are the plugin's kinds by the recording's names.
var kinds = map[string]schema.GroupVersionKind{
	"TargetGroup": aws.TargetGroupGVK, "Listener": aws.ListenerGVK, "TargetGroupBinding": aws.TargetGroupBindingGVK,
	"GameServerSet": {Group: "game.kruise.io", Version: "v1alpha1", Kind: "GameServerSet"},
}

func newNLBHarness(t *testing.T, cs nlbCase) *nlbHarness {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	for _, gvk := range kinds {
		scheme.AddKnownTypeWithName(gvk, &unstructured.Unstructured{})
		scheme.AddKnownTypeWithName(gvk.GroupVersion().WithKind(gvk.Kind+"List"), &unstructured.UnstructuredList{})
	}
	b := fake.NewClientBuilder().WithScheme(scheme)
	for _, obj := range cs.Objects {
		b = b.WithObjects(&unstructured.Unstructured{Object: obj})
	}
	h := &nlbHarness{t: t, cs: cs, c: b.Build(), pods: map[string]*corev1.Pod{}, created: map[string]int{}}
	cfg, err := plugin.ParseConfig([]byte(cs.ProviderTOML))
	if err != nil {
		return h // an invalid provider configuration: no plugin, as OKG registers none
	}
	h.cfg = cfg
	h.restart()
	return h
}

// restart makes the plugin anew, as the manager registers it, and initialises it.
func (h *nlbHarness) restart() {
	h.p = nil
	for _, p := range aws.Plugins(h.cfg) {
		if p.Name() == h.cs.Plugin {
			h.p = p.(*lb.Plugin)
		}
	}
	if h.p == nil {
		return
	}
	if err := h.p.Init(context.Background(), h.c, h.cfg); err != nil {
		h.t.Fatal(err)
	}
}

type nlbResult struct {
	outcome string
	err     error
	pod     *corev1.Pod
}

func (h *nlbHarness) podName(i int) string {
	if n := h.cs.Steps[i].Pod; n != "" {
		return n
	}
	var pod corev1.Pod
	if err := json.Unmarshal(h.cs.Pod, &pod); err != nil {
		h.t.Fatal(err)
	}
	return pod.Name
}

func (h *nlbHarness) step(i int) nlbResult {
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
		out, err := h.p.OnPodAdded(ctx, h.c, pod)
		if err != nil && !plugin.IsWarning(err) {
			return nlbResult{outcome: "denied", err: err}
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
		return nlbResult{outcome: "admitted", pod: out}
	case "update":
		return h.update(name, st.PodPatch)
	case "delete":
		if pod, ok := h.pods[name]; ok {
			if err := h.c.Delete(ctx, pod); err != nil && !apierrors.IsNotFound(err) {
				h.t.Fatal(err)
			}
			delete(h.pods, name)
		}
		return nlbResult{outcome: "admitted"}
	case "patchObject", "deleteObject":
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(kinds[st.Kind])
		u.SetNamespace("default")
		u.SetName(st.Name)
		if st.Op == "deleteObject" {
			if err := h.c.Delete(ctx, u); err != nil {
				return nlbResult{outcome: "deleteFailed", err: err}
			}
			return nlbResult{outcome: "deleted"}
		}
		if err := h.c.Patch(ctx, u, client.RawPatch(types.MergePatchType, st.Patch)); err != nil {
			return nlbResult{outcome: "patchFailed", err: err}
		}
		return nlbResult{outcome: "patched"}
	case "targetGroupEvents":
		// The network controller runs each pod on the TargetGroups' answers; the Listeners'
		// and bindings' controllers answer what those runs made, and their answers run the
		// pods once more.
		h.runAll()
		h.controllersAnswer()
		h.runAll()
		return nlbResult{outcome: "delivered"}
	case "gc":
		h.gc()
		return nlbResult{outcome: "gc"}
	case "restart":
		h.restart()
		return nlbResult{outcome: "restarted"}
	}
	h.t.Fatalf("step %d: op %q not driven", i, st.Op)
	return nlbResult{}
}

// update admits an UPDATE of the pod with patch (a JSON merge patch; none: the network
// controller's run).
func (h *nlbHarness) update(name string, patch json.RawMessage) nlbResult {
	pod, ok := h.pods[name]
	if !ok {
		return nlbResult{outcome: "skipped"}
	}
	cur, err := json.Marshal(pod)
	if err != nil {
		h.t.Fatal(err)
	}
	if len(patch) > 0 {
		if cur, err = jsonpatch.MergePatch(cur, patch); err != nil {
			h.t.Fatal(err)
		}
	}
	next := &corev1.Pod{}
	if err := json.Unmarshal(cur, next); err != nil {
		h.t.Fatal(err)
	}
	out, err := h.p.OnPodUpdated(context.Background(), h.c, next)
	if err != nil && !plugin.IsWarning(err) && plugin.TypeOf(err) != plugin.CloudError {
		return nlbResult{outcome: "denied", err: err}
	}
	h.pods[name] = out.DeepCopy()
	return nlbResult{outcome: "admitted", pod: out, err: err}
}

// runAll runs every pod of the case once, as the network controller does.
func (h *nlbHarness) runAll() {
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range h.pods {
			if !yield(n) {
				return
			}
		}
	}) {
		h.update(name, nil)
	}
}

// controllersAnswer is ACK's elbv2 controller syncing every Listener and the AWS Load
// Balancer Controller reconciling every TargetGroupBinding.
func (h *nlbHarness) controllersAnswer() {
	ctx := context.Background()
	for _, gvk := range []schema.GroupVersionKind{aws.ListenerGVK, aws.TargetGroupBindingGVK} {
		for _, u := range h.list(gvk) {
			status := map[string]any{"observedGeneration": max(u.GetGeneration(), 1)}
			if gvk == aws.ListenerGVK {
				status = map[string]any{"conditions": []any{map[string]any{"type": aws.ConditionResourceSynced, "status": "True"}},
					"ackResourceMetadata": map[string]any{"arn": "arn:aws:elasticloadbalancing:us-east-1:123456789012:listener/net/game-nlb/50dc6c495c0c9188/" + u.GetName()}}
			}
			u.Object["status"] = status
			if err := h.c.Update(ctx, &u); err != nil {
				h.t.Fatal(err)
			}
		}
	}
}

func (h *nlbHarness) list(gvk schema.GroupVersionKind) []unstructured.Unstructured {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := h.c.List(context.Background(), list); err != nil {
		h.t.Fatal(err)
	}
	return list.Items
}

// readyLater reports whether ours is the NotReady status of a network OKG reports Ready
// (okg) while one of the pod's TargetGroups has no Listener synced with AWS or no
// TargetGroupBinding reconciled: the plugin's one difference in every case.
func (h *nlbHarness) readyLater(pod, okg, ours string) bool {
	var o, u networkstatus.NetworkStatus
	if json.Unmarshal([]byte(okg), &o) != nil || json.Unmarshal([]byte(ours), &u) != nil ||
		o.CurrentNetworkState != networkstatus.NetworkReady || u.CurrentNetworkState != networkstatus.NetworkNotReady {
		return false
	}
	answered := map[string]int{}
	for _, l := range h.list(aws.ListenerGVK) {
		if arn, _, _ := unstructured.NestedString(l.Object, "status", "ackResourceMetadata", "arn"); arn != "" {
			answered[l.GetName()]++
		}
	}
	for _, b := range h.list(aws.TargetGroupBindingGVK) {
		if gen, _, _ := unstructured.NestedInt64(b.Object, "status", "observedGeneration"); gen > 0 {
			answered[b.GetName()]++
		}
	}
	for _, tg := range h.list(aws.TargetGroupGVK) {
		if tg.GetLabels()["statefulset.kubernetes.io/pod-name"] == pod && answered[tg.GetName()] < 2 {
			return true
		}
	}
	return false
}

// gc deletes the Services and the plugin's objects whose owner is gone, as the garbage
// collector does, and tells the plugin of each Service gone (its Service informer).
func (h *nlbHarness) gc() {
	ctx := context.Background()
	gone := func(obj client.Object) bool {
		for _, o := range obj.GetOwnerReferences() {
			switch o.Kind {
			case "Pod":
				pod, ok := h.pods[o.Name]
				return !ok || pod.UID != o.UID
			case "GameServerSet":
				u := &unstructured.Unstructured{}
				u.SetGroupVersionKind(kinds["GameServerSet"])
				return apierrors.IsNotFound(h.c.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: o.Name}, u))
			}
		}
		return false
	}
	var svcs corev1.ServiceList
	if err := h.c.List(ctx, &svcs); err != nil {
		h.t.Fatal(err)
	}
	for i := range svcs.Items {
		svc := &svcs.Items[i]
		if !gone(svc) {
			continue
		}
		if err := h.c.Delete(ctx, svc); err != nil {
			h.t.Fatal(err)
		}
		if err := h.p.ServiceGone(ctx, h.c, client.ObjectKeyFromObject(svc).String(), svc.CreationTimestamp.Time); err != nil {
			h.t.Fatal(err)
		}
	}
	for _, gvk := range []schema.GroupVersionKind{aws.TargetGroupGVK, aws.ListenerGVK, aws.TargetGroupBindingGVK} {
		for _, u := range h.list(gvk) {
			if gone(&u) {
				if err := h.c.Delete(ctx, &u); err != nil {
					h.t.Fatal(err)
				}
			}
		}
	}
}

// nlbService is the part of the pod's Service both implementations decide.
type nlbService struct {
	Name        string
	Annotations map[string]string
	Labels      map[string]string
	Owners      []string
	Type        corev1.ServiceType
	Selector    map[string]string
	Ports       []string
}

func normalizeService(svc *corev1.Service) nlbService {
	n := nlbService{Name: svc.Name, Annotations: map[string]string{}, Labels: svc.Labels, Type: svc.Spec.Type, Selector: svc.Spec.Selector}
	for k, v := range svc.Annotations {
		if k != lb.AnnotationConfigHash {
			n.Annotations[k] = v
		}
	}
	for _, o := range svc.OwnerReferences {
		n.Owners = append(n.Owners, o.Kind+"/"+o.Name+"/"+string(o.UID))
	}
	for _, p := range svc.Spec.Ports {
		n.Ports = append(n.Ports, fmt.Sprintf("%s %d/%s->%s", p.Name, p.Port, p.Protocol, p.TargetPort.String()))
	}
	return n
}

func normalizeServices(t *testing.T, raw []map[string]any) []nlbService {
	var out []nlbService
	for _, r := range raw {
		svc := &corev1.Service{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(r, svc); err != nil {
			t.Fatal(err)
		}
		out = append(out, normalizeService(svc))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (h *nlbHarness) services() []nlbService {
	var list corev1.ServiceList
	if err := h.c.List(context.Background(), &list); err != nil {
		h.t.Fatal(err)
	}
	var out []nlbService
	for i := range list.Items {
		out = append(out, normalizeService(&list.Items[i]))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// normalizeObjects is the plugin's objects as the replay compares them: kind, name, labels,
// annotations, owners, spec and (TargetGroups only) status, as JSON, sorted. A spec field
// of an empty string is left out (OKG writes vpcID "").
func normalizeObjects(t *testing.T, raw []map[string]any) []string {
	var out []string
	for _, r := range raw {
		u := &unstructured.Unstructured{Object: r}
		var owners []string
		for _, o := range u.GetOwnerReferences() {
			owners = append(owners, o.Kind+"/"+o.Name+"/"+string(o.UID))
		}
		spec, _, _ := unstructured.NestedMap(r, "spec")
		for k, v := range spec {
			if v == "" {
				delete(spec, k)
			}
		}
		var status any
		if u.GetKind() == "TargetGroup" {
			st, _, _ := unstructured.NestedMap(r, "status")
			for k, v := range st {
				if v == nil {
					delete(st, k)
				}
			}
			if len(st) > 0 {
				status = st
			}
		}
		b, err := json.Marshal(map[string]any{"kind": u.GetKind(), "name": u.GetName(), "labels": u.GetLabels(), "annotations": u.GetAnnotations(),
			"owners": owners, "spec": spec, "status": status})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(b))
	}
	sort.Strings(out)
	return out
}

func (h *nlbHarness) objects() []string {
	var raw []map[string]any
	for _, gvk := range []schema.GroupVersionKind{aws.TargetGroupGVK, aws.ListenerGVK, aws.TargetGroupBindingGVK} {
		for _, u := range h.list(gvk) {
			raw = append(raw, u.Object)
		}
	}
	return normalizeObjects(h.t, raw)
}
