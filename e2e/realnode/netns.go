package realnode

import (
	"bytes"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
)

// NetnsPath is where `ip netns add` puts the namespace's handle.
func NetnsPath(name string) string { return "/run/netns/" + name }

// CreateNetns makes the network namespace name with its loopback up and nothing else: no
// other interface, no route, so nothing started inside can reach the host's addresses or
// beyond. Errors carry ip's output.
func CreateNetns(name string) error {
	if err := ip("netns", "add", name); err != nil {
		return err
	}
	return ip("-n", name, "link", "set", "lo", "up")
}

// DeleteNetns kills every process left in the namespace name and deletes it (its
// interfaces, routes and iptables rules go with it). Errors carry ip's output.
func DeleteNetns(name string) error {
	out, _ := exec.Command("ip", "netns", "pids", name).Output()
	for _, f := range strings.Fields(string(out)) {
		var pid int
		if _, err := fmt.Sscan(f, &pid); err == nil && pid > 1 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	return ip("netns", "delete", name)
}

// InNetns returns a command that runs name with args inside the network namespace netns
// (nsenter --net: only the network namespace changes; the mounts, /sys and cgroups stay the
// host's, which the kubelet needs).
func InNetns(netns, name string, args ...string) *exec.Cmd {
	return exec.Command("nsenter", append([]string{"--net=" + NetnsPath(netns), "--", name}, args...)...)
}

// ip runs ip with args. Errors carry its output.
func ip(args ...string) error {
	var out bytes.Buffer
	cmd := exec.Command("ip", args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// InterfacePrefix starts the name of every interface the suite makes in its namespace.
const InterfacePrefix = "npp"

// isSuiteInterface reports whether the interface name is one the suite made.
func isSuiteInterface(name string) bool { return strings.HasPrefix(name, InterfacePrefix) }

// LoadBalancerAddresses are the addresses the cloud in a box gives its load balancers
// (e2e/cloudbox: TEST-NET-2).
const LoadBalancerAddresses = "198.51.100.0/24"

// RouteLoadBalancers makes LoadBalancerAddresses local to the current network namespace (a
// local route on lo), so that a client here can send to a load balancer's address: the nat
// rules of kube-proxy (the Services it serves) or of the box's cloud (cloudbox.Cloud.Forward)
// send it on to the pods in OUTPUT, and an address without a rule refuses at once. The route
// goes with the namespace. Errors carry ip's output.
func RouteLoadBalancers() error {
	return ip("route", "replace", "local", LoadBalancerAddresses, "dev", "lo")
}
