#!/usr/bin/env bash
# Installs the Debian 12 packages chgate needs to build, test and run against a local
# ClickHouse, skipping what is already installed. Safe to run again: with nothing missing it
# touches nothing (no apt-get update) and prints "all dependencies present".
#
# Installing clickhouse-server must not leave the packaged system service running (the project
# uses its own server, see deploy/clickhouse/clickhousectl.sh): service starts are denied during
# the install, and a service that the install started anyway is stopped again.
set -euo pipefail

PACKAGES=(
  # toolchain
  build-essential cmake ninja-build ccache pkg-config git
  clang clang-format libclang-rt-14-dev valgrind
  # libraries
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  prometheus-cpp-dev libabsl-dev libasio-dev liblz4-dev libzstd-dev libssl-dev openssl
  libspdlog-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  # local ClickHouse for integration tests, and the ZooKeeper its Replicated tables need
  # (deploy/clickhouse/clickhousectl.sh runs both; the zookeeper package has no service)
  clickhouse-server clickhouse-client zookeeper
  # independent gRPC client for end-to-end checks
  python3 python3-grpcio python3-grpc-tools grpc-proto
  # tools the scripts use; promtool (package prometheus, its service not started) checks the
  # exposition in the metrics tests
  curl procps openssl prometheus
)
# Node.js and npm: buf for the API checks (tests/api/buf_check.sh) and the Node client example
# (client/examples/node/) come from npm. The machine's own Node.js when it has one (any LTS from
# 18 on); Debian's otherwise.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  PACKAGES+=(nodejs npm)
fi

# shellcheck source=deploy/apt-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/apt-lib.sh"
find_missing "${PACKAGES[@]}"

if ((${#missing[@]} == 0)); then
  echo "install-deps: all dependencies present"
  exit 0
fi
echo "install-deps: missing: ${missing[*]}"

need_root install-deps "${missing[@]}"

# Processes of the packaged ClickHouse service: its unit and init script both pass
# --config=/etc/clickhouse-server/config.xml. The project's own server (clickhousectl.sh) runs the
# same binary with another config, so matching the binary name, as `service clickhouse-server
# status/stop` do, would also see (and kill) that one.
packaged_pids() {
  local dir cmdline
  for dir in /proc/[0-9]*; do
    cmdline=$(tr '\0' ' ' <"$dir/cmdline" 2>/dev/null) || continue
    if [[ $cmdline == *clickhouse-server*" --config=/etc/clickhouse-server/config.xml "* ]]; then
      echo "${dir#/proc/}"
    fi
  done
}
systemd_running() {
  [[ -d /run/systemd/system ]] && command -v systemctl >/dev/null 2>&1
}
unit_active() {
  systemd_running && systemctl is-active --quiet clickhouse-server.service 2>/dev/null
}

unit_was_active=false
unit_active && unit_was_active=true
pids_before=" $(packaged_pids | tr '\n' ' ') "

apt_install_without_services deploy/install-deps.sh "${missing[@]}"

# Stop what the install started (and only that).
if ! $unit_was_active && unit_active; then
  echo "install-deps: stopping the clickhouse-server system service the install started"
  "${SUDO[@]}" systemctl stop clickhouse-server.service
fi
new_pids=()
for pid in $(packaged_pids); do
  [[ $pids_before == *" $pid "* ]] || new_pids+=("$pid")
done
if ((${#new_pids[@]} > 0)); then
  echo "install-deps: stopping clickhouse-server started by the install (pid ${new_pids[*]})"
  "${SUDO[@]}" kill -TERM "${new_pids[@]}" 2>/dev/null || true
  for _ in $(seq 1 300); do
    alive=false
    for pid in "${new_pids[@]}"; do
      if [[ -d /proc/$pid ]] && ! grep -q '^State:[[:space:]]*Z' "/proc/$pid/status" 2>/dev/null; then
        alive=true
      fi
    done
    $alive || break
    sleep 0.1
  done
fi

echo "install-deps: installed ${missing[*]}"
