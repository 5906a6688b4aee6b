#!/usr/bin/env bash
# Regenerates pkg/client (clientset, listers, informers, applyconfigurations) with
# k8s.io/code-generator's kube_codegen.sh, at the code-generator version pinned in
# hack/tools/go.mod.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
codegen=$(go list -modfile=hack/tools/go.mod -m -f '{{.Dir}}' k8s.io/code-generator)
# shellcheck source=/dev/null
source "$codegen/kube_codegen.sh"

module=github.com/okg-extensions/network-plugin-policy
kube::codegen::gen_client \
  --with-watch \
  --with-applyconfig \
  --output-dir "$root/pkg/client" \
  --output-pkg "$module/pkg/client" \
  --boilerplate "$root/hack/boilerplate.go.txt" \
  "$root/apis"
