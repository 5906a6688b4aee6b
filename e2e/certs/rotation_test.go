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
	"github.com/okg-extensions/network-plugin-policy/pkg/networkstatus"
)

func TestManagerRotatesItsWebhookCertificate(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cp := cluster.StartForTest(t, cluster.Options{})
	if _, err := cluster.InstallCRDs(cp.Config, "../../crds"); err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(cp.Config)
	const root = "npp-system"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: root}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mgr, err := cp.StartManager(ctx, cluster.ManagerOptions{RootNamespace: root, CertRotation: true})
	if err != nil {
		t.Fatalf("start manager with certificate rotation: %v", err)
	}
	t.Cleanup(mgr.Kill)

	secret, err := cs.CoreV1().Secrets(root).Get(ctx, cluster.CertSecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"ca.crt", "tls.crt", "tls.key"} {
		if len(secret.Data[k]) == 0 {
			t.Errorf("Secret %s has no %s", cluster.CertSecretName, k)
		}
	}
	mut, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "mutating-webhook-configuration", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	val, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "validating-webhook-configuration", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(mut.Webhooks[0].ClientConfig.CABundle, secret.Data["ca.crt"]) || !bytes.Equal(val.Webhooks[0].ClientConfig.CABundle, secret.Data["ca.crt"]) {
		t.Errorf("the webhook configurations' caBundle is not the rotated CA of the Secret")
	}

	// The apiserver trusts the rotated certificate: both webhooks answer. (This cluster runs
	// no kube-controller-manager, so the ServiceAccount admission plugin needs the default
	// ServiceAccount made by hand.)
	if _, err := cs.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: "default",
			Annotations: map[string]string{networkstatus.AnnotationNetworkType: "Example-Unknown"}},
		Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptr.To[int64](0), Containers: []corev1.Container{{Name: "c", Image: "app:1"}}},
	}
	var lastErr error
	err = wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, lastErr = cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return lastErr != nil && strings.Contains(lastErr.Error(), "network plugin Example-Unknown failed (parameterError)"), nil
	})
	if err != nil {
		t.Fatalf("pod webhook never answered through the rotated certificate; last error: %v", lastErr)
	}
	pc := versioned.NewForConfigOrDie(cp.Config)
	_, err = pc.PolicyV1alpha1().NetworkPluginPolicies("default").Create(ctx, &policyv1alpha1.NetworkPluginPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "bad"},
		Spec: policyv1alpha1.NetworkPluginPolicySpec{Plugins: []string{"*"},
			MatchConditions: []policyv1alpha1.MatchCondition{{Name: "x", Expression: "object.spec.nodeName +"}}},
	}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err == nil || !strings.Contains(err.Error(), "spec.matchConditions[0].expression") {
		t.Errorf("validating webhook through the rotated certificate: %v, want a rejection naming spec.matchConditions[0].expression", err)
	}
}
