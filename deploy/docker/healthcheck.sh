#!/bin/bash
# Container health check of the chgate image (Dockerfile HEALTHCHECK, compose healthcheck).
#
# With chgate-cli in the image (it is): a grpc.health.v1 check of the "liveness" service on
# chgate's health listener, the same check the kubelet's probes make. Without it: chgate's
# Prometheus endpoint must answer with chgate's own metrics (bash builtins and grep only).
#
# The ports come from CHGATE_HEALTH_LISTEN / CHGATE_LISTEN and CHGATE_METRICS_LISTEN when set, so
# the check follows the container's settings; the defaults are 50052 and 9464.
set -u
port_of() { local a=$1; echo "${a##*:}"; }

cli=/usr/local/bin/chgate-cli
health=${CHGATE_HEALTH_LISTEN-[::]:50052}
# An empty health address means the API listener serves health.
[[ -z $health ]] && health=${CHGATE_LISTEN:-127.0.0.1:50051}
if [[ -x $cli ]]; then
  # A Unix socket (CHGATE_LISTEN=unix:PATH) is dialled as it is.
  addr="127.0.0.1:$(port_of "$health")"
  [[ $health == unix:* ]] && addr=$health
  exec "$cli" --addr="$addr" --timeout=2s health --service liveness >/dev/null
fi

listen=${CHGATE_METRICS_LISTEN-[::]:9464}
port=$(port_of "$listen")
if [[ -z $listen || ! $port =~ ^[0-9]+$ ]]; then
  echo "healthcheck: metrics are off (CHGATE_METRICS_LISTEN=\"$listen\") and chgate-cli is missing" >&2
  exit 1
fi
exec 3<>"/dev/tcp/127.0.0.1/$port" || exit 1
printf 'GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
if grep -q '^chgate_buffer_budget_bytes ' <&3; then
  exit 0
fi
echo "healthcheck: 127.0.0.1:$port/metrics did not serve chgate's metrics" >&2
exit 1
