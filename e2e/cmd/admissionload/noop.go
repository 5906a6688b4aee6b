package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/okg-extensions/network-plugin-policy/e2e/cluster"
)

// The no-op webhook: its annotation, URL path and configuration names.
const (
	// annotationNoop is the annotation the no-op webhook adds to every pod it admits.
	annotationNoop = "admissionload.policy.game.kruise.io/noop"
	// noopPath is the URL path the no-op webhook serves.
	noopPath = "/mutate-noop"
	// noopConfigName is its MutatingWebhookConfiguration, noopWebhookName its one webhook.
	noopConfigName  = "admissionload-noop"
	noopWebhookName = "noop.admissionload.policy.game.kruise.io"
)

// noopHandler is the no-op mutating webhook's handler: what a minimal real pod webhook does
// on the way, and nothing else.
type noopHandler struct {
	decoder admission.Decoder
}

// jsonPatchOp is one RFC 6902 operation.
type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// Handle decodes the pod (JSON, with the same controller-runtime decoder the manager uses)
// and admits it with one JSON patch operation that adds annotationNoop = "true". A pod that
// does not decode is answered with HTTP 400.
func (h noopHandler) Handle(_ context.Context, req admission.Request) admission.Response {
	pod := &corev1.Pod{}
	if err := h.decoder.Decode(req, pod); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode pod: %w", err))
	}
	op := jsonPatchOp{Op: "add", Path: "/metadata/annotations/" + escapeJSONPointer(annotationNoop), Value: "true"}
	if pod.Annotations == nil {
		op = jsonPatchOp{Op: "add", Path: "/metadata/annotations", Value: map[string]string{annotationNoop: "true"}}
	}
	patch, err := json.Marshal([]jsonPatchOp{op})
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("encode patch: %w", err))
	}
	return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{
		Allowed: true, Patch: patch, PatchType: ptr.To(admissionv1.PatchTypeJSONPatch),
	}}
}

// escapeJSONPointer escapes s as one JSON pointer token (RFC 6901): "~" as "~0", "/" as "~1".
func escapeJSONPointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// noopWebhook is the running no-op webhook.
type noopWebhook struct {
	// url is the URL the apiserver calls, through proxy.
	url string
	// proxy stands in for the no-op webhook's Service, as cluster.Manager's Proxy does for
	// the manager's.
	proxy *cluster.Proxy
	// metricsURL, when not empty, serves the separate process's /metrics (plain HTTP);
	// empty means the server runs in this process and its metrics are in
	// ctrlmetrics.Registry.
	metricsURL string
	// stop stops the server and the proxy.
	stop func()
}

// newNoopServer returns the no-op webhook server on 127.0.0.1:port with the certificate and
// key tls.crt and tls.key of certDir, HTTP/1.1 only as the manager.
func newNoopServer(port int, certDir string) webhook.Server {
	srv := webhook.NewServer(webhook.Options{
		Host: "127.0.0.1", Port: port, CertDir: certDir,
		TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }},
	})
	srv.Register(noopPath, &admission.Webhook{Handler: noopHandler{decoder: admission.NewDecoder(clientgoscheme.Scheme)}})
	return srv
}

// serveNoop runs the no-op webhook server as its own process (-serve-noop-port): the server
// of newNoopServer and, on metricsPort, controller-runtime's metrics registry as plain
// HTTP /metrics, until ctx ends. Errors are the servers'.
func serveNoop(ctx context.Context, port, metricsPort int, certDir string) error {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(ctrlmetrics.Registry, promhttp.HandlerOpts{}))
	ms := &http.Server{Addr: "127.0.0.1:" + strconv.Itoa(metricsPort), Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = ms.Close()
	}()
	go func() { _ = ms.ListenAndServe() }()
	return newNoopServer(port, certDir).Start(ctx)
}

// startNoopWebhook starts the no-op webhook: a controller-runtime webhook.Server on a free
// loopback port with a serving certificate for 127.0.0.1 and localhost issued by the control
// plane's CA (written to dir), HTTP/1.1 only as the manager, reached through a one-backend
// cluster.Proxy at https://localhost:<port>, as the manager's replicas are through theirs.
// The server runs in this process, or, with separate, in a process of its own (this program
// again, with -serve-noop-port), as the manager's replicas do, which the control plane's Stop
// stops. It returns once the server accepts TLS connections. Errors: the certificate, the
// listener or process, or a server that did not start within 30 seconds.
func startNoopWebhook(ctx context.Context, cp *cluster.ControlPlane, dir string, separate bool) (*noopWebhook, error) {
	certPEM, keyPEM, err := cp.PKI.IssueServing("127.0.0.1", "localhost")
	if err != nil {
		return nil, fmt.Errorf("issue the no-op webhook's certificate: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create %s: %w", dir, err)
	}
	for name, data := range map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return nil, fmt.Errorf("write the no-op webhook's %s: %w", name, err)
		}
	}
	port := cluster.FreePort()
	addr := "127.0.0.1:" + strconv.Itoa(port)
	ctx, cancel := context.WithCancel(ctx)
	n := &noopWebhook{}
	errs := make(chan error, 1)
	exited := func() error { return nil }
	if separate {
		exe, err := os.Executable()
		if err != nil {
			cancel()
			return nil, fmt.Errorf("find this program to run the no-op webhook: %w", err)
		}
		metricsPort := cluster.FreePort()
		p, err := cp.AddProcess("noop-webhook", nil, exe, "-serve-noop-port="+strconv.Itoa(port),
			"-serve-noop-metrics-port="+strconv.Itoa(metricsPort), "-serve-noop-certs="+dir)
		if err != nil {
			cancel()
			return nil, err
		}
		n.metricsURL = "http://127.0.0.1:" + strconv.Itoa(metricsPort) + "/metrics"
		exited = func() error {
			if done, err := p.Exited(); done {
				return fmt.Errorf("the no-op webhook process exited: %v; end of %s:\n%s", err, p.LogPath, p.LogTail(2000))
			}
			return nil
		}
	} else {
		go func() { errs <- newNoopServer(port, dir).Start(ctx) }()
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only checks that the server is up
		if err == nil {
			_ = conn.Close()
			break
		}
		if err := exited(); err != nil {
			cancel()
			return nil, err
		}
		select {
		case err := <-errs:
			cancel()
			return nil, fmt.Errorf("start the no-op webhook server: %w", err)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cancel()
			return nil, fmt.Errorf("the no-op webhook server did not accept connections within 30s")
		}
	}
	proxy, err := cluster.StartProxy(1)
	if err != nil {
		cancel()
		return nil, err
	}
	proxy.SetBackend(0, addr)
	_, proxyPort, _ := strings.Cut(proxy.Addr, ":")
	n.url, n.proxy = "https://localhost:"+proxyPort+noopPath, proxy
	n.stop = func() { proxy.Close(); cancel() }
	return n, nil
}

// install creates the no-op webhook's MutatingWebhookConfiguration: pod CREATE in namespace
// ns, only pods labelled labelKind=noop (objectSelector), failurePolicy Fail, sideEffects
// None, reinvocationPolicy Never and the given timeoutSeconds (the manager's), with the
// control plane's CA as caBundle.
func (n *noopWebhook) install(ctx context.Context, cs kubernetes.Interface, ca []byte, ns string, timeoutSeconds int32) error {
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: noopConfigName},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    noopWebhookName,
			AdmissionReviewVersions: []string{"v1"},
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: ptr.To(n.url), CABundle: ca},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{
					APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"},
				},
			}},
			NamespaceSelector:  &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
			ObjectSelector:     &metav1.LabelSelector{MatchLabels: map[string]string{labelKind: kindNoop.String()}},
			FailurePolicy:      ptr.To(admissionregistrationv1.Fail),
			SideEffects:        ptr.To(admissionregistrationv1.SideEffectClassNone),
			TimeoutSeconds:     ptr.To(timeoutSeconds),
			ReinvocationPolicy: ptr.To(admissionregistrationv1.NeverReinvocationPolicy),
		}},
	}
	if _, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, cfg, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create MutatingWebhookConfiguration %s: %w", noopConfigName, err)
	}
	return nil
}

// managerTimeoutSeconds returns the largest timeoutSeconds of the manager's mutating
// webhooks as config/default renders them (the apiserver's default, 10, where unset).
func managerTimeoutSeconds(mut *admissionregistrationv1.MutatingWebhookConfiguration) int32 {
	var out int32
	for _, w := range mut.Webhooks {
		out = max(out, ptr.Deref(w.TimeoutSeconds, 10))
	}
	return out
}
