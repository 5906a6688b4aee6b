// Command kube-proxy is the upstream kube-proxy (k8s.io/kubernetes/cmd/kube-proxy), built
// from the Go module proxy at the Kubernetes version pinned in ../go.mod, for the real nodes
// of the local cluster (e2e/realnode): NodePort game servers are reached through it.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-proxy/app"
)

func main() {
	os.Exit(cli.Run(app.NewProxyCommand()))
}
