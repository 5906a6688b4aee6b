package realnode

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/okg-extensions/network-plugin-policy/e2e/cluster"
)

// echoPort is the echo game server's UDP and TCP port in its container.
const echoPort = 7777

// testImages are the suite's images: the docker archives to import into each node's
// containerd, and the references of the sandbox and the echo game server.
type testImages struct {
	Archives    []string
	Pause, Echo string
	// Manager is the manager's image (make image's, linux/amd64) and Chart the chart's
	// manifests rendered to run it on the real nodes (renderChart).
	Manager, Chart string
	// Uninstall is Chart without the CRDs: what helm uninstall deletes.
	Uninstall string
}

// buildTestImages builds the suite's images (hack/image -test-images, linux/amd64) into dir.
// Errors carry the builder's output.
func buildTestImages(dir string) (testImages, error) {
	var imgs testImages
	root, err := cluster.RepoRoot()
	if err != nil {
		return imgs, err
	}
	cmd := exec.Command("go", "run", ".", "-test-images", "-platforms", "linux/amd64", "-root", root, "-out", dir)
	cmd.Dir = filepath.Join(root, "hack", "image")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return imgs, fmt.Errorf("build the test images: %w: %s", err, stderr.String())
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		ref := strings.Fields(line)[0]
		switch {
		case strings.Contains(ref, "/npp-pause:"):
			imgs.Pause = ref
		case strings.Contains(ref, "/npp-echo:"):
			imgs.Echo = ref
		}
	}
	imgs.Archives = []string{filepath.Join(dir, "npp-pause-linux-amd64.docker.tar"), filepath.Join(dir, "npp-echo-linux-amd64.docker.tar")}

	// The manager's image, as make image builds it (one platform here).
	cmd = exec.Command("go", "run", ".", "-platforms", "linux/amd64", "-release-platforms", "", "-root", root, "-out", dir)
	cmd.Dir = filepath.Join(root, "hack", "image")
	stderr.Reset()
	cmd.Stderr = &stderr
	if out, err = cmd.Output(); err != nil {
		return imgs, fmt.Errorf("build the manager's image: %w: %s", err, stderr.String())
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if ref := strings.Fields(line)[0]; strings.Contains(ref, "/network-plugin-policy:") {
			imgs.Manager = ref
		}
	}
	imgs.Archives = append(imgs.Archives, filepath.Join(dir, "network-plugin-policy-linux-amd64.docker.tar"))
	imgs.Chart, imgs.Uninstall, err = renderChart(root, dir, imgs.Manager)
	return imgs, err
}

// RealNodeLabel marks the real nodes (kubelet --node-labels); the chart's pods select it, so
// that none lands on the fake node.
const RealNodeLabel = "npp.e2e/real"

// renderChart renders charts/network-plugin-policy (hack/chart -render) as release
// network-plugin-policy with the manager's image ref (never pulled: imported into the
// nodes), on the real nodes, into dir/chart.yaml, and returns that path and the path of the
// same manifests without the CRDs (what helm uninstall deletes).
func renderChart(root, dir, ref string) (string, string, error) {
	repo, tag, _ := strings.Cut(ref, ":")
	values := fmt.Sprintf("image: {repository: %q, tag: %q, pullPolicy: Never}\nnodeSelector: {%q: \"true\"}\n", repo, tag, RealNodeLabel)
	vf := filepath.Join(dir, "values.yaml")
	if err := os.WriteFile(vf, []byte(values), 0o644); err != nil {
		return "", "", err
	}
	cmd := exec.Command("go", "run", ".", "-render", "-root", root, "-values", vf)
	cmd.Dir = filepath.Join(root, "hack", "chart")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", "", fmt.Errorf("render the chart: %w: %s", err, stderr.String())
	}
	path := filepath.Join(dir, "chart.yaml")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		return "", "", err
	}
	var kept []string
	for _, doc := range strings.Split(string(out), "\n---") {
		if !strings.Contains(doc, "kind: CustomResourceDefinition") && strings.TrimSpace(doc) != "" {
			kept = append(kept, doc)
		}
	}
	uninstall := filepath.Join(dir, "uninstall.yaml")
	return path, uninstall, os.WriteFile(uninstall, []byte(strings.Join(kept, "\n---")), 0o644)
}

// TestHostPortGameServersAnswer: HostPort game servers on two real nodes, admitted by the
// manager (two replicas, as deployed) with host ports 8000-8003: gs-a and gs-b on real-0 get
// distinct ports, gs-c on real-1 the same ports as gs-a (the least-used ports come first,
// as in OKG). Each answers a UDP datagram and a TCP line sent from the nodes' network
// namespace to the address and port its network-status announces, with its own name. A
// network declared Ready that does not answer fails the test.
func TestHostPortGameServersAnswer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cp := cluster.StartForTest(t, cluster.Options{FakeNodes: 1})
	if _, err := cluster.InstallCRDs(cp.Config, "../../crds"); err != nil {
		t.Fatal(err)
	}
	provider := filepath.Join(workDir, "provider.toml")
	if err := os.WriteFile(provider, []byte("[kubernetes]\nenable = true\n[kubernetes.hostPort]\nmin_port = 8000\nmax_port = 8003\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mgr, err := cp.StartManager(ctx, cluster.ManagerOptions{ProviderConfig: provider})
	if err != nil {
		t.Fatalf("start manager: %v", err)
	}
	t.Cleanup(mgr.Stop)
	var nodes []*Node
	for i := range 2 {
		n, err := StartNode(ctx, t, cp, i, images.Archives, images.Pause)
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	cs := kubernetes.NewForConfigOrDie(cp.Config)
	ns := "echo"
	gameNamespace(ctx, t, cs, ns)
	order := []string{"gs-a", "gs-b", "gs-c"}
	placements := map[string]string{"gs-a": nodes[0].Name, "gs-b": nodes[0].Name, "gs-c": nodes[1].Name}
	for _, name := range order {
		node := placements[name]
		pod := echoGameServer(ns, name, "Kubernetes-HostPort", fmt.Sprintf(`[{"name":"ContainerPorts","value":"echo:%d/UDP,%d/TCP"}]`, echoPort, echoPort))
		pod.Spec.NodeName = node
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
	}
	hostPorts := map[string][]int32{}
	for _, name := range order {
		p, addr := readyNetwork(ctx, t, cs, ns, name)
		for _, c := range p.Spec.Containers {
			for _, cp := range c.Ports {
				hostPorts[name] = append(hostPorts[name], cp.HostPort)
			}
		}
		for _, proto := range []corev1.Protocol{corev1.ProtocolUDP, corev1.ProtocolTCP} {
			var target string
			for _, p := range addr.Ports {
				if p.Protocol == proto && p.Port != nil {
					target = net.JoinHostPort(addr.IP, p.Port.String())
				}
			}
			if target == "" {
				t.Errorf("%s: network-status announces no %s port: %+v", name, proto, addr)
				continue
			}
			t.Logf("%s on %s: network-status announces %s/%s", name, placements[name], target, proto)
			got, err := echoOnce(ctx, strings.ToLower(string(proto)), target, "ping")
			if err != nil || got != name+": ping" {
				t.Errorf("%s over %s to %s: %q (%v), want %q", name, proto, target, got, err, name+": ping")
			}
		}
	}
	if !slices.Equal(hostPorts["gs-a"], hostPorts["gs-c"]) || slices.Equal(hostPorts["gs-a"], hostPorts["gs-b"]) {
		t.Errorf("host ports %v: want gs-c (real-1) to share gs-a's (real-0), and gs-b (real-0) to have others", hostPorts)
	}
}

// echoOnce sends msg to target over proto (udp or tcp) and returns the first reply line,
// retrying for 20 s (the portmap rules appear a moment after the pod runs).
func echoOnce(ctx context.Context, proto, target, msg string) (string, error) {
	var got string
	var last error
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		c, err := net.DialTimeout(proto, target, 2*time.Second)
		if err != nil {
			last = err
			return false, nil
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := fmt.Fprintf(c, "%s\n", msg); err != nil {
			last = err
			return false, nil
		}
		if proto == "udp" {
			buf := make([]byte, 1500)
			n, err := c.Read(buf)
			if err != nil {
				last = err
				return false, nil
			}
			got = strings.TrimSpace(string(buf[:n]))
			return true, nil
		}
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			last = err
			return false, nil
		}
		got = strings.TrimSpace(line)
		return true, nil
	})
	if err != nil {
		return "", fmt.Errorf("no answer: %v", last)
	}
	return got, nil
}
