#!/usr/bin/env bash
# Replicated tables on the local ClickHouse, whose ZooKeeper deploy/clickhouse/clickhousectl.sh
# runs next to it (ctest integration_replicated_dedup):
#   1. a ReplicatedMergeTree table deduplicates a block inserted twice, counts a different block,
#      and (the control) takes the same block again with insert_deduplicate=0;
#   2. with ZooKeeper paused (clickhousectl.sh zk-pause) an INSERT fails within a bound; after
#      zk-resume the same block, retried until the table takes inserts again, is there exactly
#      once, and a further retry of it is deduplicated.
# The table lives in a database of its own, dropped at the end.
#
# Environment (`make test` sets the first and the last):
#   CHGATE_CLICKHOUSE          host:port of the native protocol (default 127.0.0.1:29000)
#   CHGATE_CLICKHOUSE_CTL      clickhousectl.sh (default: deploy/clickhouse/ of this checkout)
#   CHGATE_CLICKHOUSE_CLIENT   clickhouse-client binary (default: from PATH)
#   CHGATE_REQUIRE_CLICKHOUSE  1: a missing server or ZooKeeper, or a server clickhousectl.sh does
#                              not control, fails the test; otherwise it is skipped (exit 77)
set -euo pipefail

ROOT=${CHGATE_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
CTL=${CHGATE_CLICKHOUSE_CTL:-$ROOT/deploy/clickhouse/clickhousectl.sh}
CLIENT=${CHGATE_CLICKHOUSE_CLIENT:-clickhouse-client}
ADDRESS=${CHGATE_CLICKHOUSE:-127.0.0.1:29000}
HOST=${ADDRESS%:*}
PORT=${ADDRESS##*:}
# clickhousectl.sh serves the port it is told: make it the one under test.
export CHGATE_CH_TCP_PORT=${CHGATE_CH_TCP_PORT:-$PORT}

DB=chgate_replicated_$$_$RANDOM
TABLE=$DB.events
# Bounds: an INSERT while ZooKeeper is paused (the server's ZooKeeper operation timeout is 10 s),
# and the time the table needs after zk-resume (a new ZooKeeper session, the replica reactivated).
PAUSED_INSERT_TIMEOUT=40
RECOVERY_TIMEOUT=120
WATCHDOG_SECONDS=180

paused=false
watchdog=""
db_created=false

say() { echo "[replicated_dedup] $*"; }
fail() {
  echo "[replicated_dedup] FAIL: $*" >&2
  exit 1
}
# The server or its ZooKeeper is missing: a failure under CHGATE_REQUIRE_CLICKHOUSE=1 (as in CI),
# a skip otherwise.
unavailable() {
  if [[ ${CHGATE_REQUIRE_CLICKHOUSE:-} == 1 ]]; then
    fail "CHGATE_REQUIRE_CLICKHOUSE=1, but $*"
  fi
  echo "[replicated_dedup] SKIP: $* (deploy/clickhouse/clickhousectl.sh start starts both)" >&2
  exit 77
}

ch() { timeout 60 "$CLIENT" --host "$HOST" --port "$PORT" "$@"; }
count() { ch -q "SELECT count() FROM $TABLE"; }
expect_count() {  # expected, what
  local got
  got=$(count) || fail "SELECT count() failed ($2)"
  [[ $got == "$1" ]] || fail "$2: expected $1 rows, found $got"
  say "ok: $2 ($got rows)"
}

# Inserts block C while ZooKeeper is paused: it must fail, or not finish within the bound.
insert_while_paused() {  # what
  local start=$SECONDS rc=0 err
  err=$(timeout "$PAUSED_INSERT_TIMEOUT" "$CLIENT" --host "$HOST" --port "$PORT" \
    -q "INSERT INTO $TABLE VALUES $block_c" 2>&1) || rc=$?
  ((rc != 0)) || fail "$1 succeeded while ZooKeeper (pid $zk_pid) was paused:" \
    "is $ADDRESS the server of $CTL?"
  if ((rc == 124)); then
    say "ok: $1 with ZooKeeper paused did not finish within ${PAUSED_INSERT_TIMEOUT}s"
  else
    say "ok: $1 with ZooKeeper paused failed after $((SECONDS - start))s (rc $rc):" \
      "$(tr '\n' ' ' <<<"$err" | cut -c1-300)"
  fi
}
# True when process $1 has a listening TCP socket on port $2.
pid_listens_on() {
  local hex inode fd
  hex=$(printf '%04X' "$2")
  while read -r inode; do
    for fd in /proc/"$1"/fd/*; do
      [[ $(readlink "$fd" 2>/dev/null) != "socket:[$inode]" ]] || return 0
    done
  done < <(awk -v p=":$hex" '$4 == "0A" && substr($2, length($2) - 4) == p { print $10 }' \
    /proc/net/tcp /proc/net/tcp6 2>/dev/null)
  return 1
}

cleanup() {
  local rc=$?
  if $paused; then
    "$CTL" zk-resume >&2 || true
  fi
  if [[ -n $watchdog ]]; then
    # Its own process group (setsid): the shell and its sleep.
    kill -TERM -- "-$watchdog" 2>/dev/null || true
  fi
  if $db_created; then
    ch -q "DROP DATABASE IF EXISTS $DB" || echo "[replicated_dedup] could not drop $DB" >&2
  fi
  exit "$rc"
}
trap cleanup EXIT

# --- the server and its ZooKeeper ----------------------------------------------------------------
out=$(ch -q 'SELECT 1' 2>&1) || unavailable "no ClickHouse answers on $ADDRESS: $out"
out=$(ch -q "SELECT count() FROM system.zookeeper WHERE path = '/'" 2>&1) ||
  unavailable "the ClickHouse on $ADDRESS does not reach a ZooKeeper: $out"

# --- 1. deduplication ----------------------------------------------------------------------------
ch -q "CREATE DATABASE $DB"
db_created=true
ch -q "CREATE TABLE $TABLE (id UInt64, msg String)
  ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/$TABLE', '{replica}') ORDER BY id"
zk_path=$(ch -q "SELECT zookeeper_path FROM system.replicas WHERE database = '$DB' AND table = 'events'")
say "$TABLE at $zk_path in ZooKeeper"

block_a="(1, 'a'), (2, 'b'), (3, 'c')"
block_b="(4, 'd'), (5, 'e')"
block_c="(6, 'f'), (7, 'g'), (8, 'h'), (9, 'i')"

ch -q "INSERT INTO $TABLE VALUES $block_a"
expect_count 3 "first INSERT of block A"
ch -q "INSERT INTO $TABLE VALUES $block_a"
expect_count 3 "the same block A again is deduplicated"
ch -q "INSERT INTO $TABLE VALUES $block_b"
expect_count 5 "a different block B is counted"
blocks=$(ch -q "SELECT count() FROM system.zookeeper WHERE path = '$zk_path/blocks'")
[[ $blocks == 2 ]] || fail "expected the ids of 2 blocks under $zk_path/blocks, found $blocks"
say "ok: $zk_path/blocks holds 2 block ids"
ch --insert_deduplicate=0 -q "INSERT INTO $TABLE VALUES $block_a"
expect_count 8 "control: block A with insert_deduplicate=0 is inserted again"

# --- 2. ZooKeeper paused -------------------------------------------------------------------------
if ! zk_pid=$("$CTL" zk-pid) || ! ch_pid=$("$CTL" pid) || ! pid_listens_on "$ch_pid" "$PORT"; then
  unavailable "$CTL does not control the ClickHouse on $ADDRESS and its ZooKeeper" \
    "(pid ${ch_pid:-none}, zookeeper pid ${zk_pid:-none}), so it cannot pause that ZooKeeper"
fi

"$CTL" zk-pause
paused=true
# Should this script die (a ctest timeout kills it), ZooKeeper is continued anyway.
# shellcheck disable=SC2016 # the watchdog's shell expands them
setsid bash -c 'sleep "$1"; exec "$0" zk-resume' "$CTL" "$WATCHDOG_SECONDS" \
  </dev/null >/dev/null 2>&1 &
watchdog=$!

insert_while_paused "an INSERT"
# The server has given up its ZooKeeper session by now: the next attempt fails too (at once).
insert_while_paused "a second INSERT"

"$CTL" zk-resume
paused=false
kill -TERM -- "-$watchdog" 2>/dev/null || true
watchdog=""

# The same block again, as a client that got an error must retry it, until the table takes it.
start=$SECONDS
attempts=0
last_err=""
until err=$(ch -q "INSERT INTO $TABLE VALUES $block_c" 2>&1); do
  attempts=$((attempts + 1))
  last_err=$(tr '\n' ' ' <<<"$err" | cut -c1-200)
  ((SECONDS - start < RECOVERY_TIMEOUT)) ||
    fail "INSERTs still fail ${RECOVERY_TIMEOUT}s after ZooKeeper resumed: $last_err"
  sleep 1
done
say "ok: INSERTs work again $((SECONDS - start))s after zk-resume ($attempts failed attempts" \
  "before${last_err:+, the last: $last_err})"
expect_count 12 "block C, failed while ZooKeeper was paused and retried, is there exactly once"
ch -q "INSERT INTO $TABLE VALUES $block_c"
expect_count 12 "block C once more is deduplicated"

# --- cleanup -------------------------------------------------------------------------------------
ch -q "DROP DATABASE $DB"
db_created=false
left=$(ch -q "SELECT count() FROM system.zookeeper WHERE path = '${zk_path%/*}' AND name = '${zk_path##*/}'")
[[ $left == 0 ]] || fail "DROP left $zk_path in ZooKeeper"
say "ok: dropped $DB and its ZooKeeper path"
say "PASS"
