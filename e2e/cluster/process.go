package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// stopGrace is how long Stop waits after SIGTERM before it SIGKILLs a process group.
// kube-apiserver shuts down gracefully and takes several seconds (LOCAL-CLUSTER.md).
const stopGrace = 5 * time.Second

// Process is one child process of the control plane, in its own process group, with its
// standard output and error in LogPath.
type Process struct {
	// Name is the binary's short name, such as "kube-apiserver".
	Name string
	// LogPath is the file that holds the process's standard output and error.
	LogPath string

	cmd  *exec.Cmd
	done chan struct{}
	err  error // exit status, valid once done is closed
}

// StartProcess starts path with args in a new process group, with SIGKILL as its
// parent-death signal (so it dies with the process that started it even when that one
// crashes or is killed), its output appended to <logDir>/<name>.log and, when echo is not
// nil, copied to echo as well.
func StartProcess(name, path string, args []string, logDir string, echo io.Writer) (*Process, error) {
	return startProcess(name, path, args, nil, logDir, echo)
}

// startProcess is StartProcess with env as the process's environment (nil: this process's).
func startProcess(name, path string, args, env []string, logDir string, echo io.Writer) (*Process, error) {
	logPath := filepath.Join(logDir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open log of %s: %w", name, err)
	}
	cmd := exec.Command(path, args...)
	cmd.Env = env
	var out io.Writer = logFile
	if echo != nil {
		out = io.MultiWriter(logFile, echo)
	}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Process{Name: name, LogPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// Pid returns the process ID, which is also its process group ID.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited reports whether the process has ended, and its exit error if so.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// Stop sends SIGTERM to the process group, waits up to 5 seconds, then sends SIGKILL to the
// group and waits for the process to be reaped. It is safe to call more than once.
func (p *Process) Stop() {
	pgid := p.Pid()
	if exited, _ := p.Exited(); !exited {
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(stopGrace):
		}
	}
	// Kill the whole group even if the leader is gone: a child it forked may live on.
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		_ = p.cmd.Process.Kill()
	}
	<-p.done
}

// Kill sends SIGKILL to the process group at once, as a crash or an OOM kill would end it,
// and waits for the process to be reaped. It is safe to call more than once.
func (p *Process) Kill() {
	if err := syscall.Kill(-p.Pid(), syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		_ = p.cmd.Process.Kill()
	}
	<-p.done
}

// LogTail returns the last n bytes of the process's log, for error messages.
func (p *Process) LogTail(n int) string {
	data, err := os.ReadFile(p.LogPath)
	if err != nil {
		return fmt.Sprintf("(log %s unreadable: %v)", p.LogPath, err)
	}
	if len(data) > n {
		data = data[len(data)-n:]
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			data = data[i+1:]
		}
	}
	return string(data)
}
