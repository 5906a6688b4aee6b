#!/usr/bin/env bash
# Runs every fuzz target of the network plugin and pod webhook packages for a bounded time each.
# `go test -fuzz` accepts one target per package per run, hence one run per target.
#
#   FUZZTIME=30s hack/fuzz.sh      # default 10s per target
#
# FUZZ_TIMEOUT (default 2m, set by the Makefile) is each go test's -timeout. It bounds the
# binary's start and the replay below; with -fuzz, go test runs the seed corpus inside the
# fuzzing, after it has stopped the -timeout timer, so -fuzztime bounds that.
#
# New corpus entries that make a target fail are written under the package's
# testdata/fuzz/<Target>/ by go test; check them in with the fix.
#
# Go 1.26's fuzz coordinator can fail a target with a bare "context deadline exceeded" when
# -fuzztime ends while a worker is busy (golang/go#75804, fixed in Go 1.27), on a loaded
# machine: nothing was found and no input is written. Such a run is replayed
# deterministically (the seed corpus and testdata, no fuzzing) and passes if the replay
# does; every other failure fails.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
FUZZTIME="${FUZZTIME:-10s}"
FUZZ_TIMEOUT="${FUZZ_TIMEOUT:-2m}"

targets=(
  ./pkg/plugin/networkstatus:FuzzDecodeConf
  ./pkg/plugin/networkstatus:FuzzDecodeStatus
  ./pkg/plugin/kubernetes:FuzzHostPortParams
  ./pkg/plugin/kubernetes:FuzzNodePortParams
  ./pkg/plugin/kubernetes:FuzzIngressParams
  ./pkg/webhook/pod:FuzzDirectPatch
  ./pkg/plugin/lb:FuzzLoadBalancerConf
)

for t in "${targets[@]}"; do
  pkg="${t%%:*}"
  name="${t##*:}"
  echo "==> ${name} (${pkg}, ${FUZZTIME})"
  log=$(mktemp)
  if go test -timeout="${FUZZ_TIMEOUT}" -run='^$' -fuzz="^${name}\$" -fuzztime="${FUZZTIME}" "${pkg}" 2>&1 | tee "$log"; then
    rm -f "$log"
    continue
  fi
  if grep -q 'context deadline exceeded' "$log" && ! grep -q -e 'Failing input written' -e 'panic:' -e '_test.go:[0-9]*:' "$log"; then
    rm -f "$log"
    echo "==> ${name}: the fuzz coordinator's deadline race (golang/go#75804), nothing found; replaying the corpus"
    go test -count=1 -timeout="${FUZZ_TIMEOUT}" -run="^${name}\$" "${pkg}"
    continue
  fi
  rm -f "$log"
  exit 1
done
