package realnode

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/okg-extensions/network-plugin-policy/e2e/cluster"
)

// Paths of the Debian packages the node uses (hack/install-node-deps.sh installs them): runc and
// the CNI plugins.
const (
	RuncPath   = "/usr/sbin/runc"
	CNIBinDir  = "/usr/lib/cni"
	podCIDRFmt = "10.%d.0.0/24"
)

// NodeIP is the address of the i-th real node, on a veth inside the suite's namespace
// (198.18.0.0/15 is for benchmarking, RFC 2544: nothing outside uses it).
func NodeIP(i int) string { return fmt.Sprintf("198.18.0.%d", i+1) }

// NodeName is the name of the i-th real node.
func NodeName(i int) string { return fmt.Sprintf("real-%d", i) }

// RealNodeLabel marks the real nodes (kubelet --node-labels): pods meant for them select it,
// so that none lands on a fake node. With NodeOptions.Taint it is also a NoSchedule taint,
// so that only pods that tolerate it land on them.
const RealNodeLabel = "npp.e2e/real"

// Node is a real node: containerd and a kubelet, started by the control plane (so stopped
// with it), with its own root, state, socket, cgroup root and pod subnet.
type Node struct {
	Name, IP string
	Dir      string
	Socket   string
	link     string
}

// RemoveInterface deletes the node's interface pair: a later node with the same index gets
// the same address. Call it after the node's pods are gone and before its control plane
// stops the kubelet.
func (n *Node) RemoveInterface() { _ = ip("link", "del", n.link) }

// NodeOptions are what a real node starts with.
type NodeOptions struct {
	// Images are docker archives imported into the node's containerd, SandboxImage the
	// sandbox (pause) image's reference among them.
	Images       []string
	SandboxImage string
	// Taint registers the node with the NoSchedule taint RealNodeLabel=true.
	Taint bool
}

// StartNode starts the i-th real node of cp: an interface with NodeIP(i) (the pair stays
// until Node.RemoveInterface or the namespace goes), a cgroup root in every cgroup v1
// hierarchy, containerd with opts.Images imported, the CNI bridge and portmap plugins, and a
// kubelet registered as NodeName(i); it waits until the node is Ready. Each call gets its
// own directory under the harness's work directory and its own cgroup root. Errors name the
// step.
func (h *Harness) StartNode(ctx context.Context, cp *cluster.ControlPlane, i int, opts NodeOptions) (*Node, error) {
	h.runs++
	run := fmt.Sprintf("r%d", h.runs)
	n := &Node{Name: NodeName(i), IP: NodeIP(i), Dir: filepath.Join(h.WorkDir, run, NodeName(i)), link: fmt.Sprintf("%sn%d", InterfacePrefix, i)}
	n.Socket = filepath.Join(n.Dir, "containerd.sock")
	if err := os.MkdirAll(n.Dir, 0o755); err != nil {
		return nil, err
	}
	link := n.link
	for _, args := range [][]string{
		{"link", "add", link, "type", "veth", "peer", "name", link + "p"},
		{"addr", "add", n.IP + "/32", "dev", link},
		{"link", "set", link, "up"},
		{"link", "set", link + "p", "up"},
	} {
		if err := ip(args...); err != nil {
			return nil, fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	cgroupRoot := CgroupPrefix(h.Netns) + run + "-" + n.Name
	if err := makeCgroupRoot(cgroupRoot); err != nil {
		return nil, fmt.Errorf("node %s: %w", n.Name, err)
	}
	if err := n.startContainerd(ctx, cp, opts.SandboxImage); err != nil {
		return nil, err
	}
	for _, img := range opts.Images {
		if out, err := exec.CommandContext(ctx, filepath.Join(cp.BinDir, "ctr"), "--address", n.Socket, "-n", "k8s.io",
			"images", "import", img).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("node %s: import %s: %w: %s", n.Name, img, err, out)
		}
	}
	if err := n.startKubelet(ctx, cp, cgroupRoot, opts.Taint); err != nil {
		return nil, err
	}
	return n, nil
}

// makeCgroupRoot creates the cgroup root in every cgroup v1 hierarchy (the kubelet needs it
// to exist beforehand), with cpuset's cpus and mems copied from the top.
func makeCgroupRoot(name string) error {
	hier, err := filepath.Glob("/sys/fs/cgroup/*")
	if err != nil {
		return err
	}
	for _, h := range hier {
		if st, err := os.Lstat(h); err != nil || !st.IsDir() {
			continue
		}
		d := filepath.Join(h, name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("create cgroup %s: %w", d, err)
		}
		if filepath.Base(h) == "cpuset" {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				b, err := os.ReadFile(filepath.Join(h, f))
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(d, f), b, 0o644); err != nil {
					return fmt.Errorf("write %s: %w", filepath.Join(d, f), err)
				}
			}
		}
	}
	return nil
}

// startContainerd writes containerd's configuration (its own defaults, with this node's
// root, state, sockets, runc, CNI directories and sandbox image, and restrict_oom_score_adj:
// this machine cannot raise a process's oom_score_adj) and starts it.
func (n *Node) startContainerd(ctx context.Context, cp *cluster.ControlPlane, sandboxImage string) error {
	bin := filepath.Join(cp.BinDir, "containerd")
	def, err := exec.CommandContext(ctx, bin, "config", "default").Output()
	if err != nil {
		return fmt.Errorf("node %s: containerd config default: %w", n.Name, err)
	}
	cniConf := filepath.Join(n.Dir, "cni")
	cfg := string(def)
	for _, r := range []struct{ old, new string }{
		{"root = '/var/lib/containerd'", "root = '" + filepath.Join(n.Dir, "root") + "'"},
		{"state = '/run/containerd'", "state = '" + filepath.Join(n.Dir, "state") + "'"},
		{"address = '/run/containerd/containerd.sock.ttrpc'", "address = '" + n.Socket + ".ttrpc'"},
		{"address = '/run/containerd/containerd.sock'", "address = '" + n.Socket + "'"},
		{"sandbox = 'registry.k8s.io/pause:3.10.2'", "sandbox = '" + sandboxImage + "'"},
		{"restrict_oom_score_adj = false", "restrict_oom_score_adj = true"},
		// No NRI: its socket would be a host path (/var/run/nri).
		{"    disable = false\n    socket_path = '/var/run/nri/nri.sock'", "    disable = true\n    socket_path = '" + filepath.Join(n.Dir, "nri.sock") + "'"},
		{"BinaryName = ''", "BinaryName = '" + RuncPath + "'"},
		{"            Root = ''", "            Root = '" + filepath.Join(n.Dir, "runc") + "'"},
		{"bin_dirs = ['/opt/cni/bin']", "bin_dirs = ['" + CNIBinDir + "']"},
		{"conf_dir = '/etc/cni/net.d'", "conf_dir = '" + cniConf + "'"},
	} {
		if !strings.Contains(cfg, r.old) {
			return fmt.Errorf("node %s: containerd's default configuration has no %q", n.Name, r.old)
		}
		cfg = strings.Replace(cfg, r.old, r.new, 1)
	}
	if err := os.MkdirAll(cniConf, 0o755); err != nil {
		return err
	}
	idx := strings.TrimPrefix(n.IP, "198.18.0.")
	conflist := fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "npp",
  "plugins": [
    {"type": "bridge", "bridge": "%sbr%s", "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "dataDir": "%s", "ranges": [[{"subnet": "%s"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}, "conditionsV4": ["-d", "%s"]}
  ]
}`, InterfacePrefix, idx, filepath.Join(n.Dir, "cni-ipam"), fmt.Sprintf(podCIDRFmt, 244+mustAtoi(idx)), n.IP)
	if err := os.WriteFile(filepath.Join(cniConf, "10-npp.conflist"), []byte(conflist), 0o644); err != nil {
		return err
	}
	path := filepath.Join(n.Dir, "containerd.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		return err
	}
	p, err := cp.AddProcessWithEnv(n.Name+"-containerd", nil, []string{"PATH=" + cp.BinDir + ":" + os.Getenv("PATH")}, bin, "--config", path)
	if err != nil {
		return fmt.Errorf("node %s: start containerd: %w", n.Name, err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := os.Stat(n.Socket); err == nil {
			return nil
		}
		if exited, _ := p.Exited(); exited || time.Now().After(deadline) {
			return fmt.Errorf("node %s: containerd not serving %s; end of %s:\n%s", n.Name, n.Socket, p.LogPath, p.LogTail(3000))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func mustAtoi(s string) int { v, _ := strconv.Atoi(s); return v }

// startKubelet writes the kubelet's configuration (cgroup v1 with the cgroupfs driver under
// cgroupRoot, no iptables utility chains, this node's directories and ports) and starts it
// with the control plane's admin kubeconfig, tainted when taint; it returns once the node is
// Ready.
func (n *Node) startKubelet(ctx context.Context, cp *cluster.ControlPlane, cgroupRoot string, taint bool) error {
	cfg := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
failSwapOn: false
cgroupDriver: cgroupfs
cgroupRoot: /%s
makeIPTablesUtilChains: false
containerRuntimeEndpoint: unix://%s
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
address: %s
port: %d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
podLogsDir: %s
resolvConf: ""
serializeImagePulls: false
registerNode: true
evictionHard: {}
enforceNodeAllocatable: []
`, cgroupRoot, n.Socket, n.IP, cluster.FreePort(), cluster.FreePort(), filepath.Join(n.Dir, "pod-logs"))
	path := filepath.Join(n.Dir, "kubelet.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		return err
	}
	args := []string{"--config=" + path, "--kubeconfig=" + cp.KubeconfigPath, "--root-dir=" + filepath.Join(n.Dir, "kubelet"),
		"--node-ip=" + n.IP, "--hostname-override=" + n.Name, "--node-labels=" + RealNodeLabel + "=true", "--cert-dir=" + filepath.Join(n.Dir, "pki"), "--v=2"}
	if taint {
		args = append(args, "--register-with-taints="+RealNodeLabel+"=true:NoSchedule")
	}
	_, err := cp.AddProcess(n.Name+"-kubelet", nil, filepath.Join(cp.BinDir, "kubelet"), args...)
	if err != nil {
		return fmt.Errorf("node %s: start kubelet: %w", n.Name, err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		out, _ := exec.CommandContext(ctx, "kubectl", "--kubeconfig", cp.KubeconfigPath, "get", "node", n.Name,
			"-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`).Output()
		if bytes.Equal(bytes.TrimSpace(out), []byte("True")) {
			return nil
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("node %s not Ready within 2m", n.Name)
}
