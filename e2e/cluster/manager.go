package cluster

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
)

// ManagerOptions configure StartManager.
type ManagerOptions struct {
	// Binary is the manager binary; empty means BuildManager's output.
	Binary string
	// ProviderConfig is the OKG provider configuration (TOML) the manager reads, standing in
	// for the Deployment's ConfigMap volume; empty means none (the built-in defaults).
	ProviderConfig string
	// Replicas is the number of manager processes; 0 means the Deployment's spec.replicas.
	Replicas int
	// Args are further manager flags, after the Deployment's.
	Args []string
	// ThroughFaultProxy makes the replicas reach the API server through a FaultProxy
	// (Manager.FaultProxy), for brownout faults; false: directly.
	ThroughFaultProxy bool
	// Echo, when not nil, receives the replicas' logs as well as <Dir>/manager-<i>.log.
	Echo io.Writer
	// Pprof gives every replica Go's net/http/pprof on a loopback port of its own
	// (--pprof-bind-address; Replica.PprofURL), for profiles of load runs.
	Pprof bool
	// ReplicaEnv, for replica i (when i < len), is further environment ("NAME=value") after
	// the Deployment's, a later value of one name winning: for measurements that compare
	// runtime settings (GOGC, GOMEMLIMIT) side by side in one cluster.
	ReplicaEnv [][]string
	// ReplicaBinary, for replica i (when i < len and not empty), is the manager binary that
	// replica runs instead of Binary: for measurements that compare two builds side by side
	// in one cluster.
	ReplicaBinary []string
	// ReplicaArgs, for replica i (when i < len), are further manager flags after Args, a
	// later value of one flag winning (Go's flag package): for measurements that compare
	// configurations side by side in one cluster, such as another --provider-config.
	ReplicaArgs [][]string
}

// CertSecretName is the Secret that holds the rotated webhook certificate (the manager's
// --webhook-secret-name default; config/default creates it empty).
const CertSecretName = "network-plugin-policy-webhook-cert"

// ScraperServiceAccount is the ServiceAccount, in the manager's namespace, whose token
// Replica.Metric sends: it is bound to config/rbac's metrics-reader ClusterRole only, as a
// Prometheus would be.
const ScraperServiceAccount = "e2e-metrics-scraper"

// tokenLifetime is how long the ServiceAccount tokens of the e2e manager and scraper last:
// longer than any suite runs.
const tokenLifetime = 6 * time.Hour

// Manager is the manager as config/default deploys it, run on this machine against a
// ControlPlane: its ServiceAccount and RBAC installed from the rendered manifests, each
// replica a process authenticated with that ServiceAccount's token and started with the
// Deployment's flags and environment (only listen addresses, file paths and the kubeconfig
// differ), the replicas behind a round-robin TCP Proxy that stands in for the webhook Service,
// and the webhook configurations of config/default pointed at the proxy. The replicas rotate
// their own webhook certificate in the Secret CertSecretName, copied into each replica's
// --cert-dir as the kubelet would mount it.
type Manager struct {
	// Namespace is the manager's namespace (POD_NAMESPACE); it is also the root namespace.
	Namespace string
	// ServiceAccount is the user the replicas authenticate as,
	// system:serviceaccount:<namespace>:<name>.
	ServiceAccount string
	// Replicas are the manager processes.
	Replicas []*Replica
	// WebhookURL is the base URL of the webhook Service stand-in, https://localhost:<port>.
	WebhookURL string
	// Webhooks are the names of the installed webhook configurations.
	Webhooks WebhookNames
	// Proxy spreads the apiserver's webhook connections over the ready replicas.
	Proxy *Proxy
	// Deployment is config/default as rendered.
	Deployment *Deployment
	// KubeconfigPath is the replicas' kubeconfig: the control plane's URL and CA and a token
	// of the manager's ServiceAccount (`kubectl --kubeconfig` it to act as the manager).
	KubeconfigPath string
	// FaultProxy stands between the replicas and the API server when
	// ManagerOptions.ThroughFaultProxy is set; nil otherwise.
	FaultProxy *FaultProxy

	cp           *ControlPlane
	scraperToken string
}

// Replica is one manager process.
type Replica struct {
	// Index is the replica's slot in the Proxy; Name is "manager-<Index>".
	Index int
	Name  string
	// ProbeURL is the base of /healthz and /readyz; MetricsURL serves /metrics over HTTPS
	// (--metrics-secure) to tokens with the metrics-reader role.
	ProbeURL, MetricsURL string
	// WebhookAddr is the replica's webhook server, 127.0.0.1:<port>.
	WebhookAddr string
	// PprofURL is the base of the replica's /debug/pprof/ with ManagerOptions.Pprof, empty
	// otherwise.
	PprofURL string

	mu      sync.Mutex
	process *Process
	m       *Manager
	path    string
	args    []string
	env     []string
	echo    io.Writer
}

// BuildManager builds ./cmd/manager of the repository into dir/manager and returns its path
// (a link step when the Go build cache is warm). An empty dir means <repo>/bin; a load tool
// passes its own directory so as not to replace a bin/manager that others may be running.
func BuildManager(ctx context.Context, dir string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	if dir == "" {
		dir = filepath.Join(root, "bin")
	}
	out := filepath.Join(dir, "manager")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/manager")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/manager: %w\n%s", err, b)
	}
	return out, nil
}

// StartManager deploys the manager as config/default does and starts its replicas: it
// installs the Namespace, ServiceAccount, RBAC and Secret of the rendered manifests (as
// cluster admin, as `kubectl apply -k` would), the webhook configurations pointed at a
// loopback Proxy, a metrics scraper ServiceAccount bound to metrics-reader, and runs each
// replica under the manager ServiceAccount's token, waiting until every replica is ready.
// The control plane's Stop stops the replicas.
func (c *ControlPlane) StartManager(ctx context.Context, opts ManagerOptions) (*Manager, error) {
	bin := opts.Binary
	if bin == "" {
		var err error
		if bin, err = BuildManager(ctx, ""); err != nil {
			return nil, err
		}
	}
	d, err := RenderDeployment(ctx)
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return nil, err
	}
	if err := d.install(ctx, cs); err != nil {
		return nil, err
	}
	ns, sa := d.Namespace.Name, d.ServiceAccount.Name
	m := &Manager{
		Namespace: ns, ServiceAccount: "system:serviceaccount:" + ns + ":" + sa,
		Deployment: d, cp: c,
	}
	replicas := opts.Replicas
	if replicas == 0 {
		replicas = int(ptr.Deref(d.Manager.Spec.Replicas, 1))
	}
	if m.Proxy, err = StartProxy(replicas); err != nil {
		return nil, err
	}
	c.cleanups = append(c.cleanups, m.Proxy.Close)
	m.WebhookURL = "https://localhost:" + m.Proxy.Addr[strings.LastIndex(m.Proxy.Addr, ":")+1:]
	if err := m.InstallWebhooks(ctx); err != nil {
		return nil, err
	}

	token, err := serviceAccountToken(ctx, cs, ns, sa)
	if err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(c.Dir, "manager.kubeconfig")
	m.KubeconfigPath = kubeconfig
	apiURL := c.URL
	if opts.ThroughFaultProxy {
		if m.FaultProxy, err = c.StartFaultProxy(); err != nil {
			return nil, err
		}
		apiURL = m.FaultProxy.URL
	}
	if err := writeTokenKubeconfig(kubeconfig, apiURL, c.PKI.CACertPEM, token); err != nil {
		return nil, err
	}
	if m.scraperToken, err = m.createScraper(ctx, cs); err != nil {
		return nil, err
	}

	provider := opts.ProviderConfig
	if provider == "" {
		// A missing file: the manager uses OKG's defaults and logs a warning, as with the
		// Deployment's optional ConfigMap absent.
		provider = filepath.Join(c.Dir, "no-provider-config.toml")
	}
	mountCtx, stopMount := context.WithCancel(context.Background())
	c.cleanups = append(c.cleanups, stopMount)
	ctr := d.Container()
	for i := range replicas {
		r := &Replica{Index: i, Name: "manager-" + strconv.Itoa(i), m: m, path: bin, echo: opts.Echo}
		if i < len(opts.ReplicaBinary) && opts.ReplicaBinary[i] != "" {
			r.path = opts.ReplicaBinary[i]
		}
		certDir := filepath.Join(c.Dir, r.Name+"-certs")
		if err := os.MkdirAll(certDir, 0o700); err != nil {
			return nil, fmt.Errorf("create %s: %w", certDir, err)
		}
		go mountSecret(mountCtx, cs, ns, CertSecretName, certDir)
		probe, metrics, webhookPort := FreePort(), FreePort(), FreePort()
		r.ProbeURL = "http://127.0.0.1:" + strconv.Itoa(probe)
		r.MetricsURL = "https://127.0.0.1:" + strconv.Itoa(metrics)
		r.WebhookAddr = "127.0.0.1:" + strconv.Itoa(webhookPort)
		local := map[string]string{
			"--metrics-bind-address":      "127.0.0.1:" + strconv.Itoa(metrics),
			"--health-probe-bind-address": "127.0.0.1:" + strconv.Itoa(probe),
			"--webhook-port":              strconv.Itoa(webhookPort),
			"--cert-dir":                  certDir,
			"--provider-config":           provider,
		}
		if r.args, err = localArgs(ctr.Args, local); err != nil {
			return nil, err
		}
		r.args = append(append(r.args,
			"--kubeconfig="+kubeconfig,
			// The webhook is reached at https://localhost:<proxy>, not through the Service's
			// DNS name, so the rotated certificate must name localhost too.
			"--webhook-cert-dns-names=localhost",
		), opts.Args...)
		if i < len(opts.ReplicaArgs) {
			r.args = append(r.args, opts.ReplicaArgs[i]...)
		}
		if opts.Pprof {
			port := FreePort()
			r.PprofURL = "http://127.0.0.1:" + strconv.Itoa(port)
			r.args = append(r.args, "--pprof-bind-address=127.0.0.1:"+strconv.Itoa(port))
		}
		if r.env, err = podEnv(ctr, ns, r.Name); err != nil {
			return nil, err
		}
		if i < len(opts.ReplicaEnv) {
			r.env = append(r.env, opts.ReplicaEnv[i]...)
		}
		m.Replicas = append(m.Replicas, r)
	}
	// The replicas start together, as a Deployment's pods do; one of them generates the
	// certificate, all of them serve it.
	errs := make(chan error, replicas)
	for _, r := range m.Replicas {
		go func() { errs <- r.Start(ctx) }()
	}
	for range m.Replicas {
		if err := <-errs; err != nil {
			return nil, err
		}
	}
	return m, nil
}

// localArgs returns the Deployment's container args with the value of every flag in local
// replaced; a flag of local that the Deployment does not pass is an error (the manifest and
// the harness have drifted apart).
func localArgs(args []string, local map[string]string) ([]string, error) {
	out := make([]string, 0, len(args))
	seen := map[string]bool{}
	for _, a := range args {
		name, _, _ := strings.Cut(a, "=")
		if v, ok := local[name]; ok {
			a = name + "=" + v
			seen[name] = true
		}
		out = append(out, a)
	}
	for name := range local {
		if !seen[name] {
			return nil, fmt.Errorf("the manager Deployment does not pass %s; config/manager/manager.yaml and e2e/cluster disagree", name)
		}
	}
	return out, nil
}

// podEnv returns the container's environment as the kubelet would set it for a pod named pod
// in namespace ns, after this process's own environment (PATH, HOME, ...). Only values,
// fieldRefs to metadata.namespace and metadata.name, and the resourceFieldRefs limits.memory
// and requests.memory (the container's memory limit or request in bytes, divisor 1) are
// supported; anything else is an error.
func podEnv(ctr corev1.Container, ns, pod string) ([]string, error) {
	env := os.Environ()
	for _, e := range ctr.Env {
		switch {
		case e.ValueFrom == nil:
			env = append(env, e.Name+"="+e.Value)
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			env = append(env, e.Name+"="+ns)
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
			env = append(env, e.Name+"="+pod)
		case e.ValueFrom.ResourceFieldRef != nil && (e.ValueFrom.ResourceFieldRef.Resource == "limits.memory" || e.ValueFrom.ResourceFieldRef.Resource == "requests.memory") &&
			(e.ValueFrom.ResourceFieldRef.Divisor.IsZero() || e.ValueFrom.ResourceFieldRef.Divisor.Value() == 1):
			list := ctr.Resources.Limits
			if e.ValueFrom.ResourceFieldRef.Resource == "requests.memory" {
				list = ctr.Resources.Requests
			}
			q, ok := list[corev1.ResourceMemory]
			if !ok {
				return nil, fmt.Errorf("manager env %s: %s, but the container sets none", e.Name, e.ValueFrom.ResourceFieldRef.Resource)
			}
			env = append(env, fmt.Sprintf("%s=%d", e.Name, q.Value()))
		default:
			return nil, fmt.Errorf("manager env %s: only values, fieldRefs to metadata.namespace or metadata.name and the resourceFieldRefs limits.memory and requests.memory are supported by e2e/cluster", e.Name)
		}
	}
	return env, nil
}

// install creates or updates the Namespace, ServiceAccount, RBAC, Secrets and ConfigMaps of d.
func (d *Deployment) install(ctx context.Context, cs kubernetes.Interface) error {
	ignoreExists := func(what string, err error) error {
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create %s: %w", what, err)
		}
		return nil
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, d.Namespace, metav1.CreateOptions{}); ignoreExists("Namespace "+d.Namespace.Name, err) != nil {
		return ignoreExists("Namespace "+d.Namespace.Name, err)
	}
	if _, err := cs.CoreV1().ServiceAccounts(d.ServiceAccount.Namespace).Create(ctx, d.ServiceAccount, metav1.CreateOptions{}); ignoreExists("ServiceAccount", err) != nil {
		return ignoreExists("ServiceAccount", err)
	}
	for _, s := range d.Secrets {
		if _, err := cs.CoreV1().Secrets(s.Namespace).Create(ctx, s, metav1.CreateOptions{}); ignoreExists("Secret "+s.Name, err) != nil {
			return ignoreExists("Secret "+s.Name, err)
		}
	}
	for _, c := range d.ConfigMaps {
		if _, err := cs.CoreV1().ConfigMaps(c.Namespace).Create(ctx, c, metav1.CreateOptions{}); ignoreExists("ConfigMap "+c.Name, err) != nil {
			return ignoreExists("ConfigMap "+c.Name, err)
		}
	}
	rbac := cs.RbacV1()
	for _, r := range d.ClusterRoles {
		if err := createOrUpdate(ctx, r, rbac.ClusterRoles().Create, rbac.ClusterRoles().Get, rbac.ClusterRoles().Update); err != nil {
			return err
		}
	}
	for _, r := range d.ClusterRoleBindings {
		if err := createOrUpdate(ctx, r, rbac.ClusterRoleBindings().Create, rbac.ClusterRoleBindings().Get, rbac.ClusterRoleBindings().Update); err != nil {
			return err
		}
	}
	for _, r := range d.Roles {
		api := rbac.Roles(r.Namespace)
		if err := createOrUpdate(ctx, r, api.Create, api.Get, api.Update); err != nil {
			return err
		}
	}
	for _, r := range d.RoleBindings {
		api := rbac.RoleBindings(r.Namespace)
		if err := createOrUpdate(ctx, r, api.Create, api.Get, api.Update); err != nil {
			return err
		}
	}
	return nil
}

// createOrUpdate creates obj, or replaces the stored object of its name with it.
func createOrUpdate[T interface {
	*O
	metav1.Object
}, O any](ctx context.Context, obj T,
	create func(context.Context, T, metav1.CreateOptions) (T, error),
	get func(context.Context, string, metav1.GetOptions) (T, error),
	update func(context.Context, T, metav1.UpdateOptions) (T, error)) error {
	_, err := create(ctx, obj, metav1.CreateOptions{})
	if err == nil {
		return nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create %T %s: %w", obj, obj.GetName(), err)
	}
	stored, err := get(ctx, obj.GetName(), metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get %T %s: %w", obj, obj.GetName(), err)
	}
	obj.SetResourceVersion(stored.GetResourceVersion())
	if _, err := update(ctx, obj, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update %T %s: %w", obj, obj.GetName(), err)
	}
	return nil
}

// serviceAccountToken returns a bound token of the ServiceAccount (TokenRequest API), valid
// for tokenLifetime.
func serviceAccountToken(ctx context.Context, cs kubernetes.Interface, ns, name string) (string, error) {
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(tokenLifetime.Seconds()))},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("request a token of ServiceAccount %s/%s: %w", ns, name, err)
	}
	return tr.Status.Token, nil
}

// writeTokenKubeconfig writes a kubeconfig that authenticates with a bearer token, as the
// in-cluster config of a pod does.
func writeTokenKubeconfig(path, url string, ca []byte, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: url, CertificateAuthorityData: ca}
	cfg.AuthInfos["local"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "local"}
	cfg.CurrentContext = "local"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}

// ServiceAccountConfig returns a REST config of the control plane that authenticates as the
// ServiceAccount ns/name with a fresh token, for tests that check what a user may do.
func (c *ControlPlane) ServiceAccountConfig(ctx context.Context, ns, name string) (*rest.Config, error) {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return nil, err
	}
	token, err := serviceAccountToken(ctx, cs, ns, name)
	if err != nil {
		return nil, err
	}
	return &rest.Config{Host: c.URL, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: c.PKI.CACertPEM}}, nil
}

// createScraper creates the ServiceAccount ScraperServiceAccount bound to the metrics-reader
// ClusterRole of config/default and returns its token.
func (m *Manager) createScraper(ctx context.Context, cs kubernetes.Interface) (string, error) {
	reader := ""
	for _, r := range m.Deployment.ClusterRoles {
		for _, rule := range r.Rules {
			if len(rule.NonResourceURLs) > 0 && rule.NonResourceURLs[0] == "/metrics" {
				reader = r.Name
			}
		}
	}
	if reader == "" {
		return "", fmt.Errorf("config/default has no ClusterRole that grants get on /metrics (metrics-reader)")
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: ScraperServiceAccount, Namespace: m.Namespace}}
	if _, err := cs.CoreV1().ServiceAccounts(m.Namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("create ServiceAccount %s: %w", ScraperServiceAccount, err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ScraperServiceAccount},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: reader},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: ScraperServiceAccount, Namespace: m.Namespace}},
	}
	api := cs.RbacV1().ClusterRoleBindings()
	if err := createOrUpdate(ctx, binding, api.Create, api.Get, api.Update); err != nil {
		return "", err
	}
	return serviceAccountToken(ctx, cs, m.Namespace, ScraperServiceAccount)
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
				if old, err := os.ReadFile(path); err == nil && string(old) == string(v) {
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

// Process returns the replica's running (or last) process, nil before the first start.
func (r *Replica) Process() *Process {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.process
}

// Start starts the replica's process if it is not running, waits until /readyz answers, and
// then makes it an endpoint of the Proxy, as a Service adds a pod once it is ready.
func (r *Replica) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.process != nil {
		if exited, _ := r.process.Exited(); !exited {
			return nil
		}
	}
	p, err := r.m.cp.AddProcessWithEnv(r.Name, r.echo, r.env, r.path, r.args...)
	if err != nil {
		return err
	}
	r.process = p
	if err := WaitHTTP(ctx, p, http.DefaultClient, r.ProbeURL+"/readyz"); err != nil {
		return err
	}
	r.m.Proxy.SetBackend(r.Index, r.WebhookAddr)
	return nil
}

// Stop takes the replica out of the Proxy first (a terminating pod leaves the Service's
// endpoints), then stops it gracefully: SIGTERM, SIGKILL after 5 seconds. The leader releases
// its Lease on SIGTERM.
func (r *Replica) Stop() {
	r.m.Proxy.SetBackend(r.Index, "")
	if p := r.Process(); p != nil {
		p.Stop()
	}
}

// Kill crashes the replica: SIGKILL at once, no Lease release, still an endpoint of the Proxy
// until a connection to it is refused (as until a readiness probe fails).
func (r *Replica) Kill() {
	if p := r.Process(); p != nil {
		p.Kill()
	}
	r.m.Proxy.SetBackend(r.Index, "")
}

// Running reports whether the replica's process is running.
func (r *Replica) Running() bool {
	p := r.Process()
	if p == nil {
		return false
	}
	exited, _ := p.Exited()
	return !exited
}

// Stop stops every replica (see Replica.Stop).
func (m *Manager) Stop() {
	var wg sync.WaitGroup
	for _, r := range m.Replicas {
		wg.Add(1)
		go func() { defer wg.Done(); r.Stop() }()
	}
	wg.Wait()
}

// Start starts every replica that is not running and waits until all are ready.
func (m *Manager) Start(ctx context.Context) error {
	for _, r := range m.Replicas {
		if err := r.Start(ctx); err != nil {
			return err
		}
	}
	return nil
}

// RollingRestart restarts the replicas one at a time, each ready again before the next stops,
// as a Deployment's rolling update with maxUnavailable 0 or a PodDisruptionBudget of
// minAvailable 1 would.
func (m *Manager) RollingRestart(ctx context.Context) error {
	for _, r := range m.Replicas {
		r.Stop()
		if err := r.Start(ctx); err != nil {
			return err
		}
	}
	return nil
}

// LogTails returns the end of every replica's log, n bytes each, for failure messages.
func (m *Manager) LogTails(n int) string {
	var b strings.Builder
	for _, r := range m.Replicas {
		if p := r.Process(); p != nil {
			fmt.Fprintf(&b, "--- %s (%s)\n%s\n", r.Name, p.LogPath, p.LogTail(n))
		}
	}
	return b.String()
}

// metricsClient scrapes the replicas' secured metrics endpoint; its certificate is
// self-signed by controller-runtime (no metrics certificate is configured).
var metricsClient = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
	TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}, //nolint:gosec // self-signed, loopback only
}}

// ScraperToken is the bearer token of ScraperServiceAccount, bound to the metrics-reader
// ClusterRole: what a Prometheus scraping the replicas presents.
func (m *Manager) ScraperToken() string { return m.scraperToken }

// Scrape returns the replica's /metrics text, fetched with token as bearer (empty: the
// scraper's token, bound to metrics-reader), or an error with the HTTP status.
func (r *Replica) Scrape(ctx context.Context, token string) (string, error) {
	if token == "" {
		token = r.m.scraperToken
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, r.MetricsURL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := metricsClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("scrape %s metrics: %w", r.Name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", fmt.Errorf("read %s metrics: %w", r.Name, err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("scrape %s metrics: %s: %s", r.Name, resp.Status, strings.TrimSpace(string(body)))
	}
	return string(body), nil
}

// Metric returns the sum of the samples of the Prometheus metric name whose labels include
// every label="value" pair in labels, as scraped from the replica now with the scraper's
// token.
func (r *Replica) Metric(ctx context.Context, name string, labels ...string) (float64, error) {
	body, err := r.Scrape(ctx, "")
	if err != nil {
		return 0, err
	}
	return SumMetric(body, name, labels...)
}

// Metric returns the sum over the running replicas of Replica.Metric: for counters, the
// whole manager's count (counters restart at zero with a replica).
func (m *Manager) Metric(ctx context.Context, name string, labels ...string) (float64, error) {
	var sum float64
	for _, r := range m.Replicas {
		if !r.Running() {
			continue
		}
		v, err := r.Metric(ctx, name, labels...)
		if err != nil {
			return 0, err
		}
		sum += v
	}
	return sum, nil
}

// Leader returns the replica whose controllers run (leader_election_master_status 1), or nil
// when none leads now.
func (m *Manager) Leader(ctx context.Context) (*Replica, error) {
	for _, r := range m.Replicas {
		if !r.Running() {
			continue
		}
		v, err := r.Metric(ctx, "leader_election_master_status")
		if err != nil {
			return nil, err
		}
		if v == 1 {
			return r, nil
		}
	}
	return nil, nil
}

// SumMetric returns the sum of the samples of the Prometheus metric name in body (the text
// exposition format, as Replica.Scrape returns it) whose labels include every label="value"
// pair in labels; 0 when none does. Errors name a sample line whose value does not parse.
func SumMetric(body, name string, labels ...string) (float64, error) {
	var sum float64
	for _, line := range strings.Split(body, "\n") {
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

// InstallWebhooks creates (or replaces) the webhook configurations of config/default, as
// rendered (so the entries, matchConditions and namespaceSelector under test are the deployed
// ones), with each webhook's clientConfig set to WebhookURL plus the webhook's path, and the
// caBundle the replicas rotate in CertSecretName when that Secret has one already (the
// replicas inject it again in any case).
func (m *Manager) InstallWebhooks(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(m.cp.Config)
	if err != nil {
		return err
	}
	var ca []byte
	if s, err := cs.CoreV1().Secrets(m.Namespace).Get(ctx, CertSecretName, metav1.GetOptions{}); err == nil {
		ca = s.Data["ca.crt"]
	}
	point := func(cc *admissionregistrationv1.WebhookClientConfig) {
		url := m.WebhookURL
		if cc.Service != nil && cc.Service.Path != nil {
			url += *cc.Service.Path
		}
		cc.Service, cc.URL, cc.CABundle = nil, &url, ca
	}
	mut := m.Deployment.Mutating.DeepCopy()
	for i := range mut.Webhooks {
		point(&mut.Webhooks[i].ClientConfig)
	}
	mapi := cs.AdmissionregistrationV1().MutatingWebhookConfigurations()
	if err := mapi.Delete(ctx, mut.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if _, err := mapi.Create(ctx, mut, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create MutatingWebhookConfiguration %s: %w", mut.Name, err)
	}
	val := m.Deployment.Validating.DeepCopy()
	for i := range val.Webhooks {
		point(&val.Webhooks[i].ClientConfig)
	}
	vapi := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	if err := vapi.Delete(ctx, val.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if _, err := vapi.Create(ctx, val, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create ValidatingWebhookConfiguration %s: %w", val.Name, err)
	}
	m.Webhooks = WebhookNames{Mutating: mut.Name, Validating: val.Name}
	return nil
}
