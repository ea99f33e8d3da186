#!/usr/bin/env bash
# `make run`: chgate serving in the foreground against the local ClickHouse
# (deploy/clickhouse/clickhousectl.sh, already started), with a demo table, and once chgate
# answers its health check, its addresses and a chgate-cli insert and query that work as printed.
# Ctrl-C (SIGINT) or SIGTERM drains chgate and it exits; the local ClickHouse keeps running.
#
# Usage: deploy/run-local.sh CHGATE CHGATE_CLI [extra chgate options...]
# Environment: CHGATE_CH_TCP_PORT (29000), RUN_LISTEN (127.0.0.1:50051),
#   RUN_HEALTH_LISTEN (127.0.0.1:50052), RUN_METRICS_LISTEN (127.0.0.1:9464), RUN_TABLE (chgate_demo)
set -euo pipefail

[[ $# -ge 2 ]] || {
  echo "usage: $0 CHGATE CHGATE_CLI [chgate options...]" >&2
  exit 2
}
CHGATE=$1
CLI=$2
shift 2
SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CTL=$SCRIPT_DIR/clickhouse/clickhousectl.sh
CH_PORT=${CHGATE_CH_TCP_PORT:-29000}
LISTEN=${RUN_LISTEN:-127.0.0.1:50051}
HEALTH=${RUN_HEALTH_LISTEN:-127.0.0.1:50052}
METRICS=${RUN_METRICS_LISTEN:-127.0.0.1:9464}
TABLE=${RUN_TABLE:-chgate_demo}

[[ $TABLE =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] || {
  echo "run-local: RUN_TABLE '$TABLE' is not a plain table name" >&2
  exit 2
}
"$CTL" client -q "CREATE TABLE IF NOT EXISTS default.$TABLE (id UInt64, msg String) ENGINE = MergeTree ORDER BY id"

cli_addr=""
[[ $LISTEN == 127.0.0.1:50051 ]] || cli_addr=" --addr $LISTEN"
cli=$(realpath --relative-to=. "$CLI" 2>/dev/null || echo "$CLI")

# The banner waits for chgate's health check in the background, so it appears once chgate
# serves; chgate itself replaces this shell and gets the terminal's Ctrl-C directly.
(
  for _ in $(seq 1 100); do
    if "$CLI" --addr "$HEALTH" --timeout 1s health >/dev/null 2>&1; then
      cat <<BANNER

chgate is serving (Ctrl-C drains it and exits):
  API       $LISTEN   gRPC chgate.v1.Ingest (Insert, InsertStream, Query)
  health    $HEALTH   grpc.health.v1
  metrics   http://$METRICS/metrics
  ClickHouse 127.0.0.1:$CH_PORT (the local one; make clickhouse-stop stops it)

In another terminal, from this directory:
  echo '{"id":1,"msg":"hello"}' | $cli$cli_addr insert --table $TABLE
  $cli$cli_addr query 'SELECT id, msg FROM $TABLE ORDER BY id'

BANNER
      exit 0
    fi
    sleep 0.1
  done
  echo "run-local: chgate did not answer its health check on $HEALTH within 10s" >&2
) &

# chgate warns about CHGATE_* variables that name none of its options: not the local server's.
exec env -u CHGATE_CH_TCP_PORT -u CHGATE_CH_HTTP_PORT -u CHGATE_CH_TLS_PORT -u CHGATE_CH_STATE_DIR \
  -u CHGATE_CH_INTERSERVER_PORT -u CHGATE_ZK_PORT \
  "$CHGATE" --endpoints="127.0.0.1:$CH_PORT" --listen="$LISTEN" --health-listen="$HEALTH" \
  --metrics-listen="$METRICS" "$@"
