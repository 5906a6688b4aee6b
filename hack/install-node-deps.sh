#!/usr/bin/env bash
# Installs what the real-node suite (e2e/realnode) needs beside the binaries that
# hack/build-controlplane.sh builds: runc, the CNI plugins, iptables, nsenter and ip; and the
# Prometheus server that e2e/admission's TestDashboardAndAlertQueriesOnRealMetrics runs
# against the local cluster; from Debian packages, when they are missing. The Prometheus
# package's own service is not started (policy-rc.d for the install). Needs root and apt-get;
# without them it says what will be skipped or fail, and succeeds.
set -euo pipefail
need=()
[ -x /usr/sbin/runc ] || need+=(runc)
[ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/portmap ] && [ -x /usr/lib/cni/host-local ] || need+=(containernetworking-plugins)
command -v iptables >/dev/null 2>&1 || need+=(iptables)
command -v nsenter >/dev/null 2>&1 || need+=(util-linux)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v prometheus >/dev/null 2>&1 || need+=(prometheus)
if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "install-node-deps: ${need[*]} missing and cannot be installed here (needs root and apt-get): the real-node suite (e2e/realnode) will be skipped, and without prometheus TestDashboardAndAlertQueriesOnRealMetrics fails"
  exit 0
fi
echo "install-node-deps: installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
# Keep packages from starting their services (Prometheus's) during the install.
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
  trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null 2>&1 ||
  { apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null; }
