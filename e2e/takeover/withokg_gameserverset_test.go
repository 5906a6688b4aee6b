package takeover

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/okg-extensions/network-plugin-policy/e2e/okgstandin"
	"github.com/okg-extensions/network-plugin-policy/pkg/controller/okgvalidation"
	"github.com/okg-extensions/network-plugin-policy/pkg/okgguard"
	"github.com/okg-extensions/network-plugin-policy/pkg/webhook/gameserverset"
)

// TestGameServerSetsWithOKGsWebhook installs OKG's webhooks as kruise-game-manager writes them
// (the okgstandin stand-in: its GameServerSet entry refuses every networkType OKG has not
// registered) with OKG's Kubernetes provider off, beside the manager as deployed (two
// replicas, its own RBAC, the Deployment's --manage-okg-gameserverset-validation=true):
//   - the manager puts its matchCondition on OKG's entry, and a GameServerSet of each
//     Kubernetes type is created;
//   - OKG's checks still hold: a type OKG does not know is refused by OKG, a networkType
//     change between this manager's types and OKG's is refused;
//   - a bad network-conf is refused at apply with the field and the parameter named;
//   - OKG restarts and rewrites its configuration: the condition is back within the watch's
//     latency (the gap is logged), and a GameServerSet CREATE refused meanwhile succeeds when
//     retried;
//   - OKG's provider switched back on (a rollback): the manager removes its condition, so OKG
//     validates every GameServerSet again; switched off, the condition returns.
func TestGameServerSetsWithOKGsWebhook(t *testing.T) {
	ctx := context.Background()
	okg, cm := installOKG(t)
	served := []string{"Kubernetes-HostPort", "Kubernetes-NodePort", "Kubernetes-Ingress"}
	hasCondition := conditionOn(served)
	eventually(t, 30*time.Second, "the manager's condition on OKG's GameServerSet entry", hasCondition)

	ns := "gss-okg"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	gss := dynamic.NewForConfigOrDie(cp.Config).Resource(gssResource).Namespace(ns)
	// create creates a GameServerSet of 0 replicas; conf is "Name=value" entries separated by ";".
	create := func(name, networkType, conf string) error {
		var networkConf []any
		for _, kv := range strings.Split(conf, ";") {
			k, v, _ := strings.Cut(kv, "=")
			networkConf = append(networkConf, map[string]any{"name": k, "value": v})
		}
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "game.kruise.io/v1alpha1", "kind": "GameServerSet",
			"metadata": map[string]any{"name": name, "namespace": ns},
			"spec": map[string]any{
				"replicas": int64(0),
				"network":  map[string]any{"networkType": networkType, "networkConf": networkConf},
				"gameServerTemplate": map[string]any{"spec": map[string]any{"containers": []any{
					map[string]any{"name": "game", "image": "game-server:1.0"}}}},
			},
		}}
		_, err := gss.Create(ctx, obj, metav1.CreateOptions{})
		return err
	}
	for name, c := range map[string][2]string{
		"hostport": {"Kubernetes-HostPort", "ContainerPorts=game:7777/UDP"},
		"nodeport": {"Kubernetes-NodePort", "PortProtocols=7777/UDP"},
		"ingress":  {"Kubernetes-Ingress", "Host=lobby.games.example;Port=80;Path=/;PathType=Prefix"},
	} {
		if err := create(name, c[0], c[1]); err != nil {
			t.Errorf("GameServerSet %s of %s with OKG's provider off: %v", name, c[0], err)
		}
	}
	if err := create("cloud", "AlibabaCloud-SLB", "SlbIds=lb-1"); err != nil {
		t.Errorf("GameServerSet of a type OKG serves: %v", err)
	}

	refused := func(what, want string, err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want a refusal containing %q", what, err, want)
		}
	}
	refused("a type nobody serves", "network type must be one of [AlibabaCloud-SLB AlibabaCloud-NLB]", create("typo", "Kubernetes-NodePorts", "PortProtocols=7777"))
	refused("a bad network-conf", "spec.network.networkConf", create("bad", "Kubernetes-HostPort", "ContainerPorts=sidecar:7777/UDP"))
	for _, change := range []struct{ name, to string }{{"nodeport", "AlibabaCloud-SLB"}, {"cloud", "Kubernetes-NodePort"}, {"hostport", "Kubernetes-NodePort"}} {
		obj, err := gss.Get(ctx, change.name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get GameServerSet %s: %v", change.name, err)
		}
		if err := unstructured.SetNestedField(obj.Object, change.to, "spec", "network", "networkType"); err != nil {
			t.Fatal(err)
		}
		_, err = gss.Update(ctx, obj, metav1.UpdateOptions{})
		refused("networkType of "+change.name+" changed to "+change.to, "change network type is not allowed", err)
	}
	// A scale of a served GameServerSet reaches neither webhook's checks (no spec.network change).
	if _, err := gss.Patch(ctx, "nodeport", "application/merge-patch+json", []byte(`{"spec":{"replicas":0}}`), metav1.PatchOptions{}); err != nil {
		t.Errorf("scale of GameServerSet nodeport: %v", err)
	}

	// OKG restarts: its configuration is rewritten without the condition.
	if err := okg.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	rewritten := time.Now()
	eventually(t, 30*time.Second, "the condition back after OKG's restart", hasCondition)
	t.Logf("condition back %v after OKG rewrote its configuration", time.Since(rewritten))
	retried := 0
	eventually(t, 30*time.Second, "a GameServerSet CREATE refused during the gap succeeds when retried", func(ctx context.Context) (bool, error) {
		retried++
		err := create("after-restart", "Kubernetes-NodePort", "PortProtocols=7777/UDP")
		return err == nil, nil
	})
	t.Logf("GameServerSet CREATE after OKG's restart admitted at attempt %d", retried)

	// Rollback: OKG's Kubernetes provider on again. The manager steps back and removes its
	// condition (the guard looks every 10 s); OKG validates every GameServerSet again.
	cm.Data[okgguard.ConfigKey] = "[kubernetes]\nenable = true\n"
	cm, err := cs.CoreV1().ConfigMaps(cm.Namespace).Update(ctx, cm, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Each replica's guard looks every 10 s, so for up to that long one replica may still
	// serve and put back what another, stepping back, removed. Once both step back, the
	// condition is gone, the manager's own entry matches nothing (its replicas are not ready,
	// and a Fail entry that matched would refuse every such GameServerSet), and OKG
	// validates: a Kubernetes-* GameServerSet is refused by OKG (the stand-in registers no
	// Kubernetes plugin).
	eventually(t, 45*time.Second, "both replicas stepped back", func(ctx context.Context) (bool, error) {
		n, err := mgr.Metric(ctx, "npp_okg_coexistence", `state="conflict"`)
		return n == 2, err
	})
	eventually(t, 30*time.Second, "the condition removed and the manager's own GameServerSet entry matching nothing", func(ctx context.Context) (bool, error) {
		if ok, err := hasCondition(ctx); ok || err != nil {
			return false, err
		}
		vwc, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, mgr.Webhooks.Validating, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		i := slices.IndexFunc(vwc.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool { return w.Name == gameserverset.WebhookName })
		return i >= 0 && slices.Equal(vwc.Webhooks[i].MatchConditions, gameserverset.MatchConditions(nil)), nil
	})
	refused("a served type while OKG serves it (stand-in registers no Kubernetes plugin)", "network type must be one of", create("stepped-back", "Kubernetes-NodePort", "PortProtocols=7777/UDP"))
	cm.Data[okgguard.ConfigKey] = "[kubernetes]\nenable = false\n"
	if _, err := cs.CoreV1().ConfigMaps(cm.Namespace).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 45*time.Second, "the condition back once OKG's provider is off again", hasCondition)
}

// installOKG starts the manager as deployed and installs OKG as the stand-in reproduces it:
// its provider ConfigMap with [kubernetes] enable = false and [alibabacloud] on, its two
// webhook configurations (rewritten at every start), its webhook server registering
// AlibabaCloud-SLB and AlibabaCloud-NLB. All of it is removed when the test ends.
func installOKG(t *testing.T) (*okgstandin.Manager, *corev1.ConfigMap) {
	t.Helper()
	ctx := context.Background()
	startManager(t)
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: okgguard.DefaultConfigMapNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: okgguard.DefaultConfigMapNamespace, Name: okgguard.DefaultConfigMapName},
		Data:       map[string]string{okgguard.ConfigKey: "[kubernetes]\nenable = false\n[alibabacloud]\nenable = true\n"},
	}
	cm, err := cs.CoreV1().ConfigMaps(cm.Namespace).Create(ctx, cm, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.CoreV1().ConfigMaps(cm.Namespace).Delete(context.Background(), cm.Name, metav1.DeleteOptions{})
	})
	certPEM, keyPEM, err := cp.PKI.IssueServing("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	okg, err := okgstandin.Start(ctx, cs, []string{"AlibabaCloud-SLB", "AlibabaCloud-NLB"}, cp.PKI.CACertPEM, certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { okg.Stop(context.Background()) })
	return okg, cm
}

// conditionOn reports whether OKG's GameServerSet entry holds the manager's condition for
// served.
func conditionOn(served []string) func(ctx context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		vwc, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, okgstandin.ValidatingConfiguration, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		i := slices.IndexFunc(vwc.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool { return w.Name == okgstandin.GameServerSetEntry })
		return i >= 0 && okgvalidation.HasCondition(vwc.Webhooks[i].MatchConditions, served), nil
	}
}
