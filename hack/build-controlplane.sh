#!/usr/bin/env bash
# Builds the local control-plane binaries from the Go module proxy and caches them under
# bin/k8s/<kube-version>-<os>-<arch>/ (the directory layout setup-envtest uses, so the same
# directory works as KUBEBUILDER_ASSETS).
#
# Usage: hack/build-controlplane.sh [binary ...]
#   binaries: kube-apiserver etcd kube-scheduler kube-controller-manager (default: kube-apiserver etcd)
# A binary already in the cache is not rebuilt. Versions come from hack/controlplane/go.mod
# (k8s.io/kubernetes, generated from the root go.mod) and hack/etcd/go.mod (etcd server).
set -euo pipefail
hack=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$hack/.." && pwd)
kube=$(cd "$hack/controlplane" && go list -m -f '{{.Version}}' k8s.io/kubernetes)
etcd=$(cd "$hack/etcd" && go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)
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
    kube-apiserver|kube-scheduler|kube-controller-manager)
      (cd "$hack/controlplane" && go build -trimpath -mod=mod \
        -ldflags "$(stamp k8s.io/component-base/version "$kube") $(stamp k8s.io/client-go/pkg/version "$kube")" \
        -o "$dir/$bin.tmp" "./$bin") ;;
    etcd)
      (cd "$hack/etcd" && go build -trimpath -mod=mod -ldflags "-s -w" -o "$dir/$bin.tmp" .) ;;
    *) echo "build-controlplane: unknown binary $bin (want kube-apiserver, etcd, kube-scheduler or kube-controller-manager)" >&2; exit 2 ;;
  esac
  mv "$dir/$bin.tmp" "$dir/$bin"
  echo "built: $dir/$bin ($kube / etcd $etcd) in $(( $(date +%s) - start ))s"
done
