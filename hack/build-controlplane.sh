#!/usr/bin/env bash
# Builds the local control-plane binaries from the Go module proxy and caches them under
# bin/k8s/<kube-version>-<os>-<arch>/ (the directory layout setup-envtest uses, so the same
# directory works as KUBEBUILDER_ASSETS).
#
# Usage: hack/build-controlplane.sh [binary ...]
#   binaries: kube-apiserver etcd kube-scheduler kube-controller-manager kwok kubemark
#             kubelet kube-proxy containerd containerd-shim-runc-v2 ctr
#   (default: kube-apiserver etcd)
# A binary already in the cache is not rebuilt. Versions come from hack/controlplane/go.mod
# (k8s.io/kubernetes, generated from the root go.mod), hack/etcd/go.mod (etcd server) and
# hack/kwok/go.mod (kwok). Building kwok also writes kwok-stages.yaml beside it: the node
# (fast, heartbeat) and pod (fast) Stage objects shipped in the kwok module, without which
# kwok does nothing. kubemark is the hollow node (the real kubelet with a fake runtime).
# kubelet and containerd 2.x (hack/containerd/go.mod; static, without the btrfs, devmapper,
# zfs and aufs snapshotters) make the real node; runc and the CNI plugins come from Debian.
# KUBE_MODFILE (default go.mod) picks hack/controlplane's module file: compat.mod builds the
# oldest supported Kubernetes minor (`make test-compat`) into its own bin/k8s/<version> dir.
set -euo pipefail
hack=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$hack/.." && pwd)
modfile=${KUBE_MODFILE:-go.mod}
kube=$(cd "$hack/controlplane" && go list -modfile="$modfile" -m -f '{{.Version}}' k8s.io/kubernetes)
etcd=$(cd "$hack/etcd" && go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)
kwok=$(cd "$hack/kwok" && go list -m -f '{{.Version}}' sigs.k8s.io/kwok)
containerd=$(cd "$hack/containerd" && go list -m -f '{{.Version}}' github.com/containerd/containerd/v2)
dir="$root/bin/k8s/${kube#v}-$(go env GOOS)-$(go env GOARCH)"
mkdir -p "$dir"
[ $# -gt 0 ] || set -- kube-apiserver etcd

major=${kube#v}; minor=${major#*.}; major=${major%%.*}; minor=${minor%%.*}
stamp() { # $1 = version package, $2 = version
  local pkg=$1 v=$2
  echo "-s -w -X ${pkg}.gitVersion=${v} -X ${pkg}.gitMajor=${major} -X ${pkg}.gitMinor=${minor} -X ${pkg}.gitTreeState=clean -X ${pkg}.buildDate=1970-01-01T00:00:00Z"
}

for bin in "$@"; do
  if [ -x "$dir/$bin" ]; then
    echo "cached: $dir/$bin"
    continue
  fi
  start=$(date +%s)
  case "$bin" in
    kube-apiserver|kube-scheduler|kube-controller-manager|kubemark|kubelet|kube-proxy)
      (cd "$hack/controlplane" && go build -modfile="$modfile" -trimpath -mod=mod \
        -ldflags "$(stamp k8s.io/component-base/version "$kube") $(stamp k8s.io/client-go/pkg/version "$kube")" \
        -o "$dir/$bin.tmp" "./$bin") ;;
    containerd|containerd-shim-runc-v2|ctr)
      (cd "$hack/containerd" && CGO_ENABLED=0 go build -trimpath -mod=mod -tags "no_btrfs no_devmapper no_zfs no_aufs" \
        -ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=${containerd}" \
        -o "$dir/$bin.tmp" "github.com/containerd/containerd/v2/cmd/$bin") ;;
    etcd)
      (cd "$hack/etcd" && go build -trimpath -mod=mod -ldflags "-s -w" -o "$dir/$bin.tmp" .) ;;
    kwok)
      (cd "$hack/kwok" && go build -trimpath -mod=mod -ldflags "-s -w" -o "$dir/$bin.tmp" sigs.k8s.io/kwok/cmd/kwok)
      stages=$(cd "$hack/kwok" && go list -mod=mod -m -f '{{.Dir}}' sigs.k8s.io/kwok)/kustomize/stage
      # One YAML stream; "---" between documents, or later ones replace earlier ones.
      for f in "$stages"/node/fast/node-*.yaml "$stages"/node/heartbeat/node-heartbeat.yaml "$stages"/pod/fast/pod-*.yaml; do
        echo "---"; cat "$f"
      done > "$dir/kwok-stages.yaml" ;;
    *) echo "build-controlplane: unknown binary $bin (want kube-apiserver, etcd, kube-scheduler, kube-controller-manager, kwok, kubemark, kubelet, containerd, containerd-shim-runc-v2 or ctr)" >&2; exit 2 ;;
  esac
  mv "$dir/$bin.tmp" "$dir/$bin"
  echo "built: $dir/$bin (kubernetes $kube, etcd $etcd, kwok $kwok, containerd $containerd) in $(( $(date +%s) - start ))s"
done
