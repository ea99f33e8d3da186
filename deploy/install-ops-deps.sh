#!/usr/bin/env bash
# Installs what the offline deployment checks (`make validate-deploy`, tests/ops/) need on
# Debian 12, skipping what is already there, then the pinned npm tools of tests/ops/ from their
# committed lockfile. Safe to run again: with nothing missing it changes nothing and needs no
# network.
#
#   deploy/install-ops-deps.sh            apt packages + `npm ci` in tests/ops/
#   deploy/install-ops-deps.sh --rootfs   also debootstrap (for tests/ops/runtime_rootfs.sh)
#
# Debian's prometheus package ships a service; service starts are denied while it is configured
# (the checks start their own Prometheus on loopback and stop it by pid).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

PACKAGES=(
  prometheus          # promtool (check rules/config/metrics, test rules) and the server itself
  prometheus-alertmanager  # amtool (check-config, config routes test) for deploy/alertmanager/
  yamllint
  docker-compose      # v1: `docker-compose config` works without a Docker engine
  python3 python3-grpcio python3-grpc-tools grpc-proto protobuf-compiler protobuf-compiler-grpc
  clickhouse-client   # read-back in the live checks
  curl ca-certificates jq
)
if [[ ${1:-} == --rootfs ]]; then
  PACKAGES+=(debootstrap)
fi
# Node.js: the machine's own when it has one (any LTS from 18 on); Debian's otherwise.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  PACKAGES+=(nodejs npm)
fi

# shellcheck source=deploy/apt-lib.sh
source "$ROOT/deploy/apt-lib.sh"
find_missing "${PACKAGES[@]}"

if ((${#missing[@]} > 0)); then
  echo "install-ops-deps: missing: ${missing[*]}"
  need_root install-ops-deps "${missing[@]}"
  apt_install_without_services deploy/install-ops-deps.sh "${missing[@]}"
  echo "install-ops-deps: installed ${missing[*]}"
else
  echo "install-ops-deps: all apt packages present"
fi

# npm tools, exactly as locked. Reinstalled only when the lockfile changed since the last install.
OPS=$ROOT/tests/ops
stamp=$OPS/node_modules/.chgate-lock-sha256
want=$(sha256sum "$OPS/package-lock.json" | cut -d' ' -f1)
if [[ -f $stamp && $(cat "$stamp") == "$want" ]]; then
  echo "install-ops-deps: npm tools up to date"
else
  (cd "$OPS" && npm ci --no-audit --no-fund --loglevel=error)
  echo "$want" >"$stamp"
  echo "install-ops-deps: npm tools installed"
fi
