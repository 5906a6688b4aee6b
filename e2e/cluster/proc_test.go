package cluster

import (
	"testing"
	"time"
)

func TestParseProc(t *testing.T) {
	cpu, err := parseStatCPU("1234 (my (odd) comm) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 12 0 100 1000 50")
	if err != nil || cpu != 3*time.Second {
		t.Errorf("parseStatCPU = %s, %v; want 3s", cpu, err)
	}
	if _, err := parseStatCPU("garbage"); err == nil {
		t.Error("parseStatCPU accepted a line without a command name")
	}
	rss, err := parseStatusRSS("Name:\tmanager\nVmRSS:\t   97536 kB\nThreads: 12\n")
	if err != nil || rss != 97536*1024 {
		t.Errorf("parseStatusRSS = %d, %v; want %d", rss, err, 97536*1024)
	}
	if _, err := parseStatusRSS("Name: x\n"); err == nil {
		t.Error("parseStatusRSS accepted a status without VmRSS")
	}
}
