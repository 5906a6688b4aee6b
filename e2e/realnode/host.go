// Package realnode runs the real-node suite: a kubelet with containerd, runc and the CNI
// plugins, pods from images built by `make image`, all inside a network namespace that the
// suite creates and removes, so that no traffic reaches another address of the host or
// beyond, and the host settings the kubelet and the CNI plugins change are put back.
// It needs Linux and root; elsewhere the suite says so and passes.
package realnode

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Sysctls are the host-wide (not per network namespace) kernel settings the kubelet sets at
// start (kernel.panic, kernel.panic_on_oops, vm.overcommit_memory, and the root key quotas),
// which HostState records and puts back.
var Sysctls = []string{
	"kernel/panic", "kernel/panic_on_oops", "vm/overcommit_memory",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
}

// HostPaths are the host directories the kubelet and containerd create whatever their
// configured directories (the device-plugin socket directory, the shims' sockets, the pods'
// log links, NRI's socket), which HostState records and removes when they were not there
// before.
var HostPaths = []string{
	"/var/lib/kubelet", "/run/containerd", "/run/nri", "/var/log/containers", "/var/log/pods",
	"/etc/cni", "/opt/cni", "/var/lib/cni", "/var/lib/containerd", "/etc/kubernetes",
}

// HostState is what the suite may change on the host: the Sysctls, the mount table, the
// cgroup directories directly under each cgroup v1 hierarchy (the kubelets' cgroup roots)
// and which HostPaths exist.
type HostState struct {
	Sysctls map[string]string
	Mounts  []string
	Cgroups []string
	Paths   []string
}

// CaptureHostState reads the host's state now. Errors come from reading /proc and /sys.
func CaptureHostState() (*HostState, error) {
	s := &HostState{Sysctls: map[string]string{}}
	for _, k := range Sysctls {
		b, err := os.ReadFile(filepath.Join("/proc/sys", k))
		if err != nil {
			return nil, fmt.Errorf("read sysctl %s: %w", k, err)
		}
		s.Sysctls[k] = strings.TrimSpace(string(b))
	}
	mounts, err := mountPoints()
	if err != nil {
		return nil, err
	}
	s.Mounts = mounts
	dirs, err := filepath.Glob("/sys/fs/cgroup/*/*/")
	if err != nil {
		return nil, err
	}
	slices.Sort(dirs)
	s.Cgroups = dirs
	for _, p := range HostPaths {
		if _, err := os.Lstat(p); err == nil {
			s.Paths = append(s.Paths, p)
		}
	}
	return s, nil
}

// mountPoints returns the mount points of the mount table (/proc/self/mountinfo), sorted.
func mountPoints() ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 {
			out = append(out, fields[4])
		}
	}
	slices.Sort(out)
	return out, sc.Err()
}

// Restore puts back the sysctls of s, unmounts every mount point under workDir (deepest
// first), removes the HostPaths that did not exist in s, kills the processes left in the
// cgroup directories whose name starts with cgroupPrefix (containers a run cut short did
// not stop: that is reported as an error), unmounts the CNI network namespaces
// (/run/netns/cni-*) that were not in s, and removes those cgroup directories. It returns
// the errors it met, joined; it carries on after each.
func (s *HostState) Restore(workDir, cgroupPrefix string) error {
	var errs []string
	for k, v := range s.Sysctls {
		if err := os.WriteFile(filepath.Join("/proc/sys", k), []byte(v), 0o644); err != nil {
			errs = append(errs, fmt.Sprintf("restore sysctl %s=%s: %v", k, v, err))
		}
	}
	mounts, err := mountPoints()
	if err != nil {
		errs = append(errs, err.Error())
	}
	slices.SortFunc(mounts, func(a, b string) int { return len(b) - len(a) })
	for _, m := range mounts {
		if workDir != "" && (m == workDir || strings.HasPrefix(m, workDir+"/")) {
			if err := unmount(m); err != nil {
				errs = append(errs, fmt.Sprintf("unmount %s: %v", m, err))
			}
		}
	}
	for _, p := range HostPaths {
		if !slices.Contains(s.Paths, p) {
			if err := os.RemoveAll(p); err != nil {
				errs = append(errs, fmt.Sprintf("remove %s: %v", p, err))
			}
		}
	}
	if cgroupPrefix != "" {
		roots, _ := filepath.Glob("/sys/fs/cgroup/*/" + cgroupPrefix + "*")
		// Containers the kubelets did not stop (a run cut short) still hold their cgroups
		// and, through containerd's CNI, network namespaces: kill them first.
		if killed := killCgroupProcesses(roots); killed > 0 {
			errs = append(errs, fmt.Sprintf("killed %d processes left in the nodes' cgroups", killed))
		}
		for _, m := range mounts {
			if strings.HasPrefix(m, "/run/netns/cni-") && !slices.Contains(s.Mounts, m) {
				if err := unmount(m); err != nil {
					errs = append(errs, fmt.Sprintf("unmount %s: %v", m, err))
				} else {
					_ = os.Remove(m)
				}
			}
		}
		// Children first: a cgroup directory goes only once it is empty.
		for _, root := range roots {
			var dirs []string
			_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
				if err == nil && d.IsDir() {
					dirs = append(dirs, p)
				}
				return nil
			})
			slices.SortFunc(dirs, func(a, b string) int { return len(b) - len(a) })
			for _, d := range dirs {
				if err := os.Remove(d); err != nil && !os.IsNotExist(err) {
					errs = append(errs, fmt.Sprintf("remove cgroup %s: %v", d, err))
				}
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("restore the host: %s", strings.Join(errs, "; "))
	}
	return nil
}

// Diff returns how now differs from s, one line per difference; empty when it does not.
func (s *HostState) Diff(now *HostState) []string {
	var out []string
	for _, k := range Sysctls {
		if s.Sysctls[k] != now.Sysctls[k] {
			out = append(out, fmt.Sprintf("sysctl %s: %s before, %s now", k, s.Sysctls[k], now.Sysctls[k]))
		}
	}
	for _, m := range now.Mounts {
		if !slices.Contains(s.Mounts, m) {
			out = append(out, "mount left: "+m)
		}
	}
	for _, c := range now.Cgroups {
		if !slices.Contains(s.Cgroups, c) {
			out = append(out, "cgroup left: "+c)
		}
	}
	for _, p := range now.Paths {
		if !slices.Contains(s.Paths, p) {
			out = append(out, "directory left: "+p)
		}
	}
	return out
}

// killCgroupProcesses SIGKILLs every process in the cgroup trees under roots and waits up
// to 10 s until they are gone; it returns how many it killed.
func killCgroupProcesses(roots []string) int {
	pids := map[int]bool{}
	for _, root := range roots {
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
				return nil
			}
			b, _ := os.ReadFile(p)
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
					pids[pid] = true
				}
			}
			return nil
		})
	}
	for pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		alive := false
		for pid := range pids {
			if syscall.Kill(pid, 0) == nil {
				alive = true
			}
		}
		if !alive {
			break
		}
	}
	return len(pids)
}
