package realnode

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
const echoPort = EchoPort

// testImages are the suite's images: the game images (the docker archives to import into
// each node's containerd, among them the sandbox and the echo game server), and the
// manager's.
type testImages struct {
	GameImages
	// Manager is the manager's image and Chart the chart's archive, both of the revision
	// under test as make release builds them (linux/amd64 only): the image named
	// releaseRegistry/network-plugin-policy:<the chart's appVersion>, the chart packaged
	// with that version, so that its defaults name the image.
	Manager, Chart string
	// PreviousRevision is the revision of testdata/upgrade-from, PreviousManager and
	// PreviousChart its image and chart: the release the upgrade starts from.
	PreviousRevision, PreviousManager, PreviousChart string
	// Helm is hack/chart built: it runs helm install, upgrade and uninstall with Helm's code.
	Helm string
}

// buildTestImages builds the suite's images (hack/image -test-images, linux/amd64), the
// manager's image of the revision under test and of the previous release, and hack/chart,
// into dir. Errors carry the builders' output.
func buildTestImages(dir string) (testImages, error) {
	var imgs testImages
	root, err := cluster.RepoRoot()
	if err != nil {
		return imgs, err
	}
	game, err := BuildGameImages(root, dir)
	if err != nil {
		return imgs, err
	}
	imgs.Archives, imgs.Pause, imgs.Echo = game.Archives, game.Pause, game.Echo
	if imgs.Manager, imgs.Chart, err = buildRelease(root, filepath.Join(dir, "release")); err != nil {
		return imgs, err
	}
	imgs.Archives = append(imgs.Archives, filepath.Join(dir, "release", "images", "network-plugin-policy-linux-amd64.docker.tar"))

	if imgs.PreviousRevision, err = upgradeFrom(); err != nil {
		return imgs, err
	}
	prev := filepath.Join(dir, "previous")
	if out, err := exec.Command("git", "clone", "--quiet", "--no-checkout", root, prev).CombinedOutput(); err != nil {
		return imgs, fmt.Errorf("clone the repository for the previous release: %w: %s", err, out)
	}
	if out, err := exec.Command("git", "-C", prev, "checkout", "--quiet", imgs.PreviousRevision).CombinedOutput(); err != nil {
		return imgs, fmt.Errorf("check out the previous release %s (testdata/upgrade-from; a shallow clone lacks it: git fetch --unshallow): %w: %s", imgs.PreviousRevision, err, out)
	}
	prevOut := filepath.Join(dir, "previous-images")
	if imgs.PreviousManager, err = buildManagerImage(prev, prevOut); err != nil {
		return imgs, fmt.Errorf("previous release: %w", err)
	}
	imgs.Archives = append(imgs.Archives, filepath.Join(prevOut, "network-plugin-policy-linux-amd64.docker.tar"))
	imgs.PreviousChart = filepath.Join(prev, "charts", "network-plugin-policy")

	imgs.Helm = filepath.Join(dir, "helm")
	cmd := exec.Command("go", "build", "-o", imgs.Helm, ".")
	cmd.Dir = filepath.Join(root, "hack", "chart")
	if out, err := cmd.CombinedOutput(); err != nil {
		return imgs, fmt.Errorf("build hack/chart: %w: %s", err, out)
	}
	return imgs, nil
}

// releaseRegistry is the registry and path make release names the images for (the
// Makefile's RELEASE_REGISTRY), the chart's default image repository.
const releaseRegistry = "ghcr.io/okg-extensions"

// buildRelease builds the release of the repository at root as make release does, for
// linux/amd64 only and without the kubectl-npp binaries, into dir: the version is the
// chart's appVersion. It returns the manager's image reference and the chart's archive.
// Errors carry the builders' output.
func buildRelease(root, dir string) (string, string, error) {
	b, err := os.ReadFile(filepath.Join(root, "charts", "network-plugin-policy", "Chart.yaml"))
	if err != nil {
		return "", "", err
	}
	m := regexp.MustCompile(`(?m)^appVersion:\s*"?([^"\s]+)"?`).FindSubmatch(b)
	if m == nil {
		return "", "", fmt.Errorf("Chart.yaml: no appVersion")
	}
	version := string(m[1])
	chart, err := goRun(filepath.Join(root, "hack", "chart"), "-root", root, "-package", dir, "-version", version)
	if err != nil {
		return "", "", fmt.Errorf("package the chart: %w", err)
	}
	refs, err := goRun(filepath.Join(root, "hack", "image"), "-platforms", "linux/amd64", "-release-platforms", "", "-root", root,
		"-out", filepath.Join(dir, "images"), "-release-dir", dir, "-registry", releaseRegistry, "-version", version)
	if err != nil {
		return "", "", fmt.Errorf("build the release's images: %w", err)
	}
	want := releaseRegistry + "/network-plugin-policy:" + version
	if !strings.Contains(refs, want+" ") {
		return "", "", fmt.Errorf("the release's images %q: no %s", refs, want)
	}
	return want, strings.TrimSpace(chart), nil
}

// buildManagerImage builds the manager's image of the repository at root as its make image
// does (one platform here, no release binaries) into out and returns its reference.
func buildManagerImage(root, out string) (string, error) {
	refs, err := goRun(filepath.Join(root, "hack", "image"), "-platforms", "linux/amd64", "-release-platforms", "", "-root", root, "-out", out)
	if err != nil {
		return "", fmt.Errorf("build the manager's image of %s: %w", root, err)
	}
	for _, line := range strings.Split(strings.TrimSpace(refs), "\n") {
		if ref := strings.Fields(line)[0]; strings.Contains(ref, "/network-plugin-policy:") {
			return ref, nil
		}
	}
	return "", fmt.Errorf("the manager's image of %s: no reference in hack/image's output %q", root, refs)
}

// upgradeFrom reads the revision in testdata/upgrade-from (its one line that is not a
// comment).
func upgradeFrom() (string, error) {
	b, err := os.ReadFile(filepath.Join("testdata", "upgrade-from"))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			return line, nil
		}
	}
	return "", fmt.Errorf("testdata/upgrade-from: no revision")
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
	provider := filepath.Join(harness.WorkDir, "provider.toml")
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
		nodes = append(nodes, startNode(ctx, t, cp, i))
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
		got, last = Probe(proto, target, msg, 2*time.Second)
		return last == nil, nil
	})
	if err != nil {
		return "", fmt.Errorf("no answer: %v", last)
	}
	return got, nil
}
