//go:build tools

// Package containerd pins containerd 2.x (the daemon, its runc shim and ctr) for the real
// node of the local cluster: hack/build-controlplane.sh builds them from this module, so the
// version comes from go.mod and the Go module proxy, like etcd's and kwok's.
package containerd

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
)
