package cluster

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of utime and stime in /proc/<pid>/stat (USER_HZ, 100 on Linux).
const clockTick = 10 * time.Millisecond

// ProcUsage is a process's CPU time and resident memory at one moment.
type ProcUsage struct {
	// CPU is user plus system CPU time since the process started.
	CPU time.Duration
	// RSSBytes is the resident set size (VmRSS), bytes.
	RSSBytes int64
}

// ReadProc reads the CPU time of /proc/<pid>/stat and the VmRSS of /proc/<pid>/status.
// Errors: the files cannot be read (the process is gone) or do not have the expected form.
func ReadProc(pid int) (ProcUsage, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ProcUsage{}, err
	}
	cpu, err := parseStatCPU(string(stat))
	if err != nil {
		return ProcUsage{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ProcUsage{}, err
	}
	rss, err := parseStatusRSS(string(status))
	if err != nil {
		return ProcUsage{}, fmt.Errorf("/proc/%d/status: %w", pid, err)
	}
	return ProcUsage{CPU: cpu, RSSBytes: rss}, nil
}

// parseStatCPU returns utime + stime (fields 14 and 15) of a /proc/<pid>/stat line. The
// command name (field 2) is in parentheses and may hold spaces, so fields are counted from
// the last ')'.
func parseStatCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("want \"pid (comm) state ...\", got %.40q", stat)
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state): utime is field 14, f[11]; stime field 15, f[12].
	if len(f) < 13 {
		return 0, fmt.Errorf("want at least 15 fields, got %d", len(f)+2)
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("utime/stime %q: %w", s, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * clockTick, nil
}

// parseStatusRSS returns the VmRSS line of /proc/<pid>/status in bytes ("VmRSS: 123 kB").
func parseStatusRSS(status string) (int64, error) {
	for _, line := range strings.Split(status, "\n") {
		rest, ok := strings.CutPrefix(line, "VmRSS:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("want \"VmRSS: <n> kB\", got %q", line)
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("VmRSS %q: %w", f[0], err)
		}
		return kb * 1024, nil
	}
	return 0, fmt.Errorf("no VmRSS line")
}
