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
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
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
	// CertRotation runs the manager as config/default deploys it: it generates and rotates
	// its webhook certificate in the Secret network-plugin-policy-webhook-cert of
	// RootNamespace (open-policy-agent/cert-controller) and injects the CA into the webhook
	// configurations, whose URL is then https://localhost:<port>. The Secret's keys are
	// copied into the manager's --cert-dir as the kubelet would mount them. False: the
	// control plane's CA issues the certificate (--cert-rotation=false, as with cert-manager).
	CertRotation bool
}

// CertSecretName is the Secret that holds the rotated webhook certificate when
// ManagerOptions.CertRotation is set (the manager's --webhook-secret-name default).
const CertSecretName = "network-plugin-policy-webhook-cert"

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
		args: []string{
			"--kubeconfig=" + c.KubeconfigPath,
			"--root-namespace=" + opts.RootNamespace,
			"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(probe),
			"--metrics-bind-address=127.0.0.1:" + strconv.Itoa(metrics),
			"--webhook-port=" + strconv.Itoa(webhookPort),
			"--cert-dir=" + certDir,
			"--provider-config=" + provider,
		},
	}

	if !opts.CertRotation {
		crt, key, err := c.PKI.IssueServing("127.0.0.1", "localhost")
		if err != nil {
			return nil, err
		}
		if err := writeFiles(certDir, map[string][]byte{"tls.crt": crt, "tls.key": key}); err != nil {
			return nil, err
		}
		m.args = append(append(m.args, "--cert-rotation=false"), opts.Args...)
		if err := m.start(ctx); err != nil {
			return nil, err
		}
		if _, err := c.InstallWebhooks(ctx, m.WebhookURL, c.PKI.CACertPEM); err != nil {
			return nil, err
		}
		return m, nil
	}

	// Certificate rotation: the configurations exist (without a CA) before the manager starts,
	// since it injects its CA into them and is not ready before it has.
	m.WebhookURL = "https://localhost:" + strconv.Itoa(webhookPort)
	names, err := c.InstallWebhooks(ctx, m.WebhookURL, nil)
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return nil, err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: CertSecretName, Namespace: opts.RootNamespace}}
	if _, err := cs.CoreV1().Secrets(opts.RootNamespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create Secret %s/%s: %w", opts.RootNamespace, CertSecretName, err)
	}
	mountCtx, stopMount := context.WithCancel(context.Background())
	c.cleanups = append(c.cleanups, stopMount)
	go mountSecret(mountCtx, cs, opts.RootNamespace, CertSecretName, certDir)
	m.args = append(append(m.args,
		"--cert-rotation=true",
		"--webhook-secret-name="+CertSecretName,
		"--webhook-cert-dns-names=localhost",
		"--mutating-webhook-configuration="+names.Mutating,
		"--validating-webhook-configuration="+names.Validating,
	), opts.Args...)
	if err := m.start(ctx); err != nil {
		return nil, err
	}
	return m, nil
}

// mountSecret stands in for the kubelet's Secret volume: every half second it copies the keys
// of the Secret into dir (each file written to a temporary name, then renamed), until ctx
// ends.
func mountSecret(ctx context.Context, cs kubernetes.Interface, ns, name, dir string) {
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		if s, err := cs.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
			for k, v := range s.Data {
				path := filepath.Join(dir, k)
				if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, v) {
					continue
				}
				if os.WriteFile(path+".tmp", v, 0o600) == nil {
					_ = os.Rename(path+".tmp", path)
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
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

// WebhookNames are the names of the webhook configurations InstallWebhooks created.
type WebhookNames struct {
	Mutating, Validating string
}

// InstallWebhooks creates (or replaces) the webhook configurations of the repository's
// config/webhook, as `kubectl kustomize` renders them (so the matchConditions and
// namespaceSelector under test are the deployed ones), with each webhook's clientConfig set to
// baseURL plus the webhook's path and caBundle (nil leaves it empty, for a manager that
// injects its own CA).
func (c *ControlPlane) InstallWebhooks(ctx context.Context, baseURL string, caBundle []byte) (WebhookNames, error) {
	var names WebhookNames
	root, err := RepoRoot()
	if err != nil {
		return names, err
	}
	cmd := exec.CommandContext(ctx, "kubectl", "kustomize", filepath.Join(root, "config", "webhook"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return names, fmt.Errorf("kubectl kustomize config/webhook: %w: %s", err, stderr.String())
	}
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return names, err
	}
	point := func(cc *admissionregistrationv1.WebhookClientConfig) {
		url := baseURL
		if cc.Service != nil && cc.Service.Path != nil {
			url += *cc.Service.Path
		}
		cc.Service, cc.URL, cc.CABundle = nil, &url, caBundle
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); err == io.EOF {
			break
		} else if err != nil {
			return names, fmt.Errorf("decode config/webhook: %w", err)
		}
		raw, err := yaml.Marshal(doc)
		if err != nil {
			return names, err
		}
		switch doc["kind"] {
		case "MutatingWebhookConfiguration":
			var w admissionregistrationv1.MutatingWebhookConfiguration
			if err := yaml.UnmarshalStrict(raw, &w); err != nil {
				return names, fmt.Errorf("decode MutatingWebhookConfiguration: %w", err)
			}
			for i := range w.Webhooks {
				point(&w.Webhooks[i].ClientConfig)
			}
			api := cs.AdmissionregistrationV1().MutatingWebhookConfigurations()
			if err := api.Delete(ctx, w.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return names, err
			}
			if _, err := api.Create(ctx, &w, metav1.CreateOptions{}); err != nil {
				return names, fmt.Errorf("create MutatingWebhookConfiguration %s: %w", w.Name, err)
			}
			names.Mutating = w.Name
		case "ValidatingWebhookConfiguration":
			var w admissionregistrationv1.ValidatingWebhookConfiguration
			if err := yaml.UnmarshalStrict(raw, &w); err != nil {
				return names, fmt.Errorf("decode ValidatingWebhookConfiguration: %w", err)
			}
			for i := range w.Webhooks {
				point(&w.Webhooks[i].ClientConfig)
			}
			api := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations()
			if err := api.Delete(ctx, w.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return names, err
			}
			if _, err := api.Create(ctx, &w, metav1.CreateOptions{}); err != nil {
				return names, fmt.Errorf("create ValidatingWebhookConfiguration %s: %w", w.Name, err)
			}
			names.Validating = w.Name
		}
	}
	return names, nil
}
