package admission

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
	podwebhook "github.com/okg-extensions/network-plugin-policy/pkg/webhook/pod"
)

// builtInRetryInterval is the built-in retry interval (OKG's 5s probe), the first retry's
// delay when no policy sets one.
const builtInRetryInterval = 5 * time.Second

// TestGameServersStartWhileManagerIsDown stops every replica: a NodePort StatefulSet still
// scales up (its pods go through the async entry, failurePolicy Ignore), a HostPort pod is
// refused with the apiserver's webhook error (the sync entry, failurePolicy Fail), pods of
// types without a plugin here (AmazonWebServices-NLB, a near-miss) are admitted. Once the
// manager is back, the network controller catches the NodePort pods up: they become
// network-Ready with the same Services and status as pods admitted while it was up. Then a
// tenant's Synchronous NodePort policy moves NodePort pods of its namespace, and only those,
// to the sync entry.
func TestGameServersStartWhileManagerIsDown(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "outage", nil)

	mgr.Stop()
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			if err := mgr.Start(context.Background()); err != nil {
				t.Errorf("start the manager again: %v", err)
			}
		}
	})
	createStatefulSet(t, ns, "down", 2, gamePodTemplate("down", "Kubernetes-NodePort", nodePortConf))
	eventually(t, time.Minute, "NodePort pods created while no replica answers", func(ctx context.Context) (bool, error) {
		pods, err := listPods(ctx, ns, "down")
		return len(pods) == 2, err
	})
	pods, err := listPods(ctx, ns, "down")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if d, ok := p.Annotations[podwebhook.AnnotationDecision]; ok {
			t.Errorf("pod %s carries %s=%q although no replica answered", p.Name, podwebhook.AnnotationDecision, d)
		}
	}
	hostPortPod := probePod(ns, "Kubernetes-HostPort")
	hostPortPod.Annotations[networkstatus.AnnotationNetworkConf] = hostPortConf
	_, err = cs.CoreV1().Pods(ns).Create(ctx, hostPortPod, metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
		t.Errorf("HostPort pod while the manager is down: %v, want the apiserver's webhook error (failurePolicy Fail)", err)
	}
	// Types without a plugin here go to the async entry (the webhook passes them through):
	// OKG's cloud types never wait for this manager, and neither does a near-miss
	// (docs/admission.md, "Which types are in sync").
	for _, networkType := range []string{"AmazonWebServices-NLB", "kubernetes-hostport"} {
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, probePod(ns, networkType), metav1.CreateOptions{}); err != nil {
			t.Errorf("%s pod while the manager is down: %v, want it admitted (failurePolicy Ignore)", networkType, err)
		}
	}

	if err := mgr.Start(ctx); err != nil {
		t.Fatalf("start the manager: %v", err)
	}
	restarted = true
	took := eventually(t, time.Minute, "NodePort pods admitted during the outage become network-Ready", func(ctx context.Context) (bool, error) {
		pods, err := listPods(ctx, ns, "down")
		if err != nil || len(pods) != 2 {
			return false, err
		}
		for _, p := range pods {
			if networkState(&p) != networkstatus.NetworkReady || p.Annotations[podwebhook.AnnotationDecision] == "" {
				return false, nil
			}
		}
		return true, nil
	})
	t.Logf("NodePort pods admitted during the outage were network-Ready %s after the manager was ready (built-in retry interval %s)",
		took.Round(100*time.Millisecond), builtInRetryInterval)
	if took > 3*builtInRetryInterval {
		t.Errorf("catch-up took %s, want about one retry interval (%s)", took.Round(time.Second), builtInRetryInterval)
	}

	// The same as with the webhook up: a pod of a StatefulSet created now.
	createStatefulSet(t, ns, "up", 1, gamePodTemplate("up", "Kubernetes-NodePort", nodePortConf))
	eventually(t, time.Minute, "NodePort pod admitted with the webhook up is network-Ready", func(ctx context.Context) (bool, error) {
		pods, err := listPods(ctx, ns, "up")
		return err == nil && len(pods) == 1 && networkState(&pods[0]) == networkstatus.NetworkReady, err
	})
	up, _ := listPods(ctx, ns, "up")
	down, _ := listPods(ctx, ns, "down")
	want := networkShape(t, ns, &up[0])
	for _, p := range down {
		if got := networkShape(t, ns, &p); got != strings.ReplaceAll(want, "up-0", p.Name) {
			t.Errorf("pod %s caught up after the outage:\n%s\nwant the same as with the webhook up:\n%s", p.Name, got, want)
		}
	}

	// A tenant's Synchronous NodePort policy puts NodePort pods of its own namespace, and only
	// those, behind the sync entry: with the manager down, a NodePort pod is refused there
	// and still admitted in another namespace.
	applyPolicy(t, fmt.Sprintf(`
apiVersion: policy.game.kruise.io/v1alpha1
kind: NetworkPluginPolicy
metadata: {name: nodeport-sync, namespace: %s}
spec:
  plugins: ["Kubernetes-NodePort"]
  failureMode: Synchronous
`, ns))
	moved := eventually(t, 30*time.Second, "Kubernetes-NodePort of namespace "+ns+" in the sync entry", func(ctx context.Context) (bool, error) {
		return syncEntryNames(ctx, ns)
	})
	t.Logf("kubectl apply of a Synchronous NodePort policy -> its namespace in the sync entry after %s", moved.Round(time.Millisecond))
	other := newNamespace(t, "outage-other", nil)
	mgr.Stop()
	restarted = false
	nodePortProbe := func(namespace string) error {
		p := probePod(namespace, "Kubernetes-NodePort")
		p.Annotations[networkstatus.AnnotationNetworkConf] = nodePortConf
		_, err := cs.CoreV1().Pods(namespace).Create(ctx, p, metav1.CreateOptions{})
		return err
	}
	if err := nodePortProbe(ns); err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
		t.Errorf("NodePort pod in %s (Synchronous policy) while the manager is down: %v, want the apiserver's webhook error", ns, err)
	}
	if err := nodePortProbe(other); err != nil {
		t.Errorf("NodePort pod in %s (no policy) while the manager is down: %v, want it admitted", other, err)
	}
	if err := mgr.Start(ctx); err != nil {
		t.Fatalf("start the manager: %v", err)
	}
	restarted = true

	if _, err := kubectl(t, "", "delete", "npp", "-n", ns, "nodeport-sync"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "namespace "+ns+" gone from the sync entry", func(ctx context.Context) (bool, error) {
		in, err := syncEntryNames(ctx, ns)
		return !in, err
	})
}

// syncEntryNames reports whether the sync entry (failurePolicy Fail) of the mutating webhook
// configuration names value (a network type or a namespace) as a string in its
// matchConditions.
func syncEntryNames(ctx context.Context, value string) (bool, error) {
	cfg, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, mgr.Webhooks.Mutating, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	for _, w := range cfg.Webhooks {
		if w.FailurePolicy == nil || *w.FailurePolicy != admissionregistrationv1.Fail {
			continue
		}
		for _, c := range w.MatchConditions {
			if strings.Contains(c.Expression, "'"+value+"'") {
				return true, nil
			}
		}
	}
	return false, nil
}

// networkShape describes a NodePort pod's network without the values that differ from pod to
// pod (node ports, IPs, times): its network-status fields and its Service's type, ports,
// selector and owner.
func networkShape(t *testing.T, ns string, p *corev1.Pod) string {
	t.Helper()
	st, err := networkstatus.StatusFromPod(p)
	if err != nil || st == nil {
		return fmt.Sprintf("network-status unreadable: %v", err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "status %s/%s type %s, %d internal, %d external addresses\n", st.CurrentNetworkState, st.DesiredNetworkState,
		st.NetworkType, len(st.InternalAddresses), len(st.ExternalAddresses))
	svc, err := cs.CoreV1().Services(ns).Get(context.Background(), p.Name, metav1.GetOptions{})
	if err != nil {
		fmt.Fprintf(&b, "service: %v", err)
		return b.String()
	}
	var ports, owners, selector []string
	for _, port := range svc.Spec.Ports {
		ports = append(ports, fmt.Sprintf("%s/%d->%s nodePort set %v", port.Protocol, port.Port, port.TargetPort.String(), port.NodePort != 0))
	}
	for _, o := range svc.OwnerReferences {
		owners = append(owners, o.Kind+"/"+o.Name)
	}
	for k, v := range svc.Spec.Selector {
		selector = append(selector, k+"="+v)
	}
	slices.Sort(selector)
	fmt.Fprintf(&b, "service %s type %s ports %v selector %v owners %v", svc.Name, svc.Spec.Type, ports, selector, owners)
	return b.String()
}
