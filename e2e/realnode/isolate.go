package realnode

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
)

// Environment of an isolated run's inner process (the program again, inside the namespace).
const (
	envNetns   = "NPP_REALNODE_NETNS"
	envWorkDir = "NPP_REALNODE_DIR"
)

// Harness is the real-node environment of an isolated run's inner process: its network
// namespace and its working directory (on the host's file system, removed afterwards).
type Harness struct {
	Netns, WorkDir string
	// runs counts StartNode calls: each node gets its own directory and cgroup root.
	runs int
}

// InIsolation returns the harness when this process is the inner run of Isolated, nil when
// it is not.
func InIsolation() *Harness {
	ns := os.Getenv(envNetns)
	if ns == "" {
		return nil
	}
	return &Harness{Netns: ns, WorkDir: os.Getenv(envWorkDir)}
}

// Isolated is the outer run of a program that starts real nodes: it records the host's
// state, creates a network namespace named prefix-<pid> and a working directory, calls
// prepare with the directory (for what must be done on the host, such as building images
// with the Go module proxy; the returned variables are added to the inner run's
// environment), runs this program again with the same arguments inside the namespace
// (InIsolation then returns its Harness), and once that exits removes what it left
// (processes, mounts, cgroups, sysctls, the namespace, the directory). It returns the inner
// run's exit code, or 1 when a step failed or the host is not as it was, and says why on
// standard error. Interrupts (Ctrl-C) go to the inner run; the outer run waits for it and
// cleans up.
func Isolated(prefix string, prepare func(dir string) ([]string, error)) int {
	before, err := CaptureHostState()
	if err != nil {
		fmt.Fprintln(os.Stderr, "realnode:", err)
		return 1
	}
	name := fmt.Sprintf("%s-%d", prefix, os.Getpid())
	_, statErr := os.Stat("/run/netns")
	netnsDirBefore := statErr == nil
	dir, err := os.MkdirTemp("", prefix+"-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "realnode:", err)
		return 1
	}
	code := 1
	env, err := prepare(dir)
	if err == nil {
		err = CreateNetns(name)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "realnode:", err)
	} else {
		cmd := InNetns(name, os.Args[0], os.Args[1:]...)
		cmd.Env = append(append(os.Environ(), envNetns+"="+name, envWorkDir+"="+dir), env...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
		// The terminal sends Ctrl-C to the inner run too; the outer run must outlive it.
		signal.Ignore(os.Interrupt, syscall.SIGTERM)
		code = 0
		if err := cmd.Run(); err != nil {
			code = 1
			if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() >= 0 {
				code = ee.ExitCode()
			} else {
				fmt.Fprintln(os.Stderr, "realnode: run inside the namespace:", err)
			}
		}
		signal.Reset(os.Interrupt, syscall.SIGTERM)
	}
	// Leave the host as found: processes, mounts, cgroups and sysctls, then the namespace.
	var problems []string
	if _, err := os.Stat(NetnsPath(name)); err == nil {
		if err := DeleteNetns(name); err != nil {
			problems = append(problems, err.Error())
		}
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
	if !netnsDirBefore {
		_ = os.Remove("/run/netns") // only when empty
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

// Unsupported says what this machine lacks for real nodes, empty when nothing: Linux, root,
// the tools and Debian packages of hack/install-node-deps.sh, and in binDir the binaries
// make controlplane builds.
func Unsupported(binDir string) string {
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
	for _, b := range []string{"kubelet", "kube-proxy", "containerd", "containerd-shim-runc-v2", "ctr"} {
		if _, err := os.Stat(filepath.Join(binDir, b)); err != nil {
			return b + " in " + binDir + " (make controlplane builds it)"
		}
	}
	return ""
}
