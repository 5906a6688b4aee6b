package kubernetes

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

func getService(t *testing.T, c client.Client, name string) *corev1.Service {
	t.Helper()
	svc := &corev1.Service{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "game", Name: name}, svc); err != nil {
		t.Fatalf("get service %s: %v", name, err)
	}
	return svc
}

// allocateNodePorts plays the API server: it gives every service port a node port.
func allocateNodePorts(t *testing.T, c client.Client, name string, base int32) {
	t.Helper()
	svc := getService(t, c, name)
	for i := range svc.Spec.Ports {
		svc.Spec.Ports[i].NodePort = base + int32(i)
	}
	if err := c.Update(context.Background(), svc); err != nil {
		t.Fatal(err)
	}
}

func TestNodePortOnPodAdded(t *testing.T) {
	cases := map[string]struct {
		pod       *corev1.Pod
		wantType  plugin.ErrorType
		wantParam string
		wantWarn  bool
		wantMsg   []string
	}{
		"valid": {pod: newPod("gs-0", NodePortName, param("PortProtocols", "80/TCP,7777/UDP")).obj()},
		"HostPort's ContainerPorts instead of PortProtocols": {
			pod:      newPod("gs-0", NodePortName, param("ContainerPorts", "game:80")).obj(),
			wantType: plugin.ParameterError, wantParam: "PortProtocols", wantMsg: []string{"is required", "ContainerPorts is a parameter of Kubernetes-HostPort"},
		},
		"no parameters": {
			pod:      newPod("gs-0", NodePortName).obj(),
			wantType: plugin.ParameterError, wantParam: "PortProtocols",
		},
		"lower-case protocol": {
			pod:      newPod("gs-0", NodePortName, param("PortProtocols", "80/tcp")).obj(),
			wantType: plugin.ParameterError, wantParam: "PortProtocols", wantMsg: []string{"upper case"},
		},
		"TCPUDP is HostPort only": {
			pod:      newPod("gs-0", NodePortName, param("PortProtocols", "80/TCPUDP")).obj(),
			wantType: plugin.ParameterError, wantParam: "PortProtocols",
		},
		"duplicate port": {
			pod:      newPod("gs-0", NodePortName, param("PortProtocols", "80,80/TCP")).obj(),
			wantType: plugin.ParameterError, wantParam: "PortProtocols", wantMsg: []string{"listed twice"},
		},
		"bad Fixed": {
			pod:      newPod("gs-0", NodePortName, param("PortProtocols", "80"), param("Fixed", "yes")).obj(),
			wantType: plugin.ParameterError, wantParam: "Fixed",
		},
		"unknown parameter warns": {
			pod:      newPod("gs-0", NodePortName, param("PortProtocols", "80"), param("ContainerPorts", "game:80")).obj(),
			wantType: plugin.ParameterError, wantParam: "ContainerPorts", wantWarn: true,
		},
		"network-conf not JSON": {
			pod:      newPod("gs-0", NodePortName).rawConf("[").obj(),
			wantType: plugin.ParameterError, wantParam: networkstatus.AnnotationNetworkConf,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := NewNodePort().OnPodAdded(context.Background(), newClient(), tc.pod)
			wantError(t, err, tc.wantType, tc.wantParam, tc.wantWarn, tc.wantMsg...)
			if tc.wantType != "" && !tc.wantWarn {
				return
			}
			if got.Labels[SelectorPodNameLabel] != "gs-0" {
				t.Errorf("pod-name label = %q, want gs-0", got.Labels[SelectorPodNameLabel])
			}
			if st := status(t, got); st != nil {
				t.Errorf("status = %+v, want none (OKG writes none at CREATE)", st)
			}
		})
	}
}

func TestNodePortLifecycle(t *testing.T) {
	ctx := context.Background()
	np := NewNodePort()
	c := newClient(newNode("n1", intIP("10.0.0.1"), extIP("192.0.2.1")))
	base := newPod("gs-0", NodePortName, param("PortProtocols", "80/TCP,7777/UDP")).uid("u0")

	// UPDATE before scheduling: nothing happens, as in OKG (no Service, no status).
	pod, err := np.OnPodUpdated(ctx, c, base.obj())
	wantError(t, err, "", "", false)
	if st := status(t, pod); st != nil {
		t.Errorf("status before scheduling = %+v, want none", st)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "game", Name: "gs-0"}, &corev1.Service{}); err == nil {
		t.Errorf("service created before scheduling")
	}

	// Scheduled with an IP: Service created, node ports not yet allocated: NotReady.
	scheduled := base.node("n1").ip("10.244.0.5")
	pod, err = np.OnPodUpdated(ctx, c, scheduled.obj())
	wantError(t, err, "", "", false)
	if st := status(t, pod); st.CurrentNetworkState != networkstatus.NetworkNotReady {
		t.Errorf("status without node ports = %+v", st)
	}
	svc := getService(t, c, "gs-0")
	wantSpec := corev1.ServiceSpec{
		Type:     corev1.ServiceTypeNodePort,
		Selector: map[string]string{SelectorPodNameLabel: "gs-0"},
		Ports: []corev1.ServicePort{
			{Name: "80", Port: 80, Protocol: "TCP", TargetPort: intstr.FromInt32(80)},
			{Name: "7777", Port: 7777, Protocol: "UDP", TargetPort: intstr.FromInt32(7777)},
		},
	}
	if diff := cmp.Diff(wantSpec, svc.Spec); diff != "" {
		t.Errorf("service spec (-want,+got):\n%s", diff)
	}
	wantOwner := []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "gs-0", UID: "u0", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
	if diff := cmp.Diff(wantOwner, svc.OwnerReferences); diff != "" {
		t.Errorf("owner (-want,+got):\n%s", diff)
	}
	if svc.Annotations[AnnotationServiceHash] == "" {
		t.Errorf("no hash annotation")
	}

	// Node ports allocated: Ready, one address per port as in OKG.
	allocateNodePorts(t, c, "gs-0", 30080)
	pod, err = np.OnPodUpdated(ctx, c, scheduled.obj())
	wantError(t, err, "", "", false)
	want := &networkstatus.NetworkStatus{
		InternalAddresses: []networkstatus.NetworkAddress{
			{IP: "10.244.0.5", Ports: []networkstatus.NetworkPort{{Name: "80", Protocol: "TCP", Port: networkstatus.IntPort(80)}}},
			{IP: "10.244.0.5", Ports: []networkstatus.NetworkPort{{Name: "7777", Protocol: "UDP", Port: networkstatus.IntPort(7777)}}},
		},
		ExternalAddresses: []networkstatus.NetworkAddress{
			{IP: "192.0.2.1", Ports: []networkstatus.NetworkPort{{Name: "80", Protocol: "TCP", Port: networkstatus.IntPort(30080)}}},
			{IP: "192.0.2.1", Ports: []networkstatus.NetworkPort{{Name: "7777", Protocol: "UDP", Port: networkstatus.IntPort(30081)}}},
		},
		CurrentNetworkState: networkstatus.NetworkReady,
	}
	if diff := cmp.Diff(want, status(t, pod)); diff != "" {
		t.Errorf("ready status (-want,+got):\n%s", diff)
	}

	// PortProtocols changes: the Service no longer matches and is updated, unchanged port keeps its node port.
	changed := newPod("gs-0", NodePortName, param("PortProtocols", "7777/UDP,7778/UDP")).uid("u0").node("n1").ip("10.244.0.5")
	pod, err = np.OnPodUpdated(ctx, c, changed.obj())
	wantError(t, err, "", "", false)
	svc = getService(t, c, "gs-0")
	gotPorts := map[int32]int32{}
	for _, p := range svc.Spec.Ports {
		gotPorts[p.Port] = p.NodePort
	}
	if diff := cmp.Diff(map[int32]int32{7777: 30081, 7778: 0}, gotPorts); diff != "" {
		t.Errorf("ports -> node ports after change (-want,+got):\n%s", diff)
	}
	if st := status(t, pod); st.CurrentNetworkState != networkstatus.NetworkNotReady {
		t.Errorf("status while new node port missing = %s, want NotReady", st.CurrentNetworkState)
	}

	// Network disabled: selector switched off; enabled again: switched back.
	disabled := changed.label(networkstatus.LabelNetworkDisabled, "true")
	_, err = np.OnPodUpdated(ctx, c, disabled.obj())
	wantError(t, err, "", "", false)
	if diff := cmp.Diff(map[string]string{SelectorDisabledLabel: "gs-0"}, getService(t, c, "gs-0").Spec.Selector); diff != "" {
		t.Errorf("disabled selector (-want,+got):\n%s", diff)
	}
	enabled := changed.label(networkstatus.LabelNetworkDisabled, "false")
	_, err = np.OnPodUpdated(ctx, c, enabled.obj())
	wantError(t, err, "", "", false)
	if diff := cmp.Diff(map[string]string{SelectorPodNameLabel: "gs-0"}, getService(t, c, "gs-0").Spec.Selector); diff != "" {
		t.Errorf("enabled selector (-want,+got):\n%s", diff)
	}
	_, err = np.OnPodUpdated(ctx, c, changed.label(networkstatus.LabelNetworkDisabled, "maybe").obj())
	wantError(t, err, plugin.ParameterError, networkstatus.LabelNetworkDisabled, false)

	// DELETE leaves the Service, as OKG: it is owned by the pod, and garbage collection
	// removes it once the pod is gone (a refused DELETE keeps the network).
	wantError(t, np.OnPodDeleted(ctx, c, enabled.obj()), "", "", false)
	if refs := getService(t, c, "gs-0").OwnerReferences; len(refs) != 1 || refs[0].Kind != "Pod" || refs[0].UID != "u0" {
		t.Errorf("service after DELETE admission has owners %+v, want the pod (for garbage collection)", refs)
	}
}

// gss returns an OKG GameServerSet "gs" whose network conf lists allow in
// AllowNotReadyContainers and whose template runs the given images by container name.
func gss(allow string, images map[string]string) *unstructured.Unstructured {
	var ctrs []any
	for name, image := range images {
		ctrs = append(ctrs, map[string]any{"name": name, "image": image})
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{
			"network":            map[string]any{"networkType": NodePortName, "networkConf": []any{map[string]any{"name": ParamAllowNotReadyContainers, "value": allow}}},
			"gameServerTemplate": map[string]any{"spec": map[string]any{"containers": ctrs}},
		},
	}}
	u.SetGroupVersionKind(gameServerSetGVK)
	u.SetNamespace("game")
	u.SetName("gs")
	u.SetUID("uid-gs")
	return u
}

// TestNodePortAllowNotReadyContainers: OKG's in-place update lifecycle. The containers
// come from the GameServerSet; in PreparingUpdate, a listed container whose image differs
// from the GameServerSet's template makes the Service publish the pod and the blocker
// label "false"; in any other state the blocker is "true" and publishing stops once the
// pod is Ready.
func TestNodePortAllowNotReadyContainers(t *testing.T) {
	images := map[string]string{"game": "game:1", "side": "side:2"}
	pod := func(state string, sideImage string, ready bool) *podBuilder {
		b := newPod("gs-0", NodePortName, param("PortProtocols", "80"), param("AllowNotReadyContainers", "side")).
			containers("game", "side").uid("u0").node("n1").label(networkstatus.LabelOwnerGSS, "gs")
		if state != "" {
			b.label(LabelLifecycleState, state)
		}
		b.pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "game", Image: "game:1", Ready: true}, {Name: "side", Image: sideImage, Ready: ready}}
		cond := corev1.ConditionFalse
		if ready {
			cond = corev1.ConditionTrue
		}
		b.pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: cond}}
		return b
	}
	cases := map[string]struct {
		gss         *unstructured.Unstructured
		publishing  bool // the Service's publishNotReadyAddresses before the UPDATE
		pod         *podBuilder
		wantPublish bool
		wantBlocker string
		wantWarning bool
	}{
		"normal state: blocker true": {
			gss: gss("side", images), pod: pod("Normal", "side:2", true), wantBlocker: "true",
		},
		"PreparingUpdate, listed container to be updated: published, blocker false": {
			gss: gss("side", images), pod: pod(LifecycleStatePreparingUpdate, "side:1", true), wantPublish: true, wantBlocker: "false",
		},
		"PreparingUpdate, already published: blocker false": {
			gss: gss("side", images), publishing: true, pod: pod(LifecycleStatePreparingUpdate, "side:2", true), wantPublish: true, wantBlocker: "false",
		},
		"PreparingUpdate, listed container not changing: blocker false, not published": {
			gss: gss("side", images), pod: pod(LifecycleStatePreparingUpdate, "side:2", true), wantBlocker: "false",
		},
		"PreparingUpdate, only an unlisted container changes: not published": {
			gss: gss("game", images), pod: pod(LifecycleStatePreparingUpdate, "side:1", true), wantBlocker: "false",
		},
		"updated, pod not Ready yet: still published, blocker true": {
			gss: gss("side", images), publishing: true, pod: pod("Updated", "side:2", false), wantPublish: true, wantBlocker: "true",
		},
		"updated, pod Ready: publishing stops, blocker true": {
			gss: gss("side", images), publishing: true, pod: pod("Normal", "side:2", true), wantBlocker: "true",
		},
		"no GameServerSet: a warning, nothing published": {
			pod: pod(LifecycleStatePreparingUpdate, "side:1", true), wantWarning: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs := []client.Object{}
			if tc.gss != nil {
				objs = append(objs, tc.gss)
			}
			c := fake.NewClientBuilder().WithScheme(conformanceScheme()).WithObjects(objs...).Build()
			np := NewNodePort()
			if tc.publishing {
				svc := desiredNodePortService(tc.pod.obj(), nodePortParams{ports: []servicePortSpec{{port: 80, protocol: "TCP"}}},
					[]metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "gs-0", UID: "u0", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}, false)
				svc.Spec.PublishNotReadyAddresses = true
				if err := c.Create(context.Background(), svc); err != nil {
					t.Fatal(err)
				}
			}
			got, err := np.OnPodUpdated(context.Background(), c, tc.pod.obj())
			if tc.wantWarning {
				wantError(t, err, plugin.ParameterError, ParamAllowNotReadyContainers, true, "no GameServerSet")
			} else {
				wantError(t, err, "", "", false)
			}
			if p := getService(t, c, "gs-0").Spec.PublishNotReadyAddresses; p != tc.wantPublish {
				t.Errorf("PublishNotReadyAddresses = %t, want %t", p, tc.wantPublish)
			}
			if b, ok := got.Labels[LabelInplaceUpdateNotReadyBlocker]; b != tc.wantBlocker || ok != (tc.wantBlocker != "") {
				t.Errorf("blocker label = %q (present %t), want %q", b, ok, tc.wantBlocker)
			}
		})
	}
}

// TestNodePortSameNamePod: a Service left by a previous pod of the same name is
// adopted by the new pod (garbage collection had not removed it yet), and the old pod's
// (late) DELETE does not remove it.
func TestNodePortSameNamePod(t *testing.T) {
	ctx := context.Background()
	np := NewNodePort()
	c := newClient()
	old := newPod("gs-0", NodePortName, param("PortProtocols", "80")).uid("old").node("n1")
	_, err := np.OnPodUpdated(ctx, c, old.obj())
	wantError(t, err, "", "", false)
	newer := newPod("gs-0", NodePortName, param("PortProtocols", "80")).uid("new").node("n1")
	_, err = np.OnPodUpdated(ctx, c, newer.obj())
	wantError(t, err, "", "", false)
	if refs := getService(t, c, "gs-0").OwnerReferences; len(refs) != 1 || refs[0].UID != "new" {
		t.Fatalf("owner after adoption = %+v, want the new pod", refs)
	}
	wantError(t, np.OnPodDeleted(ctx, c, old.terminating().obj()), "", "", false)
	getService(t, c, "gs-0") // still there
}

func TestNodePortFixed(t *testing.T) {
	ctx := context.Background()
	np := NewNodePort()
	c := newClient()
	pod := newPod("gs-0", NodePortName, param("PortProtocols", "80"), param("Fixed", "true")).uid("u0").node("n1").label(networkstatus.LabelOwnerGSS, "gss")
	_, err := np.OnPodUpdated(ctx, c, pod.obj())
	wantError(t, err, "", "", false)
	// As OKG: without its GameServerSet, a Fixed Service is owned by the pod.
	if refs := getService(t, c, "gs-0").OwnerReferences; len(refs) != 1 || refs[0].Kind != "Pod" || refs[0].UID != "u0" {
		t.Errorf("fixed service without a GameServerSet has owners %+v, want the pod", refs)
	}
}

// TestNodePortAPIErrors: every failed call is an APICallError with a NotReady status; a
// failed read (the Service or Node could not be seen) is Unknown, a failed create (the
// Service was seen missing) is not: the network is then observably broken.
func TestNodePortAPIErrors(t *testing.T) {
	cases := map[string]struct {
		c           client.Client
		wantUnknown bool
	}{
		"create fails": {c: failingClient("create", "service")},
		"get fails":    {c: failingClient("get", "service"), wantUnknown: true},
		"node fails":   {c: failingClient("get", "node"), wantUnknown: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pod, err := NewNodePort().OnPodUpdated(context.Background(), tc.c, newPod("gs-0", NodePortName, param("PortProtocols", "80")).uid("u0").node("n1").ip("10.0.0.9").obj())
			wantError(t, err, plugin.APICallError, "", false, "apiserver unavailable")
			if got := plugin.AsError(err).IsUnknown(); got != tc.wantUnknown {
				t.Errorf("IsUnknown = %t, want %t", got, tc.wantUnknown)
			}
			if st := status(t, pod); st == nil || st.CurrentNetworkState != networkstatus.NetworkNotReady {
				t.Errorf("status on error = %+v, want NotReady", st)
			}
		})
	}
	// DELETE admission touches nothing, so it cannot fail.
	err := NewNodePort().OnPodDeleted(context.Background(), failingClient("get", "service"), newPod("gs-0", NodePortName).uid("u0").obj())
	wantError(t, err, "", "", false)
}

// TestAdoptionIsAtomic: the patch that follows the ownership check carries the
// resourceVersion that was checked, so a Service replaced by someone else's between the
// check and the write is never patched: the write fails with a conflict (an APICallError
// marked Unknown; the next attempt reads the replacement and refuses it as not managed) and
// the replacement stays as it was.
func TestAdoptionIsAtomic(t *testing.T) {
	ctx := context.Background()
	pod := newPod("gs-0", NodePortName, param("PortProtocols", "80")).uid("u0").node("n1").ip("10.0.0.9")
	// The pod's Service, as the plugin made it, but with an old port: the plugin patches it.
	c0 := newClient(newNode("n1", extIP("1.2.3.4")))
	if _, err := NewNodePort().OnPodUpdated(ctx, c0, pod.obj()); err != nil {
		t.Fatal(err)
	}
	mine := getService(t, c0, "gs-0")
	mine.ResourceVersion = ""
	mine.Spec.Ports[0].Port = 81
	theirs := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: mine.Namespace, Name: mine.Name, Labels: map[string]string{"owner": "someone-else"}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Ports: []corev1.ServicePort{{Port: 443}}}}
	replaced := false
	c := fake.NewClientBuilder().WithObjects(newNode("n1", extIP("1.2.3.4")), mine).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			err := c.Get(ctx, key, obj, opts...)
			if _, ok := obj.(*corev1.Service); ok && err == nil && !replaced {
				// Between the plugin's read (and its ownership check) and its write, the
				// Service is deleted and someone else's is created under its name.
				replaced = true
				if err := c.Delete(ctx, obj.DeepCopyObject().(client.Object)); err != nil {
					t.Fatal(err)
				}
				if err := c.Create(ctx, theirs.DeepCopy()); err != nil {
					t.Fatal(err)
				}
			}
			return err
		},
	}).Build()
	_, err := NewNodePort().OnPodUpdated(ctx, c, pod.obj())
	wantError(t, err, plugin.APICallError, "", false, "create or patch Service", "object was modified")
	if !plugin.AsError(err).IsUnknown() {
		t.Error("a conflict is Unknown: the object changed since it was read, nothing says the network is broken")
	}
	got := getService(t, c, "gs-0")
	if got.Labels["owner"] != "someone-else" || len(got.OwnerReferences) != 0 || got.Spec.Ports[0].Port != 443 {
		t.Errorf("the replacement was patched: %+v", got)
	}
}

// TestRefusedPatchOfAnExistingServiceKeepsReady: a patch of the pod's existing Service that
// the API server does not accept (refused by another admission controller, throttled) is
// WriteRefused, so the webhook keeps a Ready network (plugin.Error.KeepsReady); it is
// Inconclusive (the window pauses) only when the API server failed rather than refused. A
// create that is refused is neither: the Service is missing.
func TestRefusedPatchOfAnExistingServiceKeepsReady(t *testing.T) {
	ctx := context.Background()
	pod := newPod("gs-0", NodePortName, param("PortProtocols", "80")).uid("u0").node("n1").ip("10.0.0.9")
	refusals := map[string]struct {
		err              error
		wantInconclusive bool
	}{
		"refused by a ValidatingAdmissionPolicy": {err: apierrors.NewForbidden(corev1.Resource("services"), "gs-0", errors.New("ValidatingAdmissionPolicy 'freeze' denied request")), wantInconclusive: false},
		"throttled":                              {err: apierrors.NewTooManyRequests("slow down", 1), wantInconclusive: true},
		"failed":                                 {err: apierrors.NewInternalError(errors.New("etcd leader changed")), wantInconclusive: true},
	}
	for name, tc := range refusals {
		t.Run(name, func(t *testing.T) {
			c0 := newClient(newNode("n1", extIP("1.2.3.4")))
			if _, err := NewNodePort().OnPodUpdated(ctx, c0, pod.obj()); err != nil {
				t.Fatal(err)
			}
			mine := getService(t, c0, "gs-0")
			mine.ResourceVersion = ""
			mine.Spec.PublishNotReadyAddresses = !mine.Spec.PublishNotReadyAddresses // a cosmetic difference
			c := fake.NewClientBuilder().WithObjects(newNode("n1", extIP("1.2.3.4")), mine).WithInterceptorFuncs(interceptor.Funcs{
				Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
					return tc.err
				},
			}).Build()
			_, err := NewNodePort().OnPodUpdated(ctx, c, pod.obj())
			perr := plugin.AsError(err)
			if perr == nil || !perr.WriteRefused || !perr.KeepsReady() || perr.IsUnknown() {
				t.Fatalf("error = %#v, want WriteRefused (KeepsReady), not Unknown", perr)
			}
			if perr.Inconclusive() != tc.wantInconclusive {
				t.Errorf("Inconclusive = %t, want %t", perr.Inconclusive(), tc.wantInconclusive)
			}
		})
	}
	t.Run("a refused create is not WriteRefused", func(t *testing.T) {
		c := fake.NewClientBuilder().WithObjects(newNode("n1", extIP("1.2.3.4"))).WithInterceptorFuncs(interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				return apierrors.NewForbidden(corev1.Resource("services"), "gs-0", errors.New("exceeded quota"))
			},
		}).Build()
		_, err := NewNodePort().OnPodUpdated(ctx, c, pod.obj())
		if perr := plugin.AsError(err); perr == nil || perr.KeepsReady() {
			t.Fatalf("error = %#v, want one that does not keep a Ready network (the Service is missing)", perr)
		}
	})
}
