package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/go-logr/logr"
	"github.com/pmezard/go-difflib/difflib"
	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	serializerjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllertest"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	"github.com/okg-extensions/network-plugin-policy/pkg/controller/network"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/kubernetes"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/lb"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/providers"
	"github.com/okg-extensions/network-plugin-policy/pkg/policy"
	podwebhook "github.com/okg-extensions/network-plugin-policy/pkg/webhook/pod"
)

// defaultSimulationNow is the time of a simulated admission when the Test's cluster.now is
// unset: the timestamps the webhook writes into network-status and the retry state, so that
// an expected pod is the same on every run.
var defaultSimulationNow = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)

// simulatedWebhookTimeout is the manager's default --webhook-timeout, the timeoutSeconds of
// its mutating pod webhook configuration.
const simulatedWebhookTimeout = 30 * time.Second

// simulationUser is the username of a simulated admission request: not the manager's, so
// the manager-owned annotations of the pod are protected as for any pod author.
const simulationUser = "nppctl-test"

// simulator runs the manager's pod webhook handler (pkg/webhook/pod.Handler) with the
// manager's plugins offline, over an in-memory cluster (controller-runtime's fake client)
// holding the Test's cluster objects: the same code that admits a pod in the cluster,
// without a cluster. Every run starts from the same objects and fresh plugins.
type simulator struct {
	g   *globalOptions
	eng *engine
	// objects are the Test's cluster.objects, decoded.
	objects []client.Object
	// namespaces are the Test's namespaces (the handler reads the pod's namespace).
	namespaces map[string]*corev1.Namespace
	now        time.Time
}

// simulation is the result of one simulated admission.
type simulation struct {
	// allowed is the webhook's answer; message is its denial message (empty when allowed).
	allowed bool
	message string
	// warnings are the admission warnings.
	warnings []string
	// pod is the admitted pod: the request's pod with the webhook's patch applied.
	pod *corev1.Pod
	// written are the objects the plugin created or changed, as they are after the run, by
	// objectKey; deleted holds the keys of objects it deleted.
	written map[string]client.Object
	deleted []string
}

// newSimulator decodes the Test's cluster objects (typed by client-go's scheme: Nodes,
// Services, Pods, Ingresses, IngressClasses, ResourceQuotas, Namespaces ...).
func newSimulator(g *globalOptions, eng *engine, docs []*document, namespaces map[string]*corev1.Namespace, now time.Time) (*simulator, error) {
	s := &simulator{g: g, eng: eng, namespaces: namespaces, now: now}
	var problems []string
	where := map[string]string{}
	for _, d := range docs {
		obj, err := decodeTyped(d)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", d.where(), err))
			continue
		}
		key := objectKey(obj.GetObjectKind().GroupVersionKind(), obj.GetNamespace(), obj.GetName())
		if prev, dup := where[key]; dup {
			problems = append(problems, fmt.Sprintf("%s: %s is given twice (first at %s)", d.where(), key, prev))
			continue
		}
		if ns, isNS := obj.(*corev1.Namespace); isNS {
			if _, dup := namespaces[ns.Name]; dup {
				problems = append(problems, fmt.Sprintf("%s: %s is also among the manifest's namespaces: give it once, under namespaces", d.where(), key))
				continue
			}
		}
		where[key] = d.where()
		s.objects = append(s.objects, obj)
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("invalid cluster.objects:\n%s", strings.Join(problems, "\n"))
	}
	return s, nil
}

// strictDecoder decodes JSON into client-go's scheme types and fails on a field the type
// does not have, so that a misspelt field of an expected object is an error, not a field
// that is never compared.
var strictDecoder = serializerjson.NewSerializerWithOptions(serializerjson.DefaultMetaFactory,
	clientgoscheme.Scheme, clientgoscheme.Scheme, serializerjson.SerializerOptions{Strict: true})

// decodeTyped decodes d strictly into the Go type client-go's scheme has for its apiVersion
// and kind; an error names the document and an unknown kind or field.
func decodeTyped(d *document) (client.Object, error) {
	if d.err != nil {
		return nil, d.err
	}
	if d.gvk().Kind == "List" {
		return nil, fmt.Errorf("%s: a List: give its items as documents of their own (kubectl get -o yaml wraps several objects in a List)", d.describe())
	}
	obj, gvk, err := strictDecoder.Decode(d.raw, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("decode %s: %w (expected a built-in Kubernetes object such as a Node, Service or Pod, with the fields of its type)", d.describe(), err)
	}
	cobj, ok := obj.(client.Object)
	if !ok {
		return nil, fmt.Errorf("%s is not an object with metadata", gvk)
	}
	cobj.GetObjectKind().SetGroupVersionKind(*gvk)
	return cobj, nil
}

// defaultPod sets the defaults of the fields the plugins read that the API server sets
// before admission: a container port's protocol (TCP). Nothing else of the pod is defaulted.
func defaultPod(pod *corev1.Pod) {
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			for j := range cs[i].Ports {
				if cs[i].Ports[j].Protocol == "" {
					cs[i].Ports[j].Protocol = corev1.ProtocolTCP
				}
			}
		}
	}
}

// failingPlugin is a registered plugin whose pod hooks fail with err: a case's simulated
// error, so that the handler answers with the message and warnings of that failure.
type failingPlugin struct {
	plugin.Plugin
	err *plugin.Error
}

func (f failingPlugin) OnPodAdded(_ context.Context, _ client.Client, pod *corev1.Pod) (*corev1.Pod, error) {
	return pod, f.err
}

func (f failingPlugin) OnPodUpdated(_ context.Context, _ client.Client, pod *corev1.Pod) (*corev1.Pod, error) {
	return pod, f.err
}

// run admits pod (old is the pod before an UPDATE; nil means pod itself) as the webhook
// does for op. perr, when set, replaces the pod's plugin by one that fails with it; otherwise
// the plugin runs against the cluster objects. An error means the simulation itself could
// not run (a provider configuration that does not load, a plugin whose Init fails).
func (s *simulator) run(ctx context.Context, pod, old *corev1.Pod, op string, perr *policy.PluginError) (*simulation, error) {
	ctx = ctrl.LoggerInto(ctx, logr.Discard())
	cfg, err := providerConfig(s.g)
	if err != nil {
		return nil, err
	}
	plugins := providers.Plugins(cfg)
	if perr != nil {
		for i, p := range plugins {
			if p.Name() == pod.Annotations[networkstatus.AnnotationNetworkType] {
				plugins[i] = failingPlugin{Plugin: p, err: plugin.Errorf(plugin.ErrorType(perr.Type), "%s", perr.Message)}
			}
		}
	}
	reg, err := plugin.NewRegistry(plugins...)
	if err != nil {
		return nil, err
	}
	pod = pod.DeepCopy()
	defaultPod(pod)
	objs := make([]client.Object, 0, len(s.objects)+len(s.namespaces)+1)
	for _, o := range s.objects {
		if p, isPod := o.(*corev1.Pod); isPod && op != "CREATE" && p.Namespace == pod.Namespace && p.Name == pod.Name {
			return nil, fmt.Errorf("cluster.objects holds Pod %s/%s, the pod of this %s case: leave it out (the case's pod is the stored pod)", p.Namespace, p.Name, op)
		}
		objs = append(objs, o.DeepCopyObject().(client.Object))
	}
	for _, ns := range s.namespaces {
		if !slices.ContainsFunc(objs, func(o client.Object) bool { _, isNS := o.(*corev1.Namespace); return isNS && o.GetName() == ns.Name }) {
			objs = append(objs, ns.DeepCopy())
		}
	}
	if _, ok := s.namespaces[pod.Namespace]; !ok {
		objs = append(objs, withNameLabel(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: pod.Namespace}}))
	}
	if op != "CREATE" {
		// The pod exists: it has a UID (the owner of what its plugin creates), and its
		// plugin may read it.
		if pod.UID == "" {
			pod.UID = types.UID("nppctl-test-" + pod.Namespace + "-" + pod.Name)
		}
		objs = append(objs, pod.DeepCopy())
	}
	written := map[string]schema.GroupVersionKind{}
	// recorded returns err and, when the write succeeded, notes obj as written.
	recorded := func(c client.WithWatch, obj client.Object, err error) error {
		if err == nil {
			if gvk, gvkErr := apiutil.GVKForObject(obj, c.Scheme()); gvkErr == nil {
				written[objectKey(gvk, obj.GetNamespace(), obj.GetName())] = gvk
			}
		}
		return err
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	for _, kind := range reg.ResultObjects() {
		// The controllers' own kinds the cloud plugins read (PodEIP, PodDNAT): none in
		// the Test's cluster, so their plugins see no answer yet.
		gvk := kind.Object.GetObjectKind().GroupVersionKind()
		scheme.AddKnownTypeWithName(gvk, &unstructured.Unstructured{})
		scheme.AddKnownTypeWithName(gvk.GroupVersion().WithKind(gvk.Kind+"List"), &unstructured.UnstructuredList{})
	}
	cl := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
		WithIndex(&networkingv1.Ingress{}, kubernetes.IngressHostIndex, kubernetes.IngressHosts).
		WithIndex(&corev1.Event{}, lb.EventServiceIndex, lb.EventServiceUID).
		WithInterceptorFuncs(interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				return recorded(c, obj, c.Create(ctx, obj, opts...))
			},
			Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
				return recorded(c, obj, c.Update(ctx, obj, opts...))
			},
			Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
				return recorded(c, obj, c.Patch(ctx, obj, patch, opts...))
			},
			Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
				return recorded(c, obj, c.Delete(ctx, obj, opts...))
			},
		}).Build()
	if err := reg.InitAll(ctx, cl, cfg); err != nil {
		return nil, err
	}
	informer := controllertest.NewFakeInformer(controllertest.Synced)
	if _, err := reg.UsePodInformer(ctx, informer); err != nil {
		return nil, err
	}
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			informer.Add(p)
		}
	}
	metrics, err := podwebhook.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		return nil, err
	}
	h := &podwebhook.Handler{
		Client:     cl,
		Namespaces: cl,
		Plugins:    reg,
		Resolver:   s.eng.resolver,
		Recorder:   events.NewFakeRecorder(256),
		Metrics:    metrics,
		Decoder:    admission.NewDecoder(clientgoscheme.Scheme),
		Clock:      clocktesting.NewFakePassiveClock(s.now),
		// As the manager with its default flags: --min-retry-interval, and the plugin
		// deadline capped below --webhook-timeout (cmd/manager).
		MinRetryInterval: network.DefaultMinRetryInterval,
		MaxTimeout:       simulatedWebhookTimeout - 2*time.Second,
	}
	raw, err := json.Marshal(pod)
	if err != nil {
		return nil, err
	}
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID:       "nppctl-test",
		Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
		Namespace: pod.Namespace,
		Name:      pod.Name,
		Operation: admissionv1.Operation(op),
		UserInfo:  authenticationv1.UserInfo{Username: simulationUser},
	}}
	switch op {
	case "DELETE":
		req.OldObject.Raw = raw
	case "UPDATE":
		req.Object.Raw = raw
		req.OldObject.Raw = raw
		if old != nil {
			o := old.DeepCopy()
			o.UID = pod.UID
			if req.OldObject.Raw, err = json.Marshal(o); err != nil {
				return nil, err
			}
		}
	default:
		req.Object.Raw = raw
	}
	resp := h.Handle(ctx, req)
	out := &simulation{allowed: resp.Allowed, warnings: resp.Warnings, written: map[string]client.Object{}}
	if !resp.Allowed {
		if resp.Result != nil {
			out.message = resp.Result.Message
		}
	} else if op != "DELETE" {
		if out.pod, err = applyPatch(raw, resp); err != nil {
			return nil, err
		}
	}
	for key, gvk := range written {
		obj, err := cl.Scheme().New(gvk)
		if err != nil {
			return nil, err
		}
		cobj := obj.(client.Object)
		ns, name := splitObjectKey(key)
		switch err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cobj); {
		case apierrors.IsNotFound(err):
			out.deleted = append(out.deleted, key)
		case err != nil:
			return nil, err
		default:
			cobj.GetObjectKind().SetGroupVersionKind(gvk)
			out.written[key] = cobj
		}
	}
	slices.Sort(out.deleted)
	return out, nil
}

// applyPatch applies the webhook's JSON patch to the request's pod raw.
func applyPatch(raw []byte, resp admission.Response) (*corev1.Pod, error) {
	patch := resp.Patch
	if len(patch) == 0 && len(resp.Patches) > 0 {
		var err error
		if patch, err = json.Marshal(resp.Patches); err != nil {
			return nil, err
		}
	}
	patched := raw
	if len(patch) > 0 {
		p, err := jsonpatch.DecodePatch(patch)
		if err != nil {
			return nil, fmt.Errorf("decode the webhook's patch: %w", err)
		}
		if patched, err = p.Apply(raw); err != nil {
			return nil, fmt.Errorf("apply the webhook's patch: %w", err)
		}
	}
	pod := &corev1.Pod{}
	if err := json.Unmarshal(patched, pod); err != nil {
		return nil, fmt.Errorf("decode the patched pod: %w", err)
	}
	pod.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Pod"))
	return pod, nil
}

// objectKey is "Kind namespace/name" (Kind name for a cluster-scoped object), the name of an
// object in messages.
func objectKey(gvk schema.GroupVersionKind, namespace, name string) string {
	if namespace == "" {
		return gvk.Kind + " " + name
	}
	return gvk.Kind + " " + namespace + "/" + name
}

// splitObjectKey returns the namespace and name of an objectKey.
func splitObjectKey(key string) (namespace, name string) {
	_, nn, _ := strings.Cut(key, " ")
	if ns, n, ok := strings.Cut(nn, "/"); ok {
		return ns, n
	}
	return "", nn
}

// comparableFields returns obj as JSON fields for comparison, without what the in-memory cluster
// or the API server sets (metadata.resourceVersion, managedFields, creationTimestamp).
func comparableFields(obj runtime.Object) (map[string]any, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	if md, ok := m["metadata"].(map[string]any); ok {
		delete(md, "resourceVersion")
		delete(md, "managedFields")
		delete(md, "creationTimestamp")
	}
	delete(m, "status")
	return m, nil
}

// compareObjects returns what differs between want and got (-want +got), one line per
// object: missing, unexpected or differing (with the diff).
func compareObjects(field string, want []client.Object, got map[string]client.Object) []string {
	var fails []string
	wantByKey := map[string]client.Object{}
	for _, w := range want {
		gvk := w.GetObjectKind().GroupVersionKind()
		wantByKey[objectKey(gvk, w.GetNamespace(), w.GetName())] = w
	}
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range wantByKey {
			if !yield(k) {
				return
			}
		}
		for k := range got {
			if _, dup := wantByKey[k]; !dup && !yield(k) {
				return
			}
		}
	})
	for _, k := range keys {
		w, inWant := wantByKey[k]
		g, inGot := got[k]
		switch {
		case !inGot:
			fails = append(fails, fmt.Sprintf("%s: expected %s, but the plugin neither created nor changed it", field, k))
		case !inWant:
			fails = append(fails, fmt.Sprintf("%s: the plugin wrote %s, which is not expected:\n%s", field, k, objectYAML(g)))
		default:
			if d := diffObjects(w, g); d != "" {
				fails = append(fails, fmt.Sprintf("%s: %s differs (-expected +got):\n%s", field, k, d))
			}
		}
	}
	return fails
}

// diffObjects returns a unified diff (-expected +got) of want and got as comparableFields in
// YAML, or "" when they are equal.
func diffObjects(want, got runtime.Object) string {
	w, err := comparableFields(want)
	if err != nil {
		return err.Error()
	}
	g, err := comparableFields(got)
	if err != nil {
		return err.Error()
	}
	if equality.Semantic.DeepEqual(w, g) {
		return ""
	}
	wy, err := yaml.Marshal(w)
	if err != nil {
		return err.Error()
	}
	gy, err := yaml.Marshal(g)
	if err != nil {
		return err.Error()
	}
	d, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: difflib.SplitLines(string(wy)), B: difflib.SplitLines(string(gy)),
		FromFile: "expected", ToFile: "got", Context: 3,
	})
	if err != nil {
		return err.Error()
	}
	return d
}

// objectYAML returns obj's comparableFields as YAML, for a message.
func objectYAML(obj runtime.Object) string {
	m, err := comparableFields(obj)
	if err != nil {
		return err.Error()
	}
	b, err := yaml.Marshal(m)
	if err != nil {
		return err.Error()
	}
	return string(b)
}
