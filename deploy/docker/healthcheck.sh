#!/bin/bash
# Container health check of the chgate image (Dockerfile HEALTHCHECK, compose healthcheck): healthy
# when chgate's Prometheus endpoint answers with chgate's own metrics. The image has no gRPC health
# client; the kubelet uses the gRPC health service itself (see deploy/kubernetes/). Only bash
# builtins and grep, both in every Debian image.
#
# The port comes from CHGATE_METRICS_LISTEN (host:port or port) when set, else 9464.
set -u
listen=${CHGATE_METRICS_LISTEN:-0.0.0.0:9464}
port=${listen##*:}
if [[ -z $listen || ! $port =~ ^[0-9]+$ ]]; then
  echo "healthcheck: metrics are off (CHGATE_METRICS_LISTEN=\"$listen\")" >&2
  exit 1
fi
exec 3<>"/dev/tcp/127.0.0.1/$port" || exit 1
printf 'GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
if grep -q '^chgate_buffer_budget_bytes ' <&3; then
  exit 0
fi
echo "healthcheck: 127.0.0.1:$port/metrics did not serve chgate's metrics" >&2
exit 1
