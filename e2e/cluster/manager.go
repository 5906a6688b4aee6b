package cluster

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"
)

// ManagerOptions configure StartManager.
type ManagerOptions struct {
	// Binary is the manager binary; empty means BuildManager's output.
	Binary string
	// RootNamespace is the manager's --root-namespace. Required.
	RootNamespace string
	// ProviderConfig is the OKG provider configuration (TOML) the manager reads; empty means
	// none (the built-in defaults).
	ProviderConfig string
	// Args are further manager flags.
	Args []string
	// Echo, when not nil, receives the manager's log as well as <Dir>/manager.log.
	Echo io.Writer
}

// Manager is the manager process run against a ControlPlane, as the apiserver reaches it:
// through the webhook configurations of config/webhook, their clientConfig pointed at the
// local webhook server.
type Manager struct {
	// Process is the running manager; Restart replaces it.
	Process *Process
	// ProbeURL is the base of /healthz and /readyz; MetricsURL serves /metrics.
	ProbeURL, MetricsURL string
	// WebhookURL is the base URL of the webhook server, https://127.0.0.1:<port>.
	WebhookURL string

	cp   *ControlPlane
	path string
	args []string
	echo io.Writer
}

// BuildManager builds ./cmd/manager of the repository into <repo>/bin/manager and returns its
// path (a link step when the Go build cache is warm).
func BuildManager(ctx context.Context) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	out := filepath.Join(root, "bin", "manager")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/manager")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/manager: %w\n%s", err, b)
	}
	return out, nil
}

// StartManager runs the manager against the control plane, with a webhook serving
// certificate issued by the control plane's CA (--cert-rotation=false, as with cert-manager),
// waits until it is ready, then installs the webhook configurations of config/webhook
// (kubectl kustomize) with their clientConfig set to the local webhook server and the CA.
// Stop stops the manager with the control plane.
func (c *ControlPlane) StartManager(ctx context.Context, opts ManagerOptions) (*Manager, error) {
	if opts.RootNamespace == "" {
		return nil, fmt.Errorf("ManagerOptions.RootNamespace is empty")
	}
	bin := opts.Binary
	if bin == "" {
		var err error
		if bin, err = BuildManager(ctx); err != nil {
			return nil, err
		}
	}
	certDir := filepath.Join(c.Dir, "manager-certs")
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return nil, fmt.Errorf("create %s: %w", certDir, err)
	}
	crt, key, err := c.PKI.IssueServing("127.0.0.1", "localhost")
	if err != nil {
		return nil, err
	}
	if err := writeFiles(certDir, map[string][]byte{"tls.crt": crt, "tls.key": key}); err != nil {
		return nil, err
	}
	provider := opts.ProviderConfig
	if provider == "" {
		// A missing file: the manager uses OKG's defaults and logs a warning.
		provider = filepath.Join(c.Dir, "no-provider-config.toml")
	}
	probe, metrics, webhookPort := FreePort(), FreePort(), FreePort()
	m := &Manager{
		ProbeURL:   "http://127.0.0.1:" + strconv.Itoa(probe),
		MetricsURL: "http://127.0.0.1:" + strconv.Itoa(metrics),
		WebhookURL: "https://127.0.0.1:" + strconv.Itoa(webhookPort),
		cp:         c, path: bin, echo: opts.Echo,
		args: append([]string{
			"--kubeconfig=" + c.KubeconfigPath,
			"--root-namespace=" + opts.RootNamespace,
			"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(probe),
			"--metrics-bind-address=127.0.0.1:" + strconv.Itoa(metrics),
			"--webhook-port=" + strconv.Itoa(webhookPort),
			"--cert-dir=" + certDir,
			"--cert-rotation=false",
			"--provider-config=" + provider,
		}, opts.Args...),
	}
	if err := m.start(ctx); err != nil {
		return nil, err
	}
	if err := c.InstallWebhooks(ctx, m.WebhookURL); err != nil {
		return nil, err
	}
	return m, nil
}

// Restart stops the manager process (SIGTERM, then SIGKILL) and starts it again with the same
// flags, waiting until it is ready.
func (m *Manager) Restart(ctx context.Context) error {
	m.Process.Stop()
	return m.start(ctx)
}

// Kill stops the manager process without starting it again.
func (m *Manager) Kill() { m.Process.Stop() }

func (m *Manager) start(ctx context.Context) error {
	p, err := m.cp.AddProcess("manager", m.echo, m.path, m.args...)
	if err != nil {
		return err
	}
	m.Process = p
	return WaitHTTP(ctx, p, http.DefaultClient, m.ProbeURL+"/readyz")
}

// Metric returns the sum of the samples of the Prometheus metric name whose labels include
// every label="value" pair in labels, as scraped from MetricsURL now.
func (m *Manager) Metric(ctx context.Context, name string, labels ...string) (float64, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, m.MetricsURL+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("scrape metrics: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("read metrics: %w", err)
	}
	var sum float64
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		ok := true
		for _, l := range labels {
			if !strings.Contains(line, l) {
				ok = false
			}
		}
		if !ok {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("parse metric line %q: %w", line, err)
		}
		sum += v
	}
	return sum, nil
}

// InstallWebhooks creates (or replaces) the webhook configurations of the repository's
// config/webhook, as `kubectl kustomize` renders them (so the matchConditions and
// namespaceSelector under test are the deployed ones), with each webhook's clientConfig set to
// baseURL plus the webhook's path and the control plane's CA as caBundle.
func (c *ControlPlane) InstallWebhooks(ctx context.Context, baseURL string) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "kubectl", "kustomize", filepath.Join(root, "config", "webhook"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("kubectl kustomize config/webhook: %w: %s", err, stderr.String())
	}
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	point := func(cc *admissionregistrationv1.WebhookClientConfig) {
		url := baseURL
		if cc.Service != nil && cc.Service.Path != nil {
			url += *cc.Service.Path
		}
		cc.Service, cc.URL, cc.CABundle = nil, &url, c.PKI.CACertPEM
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); err == io.EOF {
			break
		} else if err != nil {
			return fmt.Errorf("decode config/webhook: %w", err)
		}
		raw, err := yaml.Marshal(doc)
		if err != nil {
			return err
		}
		switch doc["kind"] {
		case "MutatingWebhookConfiguration":
			var w admissionregistrationv1.MutatingWebhookConfiguration
			if err := yaml.UnmarshalStrict(raw, &w); err != nil {
				return fmt.Errorf("decode MutatingWebhookConfiguration: %w", err)
			}
			for i := range w.Webhooks {
				point(&w.Webhooks[i].ClientConfig)
			}
			api := cs.AdmissionregistrationV1().MutatingWebhookConfigurations()
			if err := api.Delete(ctx, w.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			if _, err := api.Create(ctx, &w, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("create MutatingWebhookConfiguration %s: %w", w.Name, err)
			}
		case "ValidatingWebhookConfiguration":
			var w admissionregistrationv1.ValidatingWebhookConfiguration
			if err := yaml.UnmarshalStrict(raw, &w); err != nil {
				return fmt.Errorf("decode ValidatingWebhookConfiguration: %w", err)
			}
			for i := range w.Webhooks {
				point(&w.Webhooks[i].ClientConfig)
			}
			api := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations()
			if err := api.Delete(ctx, w.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			if _, err := api.Create(ctx, &w, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("create ValidatingWebhookConfiguration %s: %w", w.Name, err)
			}
		}
	}
	return nil
}
