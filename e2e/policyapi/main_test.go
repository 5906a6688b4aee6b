// Package policyapi tests the NetworkPluginPolicy API against a real kube-apiserver and etcd:
// the CRD's schema validation, the generated clientset, informers and listers.
package policyapi

import (
	"os"
	"testing"

	"github.com/okg-extensions/network-plugin-policy/e2e/cluster"
)

// cp is the control plane shared by this package's tests, with crds/ installed.
var cp *cluster.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(cluster.Main(m, &cp, "../../crds"))
}
