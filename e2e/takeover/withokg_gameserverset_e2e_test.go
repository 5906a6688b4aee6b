package takeover

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/okg-extensions/network-plugin-policy/e2e/okgstandin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/kubernetes"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// TestGameServerSetsEndToEnd runs GameServerSets of each Kubernetes type through OKG's
// stand-in (its validating webhook, its GameServerSet workloads and GameServer controller,
// whose pod writes are UPDATEs through this manager's webhook) beside the manager as deployed,
// with OKG's Kubernetes provider off:
//   - each GameServerSet is admitted and its pods get their networks;
//   - OKG's pod writes (state labels, network-trigger-time every 5 s for 60 s) are never
//     denied and never flip a Ready network;
//   - networkDisabled on a GameServer reaches its pod's label, and the NodePort Service stops
//     selecting the pod;
//   - a Fixed NodePort keeps its node port across its pod's re-creation, and goes with the
//     GameServerSet;
//   - scale-up and scale-down; OKG restarts in the middle of a scale-up, and again while the
//     manager's leader is killed: no HostPort pod is left without its host port, and a
//     GameServerSet CREATE refused during the gap succeeds when retried.
func TestGameServerSetsEndToEnd(t *testing.T) {
	ctx := context.Background()
	okg, _ := installOKG(t)
	served := []string{"Kubernetes-HostPort", "Kubernetes-NodePort", "Kubernetes-Ingress"}
	eventually(t, 30*time.Second, "the manager's condition on OKG's GameServerSet entry", conditionOn(served))

	ns := "gss-e2e"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(cp.Config)
	ctrls := okgstandin.StartControllers(ctx, cs, dyn, ns)
	t.Cleanup(ctrls.Stop)
	gss := dyn.Resource(okgstandin.GameServerSets).Namespace(ns)
	create := func(name, networkType string, replicas int64, conf ...string) error {
		var networkConf []any
		for i := 0; i+1 < len(conf); i += 2 {
			networkConf = append(networkConf, map[string]any{"name": conf[i], "value": conf[i+1]})
		}
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "game.kruise.io/v1alpha1", "kind": "GameServerSet",
			"metadata": map[string]any{"name": name, "namespace": ns},
			"spec": map[string]any{
				"replicas": replicas,
				"network":  map[string]any{"networkType": networkType, "networkConf": networkConf},
				"gameServerTemplate": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{
					"name": "game", "image": "game-server:1.0",
					"ports": []any{map[string]any{"containerPort": int64(7777), "protocol": "UDP"}, map[string]any{"containerPort": int64(8080), "protocol": "TCP"}}}}}},
			},
		}}
		_, err := gss.Create(ctx, obj, metav1.CreateOptions{})
		return err
	}
	scale := func(name string, replicas int) {
		t.Helper()
		if _, err := gss.Patch(ctx, name, types.MergePatchType, fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas), metav1.PatchOptions{}); err != nil {
			t.Fatalf("scale GameServerSet %s to %d: %v", name, replicas, err)
		}
	}
	pods := func(ctx context.Context, name string) ([]corev1.Pod, error) {
		l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: okgstandin.LabelOwnerGSS + "=" + name})
		if err != nil {
			return nil, err
		}
		return l.Items, nil
	}
	// ready waits until name has exactly n pods, each with a Ready network (and, for
	// HostPort, its host port).
	ready := func(name string, n int) {
		t.Helper()
		eventually(t, 90*time.Second, fmt.Sprintf("%d pods of %s with a Ready network", n, name), func(ctx context.Context) (bool, error) {
			ps, err := pods(ctx, name)
			if err != nil || len(ps) != n {
				return false, err
			}
			for i := range ps {
				st, err := networkstatus.StatusFromPod(&ps[i])
				if err != nil || st == nil || st.CurrentNetworkState != networkstatus.NetworkReady || ps[i].DeletionTimestamp != nil {
					return false, err
				}
				if ps[i].Annotations[networkstatus.AnnotationNetworkType] == "Kubernetes-HostPort" &&
					!slices.ContainsFunc(ps[i].Spec.Containers[0].Ports, func(p corev1.ContainerPort) bool { return p.HostPort != 0 }) {
					return false, fmt.Errorf("pod %s has no host port", ps[i].Name)
				}
			}
			return true, nil
		})
	}

	for _, c := range []struct {
		name, networkType string
		conf              []string
	}{
		{"hp", "Kubernetes-HostPort", []string{"ContainerPorts", "game:7777/UDP"}},
		{"np", "Kubernetes-NodePort", []string{"PortProtocols", "7777/UDP", "Fixed", "true"}},
		{"ing", "Kubernetes-Ingress", []string{"Host", "ing<id>.gss-e2e.example", "Path", "/", "PathType", "Prefix", "Port", "8080"}},
	} {
		if err := create(c.name, c.networkType, 2, c.conf...); err != nil {
			t.Fatalf("create GameServerSet %s (%s) with OKG's provider off: %v", c.name, c.networkType, err)
		}
	}
	ready("hp", 2)
	ready("np", 2)
	ready("ing", 2)

	// The pre-flight against this cluster: the three GameServerSets pass; a catch-all Ingress
	// pod (admitted NotReady) and a Service of someone else named like a NodePort game
	// server are listed as refused, each with its guardrail.
	catchAll := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "catch-all", Namespace: ns, Annotations: map[string]string{
		networkstatus.AnnotationNetworkType: "Kubernetes-Ingress",
		networkstatus.AnnotationNetworkConf: `[{"name":"Path","value":"/"},{"name":"PathType","value":"Prefix"},{"name":"Port","value":"8080"}]`,
	}}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "game", Image: "game-server:1.0"}}}}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, catchAll, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create a catch-all Ingress pod (Asynchronous: admitted NotReady): %v", err)
	}
	if _, err := cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "spare-0"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := create("spare", "Kubernetes-NodePort", 1, "PortProtocols", "7777/UDP"); err != nil {
		t.Fatal(err)
	}
	preflight := preflightJSON(t)
	want := map[string]string{"Pod/catch-all": "kubernetes.ingress.allow_catch_all_host", "GameServerSet/spare": ""}
	for _, f := range preflight.Findings {
		if f.Namespace != ns {
			continue
		}
		key := f.Kind + "/" + f.Name
		wantKey, ok := want[key]
		if !ok || f.Verdict != "refused" || f.Key != wantKey {
			t.Errorf("preflight finding %+v, want only %v refused", f, want)
		}
		delete(want, key)
	}
	if len(want) > 0 {
		t.Errorf("preflight did not list %v: %+v", want, preflight.Findings)
	}
	if err := gss.Delete(ctx, "spare", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Services(ns).Delete(ctx, "spare-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	// OKG's pod writes went through: state labels on every pod, trigger stamps written.
	eventually(t, 30*time.Second, "OKG's GameServer controller has written its labels and stamps", func(ctx context.Context) (bool, error) {
		ps, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: okgstandin.LabelOwnerGSS})
		if err != nil {
			return false, err
		}
		for _, p := range ps.Items {
			if p.Labels[okgstandin.LabelState] == "" || p.Labels[okgstandin.LabelNetworkDisabled] != "false" {
				return false, nil
			}
		}
		return ctrls.TriggerStamps.Load() > 0, nil
	})

	// networkDisabled on GameServer np-0: its pod's label, then the Service's selector.
	if _, err := dyn.Resource(okgstandin.GameServers).Namespace(ns).Patch(ctx, "np-0", types.MergePatchType,
		[]byte(`{"spec":{"networkDisabled":true}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "np-0 labelled network-disabled and its Service selecting nothing", func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "np-0", metav1.GetOptions{})
		if err != nil || p.Labels[okgstandin.LabelNetworkDisabled] != "true" {
			return false, err
		}
		svc, err := cs.CoreV1().Services(ns).Get(ctx, "np-0", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		_, selectsPod := svc.Spec.Selector[kubernetes.SelectorPodNameLabel]
		return !selectsPod && svc.Spec.Selector[kubernetes.SelectorDisabledLabel] == "np-0", nil
	})

	// Fixed: np-1's node port survives the pod's re-creation.
	svc, err := cs.CoreV1().Services(ns).Get(ctx, "np-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nodePort := svc.Spec.Ports[0].NodePort
	old, err := cs.CoreV1().Pods(ns).Get(ctx, "np-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Pods(ns).Delete(ctx, "np-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 90*time.Second, "np-1 re-created, Ready on the same node port", func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "np-1", metav1.GetOptions{})
		if err != nil || p.UID == old.UID {
			return false, nil
		}
		st, err := networkstatus.StatusFromPod(p)
		if err != nil || st == nil || st.CurrentNetworkState != networkstatus.NetworkReady {
			return false, err
		}
		s, err := cs.CoreV1().Services(ns).Get(ctx, "np-1", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if s.Spec.Ports[0].NodePort != nodePort {
			return false, fmt.Errorf("node port %d after re-creation, was %d", s.Spec.Ports[0].NodePort, nodePort)
		}
		return true, nil
	})

	// Scale-up with OKG restarting in the middle, and a CREATE during the gap.
	scale("hp", 3)
	if err := okg.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	retryCreate := func(name string) int {
		t.Helper()
		attempts := 0
		eventually(t, 60*time.Second, "GameServerSet "+name+" created once the condition is back", func(ctx context.Context) (bool, error) {
			attempts++
			err := create(name, "Kubernetes-NodePort", 1, "PortProtocols", "7777/UDP")
			if err != nil && !strings.Contains(err.Error(), "network type must be one of") {
				return false, err
			}
			return err == nil, nil
		})
		return attempts
	}
	t.Logf("GameServerSet created at attempt %d after OKG's restart during a scale-up", retryCreate("during-scale"))
	ready("hp", 3)

	// Again while the leader is killed: the other replica puts the condition back.
	leader, err := mgr.Leader(ctx)
	if err != nil || leader == nil {
		t.Fatalf("no leader: %v", err)
	}
	leader.Kill()
	t.Cleanup(func() {
		if err := leader.Start(context.Background()); err != nil {
			t.Errorf("restart the killed replica: %v", err)
		}
	})
	scale("hp", 4)
	rewritten := time.Now()
	if err := okg.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the condition back while the leader is dead", conditionOn(served))
	t.Logf("condition back %v after OKG's restart while the leader was killed", time.Since(rewritten))
	t.Logf("GameServerSet created at attempt %d after OKG's restart while the leader was killed", retryCreate("leaderless"))
	ready("hp", 4)

	// Scale-down.
	scale("hp", 1)
	ready("hp", 1)

	if n := ctrls.Denied.Load(); n != 0 {
		t.Errorf("%d of OKG's pod writes were refused (last error: %v)", n, ctrls.LastError())
	}

	// The Fixed Service goes with its GameServerSet.
	if err := gss.Delete(ctx, "np", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 90*time.Second, "the Fixed Services gone with GameServerSet np", func(ctx context.Context) (bool, error) {
		for _, name := range []string{"np-0", "np-1"} {
			if _, err := cs.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false, nil
			}
		}
		return true, nil
	})
}

// preflightFinding is one finding of nppctl preflight -o json.
type preflightFinding struct {
	Kind, Namespace, Name, Verdict, Guardrail, Key, Detail string
}

// preflightJSON runs nppctl preflight against the cluster, as a platform engineer would
// before the switch, and decodes its JSON.
func preflightJSON(t *testing.T) struct{ Findings []preflightFinding } {
	t.Helper()
	nppctl := filepath.Join(t.TempDir(), "nppctl")
	if out, err := exec.Command("go", "build", "-o", nppctl, "github.com/okg-extensions/network-plugin-policy/cmd/nppctl").CombinedOutput(); err != nil {
		t.Fatalf("go build nppctl: %v\n%s", err, out)
	}
	out, err := exec.Command(nppctl, "preflight", "--kubeconfig", cp.KubeconfigPath, "-o", "json").Output()
	var ee *exec.ExitError
	if err != nil && (!errors.As(err, &ee) || ee.ExitCode() != 1) {
		t.Fatalf("nppctl preflight: %v\n%s", err, out)
	}
	var r struct{ Findings []preflightFinding }
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("nppctl preflight -o json: %v\n%s", err, out)
	}
	return r
}
