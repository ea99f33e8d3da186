#!/usr/bin/env bash
# Runs the Python and Node.js example clients (client/examples/python, client/examples/node)
# against a real chgate and the local ClickHouse, and fails if either fails. ctest runs it as
# `e2e_client_examples` (so `make test` and CI do; the e2e name keeps it out of the container
# build's ctest, which has no ClickHouse or Node.js).
#
# Usage: client/examples/run_examples.sh CHGATE_BINARY
#
# It starts the local ClickHouse (deploy/clickhouse/clickhousectl.sh start; a server that was
# already running is reused and left running, one it started is stopped at the end), installs
# the Node example's packages from its lockfile (npm ci, again only when the lockfile changed),
# starts chgate on free loopback ports with --query-allow-writes=true (the examples create their
# tables through Query), runs both examples, and stops chgate by its pid. A missing tool, a
# failed npm install or an unreachable ClickHouse is a failure, never a skip.
#
# Environment (as `make test` sets it):
#   CHGATE_CLICKHOUSE       host:port of ClickHouse's native protocol (default 127.0.0.1:29000)
#   CHGATE_CLICKHOUSE_CTL   clickhousectl.sh (default: deploy/clickhouse/ of this checkout)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
EXAMPLES=$ROOT/client/examples
PYTHON=/usr/bin/python3  # Debian's python3-grpcio is visible to this interpreter only
EXAMPLE_TIMEOUT=120

say() { echo "run_examples: $*"; }
die() {
  echo "run_examples: error: $*" >&2
  exit 1
}

[[ $# -eq 1 ]] || die "usage: $0 CHGATE_BINARY"
CHGATE=$1
[[ -x $CHGATE ]] || die "chgate binary '$CHGATE' is missing or not executable"
CH=${CHGATE_CLICKHOUSE:-127.0.0.1:29000}
CTL=${CHGATE_CLICKHOUSE_CTL:-$ROOT/deploy/clickhouse/clickhousectl.sh}

command -v node >/dev/null 2>&1 || die "node not found (deploy/install-deps.sh installs it)"
command -v npm >/dev/null 2>&1 || die "npm not found (deploy/install-deps.sh installs it)"
"$PYTHON" -c 'import grpc' 2>/dev/null || die "$PYTHON cannot import grpc (install python3-grpcio)"

work=$(mktemp -d "${TMPDIR:-/tmp}/chgate-examples.XXXXXX")
chgate_pid=""
ch_started=false
# Stops chgate by its pid (SIGTERM: drain, then exit; SIGKILL after 25 s). Returns its exit
# status, 137 when it had to be killed.
stop_chgate() {
  local pid=$chgate_pid status=0
  [[ -n $pid ]] || return 0
  chgate_pid=""
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 250); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    say "chgate (pid $pid) did not stop within 25 s of SIGTERM; killing it"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || status=$?
  return "$status"
}
cleanup() {
  local rc=$?
  stop_chgate || true
  if $ch_started; then
    "$CTL" stop || true
  fi
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT

# The Node example's packages, exactly as locked.
node_dir=$EXAMPLES/node
stamp=$node_dir/node_modules/.chgate-lock-sha256
want=$(sha256sum "$node_dir/package-lock.json" | cut -d' ' -f1)
if [[ -f $stamp && $(cat "$stamp") == "$want" ]]; then
  say "node packages up to date"
else
  say "installing the node example's packages (npm ci)"
  (cd "$node_dir" && npm ci --no-audit --no-fund --loglevel=error) || die "npm ci failed"
  echo "$want" >"$stamp"
fi

if "$CTL" status >/dev/null 2>&1; then
  say "reusing the running local ClickHouse"
else
  "$CTL" start
  ch_started=true
fi

free_ports() {
  "$PYTHON" - <<'EOF'
import socket
socks = [socket.socket() for _ in range(3)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))
EOF
}

# chgate reads CHGATE_* variables as its options (and warns about unknown ones): start it
# without the test environment's.
unset_chgate_env=()
for v in $(compgen -e); do
  [[ $v == CHGATE_* ]] && unset_chgate_env+=(-u "$v")
done

log=$work/chgate.log
address=""
for attempt in 1 2 3; do  # a free port may be taken before chgate binds it
  read -r api_port health_port metrics_port < <(free_ports)
  env "${unset_chgate_env[@]}" "$CHGATE" --listen="127.0.0.1:$api_port" \
    --health-listen="127.0.0.1:$health_port" --metrics-listen="127.0.0.1:$metrics_port" \
    --endpoints="$CH" --query-allow-writes=true </dev/null >"$log" 2>&1 &
  chgate_pid=$!
  for _ in $(seq 1 300); do
    if grep -q 'chgate: serving the API' "$log"; then
      address=127.0.0.1:$api_port
      break
    fi
    kill -0 "$chgate_pid" 2>/dev/null || break
    sleep 0.1
  done
  [[ -n $address ]] && break
  if kill -0 "$chgate_pid" 2>/dev/null; then
    tail -n 40 "$log" >&2
    die "chgate did not start within 30 s"
  fi
  wait "$chgate_pid" 2>/dev/null || true
  chgate_pid=""
  if ! grep -q 'cannot listen' "$log" || ((attempt == 3)); then
    tail -n 40 "$log" >&2
    die "chgate exited at start"
  fi
done
say "chgate pid $chgate_pid on $address, ClickHouse $CH"

passed=0
failed=0
run_example() {
  local name=$1
  shift
  say "--- $name example"
  if timeout "$EXAMPLE_TIMEOUT" "$@"; then
    passed=$((passed + 1))
  else
    say "$name example FAILED (exit $?)"
    failed=$((failed + 1))
  fi
}
run_example python "$PYTHON" "$EXAMPLES/python/example.py" "$address" chgate_examples.python_events
run_example node node "$node_dir/example.js" "$address" chgate_examples.node_events

if ((failed > 0)); then
  say "chgate's log:"
  tail -n 40 "$log"
fi
# chgate must still be running, and stop cleanly (exit 0) on SIGTERM.
if ! kill -0 "$chgate_pid" 2>/dev/null; then
  say "chgate exited during the examples"
  tail -n 40 "$log"
  failed=$((failed + 1))
fi
stopped=0
stop_chgate || stopped=$?
if ((stopped != 0)); then
  say "chgate exited with status $stopped after SIGTERM"
  tail -n 40 "$log"
  failed=$((failed + 1))
fi
echo "examples: $passed passed, $failed failed"
((failed == 0))
