package alibabacloud

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/lb"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// cloudCase is one case of testdata/okg-conformance/cases.json: OKG's own recording of
// its AlibabaCloud-SLB plugin (the inputs; out-okg.json holds what OKG made of them).
type cloudCase struct {
	ID           string                     `json:"id"`
	Note         string                     `json:"note"`
	ProviderTOML string                     `json:"providerToml"`
	Objects      []json.RawMessage          `json:"objects"`
	Pod          json.RawMessage            `json:"pod"`
	Pods         map[string]json.RawMessage `json:"pods"`
	Steps        []struct {
		Op       string          `json:"op"`
		Pod      string          `json:"pod"`
		UID      string          `json:"uid"`
		PodPatch json.RawMessage `json:"podPatch"`
		Kind     string          `json:"kind"`
		Name     string          `json:"name"`
		Patch    json.RawMessage `json:"patch"`
	} `json:"steps"`
}

// cloudResult is OKG's recording of a case, run 1, with the paths whose values differed
// between its 100 runs (OKG picks ports at random).
type cloudResult struct {
	ProviderRegistered bool     `json:"providerRegistered"`
	VariesAcrossRuns   []string `json:"variesAcrossRuns"`
	Steps              []struct {
		Op      string `json:"op"`
		Outcome string `json:"outcome"`
		Error   *struct {
			Type    string `json:"type"`
			Message string `json:"message"`
			Panic   string `json:"panic"`
		} `json:"error"`
		NetworkStatus json.RawMessage   `json:"networkStatus"`
		Services      []json.RawMessage `json:"services"`
	} `json:"steps"`
}

// deliberate are the steps at which this plugin does not do what OKG did, on purpose, from
// which step on (what follows differs as a consequence), and why; each has its own test
// and a heading in docs/okg-compatibility.md.
var deliberate = map[string]struct {
	from int
	why  string
}{
	"slb-04-two-lb-ids-fill":                           {9, "ports are freed when the Service is gone, not at a DELETE admission (TestPortsFreedWhenTheServiceIsGone)"},
	"slb-11-exhaustion":                                {9, "ports are freed when the Service is gone, not at a DELETE admission (TestPortsFreedWhenTheServiceIsGone)"},
	"slb-14-same-name-service-no-owner":                {2, "a Service of the pod's name without owners is refused by name, OKG panics (TestBadInputIsNamed)"},
	"slb-16-invalid-conf-json":                         {1, "a network-conf that is not JSON is a parameterError, OKG panics (TestBadInputIsNamed)"},
	"slb-17-missing-lb-ids":                            {2, "SlbIds missing is a parameterError naming it (TestBadInputIsNamed)"},
	"slb-18-missing-port-protocols":                    {2, "PortProtocols missing is a parameterError naming it, OKG sends a Service the API server refuses (TestBadInputIsNamed)"},
	"slb-25-lowercase-protocol":                        {2, "a lower-case protocol is a parameterError naming PortProtocols (TestBadInputIsNamed)"},
	"slb-30-hash-update-drops-ccm-finalizer-and-label": {0, "a conf change patches what the plugin owns and keeps the cloud controller's finalizer and label (TestConfChangeKeepsTheCloudControllersMarks)"},
	"slb-20-init-warmup-okg-annotation-only":           {0, "the allocator counts every Service on the load balancer, OKG's annotation included (TestWarmUpCountsEveryService)"},
	"slb-01-lifecycle-default-range":                   {10, "enabling the network again brings the whole Service back, its external traffic policy included; OKG only flips the type, and the API server's default Cluster replaces Local (TestDisableEnableKeepsTheService)"},
	"slb-07-etp-local-and-toggle":                      {8, "enabling the network again brings the whole Service back, its external traffic policy included (TestDisableEnableKeepsTheService)"},
	"slb-09-lb-keys-invalid":                           {4, "a DELETE is never refused: this manager does not intercept DELETE (OKG denies it on a bad network-conf)"},
	"slb-19-init-warmup-counted":                       {2, "a Service on the load balancer whose network is disabled (ClusterIP) still holds its ports (TestWarmUpCountsEveryService)"},
}

func loadCloudCases(t *testing.T) ([]cloudCase, map[string]cloudResult) {
	t.Helper()
	dir := filepath.Join("testdata", "okg-conformance")
	var cases []cloudCase
	var out map[string]cloudResult
	for name, v := range map[string]any{"cases.json": &cases, "out-okg.json": &out} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	return cases, out
}

// slbRange reads [alibabacloud] as OKG's provider does: registered when enable is true and
// the [alibabacloud.slb] table is valid.
func slbRange(t *testing.T, data string) (lb.Range, bool) {
	t.Helper()
	var cfg struct {
		AlibabaCloud struct {
			Enable bool `toml:"enable"`
			SLB    struct {
				Min   int32   `toml:"min_port"`
				Max   int32   `toml:"max_port"`
				Block []int32 `toml:"block_ports"`
			} `toml:"slb"`
		} `toml:"alibabacloud"`
	}
	if _, err := toml.Decode(data, &cfg); err != nil {
		t.Fatal(err)
	}
	s := cfg.AlibabaCloud.SLB
	valid := s.Min > 0 && int(s.Max-s.Min)-len(s.Block) < 200
	for _, b := range s.Block {
		valid = valid && b > s.Min && b < s.Max
	}
	return lb.Range{Min: s.Min, Max: s.Max, Block: s.Block}, cfg.AlibabaCloud.Enable && valid
}

var gssGVK = schema.GroupVersionKind{Group: "game.kruise.io", Version: "v1alpha1", Kind: "GameServerSet"}

// harness drives a case as OKG's recording did: a fake client holding the case's objects,
// pods stored only when admitted, the cloud controller's and garbage collector's writes as
// steps.
type harness struct {
	t      *testing.T
	c      client.Client
	p      *lb.Plugin
	rng    lb.Range
	pods   map[string]*corev1.Pod
	counts map[string]int
}

func newHarness(t *testing.T, cs cloudCase, rng lb.Range) *harness {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	scheme.AddKnownTypeWithName(gssGVK, &unstructured.Unstructured{})
	scheme.AddKnownTypeWithName(gssGVK.GroupVersion().WithKind("GameServerSetList"), &unstructured.UnstructuredList{})
	b := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&corev1.Pod{}, &corev1.Service{})
	for _, raw := range cs.Objects {
		u := &unstructured.Unstructured{}
		if err := json.Unmarshal(raw, &u.Object); err != nil {
			t.Fatal(err)
		}
		if u.GetKind() == "Service" {
			svc := &corev1.Service{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, svc); err != nil {
				t.Fatal(err)
			}
			b = b.WithObjects(svc)
			continue
		}
		b = b.WithObjects(u)
	}
	h := &harness{t: t, c: b.Build(), rng: rng, pods: map[string]*corev1.Pod{}, counts: map[string]int{}}
	h.restart()
	return h
}

func (h *harness) restart() {
	h.p = NewSLB(h.rng)
	if err := h.p.Init(context.Background(), h.c, plugin.Config{}); err != nil {
		h.t.Fatal(err)
	}
}

// outcome is what the harness compares per step.
type outcome struct {
	Outcome   string
	ErrorType string
	Status    *networkstatus.NetworkStatus
	Services  []normService
}

// normService is the part of a Service both implementations decide (the API server's
// allocations and defaults left out).
type normService struct {
	Name            string
	Annotations     map[string]string
	Labels          map[string]string
	OwnerReferences []metav1.OwnerReference
	Type            corev1.ServiceType
	ETP             corev1.ServiceExternalTrafficPolicy
	Selector        map[string]string
	Ports           []string // name port/protocol->target
}

func normalize(svc *corev1.Service) normService {
	n := normService{Name: svc.Name, Annotations: map[string]string{}, Labels: svc.Labels, OwnerReferences: svc.OwnerReferences,
		Type: svc.Spec.Type, Selector: svc.Spec.Selector}
	if svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
		n.ETP = svc.Spec.ExternalTrafficPolicy
		if n.ETP == "" {
			n.ETP = corev1.ServiceExternalTrafficPolicyCluster // the API server's default
		}
	}
	for k, v := range svc.Annotations {
		if k != lb.AnnotationConfigHash {
			n.Annotations[k] = v
		}
	}
	for _, p := range svc.Spec.Ports {
		proto := p.Protocol
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		n.Ports = append(n.Ports, fmt.Sprintf("%s %d/%s->%d", p.Name, p.Port, proto, p.TargetPort.IntVal))
	}
	return n
}

func (h *harness) services() []normService {
	var list corev1.ServiceList
	if err := h.c.List(context.Background(), &list); err != nil {
		h.t.Fatal(err)
	}
	var out []normService
	for i := range list.Items {
		out = append(out, normalize(&list.Items[i]))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// podFor returns the pod of a step: a stored one (update, delete) or a new one (create).
func (h *harness) newPod(cs cloudCase, name string) *corev1.Pod {
	raw := cs.Pod
	if name != "" && cs.Pods[name] != nil {
		raw = cs.Pods[name]
	}
	pod := &corev1.Pod{}
	if err := json.Unmarshal(raw, pod); err != nil {
		h.t.Fatal(err)
	}
	return pod
}

func (h *harness) run(cs cloudCase, i int) outcome {
	ctx := context.Background()
	st := cs.Steps[i]
	name := st.Pod
	if name == "" {
		p := h.newPod(cs, "")
		name = p.Name
	}
	var out outcome
	switch st.Op {
	case "create":
		pod := h.newPod(cs, st.Pod)
		got, err := plugin.Run(ctx, 0, h.p, plugin.OperationCreate, h.c, pod)
		out = h.result(got, err)
		if err == nil {
			h.counts[name]++
			uid := "uid-" + name
			if h.counts[name] > 1 {
				uid = fmt.Sprintf("uid-%s-%d", name, h.counts[name])
			}
			if st.UID != "" {
				uid = st.UID
			}
			got.UID = types.UID(uid)
			got.ResourceVersion = ""
			if err := h.c.Create(ctx, got); err != nil {
				h.t.Fatal(err)
			}
			h.pods[name] = got
		}
	case "update":
		stored := h.pods[name]
		if stored == nil {
			return outcome{Outcome: "skipped"}
		}
		pod := patchPod(h.t, stored, st.PodPatch)
		got, err := plugin.Run(ctx, 0, h.p, plugin.OperationUpdate, h.c, pod)
		out = h.result(got, err)
		if err == nil {
			h.pods[name] = got
		}
	case "delete":
		if h.pods[name] == nil {
			return outcome{Outcome: "skipped"}
		}
		out = outcome{Outcome: "admitted"}
		if err := h.c.Delete(ctx, h.pods[name]); err != nil {
			h.t.Fatal(err)
		}
		delete(h.pods, name)
	case "patchObject":
		svc := &corev1.Service{}
		if err := h.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: st.Name}, svc); err != nil {
			return outcome{Outcome: "skipped"}
		}
		var patch map[string]json.RawMessage
		_ = json.Unmarshal(st.Patch, &patch)
		if status, ok := patch["status"]; ok {
			body, _ := json.Marshal(map[string]json.RawMessage{"status": status})
			if err := h.c.Status().Patch(ctx, svc, client.RawPatch(types.MergePatchType, body)); err != nil {
				h.t.Fatal(err)
			}
			delete(patch, "status")
		}
		if len(patch) > 0 {
			body, _ := json.Marshal(patch)
			if err := h.c.Patch(ctx, svc, client.RawPatch(types.MergePatchType, body)); err != nil {
				h.t.Fatal(err)
			}
		}
		h.p.ServiceSeen(svc)
		out = outcome{Outcome: "patched"}
	case "gc":
		var list corev1.ServiceList
		_ = h.c.List(ctx, &list)
		for i := range list.Items {
			svc := &list.Items[i]
			alive := false
			for _, ref := range svc.OwnerReferences {
				for _, p := range h.pods {
					alive = alive || p.UID == ref.UID
				}
				alive = alive || ref.Kind == "GameServerSet"
			}
			if !alive && len(svc.OwnerReferences) > 0 {
				_ = h.c.Delete(ctx, svc)
				h.p.ServiceGone(client.ObjectKeyFromObject(svc).String())
			}
		}
		out = outcome{Outcome: "gc"}
	case "restart":
		h.restart()
		out = outcome{Outcome: "restarted"}
	default:
		out = outcome{Outcome: "unknown op " + st.Op}
	}
	h.apiServer()
	out.Services = h.services()
	return out
}

func (h *harness) result(got *corev1.Pod, err error) outcome {
	o := outcome{Outcome: "admitted"}
	if err != nil && !plugin.IsWarning(err) {
		o = outcome{Outcome: "denied", ErrorType: string(plugin.TypeOf(err))}
	}
	if got != nil {
		o.Status, _ = networkstatus.StatusFromPod(got)
	}
	return o
}

// apiServer does what the API server does to a Service that the fake client does not: a
// Service that is not of type LoadBalancer has no load-balancer status.
func (h *harness) apiServer() {
	ctx := context.Background()
	var list corev1.ServiceList
	_ = h.c.List(ctx, &list)
	for i := range list.Items {
		svc := &list.Items[i]
		if svc.Spec.Type != corev1.ServiceTypeLoadBalancer && len(svc.Status.LoadBalancer.Ingress) > 0 {
			svc.Status.LoadBalancer = corev1.LoadBalancerStatus{}
			if err := h.c.Status().Update(ctx, svc); err != nil {
				h.t.Fatal(err)
			}
		}
	}
}

func patchPod(t *testing.T, pod *corev1.Pod, patch json.RawMessage) *corev1.Pod {
	t.Helper()
	if len(patch) == 0 {
		return pod.DeepCopy()
	}
	doc, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	merged, err := jsonpatch.MergePatch(doc, patch)
	if err != nil {
		t.Fatal(err)
	}
	out := &corev1.Pod{}
	if err := json.Unmarshal(merged, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// okgOutcome turns OKG's recording of step i into an outcome.
func okgOutcome(t *testing.T, res cloudResult, i int) outcome {
	s := res.Steps[i]
	o := outcome{Outcome: s.Outcome}
	switch {
	case strings.HasPrefix(s.Outcome, "gc"):
		o.Outcome = "gc"
	case s.Outcome == "deleted":
		o.Outcome = "admitted"
	}
	if s.Error != nil {
		o.ErrorType = s.Error.Type
	}
	if len(s.NetworkStatus) > 0 && string(s.NetworkStatus) != "null" {
		st := &networkstatus.NetworkStatus{}
		if err := json.Unmarshal(s.NetworkStatus, st); err != nil {
			t.Fatal(err)
		}
		o.Status = st
	}
	for _, raw := range s.Services {
		svc := &corev1.Service{}
		if err := json.Unmarshal(raw, svc); err != nil {
			t.Fatal(err)
		}
		o.Services = append(o.Services, normalize(svc))
	}
	sort.Slice(o.Services, func(i, j int) bool { return o.Services[i].Name < o.Services[j].Name })
	if o.Outcome != "denied" && s.Op != "create" && s.Op != "update" {
		o.Status = nil
	}
	return o
}

// maskPorts replaces every listener port (Service port, external status port) with "P" when
// OKG's value varied across its runs at that step: OKG picks at random, this plugin the
// lowest free port; invariants are checked apart.
func maskPorts(o outcome, step int, varies []string) outcome {
	prefix := fmt.Sprintf("/steps/%d/", step)
	random := slices.ContainsFunc(varies, func(p string) bool { return strings.HasPrefix(p, prefix) })
	if !random {
		return o
	}
	for i := range o.Services {
		for j, p := range o.Services[i].Ports {
			name, rest, _ := strings.Cut(p, " ")
			_, proto, _ := strings.Cut(rest, "/")
			o.Services[i].Ports[j] = name + " P/" + proto
		}
	}
	if o.Status != nil {
		st := *o.Status
		st.ExternalAddresses = slices.Clone(st.ExternalAddresses)
		for i := range st.ExternalAddresses {
			a := st.ExternalAddresses[i]
			a.Ports = slices.Clone(a.Ports)
			for j := range a.Ports {
				a.Ports[j].Port = nil
			}
			st.ExternalAddresses[i] = a
		}
		o.Status = &st
	}
	return o
}

// TestOKGConformance replays OKG's recorded AlibabaCloud-SLB cases: each step's outcome,
// error type, network-status and Services (the API server's allocations left out) are
// OKG's, with the listener ports compared by invariants where OKG chose at random (in range,
// not blocked, distinct per load balancer). From the step a deliberate difference starts,
// the rest of the case is checked by the test that names it.
func TestOKGConformance(t *testing.T) {
	cases, results := loadCloudCases(t)
	for _, cs := range cases {
		t.Run(cs.ID, func(t *testing.T) {
			res := results[cs.ID]
			rng, registered := slbRange(t, cs.ProviderTOML)
			if registered != res.ProviderRegistered {
				t.Fatalf("provider registered %t, OKG's %t", registered, res.ProviderRegistered)
			}
			if !registered {
				return // OKG admits such pods unchanged, and so does this manager: no plugin
			}
			h := newHarness(t, cs, rng)
			stop := len(cs.Steps)
			if d, ok := deliberate[cs.ID]; ok {
				stop = d.from
			}
			for i := 0; i < stop; i++ {
				got := h.run(cs, i)
				checkInvariants(t, i, got, rng)
				want := maskPorts(okgOutcome(t, res, i), i, res.VariesAcrossRuns)
				got = maskPorts(got, i, res.VariesAcrossRuns)
				if diff := cmp.Diff(want, got); diff != "" {
					t.Fatalf("step %d (%s): differs from OKG (-okg +here):\n%s", i, cs.Steps[i].Op, diff)
				}
			}
		})
	}
}

// checkInvariants: every listener port of a Service on a load balancer is in range and not
// blocked, and no two Services on one load balancer share one.
func checkInvariants(t *testing.T, step int, o outcome, rng lb.Range) {
	t.Helper()
	seen := map[string]string{}
	for _, s := range o.Services {
		id := s.Annotations[AnnotationLBID]
		if id == "" {
			continue
		}
		ports := map[string]bool{}
		for _, p := range s.Ports {
			_, rest, _ := strings.Cut(p, " ")
			port, _, _ := strings.Cut(rest, "/")
			ports[port] = true
		}
		for port := range ports {
			var n int32
			if _, err := fmt.Sscan(port, &n); err != nil {
				t.Fatalf("step %d: Service %s port %q: %v", step, s.Name, port, err)
			}
			if n < rng.Min || n > rng.Max || slices.Contains(rng.Block, n) {
				t.Errorf("step %d: Service %s has port %d outside [%d,%d] or blocked", step, s.Name, n, rng.Min, rng.Max)
			}
			key := id + "/" + port
			if other, dup := seen[key]; dup {
				t.Errorf("step %d: port %s of load balancer %s held by %s and %s", step, port, id, other, s.Name)
			}
			seen[key] = s.Name
		}
	}
}
