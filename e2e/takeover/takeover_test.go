// Package takeover checks the migration from OpenKruise Game's own Kubernetes network plugins
// (docs/migration-from-okg.md): a namespace holds game servers exactly as kruise-game-manager
// left them (network-status Ready in OKG's bytes, Services and Ingresses with OKG's hash
// annotations, host ports in use), and then the manager is installed, as config/default
// deploys it. Nothing OKG made is rewritten, no network flips, the host ports in use are
// counted, and new pods of the same StatefulSets get their networks.
package takeover

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/okg-extensions/network-plugin-policy/e2e/cluster"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

const (
	minPort, maxPort = 8000, 8003
	fakeNodes        = 2
	// OKG's hash annotations. Their values come from OKG's own FNV-32 over its Go structs;
	// the manager must keep an object whose spec matches whatever hash it carries.
	svcHashKey     = "game.kruise.io/svc-hash"
	ingressHashKey = "game.kruise.io/ingress-hash"
	// decisionKey is written by the manager's webhook on every pod it admits.
	decisionKey = "policy.game.kruise.io/network-decision"
)

var (
	cp *cluster.ControlPlane
	cs kubernetes.Interface
	// mgr is the manager, once a test has started it (TestTakeoverFromOKG starts it after
	// building OKG's objects; startManager starts it for tests that run alone).
	mgr *cluster.Manager
	// provider is the manager's provider configuration file.
	provider string
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	return cluster.RunSuite(m, cluster.SuiteOptions{
		Cluster: cluster.Options{FakeNodes: fakeNodes},
		// The project's CRD, and OKG's GameServerSet (reduced) for AllowNotReadyContainers.
		CRDDirs:        []string{"../../crds", "testdata/crds"},
		ProviderConfig: fmt.Sprintf("[kubernetes]\nenable = true\n[kubernetes.hostPort]\nmin_port = %d\nmax_port = %d\n", minPort, maxPort),
	}, func(s *cluster.Suite) error {
		cp, provider = s.ControlPlane, s.ProviderConfig
		cs = kubernetes.NewForConfigOrDie(cp.Config)
		return nil
	})
}

// okgStatus is a Ready network-status as OKG's plugins write it (the conformance facts of
// docs/okg-compatibility.md): OKG's field order, no networkType, null times.
func okgStatus(internal, external []networkstatus.NetworkAddress) string {
	type status struct {
		InternalAddresses   []networkstatus.NetworkAddress `json:"internalAddresses,omitempty"`
		ExternalAddresses   []networkstatus.NetworkAddress `json:"externalAddresses,omitempty"`
		CurrentNetworkState string                         `json:"currentNetworkState,omitempty"`
		CreateTime          *string                        `json:"createTime"`
		LastTransitionTime  *string                        `json:"lastTransitionTime"`
	}
	out, _ := json.Marshal(status{InternalAddresses: internal, ExternalAddresses: external, CurrentNetworkState: "Ready"})
	return string(out)
}

func port(name string, protocol corev1.Protocol, p int) networkstatus.NetworkPort {
	v := intstr.FromInt32(int32(p))
	return networkstatus.NetworkPort{Name: name, Protocol: protocol, Port: &v}
}

func statefulSet(name string, replicas int32, networkType, conf string, ports []corev1.ContainerPort) *appsv1.StatefulSet {
	labels := map[string]string{"app": name}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To(replicas),
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector:            &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{
					networkstatus.AnnotationNetworkType: networkType, networkstatus.AnnotationNetworkConf: conf}},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To[int64](0),
					Containers:                    []corev1.Container{{Name: "game", Image: "game-server:1.0", Ports: ports}},
				},
			},
		},
	}
}

// eventually polls cond every 250ms and fails the test after timeout.
func eventually(t *testing.T, timeout time.Duration, msg string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last error
	if err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		if err != nil && ctx.Err() == nil {
			last = err
		}
		return ok && err == nil, nil
	}); err != nil {
		t.Fatalf("%s: not within %s (last error: %v)", msg, timeout, last)
	}
}

func runningPods(ctx context.Context, ns, app string, n int) ([]corev1.Pod, error) {
	list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		return nil, err
	}
	if len(list.Items) != n {
		return nil, fmt.Errorf("%d pods of %s, want %d", len(list.Items), app, n)
	}
	for _, p := range list.Items {
		if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" || p.Spec.NodeName == "" {
			return nil, fmt.Errorf("pod %s not running with an IP yet", p.Name)
		}
	}
	return list.Items, nil
}

func nodeIP(ctx context.Context, name string) (string, error) {
	node, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address, nil
		}
	}
	return "", fmt.Errorf("node %s has no InternalIP", name)
}

func ownedByPod(p *corev1.Pod) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: p.Name, UID: p.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
}

func setStatus(ctx context.Context, p *corev1.Pod, status string) error {
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{networkstatus.AnnotationNetworkStatus: status}}})
	_, err := cs.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// TestTakeoverFromOKG: game servers of the three types, as OKG's plugins left them, are taken
// over by the manager without a write to their Services, Ingresses or network-status.
func TestTakeoverFromOKG(t *testing.T) {
	ctx := context.Background()
	ns := "okg-game"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// ingress-nginx's class, the cluster's default, as OKG clusters have it (the manager
	// allows the default class and the configured ones).
	nginx := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "nginx",
		Annotations: map[string]string{networkingv1.AnnotationIsDefaultIngressClass: "true"}},
		Spec: networkingv1.IngressClassSpec{Controller: "k8s.io/ingress-nginx"}}
	if _, err := cs.NetworkingV1().IngressClasses().Create(ctx, nginx, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// As OKG left them. The host port is in the StatefulSet's template (what OKG's webhook
	// wrote into each pod); both pods hold 8000, on different nodes.
	ingressConf := `[{"name":"Path","value":"/game<id>(/|$)(.*)"},{"name":"PathType","value":"ImplementationSpecific"},` +
		`{"name":"Port","value":"8080"},{"name":"Host","value":"play<id>.example.com"},{"name":"IngressClassName","value":"nginx"}]`
	for _, sts := range []*appsv1.StatefulSet{
		statefulSet("np", 2, "Kubernetes-NodePort", `[{"name":"PortProtocols","value":"80/TCP"}]`, nil),
		statefulSet("hp", 2, "Kubernetes-HostPort", `[{"name":"ContainerPorts","value":"game:7777/UDP"}]`,
			[]corev1.ContainerPort{{ContainerPort: 7777, HostPort: 8000, Protocol: corev1.ProtocolUDP}}),
		statefulSet("ing", 1, "Kubernetes-Ingress", ingressConf, nil),
	} {
		if _, err := cs.AppsV1().StatefulSets(ns).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var np, hp, ing []corev1.Pod
	eventually(t, 2*time.Minute, "OKG's game servers running", func(ctx context.Context) (bool, error) {
		var err error
		if np, err = runningPods(ctx, ns, "np", 2); err != nil {
			return false, err
		}
		if hp, err = runningPods(ctx, ns, "hp", 2); err != nil {
			return false, err
		}
		ing, err = runningPods(ctx, ns, "ing", 1)
		return err == nil, err
	})
	selector := func(p *corev1.Pod) map[string]string {
		return map[string]string{"statefulset.kubernetes.io/pod-name": p.Name}
	}
	for i := range np {
		p := &np[i]
		svc, err := cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: p.Name, Annotations: map[string]string{svcHashKey: "4151766375"}, OwnerReferences: ownedByPod(p)},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: selector(p),
				Ports: []corev1.ServicePort{{Name: "80", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(80)}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ip, err := nodeIP(ctx, p.Spec.NodeName)
		if err != nil {
			t.Fatal(err)
		}
		status := okgStatus(
			[]networkstatus.NetworkAddress{{IP: p.Status.PodIP, Ports: []networkstatus.NetworkPort{port("80", corev1.ProtocolTCP, 80)}}},
			[]networkstatus.NetworkAddress{{IP: ip, Ports: []networkstatus.NetworkPort{port("80", corev1.ProtocolTCP, int(svc.Spec.Ports[0].NodePort))}}})
		if err := setStatus(ctx, p, status); err != nil {
			t.Fatal(err)
		}
	}
	for i := range hp {
		p := &hp[i]
		ip, err := nodeIP(ctx, p.Spec.NodeName)
		if err != nil {
			t.Fatal(err)
		}
		status := okgStatus(
			[]networkstatus.NetworkAddress{{IP: p.Status.PodIP, Ports: []networkstatus.NetworkPort{port("game-7777", corev1.ProtocolUDP, 7777)}}},
			[]networkstatus.NetworkAddress{{IP: ip, Ports: []networkstatus.NetworkPort{port("game-7777", corev1.ProtocolUDP, 8000)}}})
		if err := setStatus(ctx, p, status); err != nil {
			t.Fatal(err)
		}
	}
	for i := range ing {
		p := &ing[i]
		id := p.Name[strings.LastIndex(p.Name, "-")+1:]
		path, host := "/game"+id+"(/|$)(.*)", "play"+id+".example.com"
		if _, err := cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: p.Name, Annotations: map[string]string{svcHashKey: "3399268406"}, OwnerReferences: ownedByPod(p)},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Selector: selector(p),
				Ports: []corev1.ServicePort{{Name: "8080", Port: 8080, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pathType := networkingv1.PathTypeImplementationSpecific
		if _, err := cs.NetworkingV1().Ingresses(ns).Create(ctx, &networkingv1.Ingress{
			ObjectMeta: metav1.ObjectMeta{Name: p.Name, Annotations: map[string]string{ingressHashKey: "1217248329"}, OwnerReferences: ownedByPod(p)},
			Spec: networkingv1.IngressSpec{IngressClassName: ptr.To("nginx"), Rules: []networkingv1.IngressRule{{Host: host,
				IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
					Path: path, PathType: &pathType,
					Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: p.Name,
						Port: networkingv1.ServiceBackendPort{Number: 8080}}},
				}}}}}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		status := okgStatus(
			[]networkstatus.NetworkAddress{{IP: p.Status.PodIP, Ports: []networkstatus.NetworkPort{{Name: path, Port: ptr.To(intstr.FromInt32(8080))}}}},
			[]networkstatus.NetworkAddress{{IP: "", Ports: []networkstatus.NetworkPort{{Name: path, Port: ptr.To(intstr.FromInt32(8080))}}, EndPoint: host}})
		if err := setStatus(ctx, p, status); err != nil {
			t.Fatal(err)
		}
	}

	// What OKG left: every object's resourceVersion, every pod's network-status bytes.
	before := snapshot(t, ns)

	if mgr != nil {
		t.Fatal("the manager already runs: this test must start it after OKG's objects exist")
	}
	mgr = startManager(t)
	defer func() {
		if t.Failed() {
			t.Logf("manager logs:\n%s", mgr.LogTails(20000))
		}
	}()

	// The catch-up controller stamps every pod the webhook never saw; the UPDATE runs the
	// plugin, which writes the decision. Then one more retry interval for anything that would
	// follow.
	eventually(t, time.Minute, "every pod taken over (decision written by the webhook)", func(ctx context.Context) (bool, error) {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			if p.Annotations[decisionKey] == "" {
				return false, fmt.Errorf("pod %s has no %s yet", p.Name, decisionKey)
			}
		}
		return true, nil
	})
	time.Sleep(6 * time.Second)
	after := snapshot(t, ns)
	for key, was := range before {
		if now := after[key]; now != was {
			t.Errorf("%s changed on takeover:\n  OKG left: %s\n  now:      %s", key, was, now)
		}
	}

	// The host ports OKG's pods hold are counted on both replicas.
	for i, r := range mgr.Replicas {
		eventually(t, 30*time.Second, fmt.Sprintf("replica %d counts the 2 host ports in use", i), func(ctx context.Context) (bool, error) {
			v, err := r.Metric(ctx, "npp_hostport_allocations", `source="observed"`)
			if err != nil {
				return false, err
			}
			if v != 2 {
				return false, fmt.Errorf("npp_hostport_allocations{source=observed} = %v, want 2", v)
			}
			return true, nil
		})
	}

	// New pods of the same StatefulSets get their networks; the third HostPort pod cannot
	// have 8000, which both nodes already hold.
	for name, replicas := range map[string]int32{"np": 3, "hp": 3, "ing": 2} {
		scale, err := cs.AppsV1().StatefulSets(ns).GetScale(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		scale.Spec.Replicas = replicas
		if _, err := cs.AppsV1().StatefulSets(ns).UpdateScale(ctx, name, scale, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, time.Minute, "new pods network-Ready", func(ctx context.Context) (bool, error) {
		for _, name := range []string{"np-2", "hp-2", "ing-1"} {
			p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			st, err := networkstatus.StatusFromPod(p)
			if err != nil || st == nil || st.CurrentNetworkState != networkstatus.NetworkReady {
				return false, fmt.Errorf("pod %s network %+v (%v)", name, st, err)
			}
			if name == "hp-2" {
				hostPort := p.Spec.Containers[0].Ports[0].HostPort
				if hostPort == 8000 || hostPort < minPort || hostPort > maxPort {
					return false, fmt.Errorf("pod hp-2 has host port %d, want one in [%d, %d] other than 8000", hostPort, minPort, maxPort)
				}
			}
		}
		return true, nil
	})
}

// startManager starts the manager as deployed (2 replicas), once for the package.
func startManager(t *testing.T) *cluster.Manager {
	t.Helper()
	if mgr != nil {
		return mgr
	}
	m, err := cp.StartManager(context.Background(), cluster.ManagerOptions{ProviderConfig: provider, Replicas: 2})
	if err != nil {
		t.Fatalf("start manager: %v", err)
	}
	mgr = m
	return m
}

// snapshot returns, by "Kind name", every Service's and Ingress's resourceVersion and every
// pod's network-status.
func snapshot(t *testing.T, ns string) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	svcs, err := cs.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range svcs.Items {
		out["Service "+s.Name] = "resourceVersion " + s.ResourceVersion + " " + strconv.Quote(s.Annotations[svcHashKey])
	}
	ings, err := cs.NetworkingV1().Ingresses(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range ings.Items {
		out["Ingress "+i.Name] = "resourceVersion " + i.ResourceVersion + " " + strconv.Quote(i.Annotations[ingressHashKey])
	}
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		out["Pod "+p.Name+" network-status"] = p.Annotations[networkstatus.AnnotationNetworkStatus]
	}
	return out
}
