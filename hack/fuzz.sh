#!/usr/bin/env bash
# Runs every fuzz target of the network plugin and pod webhook packages for a bounded time each.
# `go test -fuzz` accepts one target per package per run, hence one run per target.
#
#   FUZZTIME=30s hack/fuzz.sh      # default 10s per target
#
# New corpus entries that make a target fail are written under the package's
# testdata/fuzz/<Target>/ by go test; check them in with the fix.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
FUZZTIME="${FUZZTIME:-10s}"

targets=(
  ./pkg/plugin/networkstatus:FuzzDecodeConf
  ./pkg/plugin/networkstatus:FuzzDecodeStatus
  ./pkg/plugin/kubernetes:FuzzHostPortParams
  ./pkg/plugin/kubernetes:FuzzNodePortParams
  ./pkg/plugin/kubernetes:FuzzIngressParams
  ./pkg/webhook/pod:FuzzDirectPatch
)

for t in "${targets[@]}"; do
  pkg="${t%%:*}"
  name="${t##*:}"
  echo "==> ${name} (${pkg}, ${FUZZTIME})"
  go test -run='^$' -fuzz="^${name}\$" -fuzztime="${FUZZTIME}" "${pkg}"
done
