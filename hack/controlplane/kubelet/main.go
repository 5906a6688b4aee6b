// Command kubelet is the upstream kubelet (k8s.io/kubernetes/cmd/kubelet), built from the Go
// module proxy at the Kubernetes version pinned in ../go.mod, for the real node of the local
// cluster (e2e/realnode): pods run in containerd, from images built by `make image`.
package main

import (
	"context"
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kubelet/app"
)

func main() {
	os.Exit(cli.Run(app.NewKubeletCommand(context.Background())))
}
