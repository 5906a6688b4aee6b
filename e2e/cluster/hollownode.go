package cluster

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// BinKubemark is kubemark, whose hollow node (--morph=kubelet) is the real kubelet code with
// a fake container runtime, cadvisor and container manager; built from the Go module proxy by
// hack/build-controlplane.sh (about 2 minutes warm, 131 MB).
const BinKubemark = "kubemark"

// HollowNodeTaint is the taint every hollow node registers with (NoSchedule): only pods that
// tolerate it run there. Every pod on a hollow node gets the same IP (HollowPodIP), which
// would confuse tests that need distinct pod IPs; those run on the kwok nodes.
const HollowNodeTaint = "npp.e2e/hollow"

// HollowNodeAddress is the InternalIP a hollow node reports (kubemark's fixed 192.0.2.2, an
// address of TEST-NET-1).
const HollowNodeAddress = "192.0.2.2"

// HollowPodIP is the IP the hollow node's fake runtime gives every pod (kubemark's
// 192.168.192.168).
const HollowPodIP = "192.168.192.168"

// hollowNodeReadyTimeout bounds the wait for a hollow node to register and turn Ready; it
// does so in seconds on an idle machine.
const hollowNodeReadyTimeout = 2 * time.Minute

// HollowNodeName returns the name of hollow node i (0-based): hollow-node-<i>.
func HollowNodeName(i int) string { return "hollow-node-" + strconv.Itoa(i) }

// HollowNodeToleration is the toleration a pod needs to run on a hollow node.
var HollowNodeToleration = corev1.Toleration{Key: HollowNodeTaint, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}

// startHollowNodes starts n kubemark hollow kubelets as the admin user, named HollowNodeName(i)
// and labelled HollowNodeTaint=true and tainted with it, and waits until their Nodes are Ready.
// The kubelets' own ports are free loopback ports; their read-only port is off.
func (c *ControlPlane) startHollowNodes(ctx context.Context, n int) error {
	procs := make([]*Process, 0, n)
	for i := range n {
		name := HollowNodeName(i)
		p, err := c.AddProcess(name, nil, filepath.Join(c.BinDir, BinKubemark),
			"--morph=kubelet",
			"--name="+name,
			"--kubeconfig="+c.KubeconfigPath,
			"--use-host-image-service=false",
			"--kubelet-port="+strconv.Itoa(FreePort()),
			"--kubelet-read-only-port=0",
			"--node-labels="+HollowNodeTaint+"=true",
			"--register-with-taints="+HollowNodeTaint+"=true:NoSchedule",
		)
		if err != nil {
			return err
		}
		procs = append(procs, p)
	}
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, hollowNodeReadyTimeout)
	defer cancel()
	err = wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		for _, p := range procs {
			if exited, err := p.Exited(); exited {
				return false, fmt.Errorf("%s exited (%v); end of %s:\n%s", p.Name, err, p.LogPath, p.LogTail(4000))
			}
		}
		for i := range n {
			node, err := cs.CoreV1().Nodes().Get(ctx, HollowNodeName(i), metav1.GetOptions{})
			if err != nil || !nodeReady(node) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("hollow nodes not Ready within %s: %w", hollowNodeReadyTimeout, err)
	}
	return nil
}

// nodeReady reports whether node's Ready condition is True.
func nodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
