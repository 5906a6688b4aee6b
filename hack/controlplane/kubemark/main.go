// Command kubemark is upstream kubemark's hollow node (k8s.io/kubernetes/cmd/kubemark), built
// from the Go module proxy at the Kubernetes version pinned in ../go.mod. With --morph=kubelet
// it is the real kubelet code with a fake container runtime, cadvisor and container manager:
// e2e/cluster runs it as a node whose kubelet computes pod readiness (readiness gates
// included), which kwok does not.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kubemark/app"
)

func main() {
	os.Exit(cli.Run(app.NewHollowNodeCommand()))
}
