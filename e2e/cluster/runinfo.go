package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// Revision returns `git describe --always --dirty` of the working tree (the code a load
// tool's manager is built from), or "unknown" without git.
func Revision(ctx context.Context) string {
	out, err := exec.CommandContext(ctx, "git", "describe", "--always", "--dirty").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

// LoadAverage returns the 1, 5 and 15 minute load averages of /proc/loadavg, such as
// "1.16 0.94 1.78", or "unknown" where there is none (not Linux): load tools report it beside
// their figures.
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	var one, five, fifteen string
	if _, err := fmt.Sscan(string(b), &one, &five, &fifteen); err != nil {
		return "unknown"
	}
	return one + " " + five + " " + fifteen
}
