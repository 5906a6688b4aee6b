package takeover

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
		Data:       map[string]string{okgguard.ConfigKey: "[kubernetes]\nenable = true\n[kubernetes.hostPort]\nmax_port = 9000\nmin_port = 8000\n"},
	}
	cm, err := cs.CoreV1().ConfigMaps(cm.Namespace).Create(ctx, cm, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
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
