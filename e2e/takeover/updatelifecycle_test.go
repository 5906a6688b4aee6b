package takeover

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/okg-extensions/network-plugin-policy/e2e/okgstandin"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/kubernetes"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
)

// gssResource is OKG's GameServerSet resource (the stand-in's definition).
var gssResource = okgstandin.GameServerSets

// TestAllowNotReadyContainersInPlaceUpdate plays OKG's in-place update of a sidecar with
// AllowNotReadyContainers on a real cluster, with the GameServerSet CRD installed. OpenKruise's
// part (the lifecycle state label, the in-place image change) is done by the test, as OpenKruise
// would do it; the rest is the manager's:
//
//  1. running: the Service does not publish not-ready addresses, the blocker label is "true"
//     (OpenKruise's preUpdate hook waits on it);
//  2. the GameServerSet gets a new sidecar image and OpenKruise puts the pod in
//     PreparingUpdate: the Service publishes not-ready addresses, then the blocker is "false"
//     and the update may go on;
//  3. the sidecar is updated in place and the pod leaves PreparingUpdate: the blocker is "true"
//     again, and once the pod is Ready the Service stops publishing not-ready addresses.
func TestAllowNotReadyContainersInPlaceUpdate(t *testing.T) {
	ctx := context.Background()
	startManager(t)
	ns := "okg-inplace"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createGameServerSet(t, ns, "gs", []string{"PortProtocols", "80", kubernetes.ParamAllowNotReadyContainers, "sidecar"}, "game", "sidecar")
	dyn := dynamic.NewForConfigOrDie(cp.Config)
	conf := `[{"name":"PortProtocols","value":"80"},{"name":"AllowNotReadyContainers","value":"sidecar"}]`
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "gs-0", Namespace: ns,
			Labels: map[string]string{networkstatus.LabelOwnerGSS: "gs", kubernetes.SelectorPodNameLabel: "gs-0"},
			Annotations: map[string]string{networkstatus.AnnotationNetworkType: kubernetes.NodePortName,
				networkstatus.AnnotationNetworkConf: conf}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers:                    []corev1.Container{{Name: "game", Image: "game-server:1.0"}, {Name: "sidecar", Image: "sidecar:1.0"}},
		},
	}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// state reads the pod's blocker label, network state and the Service's
	// publishNotReadyAddresses; stamp is OKG's GameServer controller's trigger stamp (an
	// UPDATE that runs the plugin again).
	state := func(ctx context.Context) (blocker string, network networkstatus.NetworkState, publish bool, err error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "gs-0", metav1.GetOptions{})
		if err != nil {
			return "", "", false, err
		}
		if st, _ := networkstatus.StatusFromPod(p); st != nil {
			network = st.CurrentNetworkState
		}
		svc, err := cs.CoreV1().Services(ns).Get(ctx, "gs-0", metav1.GetOptions{})
		if err != nil {
			return "", "", false, err
		}
		return p.Labels[kubernetes.LabelInplaceUpdateNotReadyBlocker], network, svc.Spec.PublishNotReadyAddresses, nil
	}
	patchPod := func(ctx context.Context, patch map[string]any) error {
		b, _ := json.Marshal(patch)
		_, err := cs.CoreV1().Pods(ns).Patch(ctx, "gs-0", types.StrategicMergePatchType, b, metav1.PatchOptions{})
		return err
	}
	stamp := func(ctx context.Context) error {
		return patchPod(ctx, map[string]any{"metadata": map[string]any{"annotations": map[string]string{
			networkstatus.AnnotationNetworkTriggerTime: time.Now().UTC().Format(time.RFC3339Nano)}}})
	}
	expect := func(msg, wantBlocker string, wantPublish bool) {
		t.Helper()
		eventually(t, time.Minute, msg, func(ctx context.Context) (bool, error) {
			blocker, network, publish, err := state(ctx)
			if err != nil {
				return false, err
			}
			if blocker != wantBlocker || publish != wantPublish || network != networkstatus.NetworkReady {
				_ = stamp(ctx)
				return false, fmt.Errorf("blocker %q, publishNotReadyAddresses %t, network %q; want %q, %t, Ready",
					blocker, publish, network, wantBlocker, wantPublish)
			}
			return true, nil
		})
	}

	// 1. Running: nothing published beyond Ready, OpenKruise's preUpdate hook blocked.
	expect("pod running with its network Ready, blocker true, not-ready addresses not published", "true", false)

	// 2. A new sidecar image in the GameServerSet; OpenKruise enters PreparingUpdate.
	cur, err := dyn.Resource(gssResource).Namespace(ns).Get(ctx, "gs", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedSlice(cur.Object, []any{
		map[string]any{"name": "game", "image": "game-server:1.0"},
		map[string]any{"name": "sidecar", "image": "sidecar:2.0"},
	}, "spec", "gameServerTemplate", "spec", "containers"); err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(gssResource).Namespace(ns).Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update GameServerSet: %v", err)
	}
	if err := patchPod(ctx, map[string]any{"metadata": map[string]any{"labels": map[string]string{
		kubernetes.LabelLifecycleState: kubernetes.LifecycleStatePreparingUpdate}}}); err != nil {
		t.Fatal(err)
	}
	expect("PreparingUpdate: not-ready addresses published, blocker released", "false", true)

	// 3. OpenKruise updates the sidecar in place and leaves PreparingUpdate.
	if err := patchPod(ctx, map[string]any{
		"metadata": map[string]any{"labels": map[string]string{kubernetes.LabelLifecycleState: "Updated"}},
		"spec":     map[string]any{"containers": []any{map[string]any{"name": "sidecar", "image": "sidecar:2.0"}}},
	}); err != nil {
		t.Fatal(err)
	}
	expect("updated and Ready: blocker true again, not-ready addresses no longer published", "true", false)
}

// createGameServerSet creates OKG's GameServerSet name in ns (the reduced CRD of testdata):
// one replica of NodePort game servers whose network conf is conf (name, value pairs) and
// whose template has the containers named containers, image "<name>-server:1.0" for "game"
// and "<name>:1.0" for the others.
func createGameServerSet(t *testing.T, ns, name string, conf []string, containers ...string) {
	t.Helper()
	var networkConf, ctrs []any
	for i := 0; i+1 < len(conf); i += 2 {
		networkConf = append(networkConf, map[string]any{"name": conf[i], "value": conf[i+1]})
	}
	for _, c := range containers {
		image := c + ":1.0"
		if c == "game" {
			image = "game-server:1.0"
		}
		ctrs = append(ctrs, map[string]any{"name": c, "image": image})
	}
	gss := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "game.kruise.io/v1alpha1", "kind": "GameServerSet",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{
			"replicas":           int64(1),
			"network":            map[string]any{"networkType": kubernetes.NodePortName, "networkConf": networkConf},
			"gameServerTemplate": map[string]any{"spec": map[string]any{"containers": ctrs}},
		},
	}}
	if _, err := dynamic.NewForConfigOrDie(cp.Config).Resource(gssResource).Namespace(ns).Create(context.Background(), gss, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create GameServerSet %s/%s: %v", ns, name, err)
	}
}
