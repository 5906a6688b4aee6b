package realnode

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/okg-extensions/network-plugin-policy/e2e/cluster"
)

// StartKubeProxy starts one kube-proxy (iptables mode) for the suite's namespace, which is
// the real nodes' one network: node ports on every node address (198.18.0.0/24). It changes
// no host-wide setting: the conntrack limits are left alone (0), and the rest of what it
// writes (iptables rules, route_localnet) belongs to the namespace.
// Errors name the step.
func (h *Harness) StartKubeProxy(cp *cluster.ControlPlane) error {
	cfg := fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: %q}
hostnameOverride: %s
mode: iptables
nodePortAddresses: ["198.18.0.0/24"]
healthzBindAddress: 127.0.0.1:%d
metricsBindAddress: 127.0.0.1:%d
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
`, cp.KubeconfigPath, NodeName(0), cluster.FreePort(), cluster.FreePort())
	path := filepath.Join(h.WorkDir, "kube-proxy.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		return err
	}
	if _, err := cp.AddProcess("kube-proxy", nil, filepath.Join(cp.BinDir, "kube-proxy"), "--config="+path, "--v=2"); err != nil {
		return fmt.Errorf("start kube-proxy: %w", err)
	}
	return nil
}
