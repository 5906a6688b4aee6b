package takeover

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/okg-extensions/network-plugin-policy/pkg/controller/webhookconfig"
	"github.com/okg-extensions/network-plugin-policy/pkg/okgguard"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
	podwebhook "github.com/okg-extensions/network-plugin-policy/pkg/webhook/pod"
)

// TestStepsBackWhileOKGRunsTheKubernetesProvider (after TestTakeoverFromOKG, which needs the
// manager not started yet: files run in name order) installs what kruise-game-manager installs
// (its MutatingWebhookConfiguration, without entries here, and its provider ConfigMap) with
// [kubernetes] enable = true, as a GitOps sync of OKG's chart would put it back during a
// migration or a rollback. The manager, already serving, steps back: both replicas turn not
// ready (okg-coexistence), the gauge and a Warning Event say why, the sync entry intercepts
// no type, and a HostPort pod is admitted untouched, without this manager's decision (OKG's
// webhook would serve it). With enable = false again, the manager decides HostPort pods.
func TestStepsBackWhileOKGRunsTheKubernetesProvider(t *testing.T) {
	ctx := context.Background()
	m := startManager(t)
	ns := "okg-guard"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cm := installOKGConfig(t, "[kubernetes]\nenable = true\n[kubernetes.hostPort]\nmax_port = 9000\nmin_port = 8000\n")
	start := time.Now()

	hostPortPod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "hp-", Namespace: ns, Annotations: map[string]string{
			networkstatus.AnnotationNetworkType: "Kubernetes-HostPort",
			networkstatus.AnnotationNetworkConf: `[{"name":"ContainerPorts","value":"game:7777/UDP"}]`,
		}},
		Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptr.To[int64](0), Containers: []corev1.Container{{
			Name: "game", Image: "game-server:1.0", Ports: []corev1.ContainerPort{{Name: "game", ContainerPort: 7777, Protocol: corev1.ProtocolUDP}}}}},
	}
	dryRun := func(ctx context.Context) (*corev1.Pod, error) {
		return cs.CoreV1().Pods(ns).Create(ctx, hostPortPod.DeepCopy(), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	}
	syncTypes := func(ctx context.Context) (string, error) {
		mwc, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, m.Webhooks.Mutating, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		for _, w := range mwc.Webhooks {
			for _, c := range w.MatchConditions {
				if w.Name == podwebhook.SyncWebhookName && c.Name == webhookconfig.ConditionSynchronousType {
					return c.Expression, nil
				}
			}
		}
		return "", fmt.Errorf("no %s condition in the sync entry", webhookconfig.ConditionSynchronousType)
	}

	// Conflict: both replicas not ready with okg-coexistence failing, the gauge at 1, the
	// sync entry without HostPort, and a HostPort pod passed through.
	eventually(t, 40*time.Second, "both replicas not ready with okg-coexistence failing", func(ctx context.Context) (bool, error) {
		for _, r := range m.Replicas {
			body, code, err := get(ctx, r.ProbeURL+"/readyz?verbose")
			if err != nil || code == http.StatusOK || !strings.Contains(body, "[-]okg-coexistence failed") {
				return false, err
			}
		}
		return true, nil
	})
	t.Logf("stepped back %s after OKG's provider was enabled", time.Since(start).Round(time.Second))
	for _, r := range m.Replicas {
		v, err := r.Metric(ctx, "npp_okg_coexistence", `state="conflict"`)
		if err != nil || v != 1 {
			t.Errorf("%s: npp_okg_coexistence{state=conflict} = %v (%v), want 1", r.Name, v, err)
		}
	}
	eventually(t, 30*time.Second, "the sync entry intercepting no type", func(ctx context.Context) (bool, error) {
		expr, err := syncTypes(ctx)
		return err == nil && strings.Contains(expr, "in []") && !strings.Contains(expr, "Kubernetes-HostPort"), err
	})
	eventually(t, 30*time.Second, "a HostPort pod admitted untouched", func(ctx context.Context) (bool, error) {
		got, err := dryRun(ctx)
		if err != nil {
			return false, err
		}
		return got.Annotations[podwebhook.AnnotationDecision] == "", nil
	})
	eventually(t, 30*time.Second, "a Warning Event on OKG's ConfigMap", func(ctx context.Context) (bool, error) {
		evs, err := cs.EventsV1().Events(okgguard.DefaultConfigMapNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Reason == "KubernetesProviderConflict" && e.Regarding.Name == okgguard.DefaultConfigMapName && strings.Contains(e.Note, "enable = true") {
				return true, nil
			}
		}
		return false, nil
	})

	// OKG's provider off again: the manager serves HostPort pods.
	cm.Data[okgguard.ConfigKey] = "[kubernetes]\nenable = false\n"
	if _, err := cs.CoreV1().ConfigMaps(cm.Namespace).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 40*time.Second, "both replicas ready again", func(ctx context.Context) (bool, error) {
		for _, r := range m.Replicas {
			if _, code, err := get(ctx, r.ProbeURL+"/readyz"); err != nil || code != http.StatusOK {
				return false, err
			}
		}
		return true, nil
	})
	eventually(t, 30*time.Second, "HostPort back in the sync entry", func(ctx context.Context) (bool, error) {
		expr, err := syncTypes(ctx)
		return err == nil && strings.Contains(expr, "Kubernetes-HostPort"), err
	})
	// A dry run runs no plugin; the decision annotation says the webhook decided the pod.
	eventually(t, 30*time.Second, "a HostPort pod decided by this manager", func(ctx context.Context) (bool, error) {
		got, err := dryRun(ctx)
		if err != nil {
			return false, err
		}
		return got.Annotations[podwebhook.AnnotationDecision] != "", nil
	})
}

// get returns the body and status code of a GET of url.
func get(ctx context.Context, url string) (string, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), resp.StatusCode, err
}

// lookToFail is how soon after OKG's [kubernetes] goes off HostPort is behind the sync entry
// (failurePolicy Fail): the guard reads OKG's configuration every 10 s
// (okgguard.DefaultInterval), then the leader's webhook configuration controller writes the
// entry; 20 s leaves room for a busy machine. docs/migration-from-okg.md states it.
const lookToFail = 20 * time.Second

// TestInstallBesideOKGRefusesNothing (the package's last test: it reinstalls the manager)
// installs the manager as a fresh install does, beside a kruise-game-manager that still
// serves [kubernetes]: both replicas stopped, the webhook configurations created anew as
// config/default (and so the chart, hack/chart's TestChartRendersConfigDefault) ships them,
// then both replicas started. OKG's provider on means neither replica is ever ready, so the
// webhook Service has no endpoint. From before the configurations are installed until
// several seconds after both replicas' first look, a HostPort pod and a HostPort
// GameServerSet are created (dry run) every 200 ms: none is refused. A watch on the mutating
// configuration, started before the install, never sees Kubernetes-HostPort in the sync
// entry while OKG serves [kubernetes]. Once OKG's provider is off, HostPort is behind the sync
// entry within lookToFail.
func TestInstallBesideOKGRefusesNothing(t *testing.T) {
	ctx := context.Background()
	m := startManager(t)
	m.Stop()
	started := make(chan error, len(m.Replicas))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("manager logs:\n%s", m.LogTails(20000))
		}
	})
	ns := "okg-install"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cm := installOKGConfig(t, "[kubernetes]\nenable = true\n")

	// Uninstalled: the configuration the package's manager wrote goes (InstallWebhooks
	// deletes it too).
	if err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, m.Webhooks.Mutating, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The watch, before the install: every version of the configuration while OKG serves
	// [kubernetes] must keep HostPort out of the sync entry.
	var okgServes atomic.Bool
	okgServes.Store(true)
	var seenBehindFail atomic.Value // string: the first expression seen with HostPort while OKG serves
	behindFail := make(chan time.Time, 1)
	w, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + m.Webhooks.Mutating})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	go func() {
		for ev := range w.ResultChan() {
			mwc, ok := ev.Object.(*admissionregistrationv1.MutatingWebhookConfiguration)
			if !ok {
				continue
			}
			for _, wh := range mwc.Webhooks {
				for _, c := range wh.MatchConditions {
					if wh.Name != podwebhook.SyncWebhookName || c.Name != webhookconfig.ConditionSynchronousType || !strings.Contains(c.Expression, "'Kubernetes-HostPort'") {
						continue
					}
					if okgServes.Load() {
						seenBehindFail.CompareAndSwap(nil, c.Expression)
					} else {
						select {
						case behindFail <- time.Now():
						default:
						}
					}
				}
			}
		}
	}()

	// The creates, from before the install.
	hostPortPod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "hp-", Namespace: ns, Annotations: map[string]string{
			networkstatus.AnnotationNetworkType: "Kubernetes-HostPort",
			networkstatus.AnnotationNetworkConf: `[{"name":"ContainerPorts","value":"game:7777/UDP"}]`,
		}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "game", Image: "game-server:1.0",
			Ports: []corev1.ContainerPort{{Name: "game", ContainerPort: 7777, Protocol: corev1.ProtocolUDP}}}}},
	}
	gss := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "game.kruise.io/v1alpha1", "kind": "GameServerSet",
		"metadata": map[string]any{"generateName": "hp-", "namespace": ns},
		"spec": map[string]any{
			"replicas": int64(1),
			"network": map[string]any{"networkType": "Kubernetes-HostPort", "networkConf": []any{
				map[string]any{"name": "ContainerPorts", "value": "game:7777/UDP"}}},
			"gameServerTemplate": map[string]any{"spec": map[string]any{"containers": []any{
				map[string]any{"name": "game", "image": "game-server:1.0"}}}},
		},
	}}
	dyn := dynamic.NewForConfigOrDie(cp.Config)
	var creates, refused atomic.Int64
	var firstRefusal atomic.Value
	stopCreates := make(chan struct{})
	var stopOnce sync.Once
	stop := func() { stopOnce.Do(func() { close(stopCreates) }) }
	createsDone := make(chan struct{})
	t.Cleanup(func() { stop(); <-createsDone }) // a failed wait below must not leave the loop running
	go func() {
		defer close(createsDone)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopCreates:
				return
			case <-tick.C:
			}
			dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
			_, perr := cs.CoreV1().Pods(ns).Create(ctx, hostPortPod.DeepCopy(), dry)
			_, gerr := dyn.Resource(gssResource).Namespace(ns).Create(ctx, gss.DeepCopy(), dry)
			for _, err := range []error{perr, gerr} {
				creates.Add(1)
				if err != nil {
					refused.Add(1)
					firstRefusal.CompareAndSwap(nil, err.Error())
				}
			}
		}
	}()

	// The install: the configurations as shipped, then both replicas, which stay unready.
	if err := m.InstallWebhooks(ctx); err != nil {
		t.Fatal(err)
	}
	startCtx, cancelStart := context.WithTimeout(ctx, 3*time.Minute)
	defer cancelStart()
	for _, r := range m.Replicas {
		// Each on its own: Replica.Start returns once the replica is ready.
		go func() { started <- r.Start(startCtx) }()
	}
	eventually(t, time.Minute, "both replicas looked and step back from [kubernetes]", func(ctx context.Context) (bool, error) {
		for _, r := range m.Replicas {
			if v, err := r.Metric(ctx, "npp_okg_coexistence", `provider="kubernetes"`, `state="conflict"`); err != nil || v != 1 {
				return false, nil
			}
		}
		return true, nil
	})
	// The leader's controllers act on the look at once; a few more seconds of creates.
	time.Sleep(5 * time.Second)
	stop()
	<-createsDone
	if n := refused.Load(); n != 0 {
		t.Errorf("%d of %d creates refused while OKG serves [kubernetes]; the first: %v", n, creates.Load(), firstRefusal.Load())
	} else {
		t.Logf("%d creates, none refused, from before the install until 5 s after both replicas' first look", creates.Load())
	}
	if creates.Load() < 20 {
		t.Errorf("only %d creates: the loop did not run through the install", creates.Load())
	}
	if expr := seenBehindFail.Load(); expr != nil {
		t.Errorf("the sync entry held Kubernetes-HostPort while OKG serves [kubernetes]: %s", expr)
	}

	// OKG's provider off: HostPort behind Fail within lookToFail, and the replicas ready.
	okgServes.Store(false)
	off := time.Now()
	cm.Data[okgguard.ConfigKey] = "[kubernetes]\nenable = false\n"
	if _, err := cs.CoreV1().ConfigMaps(cm.Namespace).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case at := <-behindFail:
		if d := at.Sub(off); d > lookToFail {
			t.Errorf("HostPort behind the sync entry %s after OKG's provider went off, want within %s", d.Round(time.Second), lookToFail)
		} else {
			t.Logf("HostPort behind the sync entry %s after OKG's provider went off", d.Round(100*time.Millisecond))
		}
	case <-time.After(2 * lookToFail):
		t.Fatalf("HostPort not behind the sync entry %s after OKG's provider went off", 2*lookToFail)
	}
	for range m.Replicas {
		if err := <-started; err != nil {
			t.Fatalf("a replica not ready after OKG's provider went off: %v", err)
		}
	}
}

// installOKGConfig installs what kruise-game-manager installs, as far as the guard reads it:
// its MutatingWebhookConfiguration (without entries here) and its provider ConfigMap holding
// toml (one an earlier test left is replaced), both removed when the test ends. It returns
// the ConfigMap as stored.
func installOKGConfig(t *testing.T, toml string) *corev1.ConfigMap {
	t.Helper()
	ctx := context.Background()
	// OKG's namespace may exist already: TestGameServerSetsWithOKGsWebhook installs OKG too.
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: okgguard.DefaultConfigMapNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	okgWebhook := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: okgguard.DefaultWebhookConfiguration}}
	if _, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, okgWebhook, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), okgWebhook.Name, metav1.DeleteOptions{})
	})
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: okgguard.DefaultConfigMapNamespace, Name: okgguard.DefaultConfigMapName},
		Data:       map[string]string{okgguard.ConfigKey: toml},
	}
	_ = cs.CoreV1().ConfigMaps(cm.Namespace).Delete(ctx, cm.Name, metav1.DeleteOptions{})
	cm, err := cs.CoreV1().ConfigMaps(cm.Namespace).Create(ctx, cm, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.CoreV1().ConfigMaps(cm.Namespace).Delete(context.Background(), cm.Name, metav1.DeleteOptions{})
	})
	return cm
}
