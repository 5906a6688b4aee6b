package lb_test

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
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/alibabacloud"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/hwcloud"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/jdcloud"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/lb"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/volcengine"
)

// cloudCase is one case of testdata/okg-conformance/cases.json: OKG's own recording of
// one of its load-balancer plugins (the inputs; out-okg.json holds what OKG made of them).
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

// deliberate are the situations (case ids without the plugin prefix) in which these plugins
// do not do what OKG did, on purpose: from the step the rule finds on, the case is not
// compared (what follows differs as a consequence), and the named test holds the
// difference. A rule is "start" (step 0), "firstDelete", "firstOKGError" (OKG denied or
// panicked), "reEnable" (network-disabled set back to false), "firstNewService" (the first
// Service the plugin makes) or "emptyLBID" (OKG made a Service with an empty load-balancer
// id).
var deliberate = map[string]struct {
	rule, why string
}{
	"04-two-lb-ids-fill":                           {"firstDelete", "ports are freed when the Service is gone, not at a DELETE admission (TestPortsFreedWhenTheServiceIsGone)"},
	"07-etp-local-and-toggle":                      {"reEnable", "enabling the network again brings the whole Service back, its external traffic policy included (TestDisableEnableKeepsTheService)"},
	"09-lb-keys-invalid":                           {"firstDelete", "a DELETE is never refused: this manager does not intercept DELETE (OKG denies it on a bad network-conf)"},
	"11-exhaustion":                                {"firstDelete", "ports are freed when the Service is gone, not at a DELETE admission (TestPortsFreedWhenTheServiceIsGone)"},
	"14-same-name-service-no-owner":                {"start", "a Service of the pod's name without owners is someone else's and is refused by name; OKG panics (SLB, ELB) or takes it over (NLB, CLB, JdCloud) (TestBadInputIsNamed)"},
	"01-lifecycle-default-range":                   {"reEnable", "enabling the network again brings the whole Service back, its external traffic policy included (TestDisableEnableKeepsTheService)"},
	"16-invalid-conf-json":                         {"firstOKGError", "a network-conf that is not JSON is a parameterError, OKG panics (TestBadInputIsNamed)"},
	"17-missing-lb-ids":                            {"firstOKGError", "no load balancer ids is a parameterError naming the parameter (TestBadInputIsNamed)"},
	"18-missing-port-protocols":                    {"firstOKGError", "PortProtocols missing is a parameterError naming it, OKG sends a Service the API server refuses (TestBadInputIsNamed)"},
	"25-lowercase-protocol":                        {"firstOKGError", "a lower-case protocol is a parameterError naming PortProtocols (TestBadInputIsNamed)"},
	"19-init-warmup-counted":                       {"start", "a Service on the load balancer whose network is disabled (ClusterIP) still holds its ports (TestWarmUpCountsEveryService)"},
	"20-init-warmup-okg-annotation-only":           {"start", "the allocator counts every Service on the load balancer, OKG's annotation included (TestWarmUpCountsEveryService)"},
	"20-init-warmup-label-only":                    {"start", "the allocator counts every Service on the load balancer (TestWarmUpCountsEveryService)"},
	"30-hash-update-drops-ccm-finalizer-and-label": {"start", "a conf change patches what the plugin owns and keeps the cloud controller's finalizer and label (TestConfChangeKeepsTheCloudControllersMarks)"},
}

// deliberateFor overrides deliberate for one plugin's case.
var deliberateFor = map[string]struct {
	rule, why string
}{
	"clb-09-lb-keys-invalid":             {"firstOKGError", "an invalid Annotations key is a parameterError naming Annotations, OKG sends a Service the API server refuses (TestAnnotationsKeysChecked)"},
	"jdn-09-lb-keys-invalid":             {"firstOKGError", "an invalid Annotations key is a parameterError naming Annotations (TestAnnotationsKeysChecked)"},
	"jdn-04-two-lb-ids-fill":             {"emptyLBID", "no NLB with room is a parameterError; OKG makes a Service with an empty NLB id (TestJdCloudExhaustionIsAnError)"},
	"jdn-11-exhaustion":                  {"emptyLBID", "no NLB with room is a parameterError; OKG makes a Service with an empty NLB id (TestJdCloudExhaustionIsAnError)"},
	"jdn-17-missing-lb-ids":              {"emptyLBID", "no NlbIds is a parameterError naming it; OKG makes a Service with an empty NLB id (TestBadInputIsNamed)"},
	"jdn-22-recreate-same-name":          {"firstDelete", "the Service of an earlier pod of the same name is waited for, not taken over as OKG's JdCloud-NLB does (TestEarlierPodsServiceIsWaitedFor)"},
	"clb-30-annotations-override-lb-id":  {"firstNewService", "an Annotations entry that would set the load balancer id is a parameterError naming it: a pod cannot move its Service to a load balancer it was given no port on (TestProtectedAnnotationsRefused)"},
	"jdn-13-same-name-service-other-pod": {"start", "the Service of an earlier pod of the same name is waited for, not taken over as OKG's JdCloud-NLB does (TestEarlierPodsServiceIsWaitedFor)"},
}

// deliberateFrom returns the step from which case cs is not compared, len(steps) when
// never: the step the case's rule finds, or, when it comes first, the CREATE of the first
// pod no load balancer had room for. These plugins choose ports at CREATE, so such a pod is
// refused there (a Synchronous policy denies it; TestExhaustedAtCreate), where OKG admits
// it and refuses its updates.
func deliberateFrom(cs cloudCase, res cloudResult, idAnnotation string) int {
	from := len(cs.Steps)
	if i, ok := createOfFirstExhausted(cs, res, idAnnotation); ok {
		from = i
	}
	d, ok := deliberateFor[cs.ID]
	if !ok {
		d, ok = deliberate[cs.ID[4:]]
	}
	if !ok {
		return from
	}
	return min(from, ruleFrom(cs, res, idAnnotation, d.rule))
}

// createOfFirstExhausted returns the CREATE step of the first pod OKG found no room for: an
// update it denied with its exhaustion error, or (JdCloud) a Service it made with an empty
// load balancer id.
func createOfFirstExhausted(cs cloudCase, res cloudResult, idAnnotation string) (int, bool) {
	podOf := func(i int) string {
		if cs.Steps[i].Pod != "" {
			return cs.Steps[i].Pod
		}
		var pod struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		_ = json.Unmarshal(cs.Pod, &pod)
		return pod.Metadata.Name
	}
	for i, r := range res.Steps {
		exhausted := r.Error != nil && (strings.Contains(r.Error.Message, "avaialable ports") || strings.Contains(r.Error.Message, "unable to find load balancer"))
		if !exhausted && cs.ID[:3] == "jdn" {
			exhausted = ruleFrom(cs, res, idAnnotation, "emptyLBID") == i
		}
		if !exhausted {
			continue
		}
		name := podOf(i)
		for j := i; j >= 0; j-- {
			if cs.Steps[j].Op == "create" && podOf(j) == name {
				return j, true
			}
		}
	}
	return 0, false
}

// ruleFrom returns the step rule finds in cs, len(steps) when none.
func ruleFrom(cs cloudCase, res cloudResult, idAnnotation, rule string) int {
	initial := len(cs.Objects)
	for i, st := range cs.Steps {
		r := res.Steps[i]
		switch rule {
		case "start":
			return 0
		case "firstDelete":
			if st.Op == "delete" {
				return i
			}
		case "firstOKGError":
			if r.Error != nil || r.Outcome == "nilPod" || r.Outcome == "panic" {
				return i
			}
		case "reEnable":
			var patch struct {
				Metadata struct {
					Labels map[string]string `json:"labels"`
				} `json:"metadata"`
			}
			_ = json.Unmarshal(st.PodPatch, &patch)
			if patch.Metadata.Labels[networkstatus.LabelNetworkDisabled] == "false" {
				return i
			}
		case "firstNewService":
			if len(r.Services) > initial {
				return i
			}
		case "emptyLBID":
			for _, raw := range r.Services {
				svc := &corev1.Service{}
				if json.Unmarshal(raw, svc) == nil && svc.Annotations != nil {
					if id, ok := svc.Annotations[idAnnotation]; ok && id == "" {
						return i
					}
				}
			}
		}
	}
	return len(cs.Steps)
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

// provider is one recorded plugin: its case-id prefix, its constructor, its range table and
// OKG's validity rule for the whole provider (OKG registers a provider only when every table
// it checks is valid).
type provider struct {
	new          func(lb.Range) *lb.Plugin
	provider     string   // the TOML table of the provider, e.g. "alibabacloud"
	table        string   // the plugin's range table under it, e.g. "slb"
	validTables  []string // the tables Valid checks
	valid        func(table string, r lb.Range) bool
	idAnnotation string
	ignoreBlock  bool // the plugin does not read block_ports (JdCloud)
}

func strictlyInside(r lb.Range) bool {
	for _, b := range r.Block {
		if b <= r.Min || b >= r.Max {
			return false
		}
	}
	return true
}

var providers = map[string]provider{
	"slb": {new: alibabacloud.NewSLB, provider: "alibabacloud", table: "slb", validTables: []string{"slb", "nlb"}, valid: validAlibaba, idAnnotation: alibabacloud.AnnotationLBID},
	"nlb": {new: alibabacloud.NewNLB, provider: "alibabacloud", table: "nlb", validTables: []string{"slb", "nlb"}, valid: validAlibaba, idAnnotation: alibabacloud.AnnotationLBID},
	"elb": {new: hwcloud.NewELB, provider: "hwcloud", table: "elb", validTables: []string{"elb", "cce.elb"}, idAnnotation: hwcloud.AnnotationELBID,
		valid: func(table string, r lb.Range) bool {
			return r.Min > 0 && r.Max <= 65535 && strictlyInside(r) && (table != "elb" || int(r.Max-r.Min)-len(r.Block) <= 200)
		}},
	"clb": {new: volcengine.NewCLB, provider: "volcengine", table: "clb", validTables: []string{"clb"}, idAnnotation: volcengine.AnnotationCLBID,
		valid: func(_ string, r lb.Range) bool {
			for _, b := range r.Block {
				if b < r.Min || b >= r.Max {
					return false
				}
			}
			return r.Min >= 1 && r.Max <= 65535
		}},
	"jdn": {new: jdcloud.NewNLB, provider: "jdcloud", table: "nlb", validTables: []string{"nlb"}, idAnnotation: jdcloud.AnnotationNLBID, ignoreBlock: true,
		valid: func(_ string, r lb.Range) bool { return r.Min >= 1 && r.Max <= 65535 }},
}

// validAlibaba is OKG's Alibaba Cloud Valid: SLB block ports strictly inside and fewer than
// 200 ports, NLB block ports strictly inside, minimums above 0.
func validAlibaba(table string, r lb.Range) bool {
	if r.Min <= 0 || !strictlyInside(r) {
		return false
	}
	return table != "slb" || int(r.Max-r.Min)-len(r.Block) < 200
}

// rangeOf reads the plugin's range from the case's provider TOML and tells whether OKG
// registers the provider (enable = true and valid).
func rangeOf(t *testing.T, pr provider, data string) (lb.Range, bool) {
	t.Helper()
	var cfg map[string]map[string]any
	if _, err := toml.Decode(data, &cfg); err != nil {
		t.Fatal(err)
	}
	table := func(name string) lb.Range {
		// The caps at their defaults (OKG has none): every valid recorded case passes them.
		r := lb.Range{MaxPerPod: plugin.DefaultLBMaxPortsPerPod, MaxReservedPerNamespace: plugin.DefaultLBMaxReservedPortsPerNamespace}
		m := cfg[pr.provider]
		for _, part := range strings.Split(name, ".") {
			m, _ = m[part].(map[string]any)
		}
		if v, ok := m["min_port"].(int64); ok {
			r.Min = int32(v)
		}
		if v, ok := m["max_port"].(int64); ok {
			r.Max = int32(v)
		}
		if bs, ok := m["block_ports"].([]any); ok {
			for _, b := range bs {
				r.Block = append(r.Block, int32(b.(int64)))
			}
		}
		return r
	}
	enabled, _ := cfg[pr.provider]["enable"].(bool)
	valid := enabled
	for _, name := range pr.validTables {
		valid = valid && pr.valid(name, table(name))
	}
	r := table(pr.table)
	if pr.ignoreBlock {
		r.Block = nil
	}
	return r, valid
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
	pr     provider
	pods   map[string]*corev1.Pod
	counts map[string]int
}

func newHarness(t *testing.T, cs cloudCase, pr provider, rng lb.Range) *harness {
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
	h := &harness{t: t, c: b.Build(), rng: rng, pr: pr, pods: map[string]*corev1.Pod{}, counts: map[string]int{}}
	h.restart()
	return h
}

func (h *harness) restart() {
	h.p = h.pr.new(h.rng)
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
		if out.Outcome == "admitted" {
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
		if out.Outcome == "admitted" {
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
				_ = h.p.ServiceGone(ctx, h.c, client.ObjectKeyFromObject(svc).String(), svc.CreationTimestamp.Time)
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
			pr := providers[cs.ID[:3]]
			rng, registered := rangeOf(t, pr, cs.ProviderTOML)
			if registered != res.ProviderRegistered {
				t.Fatalf("provider registered %t, OKG's %t", registered, res.ProviderRegistered)
			}
			if !registered {
				return // OKG admits such pods unchanged, and so does this manager: no plugin
			}
			h := newHarness(t, cs, pr, rng)
			stop := deliberateFrom(cs, res, pr.idAnnotation)
			for i := 0; i < stop; i++ {
				got := h.run(cs, i)
				checkInvariants(t, i, got, rng, pr.idAnnotation, initialServices(cs))
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
func checkInvariants(t *testing.T, step int, o outcome, rng lb.Range, idAnnotation string, initial []string) {
	t.Helper()
	seen := map[string]string{}
	for _, s := range o.Services {
		id := s.Annotations[idAnnotation]
		if id == "" || slices.Contains(initial, s.Name) {
			continue // not the plugin's: a case's own objects may hold any port
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

// initialServices returns the names of the Services a case starts with.
func initialServices(cs cloudCase) []string {
	var names []string
	for _, raw := range cs.Objects {
		var o struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if json.Unmarshal(raw, &o) == nil && o.Kind == "Service" {
			names = append(names, o.Metadata.Name)
		}
	}
	return names
}
