package realnode

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// Environment of the suite's inner run (the test binary again, inside the namespace).
const (
	envNetns   = "NPP_REALNODE_NETNS"
	envWorkDir = "NPP_REALNODE_DIR"
	envImages  = "NPP_REALNODE_IMAGES"
)

// netns and workDir are the namespace and the working directory of the inner run; images
// are the suite's images (testImages), built by the outer run: inside the namespace the Go
// module proxy cannot be reached.
var (
	netns, workDir string
	images         testImages
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

// run is the outer run on the host: it records the host's state, creates the network
// namespace and runs the test binary again inside it, then removes what the suite left
// (processes, mounts, cgroups, sysctls, the namespace) and fails when the host is not as it
// was. Inside, it runs the tests.
func run(m *testing.M) int {
	if ns := os.Getenv(envNetns); ns != "" {
		netns, workDir = ns, os.Getenv(envWorkDir)
		// envtest's CRD installer logs through controller-runtime's logger.
		ctrllog.SetLogger(logr.Discard())
		if err := json.Unmarshal([]byte(os.Getenv(envImages)), &images); err != nil {
			fmt.Fprintln(os.Stderr, "realnode:", envImages+":", err)
			return 1
		}
		return m.Run()
	}
	if why := unsupported(); why != "" {
		fmt.Println("realnode: skipped, the real-node suite needs", why)
		return 0
	}
	before, err := CaptureHostState()
	if err != nil {
		fmt.Fprintln(os.Stderr, "realnode:", err)
		return 1
	}
	name := fmt.Sprintf("npp-rn-%d", os.Getpid())
	dir, err := os.MkdirTemp("", "npp-realnode-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "realnode:", err)
		return 1
	}
	imgs, err := buildTestImages(filepath.Join(dir, "images"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "realnode:", err)
		return 1
	}
	imgsJSON, _ := json.Marshal(imgs)
	if err := CreateNetns(name); err != nil {
		fmt.Fprintln(os.Stderr, "realnode:", err)
		return 1
	}
	cmd := InNetns(name, os.Args[0], os.Args[1:]...)
	cmd.Env = append(os.Environ(), envNetns+"="+name, envWorkDir+"="+dir, envImages+"="+string(imgsJSON))
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	code := 0
	if err := cmd.Run(); err != nil {
		code = 1
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else {
			fmt.Fprintln(os.Stderr, "realnode: run inside the namespace:", err)
		}
	}
	// Leave the host as found: processes, mounts, cgroups and sysctls, then the namespace.
	var problems []string
	if err := DeleteNetns(name); err != nil {
		problems = append(problems, err.Error())
	}
	// `ip netns add` mounts /run/netns on itself the first time; that goes too when it was
	// not there before and no other namespace uses it.
	if !slices.Contains(before.Mounts, "/run/netns") {
		if entries, err := os.ReadDir("/run/netns"); err == nil && len(entries) == 0 {
			if err := unmount("/run/netns"); err != nil {
				problems = append(problems, "unmount /run/netns: "+err.Error())
			}
		}
	}
	if err := before.Restore(dir, CgroupPrefix(name)); err != nil {
		problems = append(problems, err.Error())
	}
	if err := os.RemoveAll(dir); err != nil {
		problems = append(problems, err.Error())
	}
	after, err := CaptureHostState()
	if err != nil {
		problems = append(problems, err.Error())
	} else {
		problems = append(problems, before.Diff(after)...)
	}
	if len(problems) > 0 {
		fmt.Fprintln(os.Stderr, "realnode: the host is not as it was:\n  "+strings.Join(problems, "\n  "))
		return 1
	}
	fmt.Println("realnode: host state restored (sysctls, mounts, cgroups, network namespace)")
	return code
}

// CgroupPrefix is the prefix of the cgroup roots of the nodes of the run in namespace name.
func CgroupPrefix(name string) string { return name + "-" }

// unsupported says what this machine lacks for the suite, empty when nothing.
func unsupported() string {
	if runtime.GOOS != "linux" {
		return "Linux (this is " + runtime.GOOS + ")"
	}
	if os.Geteuid() != 0 {
		return "root"
	}
	for _, tool := range []string{"ip", "nsenter", "iptables"} {
		if _, err := exec.LookPath(tool); err != nil {
			return tool + " (hack/install-node-deps.sh installs it)"
		}
	}
	for _, f := range []string{RuncPath, filepath.Join(CNIBinDir, "bridge"), filepath.Join(CNIBinDir, "portmap"), filepath.Join(CNIBinDir, "host-local")} {
		if _, err := os.Stat(f); err != nil {
			return f + " (hack/install-node-deps.sh installs it)"
		}
	}
	bin := os.Getenv("KUBEBUILDER_ASSETS")
	for _, b := range []string{"kubelet", "kube-proxy", "containerd", "containerd-shim-runc-v2", "ctr"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			return b + " in KUBEBUILDER_ASSETS (" + bin + "; make controlplane builds it)"
		}
	}
	return ""
}
