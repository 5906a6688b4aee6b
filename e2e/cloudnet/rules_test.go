package cloudnet

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/alibabacloud"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/lb"
)

// TestNetworkConfRulesAsDeployed: a root policy's network-conf rule, applied with kubectl as
// GitOps would, refuses at both replicas a game server whose network-conf names a load
// balancer the rule does not list (here Synchronous, so a denial naming the rule, its policy
// and SlbIds), and nothing is claimed in the port ledger for it; a listed id gets its network;
// a GameServerSet naming the refused id is refused at apply, naming the rule and the field.
func TestNetworkConfRulesAsDeployed(t *testing.T) {
	ctx := context.Background()
	c := startCloud(t)
	ns := newNamespace(t, "rules", nil)
	const allowed, refused = "rules-slb-ok", "rules-slb-other"
	applyPolicy(t, fmt.Sprintf(`apiVersion: policy.game.kruise.io/v1alpha1
kind: NetworkPluginPolicy
metadata:
  name: rules-%[1]s
  namespace: %[2]s
spec:
  plugins: ["*"]
  namespaceSelector:
    matchLabels:
      kubernetes.io/metadata.name: %[1]s
  failureMode: Synchronous
  networkConfRules:
  - name: listed-ids
    expression: "network.loadBalancerIDs.all(id, id == '%[3]s')"
    message: "this namespace may use %[3]s only"
`, ns, rootNS, allowed))
	t.Cleanup(func() { _, _ = kubectl(t, "", "delete", "networkpluginpolicy", "-n", rootNS, "rules-"+ns) })
	want := fmt.Sprintf("refused by rule listed-ids of root policy %s/rules-%s@1: this namespace may use %s only", rootNS, ns, allowed)
	pod := func(name, id string) *corev1.Pod {
		tmpl := lbServer(name, alibabacloud.SLBName, alibabacloud.ParamSLBIDs, id)
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: tmpl.Labels, Annotations: tmpl.Annotations}, Spec: tmpl.Spec}
	}
	// In force on every replica: ten dry-run CREATEs in a row denied (the API server's
	// connections reach both).
	eventually(t, time.Minute, "the rule in force on every replica", func(ctx context.Context) (bool, error) {
		for range 10 {
			_, err := cs.CoreV1().Pods(ns).Create(ctx, pod("probe", refused), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if err == nil || !strings.Contains(err.Error(), want) {
				return false, nil
			}
		}
		return true, nil
	})
	_, err := cs.CoreV1().Pods(ns).Create(ctx, pod("refused", refused), metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "parameter "+alibabacloud.ParamSLBIDs) {
		t.Errorf("CREATE naming %s: %v, want a denial naming the rule and %s", refused, err, alibabacloud.ParamSLBIDs)
	}
	for _, name := range lb.LedgerConfigMapNames(lb.DefaultLedgerName) {
		cm, err := cs.CoreV1().ConfigMaps(rootNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if ports, ok := lb.ParseLedger(cm.Data)[alibabacloud.SLBName][refused]; ok {
			t.Errorf("the refused pod claimed %v on %s in %s", ports, refused, name)
		}
	}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod("listed", allowed), metav1.CreateOptions{}); err != nil {
		t.Fatalf("CREATE naming %s: %v", allowed, err)
	}

	gssClient := dynamic.NewForConfigOrDie(cp.Config).Resource(schema.GroupVersionResource{Group: "game.kruise.io", Version: "v1alpha1", Resource: "gameserversets"}).Namespace(ns)
	gss := func(name, id string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "game.kruise.io/v1alpha1", "kind": "GameServerSet",
			"metadata": map[string]any{"name": name, "namespace": ns},
			"spec": map[string]any{"replicas": int64(0), "network": map[string]any{"networkType": alibabacloud.SLBName,
				"networkConf": []any{map[string]any{"name": alibabacloud.ParamSLBIDs, "value": id}, map[string]any{"name": "PortProtocols", "value": "7777/UDP"}}}},
		}}
	}
	_, err = gssClient.Create(ctx, gss("refused", refused), metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "spec.network.networkConf[0].value") {
		t.Errorf("GameServerSet naming %s: %v, want it refused naming the rule and spec.network.networkConf[0].value", refused, err)
	}
	if _, err := gssClient.Create(ctx, gss("listed", allowed), metav1.CreateOptions{}); err != nil {
		t.Errorf("GameServerSet naming %s: %v", allowed, err)
	}
	eventually(t, time.Minute, "the listed game server Ready at its SLB", func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "listed", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ip, ok := externalAddress(p)
		return ok && ip == c.Address(allowed), nil
	})
}
