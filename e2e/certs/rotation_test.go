// Package certs tests the manager's own webhook certificate management, as config/default
// deploys it: open-policy-agent/cert-controller fills the Secret, the CA is injected into both
// webhook configurations, and the apiserver reaches both webhooks through them.
package certs

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	policyv1alpha1 "github.com/okg-extensions/network-plugin-policy/apis/policy/v1alpha1"
	"github.com/okg-extensions/network-plugin-policy/e2e/cluster"
	"github.com/okg-extensions/network-plugin-policy/pkg/client/clientset/versioned"
	"github.com/okg-extensions/network-plugin-policy/pkg/plugin/networkstatus"
	"github.com/okg-extensions/network-plugin-policy/pkg/webhookcert"
)

func TestManagerRotatesItsWebhookCertificate(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cp := cluster.StartForTest(t, cluster.Options{})
	if _, err := cluster.InstallCRDs(cp.Config, "../../crds"); err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(cp.Config)
	// Both replicas of config/default rotate into the same Secret; every replica serves it.
	// A short overlap, so that the CA change below is seen through to its end.
	mgr, err := cp.StartManager(ctx, cluster.ManagerOptions{Args: []string{"--ca-overlap=8s"}})
	if err != nil {
		t.Fatalf("start manager with certificate rotation: %v", err)
	}
	t.Cleanup(mgr.Stop)
	root := mgr.Namespace

	secret, err := cs.CoreV1().Secrets(root).Get(ctx, cluster.CertSecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"ca.crt", "tls.crt", "tls.key"} {
		if len(secret.Data[k]) == 0 {
			t.Errorf("Secret %s has no %s", cluster.CertSecretName, k)
		}
	}
	mut, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, mgr.Webhooks.Mutating, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	val, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, mgr.Webhooks.Validating, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var bundles [][]byte
	for _, w := range mut.Webhooks {
		bundles = append(bundles, w.ClientConfig.CABundle)
	}
	for _, w := range val.Webhooks {
		bundles = append(bundles, w.ClientConfig.CABundle)
	}
	for i, b := range bundles {
		if !bytes.Equal(b, secret.Data["ca.crt"]) {
			t.Errorf("webhook entry %d: the caBundle is not the rotated CA of the Secret", i)
		}
	}

	// The apiserver trusts the rotated certificate: both webhooks answer. (This cluster runs
	// no kube-controller-manager, so the ServiceAccount admission plugin needs the default
	// ServiceAccount made by hand.)
	if _, err := cs.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: "default",
			Annotations: map[string]string{networkstatus.AnnotationNetworkType: "Kubernetes-Hostport"}},
		Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptr.To[int64](0), Containers: []corev1.Container{{Name: "c", Image: "app:1"}}},
	}
	podWebhookAnswers(ctx, t, cs, pod)
	pc := versioned.NewForConfigOrDie(cp.Config)
	_, err = pc.PolicyV1alpha1().NetworkPluginPolicies("default").Create(ctx, &policyv1alpha1.NetworkPluginPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "bad"},
		Spec: policyv1alpha1.NetworkPluginPolicySpec{Plugins: []string{"*"},
			MatchConditions: []policyv1alpha1.MatchCondition{{Name: "x", Expression: "object.spec.nodeName +"}}},
	}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err == nil || !strings.Contains(err.Error(), "spec.matchConditions[0].expression") {
		t.Errorf("validating webhook through the rotated certificate: %v, want a rejection naming spec.matchConditions[0].expression", err)
	}

	// A new CA (the Secret lost): every caBundle carries the previous CA beside the new one,
	// with the end of the overlap recorded, then the new CA alone once the overlap is over;
	// the webhook answers throughout.
	oldCA := secret.Data["ca.crt"]
	secret.Data = nil
	if _, err := cs.CoreV1().Secrets(root).Update(ctx, secret, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var newCA []byte
	err = wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		s, err := cs.CoreV1().Secrets(root).Get(ctx, cluster.CertSecretName, metav1.GetOptions{})
		newCA = s.Data["ca.crt"]
		return err == nil && len(newCA) > 0 && !bytes.Equal(newCA, oldCA), nil
	})
	if err != nil {
		t.Fatal("no new CA in the emptied Secret")
	}
	caBundles := func() (map[string]string, [][]byte) {
		mut, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, mgr.Webhooks.Mutating, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		val, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, mgr.Webhooks.Validating, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var out [][]byte
		for _, w := range mut.Webhooks {
			out = append(out, w.ClientConfig.CABundle)
		}
		for _, w := range val.Webhooks {
			out = append(out, w.ClientConfig.CABundle)
		}
		return mut.Annotations, out
	}
	overlapping := func(want []byte) bool {
		_, bs := caBundles()
		for _, b := range bs {
			if !bytes.Equal(b, want) {
				return false
			}
		}
		return true
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return overlapping(append(append([]byte{}, newCA...), oldCA...)), nil
	})
	if err != nil {
		t.Fatal("the caBundles never held the new CA followed by the previous one")
	}
	if ann, _ := caBundles(); ann[webhookcert.OverlapUntilAnnotation] == "" {
		t.Errorf("no %s annotation during the overlap", webhookcert.OverlapUntilAnnotation)
	}
	podWebhookAnswers(ctx, t, cs, pod)
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return overlapping(newCA), nil
	})
	if err != nil {
		t.Fatal("the previous CA is still in the caBundles 30 s after an overlap of 8 s")
	}
	if ann, _ := caBundles(); ann[webhookcert.OverlapUntilAnnotation] != "" {
		t.Errorf("%s annotation still there after the overlap", webhookcert.OverlapUntilAnnotation)
	}
	podWebhookAnswers(ctx, t, cs, pod)
}

// podWebhookAnswers waits until the pod webhook answers a dry-run create of pod (a HostPort
// pod without its ports: the plugin's parameter error), through whatever certificate the
// replicas serve.
func podWebhookAnswers(ctx context.Context, t *testing.T, cs kubernetes.Interface, pod *corev1.Pod) {
	t.Helper()
	var lastErr error
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, lastErr = cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return lastErr != nil && strings.Contains(lastErr.Error(), "network plugin Kubernetes-Hostport failed (parameterError)"), nil
	})
	if err != nil {
		t.Fatalf("pod webhook never answered through the rotated certificate; last error: %v", lastErr)
	}
}
