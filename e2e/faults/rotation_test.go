//go:build faults

package faults

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/okg-extensions/network-plugin-policy/e2e/cluster"
	podwebhook "github.com/okg-extensions/network-plugin-policy/pkg/webhook/pod"
	"github.com/okg-extensions/network-plugin-policy/pkg/webhookcert"
)

// TestCertificateRotationUnderLoad forces a rotation of the webhook certificate (the Secret
// emptied, so the manager's rotator makes a new CA and serving certificate and injects the
// CA) while 4 clients admit game servers for 25 s: dry-run CREATEs of HostPort pods (the sync
// entry, failurePolicy Fail: a failed call is a refused create) and NodePort pods (the async
// entry, failurePolicy Ignore: a failed call admits the pod without the webhook, seen as a
// pod without the network-decision annotation). Both kinds of failure are counted; the test
// requires 0 of both.
//
// It holds because the CA changes with an overlap: the manager keeps the previous CA in the
// caBundle beside the new one (webhookcert.BundleReconciler), and each replica serves its
// certificate of the new CA only once every caBundle trusts it (webhookcert.Gate).
func TestCertificateRotationUnderLoad(t *testing.T) {
	ctx := context.Background()
	cfg := rest.CopyConfig(cp.Config)
	cfg.QPS, cfg.Burst = 1000, 1000
	fast := kubernetes.NewForConfigOrDie(cfg)
	ns := newNamespace(t, "rotation")
	secrets := cs.CoreV1().Secrets(mgr.Namespace)
	old, err := secrets.Get(ctx, cluster.CertSecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	loadCtx, stop := context.WithTimeout(ctx, 25*time.Second)
	defer stop()
	var admitted, refused, bypassed atomic.Int64
	var wg sync.WaitGroup
	for c := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; loadCtx.Err() == nil; i++ {
				pod := gameServer(ns, "rot", "Kubernetes-NodePort", nodePortConf)
				if (c+i)%2 == 0 {
					pod = gameServer(ns, "rot", "Kubernetes-HostPort", hostPortConf)
				}
				got, err := fast.CoreV1().Pods(ns).Create(loadCtx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
				switch {
				case loadCtx.Err() != nil, err != nil && strings.Contains(err.Error(), "would exceed context deadline"):
				case err != nil:
					refused.Add(1)
					t.Logf("refused: %v", err)
				case got.Annotations[podwebhook.AnnotationDecision] == "":
					bypassed.Add(1)
				default:
					admitted.Add(1)
				}
			}
		}()
	}
	time.Sleep(5 * time.Second)
	oldCA := old.Data["ca.crt"]
	old.Data = nil
	if _, err := secrets.Update(ctx, old, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("empty the certificate Secret: %v", err)
	}
	rotated := eventually(t, time.Minute, "a new CA in the Secret", func(ctx context.Context) (bool, error) {
		s, err := secrets.Get(ctx, cluster.CertSecretName, metav1.GetOptions{})
		return err == nil && len(s.Data["ca.crt"]) > 0 && !bytes.Equal(s.Data["ca.crt"], oldCA), err
	})
	wg.Wait()
	t.Logf("fault: certificate rotated (new CA %s after the Secret was emptied) while 4 clients admitted: %d admitted by the webhook, %d refused, %d admitted without it",
		rotated.Round(100*time.Millisecond), admitted.Load(), refused.Load(), bypassed.Load())
	// The overlap: both CAs in every caBundle, with its end recorded; and every replica serves
	// a certificate of the new CA soon after (as soon as its caBundles trust it).
	s, err := secrets.Get(ctx, cluster.CertSecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	newCA := s.Data["ca.crt"]
	mut, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, mgr.Webhooks.Mutating, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range mut.Webhooks {
		if !bytes.Contains(w.ClientConfig.CABundle, newCA) || !bytes.Contains(w.ClientConfig.CABundle, oldCA) {
			t.Errorf("webhook %s: caBundle does not hold both the new and the previous CA during the overlap", w.Name)
		}
	}
	if mut.Annotations[webhookcert.OverlapUntilAnnotation] == "" {
		t.Errorf("no %s annotation during the overlap", webhookcert.OverlapUntilAnnotation)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(newCA)
	for _, r := range mgr.Replicas {
		eventually(t, 30*time.Second, r.Name+" serving a certificate of the new CA", func(ctx context.Context) (bool, error) {
			conn, err := tls.Dial("tcp", r.WebhookAddr, &tls.Config{RootCAs: pool, ServerName: "localhost"})
			if err != nil {
				return false, nil
			}
			return true, conn.Close()
		})
	}
	if refused.Load()+bypassed.Load() != 0 {
		t.Errorf("%d admissions failed during the certificate rotation (%d refused, %d without the webhook), want 0",
			refused.Load()+bypassed.Load(), refused.Load(), bypassed.Load())
	}
}
