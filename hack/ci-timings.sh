#!/usr/bin/env bash
# Measures `bash .ci/run` as CI runs it, on a clean clone of HEAD: first cold (GOCACHE and
# GOMODCACHE are new empty directories, as on a new CI machine: every module downloaded,
# every package compiled, the control-plane binaries built), then warm (the same clone and
# the caches and bin/ the cold run filled). It prints, for both runs, each make target's
# wall time, each test binary's time as go test reported it (its `ok` line) and the whole
# run: the tables of docs/development.md#time-budget.
#
#   hack/ci-timings.sh [dir]   # dir: a new or empty directory for the clone, the caches
#                              # and the logs (default: a new directory under /tmp)
#   hack/ci-timings.sh -summary dir   # print the tables again from dir's logs (and write
#                                     # dir/cold.sum and dir/warm.sum again)
#
# The machine's own Go caches are never read or written. Each run's log is dir/cold.log and
# dir/warm.log, every line stamped with the seconds since that run started; make's --trace
# (through MAKEFLAGS, so .ci/run is run unchanged) marks where each target starts. The runs
# get the rest of the environment as CI does (GOFLAGS, GOPROXY, ...); the Debian packages
# that make controlplane installs are the machine's, so that step is cold only on a new
# machine. It needs what .ci/run needs: root for the real-node suite, and about 15 GB free
# while it runs (the caches, the clone and its bin/, removed at the end). The cold run takes
# about 40 minutes on 2 cores and the warm one about 20 more; let nothing else run on the
# machine meanwhile, or the figures say nothing.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

# summary LOG prints one line per make target in the order they ran, "<target> <wall
# seconds> <longest test binary's seconds> <its package>" ("-" where the target ran no test
# binary), then one line per test binary, "<target>:<package>[#n] <seconds>" (#n for its nth
# run within the target, as hack/fuzz.sh's), then "total <seconds>".
summary() {
  awk '
    function flush(now) { if (cur != "") { t[cur] += now - since; if (!(cur in seen)) { seen[cur] = 1; order[n++] = cur } } }
    { now = $1 + 0; last = now }
    match($0, /Makefile:[0-9]+: (update target|target) .[^ ]+. (does not exist|due to:)/) {
      name = substr($0, RSTART, RLENGTH); sub(/^Makefile:[0-9]+: (update target|target) ./, "", name); sub(/. (does not exist|due to:)$/, "", name)
      sub(/.*\/bin\//, "bin/", name)
      if (cur == "") { t["(start)"] = now; order[n++] = "(start)" }
      flush(now); cur = name; since = now; next
    }
    $2 == "ok" && $4 ~ /^[0-9.]+s$/ {
      sub(/s$/, "", $4); pkg = $3; sub(/^github.com\/okg-extensions\/network-plugin-policy\//, "", pkg)
      k = cur ":" pkg; runs[k]++; if (runs[k] > 1) k = k "#" runs[k]
      gt[k] = $4 + 0; gorder[gn++] = k
      if (!(cur in mx) || $4 + 0 > mx[cur]) { mx[cur] = $4 + 0; mxp[cur] = pkg }
    }
    END {
      flush(last)
      for (i = 0; i < n; i++) { c = order[i]; if (c in mx) printf "%s %d %.0f %s\n", c, t[c], mx[c], mxp[c]; else printf "%s %d - -\n", c, t[c] }
      for (i = 0; i < gn; i++) printf "%s %.0f\n", gorder[i], gt[gorder[i]]
      printf "total %d\n", last
    }' "$1"
}

# table prints, from dir's cold and warm logs, the markdown tables of the make targets (wall
# time, the cold run's longest test binary and that binary's run in both) and of the test
# binaries that ran 10 s or more in either run. It writes dir/cold.sum and dir/warm.sum.
table() {
  local dir=$1
  summary "$dir/cold.log" >"$dir/cold.sum"
  if [ -s "$dir/warm.log" ]; then summary "$dir/warm.log" >"$dir/warm.sum"; else : >"$dir/warm.sum"; fi
  echo "| make target | cold (s) | warm (s) | longest test binary | its run, cold (s) | warm (s) |"
  echo "| --- | ---: | ---: | --- | ---: | ---: |"
  awk 'FILENAME == ARGV[1] { if (NF == 4) w[$1] = $2; else if (NF == 2) wb[$1] = $2; next }
       NF == 4 { b = ($4 == "-") ? "" : "`" $4 "`"; printf "| `%s` | %s | %s | %s | %s | %s |\n", $1, $2, w[$1], b, ($3 == "-") ? "" : $3, ($3 == "-") ? "" : wb[$1 ":" $4] }
       $1 == "total" { printf "| **`bash .ci/run`** | **%s** | **%s** | | | |\n", $2, wb["total"] }' \
    "$dir/warm.sum" "$dir/cold.sum"
  echo
  echo "| test binary (make target:package) | cold (s) | warm (s) |"
  echo "| --- | ---: | ---: |"
  awk 'FILENAME == ARGV[1] { if (NF == 2) w[$1] = $2; next }
       NF == 2 && $1 != "total" && ($2 >= 10 || w[$1] >= 10) { printf "| `%s` | %s | %s |\n", $1, $2, w[$1] }' \
    "$dir/warm.sum" "$dir/cold.sum"
}

if [ "${1:-}" = "-summary" ]; then
  [ -n "${2:-}" ] || { echo "usage: hack/ci-timings.sh -summary DIR" >&2; exit 2; }
  table "$2"
  exit 0
fi

dir=${1:-$(mktemp -d /tmp/ci-timings.XXXXXX)}
mkdir -p "$dir"
if [ -n "$(ls -A "$dir")" ]; then
  echo "ci-timings: $dir is not empty; its caches would not be cold" >&2
  exit 2
fi
git clone -q --no-local "$root" "$dir/src"
export GOCACHE="$dir/gocache" GOMODCACHE="$dir/gomodcache"
mkdir -p "$GOCACHE" "$GOMODCACHE"
echo "ci-timings: $(git -C "$dir/src" rev-parse HEAD) in $dir/src, caches in $dir"

# stamp prefixes every line of its input with the seconds (one decimal) since it started.
stamp() {
  local start=${EPOCHREALTIME/./} line d
  while IFS= read -r line || [ -n "$line" ]; do
    d=$(( ${EPOCHREALTIME/./} - start ))
    printf '%6d.%d %s\n' $(( d / 1000000 )) $(( d / 100000 % 10 )) "$line"
  done
}

rc=0
for run in cold warm; do
  echo "ci-timings: $run run, log $dir/$run.log"
  if ! (cd "$dir/src" && MAKEFLAGS=--trace bash .ci/run) 2>&1 | stamp >"$dir/$run.log"; then
    echo "ci-timings: the $run run failed; the end of its log:"
    tail -n 40 "$dir/$run.log"
    rc=1
    break
  fi
done
table "$dir"
# The caches, the clone and its bin/ take about 15 GB: a second measurement (or CI itself, on
# this machine) must not find the disk full of them. The logs and the tables stay.
chmod -R u+w "$dir/gocache" "$dir/gomodcache" 2>/dev/null || true
rm -rf "$dir/gocache" "$dir/gomodcache" "$dir/src"
exit $rc
