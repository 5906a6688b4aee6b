package cluster

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// KwokNodeAnnotation marks the Node objects kwok manages (kwok runs with
// --manage-nodes-with-annotation-selector on it).
const KwokNodeAnnotation = "kwok.x-k8s.io/node"

// PodCIDR is the range kwok assigns pod IPs from.
const PodCIDR = "10.244.0.0/16"

// nodesReadyTimeout bounds the wait for fake nodes to turn Ready and lose the not-ready taint.
const nodesReadyTimeout = 2 * time.Minute

// NodeAddress returns the InternalIP of fake node i (0-based): 172.18.0.<10+i>, an address in
// a private range that nothing on this machine sends traffic to; it only appears in Node
// status and in network-status annotations.
func NodeAddress(i int) string { return "172.18.0." + strconv.Itoa(10+i) }

// NodeName returns the name of fake node i (0-based): kwok-node-<i>.
func NodeName(i int) string { return "kwok-node-" + strconv.Itoa(i) }

// startWorkloads starts kube-controller-manager, kube-scheduler and kwok, creates n fake
// nodes, and waits until they are Ready and schedulable and the default namespace has its
// default ServiceAccount (pods cannot be created before).
func (c *ControlPlane) startWorkloads(ctx context.Context, n int) error {
	pki := filepath.Join(c.Dir, "pki")
	kcm, err := c.AddProcess(BinKubeControllerManager, nil, filepath.Join(c.BinDir, BinKubeControllerManager),
		"--kubeconfig="+c.KubeconfigPath,
		"--authentication-kubeconfig="+c.KubeconfigPath,
		"--authorization-kubeconfig="+c.KubeconfigPath,
		"--leader-elect=false",
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(FreePort()),
		"--service-account-private-key-file="+filepath.Join(pki, "sa.key"),
		"--root-ca-file="+filepath.Join(pki, "ca.crt"),
		"--controllers=*",
		// Evict nothing: a fake node's heartbeat can lag on a busy 2-core machine.
		"--node-monitor-grace-period=5m",
	)
	if err != nil {
		return err
	}
	sched, err := c.AddProcess(BinKubeScheduler, nil, filepath.Join(c.BinDir, BinKubeScheduler),
		"--kubeconfig="+c.KubeconfigPath,
		"--authentication-kubeconfig="+c.KubeconfigPath,
		"--authorization-kubeconfig="+c.KubeconfigPath,
		"--leader-elect=false",
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(FreePort()),
	)
	if err != nil {
		return err
	}
	stages, err := cloudStages(c.BinDir, c.Dir)
	if err != nil {
		return fmt.Errorf("kwok stages: %w", err)
	}
	kwok, err := c.AddProcess(BinKwok, nil, filepath.Join(c.BinDir, BinKwok),
		"--kubeconfig="+c.KubeconfigPath,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector="+KwokNodeAnnotation+"=fake",
		"--config="+stages,
		"--cidr="+PodCIDR,
		"--node-ip="+NodeAddress(0),
		"--server-address=127.0.0.1:"+strconv.Itoa(FreePort()),
	)
	if err != nil {
		return err
	}

	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	for i := range n {
		if err := createNode(ctx, cs, i); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, nodesReadyTimeout)
	defer cancel()
	err = wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		for _, p := range []*Process{kcm, sched, kwok} {
			if exited, err := p.Exited(); exited {
				return false, fmt.Errorf("%s exited (%v); end of %s:\n%s", p.Name, err, p.LogPath, p.LogTail(4000))
			}
		}
		if _, err := cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{}); err != nil {
			return false, nil
		}
		for i := range n {
			node, err := cs.CoreV1().Nodes().Get(ctx, NodeName(i), metav1.GetOptions{})
			if err != nil || !schedulable(node) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("fake nodes not Ready and schedulable within %s: %w (logs: %s, %s, %s)",
			nodesReadyTimeout, err, kcm.LogPath, sched.LogPath, kwok.LogPath)
	}
	return nil
}

// createNode creates fake node i, managed by kwok, with room for 110 pods.
func createNode(ctx context.Context, cs kubernetes.Interface, i int) error {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        NodeName(i),
			Annotations: map[string]string{KwokNodeAnnotation: "fake", "node.alpha.kubernetes.io/ttl": "0"},
			Labels:      map[string]string{"kubernetes.io/hostname": NodeName(i), "kubernetes.io/os": "linux", "type": "kwok"},
		},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity,
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: NodeAddress(i)},
				{Type: corev1.NodeHostName, Address: NodeName(i)},
			},
		},
	}
	if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create node %s: %w", node.Name, err)
	}
	return nil
}

// schedulable reports whether node is Ready and carries no NoSchedule or NoExecute taint.
func schedulable(node *corev1.Node) bool {
	for _, t := range node.Spec.Taints {
		if t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
			return false
		}
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
