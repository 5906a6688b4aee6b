package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// readyTimeout bounds the wait for etcd and kube-apiserver to answer; /readyz answered in
// 2 to 4 seconds on a 2-core machine (LOCAL-CLUSTER.md), more when the machine is busy.
const readyTimeout = 2 * time.Minute

// AdminUser is the user of the kubeconfig that Start writes, in the system:masters group.
const AdminUser = "admin"

// Options configures Start.
type Options struct {
	// Dir is the working directory: data, certificates, logs and the kubeconfig. Empty means
	// a new temporary directory that Stop removes; a given directory is kept.
	Dir string
	// Log receives progress and the binary lookup's messages; nil discards them.
	Log io.Writer
	// APIServerFlags are extra or overriding kube-apiserver flags, name without "--" to value.
	APIServerFlags map[string]string
	// APIServerHosts are further names and addresses (IPs) of kube-apiserver's serving
	// certificate, beside 127.0.0.1 and localhost: the kubernetes Service's cluster IP and
	// a node address when pods reach it (e2e/realnode).
	APIServerHosts []string
	// FakeNodes, when more than 0, makes a cluster that runs workloads: Start also starts
	// kube-controller-manager, kube-scheduler and kwok, and creates this many kwok nodes
	// (NodeName(i), InternalIP NodeAddress(i)) whose pods get IPs from PodCIDR.
	FakeNodes int
	// HollowNodes, when more than 0 (and FakeNodes more than 0), also starts this many
	// kubemark hollow nodes (HollowNodeName(i)): the real kubelet with a fake runtime, which
	// computes pod readiness from readiness gates as production kubelets do (kwok marks every
	// gate True). They are tainted HollowNodeTaint; see HollowNodeToleration.
	HollowNodes int
}

// ControlPlane is a running etcd and kube-apiserver, and with Options.FakeNodes also
// kube-controller-manager, kube-scheduler and kwok.
type ControlPlane struct {
	// Dir is the working directory (see Options.Dir).
	Dir string
	// BinDir holds the binaries the control plane runs.
	BinDir string
	// URL is the kube-apiserver's address, https://127.0.0.1:<port>.
	URL string
	// KubeconfigPath is a kubeconfig for AdminUser (system:masters) at URL.
	KubeconfigPath string
	// Config is the REST config of the same admin user.
	Config *rest.Config
	// PKI is the control plane's CA, to issue serving certificates, for example a webhook's.
	PKI *PKI

	etcdURL string
	// apiServerHosts are Options.APIServerHosts.
	apiServerHosts []string
	// apiServer is the running kube-apiserver, started with apiServerArgs; apiClient reads
	// its /readyz.
	apiServer     *Process
	apiServerArgs []string
	apiClient     *http.Client
	procs         []*Process
	cleanups      []func()
	removeDir     bool
}

// Start starts etcd and kube-apiserver (RBAC authorization, admission webhooks,
// ResourceQuota and OwnerReferencesPermissionEnforcement on, service account keys,
// client-certificate authentication), waits until /readyz answers, and writes a kubeconfig.
// On error everything already started is stopped. The processes are not tied to ctx: call
// Stop.
func Start(ctx context.Context, opts Options) (_ *ControlPlane, err error) {
	log := opts.Log
	if log == nil {
		log = io.Discard
	}
	names := []string{BinKubeAPIServer, BinEtcd}
	if opts.FakeNodes > 0 {
		names = append(names, BinKubeControllerManager, BinKubeScheduler, BinKwok)
		if opts.HollowNodes > 0 {
			names = append(names, BinKubemark)
		}
	}
	bins, err := Binaries(ctx, names, log)
	if err != nil {
		return nil, err
	}
	c := &ControlPlane{Dir: opts.Dir, BinDir: bins, apiServerHosts: opts.APIServerHosts}
	if c.Dir == "" {
		if c.Dir, err = os.MkdirTemp("", "npp-cluster-"); err != nil {
			return nil, fmt.Errorf("create working directory: %w", err)
		}
		c.removeDir = true
	}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	if err := c.startEtcd(ctx); err != nil {
		return nil, err
	}
	if err := c.startAPIServer(ctx, opts.APIServerFlags); err != nil {
		return nil, err
	}
	if opts.FakeNodes > 0 {
		if err := c.startWorkloads(ctx, opts.FakeNodes); err != nil {
			return nil, err
		}
		fmt.Fprintf(log, "cluster: %d fake nodes Ready (kube-controller-manager, kube-scheduler, kwok)\n", opts.FakeNodes)
		if opts.HollowNodes > 0 {
			if err := c.startHollowNodes(ctx, opts.HollowNodes); err != nil {
				return nil, err
			}
			fmt.Fprintf(log, "cluster: %d hollow nodes Ready (kubemark kubelets)\n", opts.HollowNodes)
		}
	}
	fmt.Fprintf(log, "cluster: kube-apiserver ready at %s, kubeconfig %s\n", c.URL, c.KubeconfigPath)
	return c, nil
}

// Processes returns the processes the control plane started, in start order.
func (c *ControlPlane) Processes() []*Process { return append([]*Process(nil), c.procs...) }

// Stop stops every process the control plane started, last started first, and removes the
// working directory if Start created it. It is safe to call more than once.
func (c *ControlPlane) Stop() {
	for _, f := range c.cleanups {
		f()
	}
	for i := len(c.procs) - 1; i >= 0; i-- {
		c.procs[i].Stop()
	}
	if c.removeDir {
		_ = os.RemoveAll(c.Dir)
	}
}

// AddProcess starts a further process that belongs to this control plane (a scheduler, a
// manager, fake nodes), logging to <Dir>/<name>.log and, when echo is not nil, to echo too;
// Stop stops it with the others.
func (c *ControlPlane) AddProcess(name string, echo io.Writer, path string, args ...string) (*Process, error) {
	return c.AddProcessWithEnv(name, echo, nil, path, args...)
}

// AddProcessWithEnv is AddProcess with env as the process's whole environment (nil: this
// process's own).
func (c *ControlPlane) AddProcessWithEnv(name string, echo io.Writer, env []string, path string, args ...string) (*Process, error) {
	p, err := startProcess(name, path, args, env, c.Dir, echo)
	if err != nil {
		return nil, err
	}
	c.procs = append(c.procs, p)
	return p, nil
}

func (c *ControlPlane) startEtcd(ctx context.Context) error {
	client, peer := FreePort(), FreePort()
	if client == 0 || peer == 0 {
		return fmt.Errorf("find free ports for etcd")
	}
	clientURL := "http://127.0.0.1:" + strconv.Itoa(client)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peer)
	p, err := c.AddProcess(BinEtcd, nil, filepath.Join(c.BinDir, BinEtcd),
		"--name=default",
		"--data-dir="+filepath.Join(c.Dir, "etcd"),
		"--listen-client-urls="+clientURL, "--advertise-client-urls="+clientURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=default="+peerURL,
		"--unsafe-no-fsync=true", "--log-level=warn",
	)
	if err != nil {
		return err
	}
	c.etcdURL = clientURL
	return WaitHTTP(ctx, p, http.DefaultClient, clientURL+"/health")
}

func (c *ControlPlane) startAPIServer(ctx context.Context, extra map[string]string) error {
	pki, err := NewPKI()
	if err != nil {
		return err
	}
	c.PKI = pki
	serving, servingKey, err := pki.IssueServing(append([]string{"127.0.0.1", "localhost"}, c.apiServerHosts...)...)
	if err != nil {
		return err
	}
	admin, adminKey, err := pki.IssueClient(AdminUser, "system:masters")
	if err != nil {
		return err
	}
	saKey, err := newServiceAccountKey()
	if err != nil {
		return err
	}
	pkiDir := filepath.Join(c.Dir, "pki")
	if err := os.MkdirAll(pkiDir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", pkiDir, err)
	}
	if err := writeFiles(pkiDir, map[string][]byte{
		"ca.crt": pki.CACertPEM, "apiserver.crt": serving, "apiserver.key": servingKey,
		"admin.crt": admin, "admin.key": adminKey, "sa.key": saKey,
	}); err != nil {
		return err
	}
	port := FreePort()
	if port == 0 {
		return fmt.Errorf("find a free port for kube-apiserver")
	}
	c.URL = "https://127.0.0.1:" + strconv.Itoa(port)
	flags := map[string]string{
		"etcd-servers":                     c.etcdURL,
		"bind-address":                     "127.0.0.1",
		"advertise-address":                "127.0.0.1",
		"endpoint-reconciler-type":         "none", // a loopback advertise address is refused by the other reconcilers
		"secure-port":                      strconv.Itoa(port),
		"cert-dir":                         pkiDir,
		"tls-cert-file":                    filepath.Join(pkiDir, "apiserver.crt"),
		"tls-private-key-file":             filepath.Join(pkiDir, "apiserver.key"),
		"client-ca-file":                   filepath.Join(pkiDir, "ca.crt"),
		"service-account-key-file":         filepath.Join(pkiDir, "sa.key"),
		"service-account-signing-key-file": filepath.Join(pkiDir, "sa.key"),
		"service-account-issuer":           "https://kubernetes.default.svc.cluster.local",
		"authorization-mode":               "RBAC",
		// OwnerReferencesPermissionEnforcement as OpenShift enables it: an owner reference
		// with blockOwnerDeletion needs update on the owner's finalizers.
		"enable-admission-plugins":     "MutatingAdmissionWebhook,ValidatingAdmissionWebhook,ResourceQuota,OwnerReferencesPermissionEnforcement",
		"service-cluster-ip-range":     "10.96.0.0/16",
		"service-node-port-range":      "30000-32767",
		"allow-privileged":             "true",
		"enable-priority-and-fairness": "false",
		"profiling":                    "false",
	}
	for k, v := range extra {
		flags[k] = v
	}
	args := make([]string, 0, len(flags))
	for _, k := range slices.Sorted(maps.Keys(flags)) {
		args = append(args, "--"+k+"="+flags[k])
	}
	p, err := c.AddProcess(BinKubeAPIServer, nil, filepath.Join(c.BinDir, BinKubeAPIServer), args...)
	if err != nil {
		return err
	}
	c.apiServer, c.apiServerArgs = p, args

	c.Config = &rest.Config{
		Host: c.URL,
		TLSClientConfig: rest.TLSClientConfig{
			CAData: pki.CACertPEM, CertData: admin, KeyData: adminKey,
		},
		QPS: 200, Burst: 400,
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pki.CACertPEM)
	pair, err := tls.X509KeyPair(admin, adminKey)
	if err != nil {
		return fmt.Errorf("load admin certificate: %w", err)
	}
	httpClient := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12,
	}}}
	c.apiClient = httpClient
	if err := WaitHTTP(ctx, p, httpClient, c.URL+"/readyz"); err != nil {
		return err
	}
	c.KubeconfigPath = filepath.Join(c.Dir, "kubeconfig")
	return writeKubeconfig(c.KubeconfigPath, c.URL, pki.CACertPEM, admin, adminKey)
}

// RestartAPIServer stops the kube-apiserver (SIGTERM, SIGKILL after 5 s), leaves the API
// away for down, then starts it again with the same flags, port and certificates and waits
// until /readyz answers. etcd keeps every object; clients reconnect on their own. The new
// process logs to <Dir>/kube-apiserver-restarted.log.
func (c *ControlPlane) RestartAPIServer(ctx context.Context, down time.Duration) error {
	c.apiServer.Stop()
	select {
	case <-time.After(down):
	case <-ctx.Done():
		return ctx.Err()
	}
	p, err := c.AddProcess(BinKubeAPIServer+"-restarted", nil, filepath.Join(c.BinDir, BinKubeAPIServer), c.apiServerArgs...)
	if err != nil {
		return err
	}
	c.apiServer = p
	return WaitHTTP(ctx, p, c.apiClient, c.URL+"/readyz")
}

// writeKubeconfig writes a kubeconfig with one cluster, user and context, all named "local".
func writeKubeconfig(path, url string, ca, cert, key []byte) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: url, CertificateAuthorityData: ca}
	cfg.AuthInfos["local"] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}
	cfg.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "local", Namespace: "default"}
	cfg.CurrentContext = "local"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}

// WaitHTTP polls url with client until it answers 200 OK, and fails when p exits first, ctx
// ends or 2 minutes pass; the error holds the end of p's log.
func WaitHTTP(ctx context.Context, p *Process, client *http.Client, url string) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var last string // what the last poll got; each poll sets it before it is read
	for {
		if exited, err := p.Exited(); exited {
			return fmt.Errorf("%s exited before it was ready (%v); end of %s:\n%s", p.Name, err, p.LogPath, p.LogTail(4000))
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := client.Do(req); err != nil {
			last = err.Error()
		} else {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("%s: %s", resp.Status, body)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready at %s within %s (last: %s); end of %s:\n%s",
				p.Name, url, readyTimeout, last, p.LogPath, p.LogTail(4000))
		case <-tick.C:
		}
	}
}

// Ports handed out by FreePort: below the kernel's ephemeral range (ip_local_port_range,
// 32768-60999 by default), so that no outgoing connection of another process takes one
// between FreePort and the bind of the process it is for (a kube-scheduler that exited
// with "address already in use" did), and below the NodePort range (30000-32767).
const (
	freePortMin = 10000
	freePortMax = 29999
)

var (
	freePortMu   sync.Mutex
	freePortNext = freePortMin + rand.IntN(freePortMax-freePortMin)
)

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago, or 0 when none could
// be had. Ports come from 10000-29999, round-robin from a random start, so that one process
// does not hand out a port twice while it is still in use.
func FreePort() int {
	freePortMu.Lock()
	defer freePortMu.Unlock()
	for range freePortMax - freePortMin + 1 {
		port := freePortNext
		freePortNext++
		if freePortNext > freePortMax {
			freePortNext = freePortMin
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue
		}
		_ = l.Close()
		return port
	}
	return 0
}
