package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// helperEnv makes the test binary act as a process that starts a control plane in the
// directory the variable names, prints the processes' IDs and then waits to be killed
// (TestHelperStartAndHang).
const helperEnv = "NPP_CLUSTER_TEST_HELPER"

func TestStartServesAndStopLeavesNoProcess(t *testing.T) {
	c, err := Start(context.Background(), Options{Log: testWriter{t}})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(c.Stop)

	// The kubeconfig works for an admin (system:masters) through RBAC.
	cfg, err := clientcmd.BuildConfigFromFlags("", c.KubeconfigPath)
	if err != nil {
		t.Fatalf("load kubeconfig: %v", err)
	}
	cs := kubernetes.NewForConfigOrDie(cfg)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "smoke"}}
	if _, err := cs.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace through the kubeconfig: %v", err)
	}
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		t.Fatalf("server version: %v", err)
	}
	// The binaries' directory is named <version>-<os>-<arch>: the go.mod's version, or the
	// oldest supported one under `make test-compat`.
	want, _, _ := strings.Cut(filepath.Base(c.BinDir), "-")
	if want == "" {
		root, err := RepoRoot()
		if err != nil {
			t.Fatal(err)
		}
		if want, err = KubeVersion(root); err != nil {
			t.Fatal(err)
		}
	}
	if v.GitVersion != "v"+want {
		t.Errorf("server gitVersion = %q, want %q (the version must be stamped into the build)", v.GitVersion, "v"+want)
	}

	procs := c.Processes()
	if len(procs) != 2 {
		t.Fatalf("Processes() = %d, want 2 (etcd, kube-apiserver)", len(procs))
	}
	c.Stop()
	for _, p := range procs {
		if alive(p.Pid()) {
			t.Errorf("%s (pid %d) still runs after Stop", p.Name, p.Pid())
		}
		if err := syscall.Kill(-p.Pid(), 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process group %d of %s still has members after Stop (kill: %v)", p.Pid(), p.Name, err)
		}
	}
	if _, err := os.Stat(c.Dir); !os.IsNotExist(err) {
		t.Errorf("working directory %s still exists after Stop (stat: %v)", c.Dir, err)
	}
}

// TestKilledTestBinaryLeavesNoProcess starts a control plane in a child test binary, then
// SIGKILLs that binary as `go test -timeout` or a crash would end it, without any cleanup:
// the control plane's processes must die with it.
func TestKilledTestBinaryLeavesNoProcess(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperStartAndHang$", "-test.v")
	// The killed child cannot remove its working directory: give it one this test removes.
	cmd.Env = append(os.Environ(), helperEnv+"="+t.TempDir())
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start helper: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	var pids []int
	scanner := bufio.NewScanner(stdout)
	for scanner.Scan() {
		if rest, ok := strings.CutPrefix(scanner.Text(), "PIDS "); ok {
			for _, f := range strings.Fields(rest) {
				pid, err := strconv.Atoi(f)
				if err != nil {
					t.Fatalf("bad pid %q from helper", f)
				}
				pids = append(pids, pid)
			}
			break
		}
	}
	if len(pids) != 2 {
		t.Fatalf("helper reported pids %v, want 2 (etcd, kube-apiserver)", pids)
	}
	for _, pid := range pids {
		if !alive(pid) {
			t.Fatalf("pid %d is not running before the helper is killed", pid)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill helper: %v", err)
	}
	_ = cmd.Wait()

	deadline := time.Now().Add(15 * time.Second)
	for _, pid := range pids {
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		if alive(pid) {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			t.Errorf("pid %d still runs 15s after the test binary that started it was killed", pid)
		}
	}
}

// TestHelperStartAndHang is the child of TestKilledTestBinaryLeavesNoProcess; it does
// nothing in a normal run.
func TestHelperStartAndHang(t *testing.T) {
	dir := os.Getenv(helperEnv)
	if dir == "" {
		t.Skip("helper for TestKilledTestBinaryLeavesNoProcess")
	}
	c, err := Start(context.Background(), Options{Log: os.Stderr, Dir: dir})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	var pids []string
	for _, p := range c.Processes() {
		pids = append(pids, strconv.Itoa(p.Pid()))
	}
	fmt.Printf("PIDS %s\n", strings.Join(pids, " "))
	select {} // killed by the parent test
}

// alive reports whether pid exists and is not a zombie (a zombie has exited and only waits
// to be reaped by its new parent).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state is the field after the parenthesised command name.
	if i := strings.LastIndexByte(string(stat), ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2] != 'Z'
	}
	return true
}
