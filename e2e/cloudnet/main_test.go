// Package cloudnet runs the end-to-end scenarios of the cloud network plugins on a real
// cluster, as e2e/admission runs the others: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler and kwok fake nodes (e2e/cluster), the manager deployed as config/default
// deploys it (two replicas under its own ServiceAccount and RBAC, with the Deployment's
// flags) with every cloud provider enabled, and the cloud in a box (e2e/cloudbox): the
// service controller with a load-balancer cloud that fails on demand, and the stand-ins of
// the providers' network controllers. The tests share the cluster and run one after
// another; each uses its own namespaces.
package cloudnet

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/okg-extensions/network-plugin-policy/e2e/cluster"
	"github.com/okg-extensions/network-plugin-policy/e2e/suite"
)

const (
	// The manager's HostPort range: 4 ports, each shared by at most 2 pods (on different
	// nodes), so 8 pods fill it on the 2 fake nodes.
	minPort, maxPort, podsPerPort = 8000, 8003, 2
	fakeNodes                     = 2
)

var (
	cp  *cluster.ControlPlane
	mgr *cluster.Manager
	cs  kubernetes.Interface
	// rootNS is the manager's namespace, the root namespace of its policies.
	rootNS string
	// managerStarted is when the manager's replicas were all ready.
	managerStarted time.Time
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	return cluster.RunSuite(m, cluster.SuiteOptions{
		Cluster: cluster.Options{FakeNodes: fakeNodes},
		// The project's CRD, OKG's GameServerSet (reduced) for the Fixed load-balancer
		// Services a GameServerSet owns, and stand-ins for Alibaba's PodEIP and PodDNAT.
		CRDDirs: []string{"../../crds", "../takeover/testdata/crds", "../cloudbox/testdata/crds"},
		// allowed_ingress_classes = []: the shared-cluster restriction docs/security.md
		// recommends (the cluster's default IngressClass only), which
		// TestIngressClassNotAllowedRefused exercises.
		ProviderConfig: fmt.Sprintf("[kubernetes]\nenable = true\n[kubernetes.hostPort]\nmin_port = %d\nmax_port = %d\nmax_pods_per_port = %d\n[kubernetes.ingress]\nallowed_ingress_classes = []\n",
			minPort, maxPort, podsPerPort) + cloudProviderConfig,
		Manager: &cluster.ManagerOptions{},
	}, func(s *cluster.Suite) error {
		suite.Use(s)
		cp, mgr = s.ControlPlane, s.Manager
		managerStarted = time.Now()
		cs = kubernetes.NewForConfigOrDie(cp.Config)
		rootNS = mgr.Namespace
		return nil
	})
}

// The suite's helpers (e2e/suite), by the names the tests use.
var (
	newNamespace      = suite.NewNamespace
	kubectl           = suite.Kubectl
	applyPolicy       = suite.ApplyPolicy
	gamePodTemplate   = suite.GamePodTemplate
	createStatefulSet = suite.CreateStatefulSet
	eventually        = suite.Eventually
	listPods          = suite.ListPods
	networkState      = suite.NetworkState
	retryState        = suite.RetryState
	ignoreNotFound    = suite.IgnoreNotFound
	scaleStatefulSet  = suite.ScaleStatefulSet
	buildNppctl       = suite.BuildNppctl
	waitForPolicy     = suite.WaitForPolicy
)

// standIn is one of the box's stand-in controllers, started once for the rest of the run
// by the first test that asks for it.
type standIn[T any] struct {
	once sync.Once
	v    *T
}

// get starts the stand-in (what names it in a failure) with start against the suite's
// cluster the first time and returns it; when that start failed, every test that asks for it
// fails.
func (s *standIn[T]) get(t *testing.T, what string, start func(context.Context, *rest.Config, *T) error) *T {
	t.Helper()
	s.once.Do(func() {
		v := new(T)
		if err := start(context.Background(), cp.Config, v); err != nil {
			t.Fatalf("start %s: %v", what, err)
		}
		s.v = v
	})
	if s.v == nil {
		t.Fatalf("%s did not start", what)
	}
	return s.v
}
