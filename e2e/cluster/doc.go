// Package cluster starts a real local Kubernetes control plane (etcd and kube-apiserver) for
// the e2e tests and for `make run`, and stops every process it started. With
// Options.FakeNodes it is a whole cluster that runs workloads: kube-controller-manager,
// kube-scheduler and kwok with fake nodes that run pods (Running phase, pod IPs, node
// addresses).
//
// Binaries are looked up in this order (see Binaries): the KUBEBUILDER_ASSETS directory; the
// cache under bin/k8s/<version>-<os>-<arch>/ of the repository (setup-envtest's layout); a
// download through setup-envtest (pinned in hack/tools/go.mod) where the network allows; and
// finally a build from the Go module proxy with hack/build-controlplane.sh, at the Kubernetes
// version of go.mod's k8s.io/api (v0.X.Y -> v1.X.Y), with the version stamped in (kwok at the
// version of hack/kwok/go.mod).
//
// Every process runs in its own process group with a parent-death signal (SIGKILL), so a test
// binary that panics or is killed by `go test -timeout` takes its control plane with it; Stop
// sends SIGTERM to each group, waits, then SIGKILLs it.
package cluster
