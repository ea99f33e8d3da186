#!/usr/bin/env bash
# Controls the local, test-only ClickHouse server that chgate's run command and integration
# tests use: Debian's clickhouse-server, loopback only, non-default ports, all state in one
# directory of the checkout.
#
# Usage: deploy/clickhouse/clickhousectl.sh start|stop|restart|status|pid|wait|client [args...]
#
#   start    start the server unless ours is already running, then wait until it answers
#   stop     stop the server whose pid is in the pid file (TERM, then KILL after 30 s)
#   restart  stop, then start
#   status   print the state; exit 0 when running, 3 when not
#   pid      print the server's pid; exit 3 when not running
#   wait     wait until the server answers a query; non-zero on timeout
#   client   run clickhouse-client against this server, e.g. `client -q 'SELECT version()'`
#
# Environment:
#   CHGATE_CH_STATE_DIR      state dir (default: <checkout>/.local/clickhouse)
#   CHGATE_CH_TCP_PORT       native protocol port (default 29000)
#   CHGATE_CH_HTTP_PORT      HTTP port (default 28123)
#   CHGATE_CH_TLS_PORT       secure (TLS) native protocol port (default 29440); its certificate
#                            and the CA that signed it are made at start under <state>/tls/
#                            (ca.crt is what clients verify against)
#   CHGATE_CH_START_TIMEOUT  seconds to wait for the server to answer (default 60)
#   CHGATE_CH_SERVER         server binary (default: clickhouse-server from PATH or /usr/sbin)
#   CHGATE_CH_CLIENT         client binary (default: clickhouse-client from PATH)
#
# The server runs in the foreground of its own session (setsid), so it survives the shell
# that started it and a Ctrl-C in that terminal; its pid is written to <state>/clickhouse-server.pid.
# It is only ever stopped by that pid, never by process name. Config templates live next to
# this script; the absolute paths ClickHouse needs are filled in at start.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$SCRIPT_DIR/../.." && pwd)

STATE_DIR=${CHGATE_CH_STATE_DIR:-$REPO_ROOT/.local/clickhouse}
TCP_PORT=${CHGATE_CH_TCP_PORT:-29000}
HTTP_PORT=${CHGATE_CH_HTTP_PORT:-28123}
TLS_PORT=${CHGATE_CH_TLS_PORT:-29440}
START_TIMEOUT=${CHGATE_CH_START_TIMEOUT:-60}
STOP_TIMEOUT=30
HOST=127.0.0.1
CLIENT=""

die() {
  echo "clickhousectl: error: $*" >&2
  exit 1
}
say() { echo "clickhousectl: $*"; }

for port in "$TCP_PORT" "$HTTP_PORT" "$TLS_PORT"; do
  if ! [[ $port =~ ^[1-9][0-9]{0,4}$ ]] || ((port > 65535)); then
    die "invalid port '$port'"
  fi
done
[[ $TCP_PORT != "$HTTP_PORT" && $TCP_PORT != "$TLS_PORT" && $HTTP_PORT != "$TLS_PORT" ]] ||
  die "the TCP, HTTP and TLS ports must differ ($TCP_PORT, $HTTP_PORT, $TLS_PORT)"
[[ $START_TIMEOUT =~ ^[0-9]+$ ]] || die "invalid CHGATE_CH_START_TIMEOUT '$START_TIMEOUT'"

# ClickHouse wants absolute paths; the path also goes into XML, so keep it plain.
case $STATE_DIR in
  /*) ;;
  *) STATE_DIR=$PWD/$STATE_DIR ;;
esac
STATE_DIR=${STATE_DIR%/}
[[ $STATE_DIR != *[\&\<\>\"\']* ]] || die "state dir '$STATE_DIR' contains characters unsafe in XML"

CONFIG=$STATE_DIR/config.xml
USERS=$STATE_DIR/users.xml
PID_FILE=$STATE_DIR/clickhouse-server.pid
LOG_DIR=$STATE_DIR/log
STDOUT_LOG=$LOG_DIR/stdout.log
DATA_DIR=$STATE_DIR/data
TLS_DIR=$STATE_DIR/tls

find_binary() {  # name, override, fallback dir
  local override=$2
  if [[ -n $override ]]; then
    command -v "$override" 2>/dev/null || die "$override not found"
  elif command -v "$1" >/dev/null 2>&1; then
    command -v "$1"
  elif [[ -x $3/$1 ]]; then
    echo "$3/$1"
  else
    die "$1 not found; run deploy/install-deps.sh (Debian package $1)"
  fi
}
server_bin() { find_binary clickhouse-server "${CHGATE_CH_SERVER:-}" /usr/sbin; }
client_bin() { find_binary clickhouse-client "${CHGATE_CH_CLIENT:-}" /usr/bin; }

# True when $1 is a live (not zombie) process whose command line names our generated config
# (--config-file=<path> is the last argument; the space tr appends makes the match exact).
is_our_server() {
  local pid=$1 state cmdline
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  [[ -r /proc/$pid/stat ]] || return 1
  # Field 3 of /proc/<pid>/stat is the state; the command name before it may contain spaces.
  state=$(sed -E 's/^.*\) ([A-Za-z]).*$/\1/' "/proc/$pid/stat" 2>/dev/null) || return 1
  [[ $state != Z && $state != X ]] || return 1
  cmdline=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
  [[ $cmdline == *"--config-file=$CONFIG "* ]]
}

# Prints the pid of our running server, or returns 1. The server's own status file in the data
# dir ("PID: n") is a fallback for a lost pid file; either way the pid is checked, never guessed.
running_pid() {
  local pid=""
  if [[ -f $PID_FILE ]]; then
    pid=$(tr -dc '0-9' <"$PID_FILE")
    if is_our_server "$pid"; then
      echo "$pid"
      return 0
    fi
  fi
  if [[ -f $DATA_DIR/status ]]; then
    pid=$(sed -n 's/^PID: *\([0-9][0-9]*\).*/\1/p' "$DATA_DIR/status" | head -n 1)
    if is_our_server "$pid"; then
      echo "$pid" >"$PID_FILE"
      echo "$pid"
      return 0
    fi
  fi
  return 1
}

# True when something accepts TCP connections on 127.0.0.1:$1.
port_open() {
  (exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null
}

port_owner() {
  if command -v ss >/dev/null 2>&1; then
    ss -Hltnp "sport = :$1" 2>/dev/null | sed -n 's/.*users:(\(.*\))$/\1/p' | head -n 1
  fi
}

answers() {
  timeout 10 "$CLIENT" --host "$HOST" --port "$TCP_PORT" -q 'SELECT 1' >/dev/null 2>&1
}

log_tail() {
  local f
  for f in "$STDOUT_LOG" "$LOG_DIR/clickhouse-server.err.log" "$LOG_DIR/clickhouse-server.log"; do
    if [[ -s $f ]]; then
      echo "----- last lines of $f -----" >&2
      tail -n 30 "$f" >&2
    fi
  done
}

# Waits until the server answers; $1 is the pid to watch (empty: any).
wait_ready() {
  local pid=${1:-} deadline=$((SECONDS + START_TIMEOUT))
  while ((SECONDS < deadline)); do
    if answers; then
      return 0
    fi
    if [[ -n $pid ]] && ! is_our_server "$pid"; then
      echo "clickhousectl: error: clickhouse-server (pid $pid) exited during startup" >&2
      log_tail
      return 1
    fi
    sleep 0.5
  done
  echo "clickhousectl: error: no answer on $HOST:$TCP_PORT within ${START_TIMEOUT}s" >&2
  log_tail
  return 1
}

render() {  # template, output
  local text
  text=$(<"$1")
  text=${text//@STATE_DIR@/"$STATE_DIR"}
  text=${text//@TCP_PORT@/"$TCP_PORT"}
  text=${text//@HTTP_PORT@/"$HTTP_PORT"}
  text=${text//@TLS_PORT@/"$TLS_PORT"}
  printf '%s\n' "$text" >"$2.tmp"
  mv -f "$2.tmp" "$2"
}

# The secure port's certificate: a CA of this state dir and a server certificate it signs for
# localhost and 127.0.0.1 (EC P-256). Made again when missing or within a week of expiry.
make_certificates() {
  command -v openssl >/dev/null 2>&1 || die "openssl not found; run deploy/install-deps.sh"
  mkdir -p "$TLS_DIR"
  if [[ -s $TLS_DIR/ca.crt && -s $TLS_DIR/server.crt && -s $TLS_DIR/server.key ]] &&
    openssl x509 -checkend 604800 -noout -in "$TLS_DIR/server.crt" >/dev/null 2>&1 &&
    openssl x509 -checkend 604800 -noout -in "$TLS_DIR/ca.crt" >/dev/null 2>&1; then
    return 0
  fi
  say "making a test CA and server certificate in $TLS_DIR"
  (
    umask 077
    cd "$TLS_DIR"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 3650 \
      -subj "/CN=chgate local test CA" -keyout ca.key -out ca.crt \
      -addext "basicConstraints=critical,CA:TRUE" \
      -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=localhost" \
      -keyout server.key -out server.csr 2>/dev/null
    printf '%s\n' "basicConstraints=critical,CA:FALSE" \
      "keyUsage=critical,digitalSignature,keyAgreement" "extendedKeyUsage=serverAuth" \
      "subjectAltName=DNS:localhost,IP:127.0.0.1" >server.ext
    openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 825 \
      -extfile server.ext -out server.crt 2>/dev/null
    rm -f server.csr server.ext ca.srl
    # Clients read the CA certificate; the keys stay private.
    chmod 644 ca.crt server.crt
  ) || die "openssl failed to make the test certificates in $TLS_DIR"
}

# start and stop hold this lock, so concurrent callers (parallel tests) start one server.
take_lock() {
  exec 9>"$STATE_DIR/.lock"
  flock -w $((START_TIMEOUT + STOP_TIMEOUT + 30)) 9 || die "timed out waiting for $STATE_DIR/.lock"
}

# TERM, wait up to STOP_TIMEOUT seconds, then KILL: exactly this pid, and only while it is ours.
terminate() {
  local pid=$1 ticks=0
  is_our_server "$pid" || return 0
  kill -TERM "$pid" 2>/dev/null || true
  while is_our_server "$pid"; do
    if ((ticks >= STOP_TIMEOUT * 10)); then
      say "pid $pid still running after ${STOP_TIMEOUT}s, sending KILL"
      kill -KILL "$pid" 2>/dev/null || true
      ticks=0
      while is_our_server "$pid"; do
        ((ticks < 100)) || die "pid $pid survived KILL"
        sleep 0.1
        ticks=$((ticks + 1))
      done
      return 0
    fi
    sleep 0.1
    ticks=$((ticks + 1))
  done
}

cmd_start() {
  local server pid port owner
  server=$(server_bin)
  CLIENT=$(client_bin)
  mkdir -p "$STATE_DIR" || die "cannot create state dir $STATE_DIR"
  [[ -w $STATE_DIR ]] || die "state dir $STATE_DIR is not writable by $(id -un)"
  take_lock

  if pid=$(running_pid); then
    say "already running (pid $pid), reusing it"
    wait_ready "$pid" || exit 1
    say "ready on $HOST:$TCP_PORT (tls $TLS_PORT, http $HTTP_PORT)"
    return 0
  fi
  rm -f "$PID_FILE"

  for port in "$TCP_PORT" "$HTTP_PORT" "$TLS_PORT"; do
    if port_open "$port"; then
      owner=$(port_owner "$port")
      die "port $HOST:$port is already in use${owner:+ by $owner}, and not by the server of $STATE_DIR." \
        "Stop that process, or choose other ports with CHGATE_CH_TCP_PORT, CHGATE_CH_HTTP_PORT" \
        "or CHGATE_CH_TLS_PORT."
    fi
  done

  mkdir -p "$LOG_DIR" "$DATA_DIR"
  make_certificates
  render "$SCRIPT_DIR/config.xml" "$CONFIG"
  render "$SCRIPT_DIR/users.xml" "$USERS"

  say "starting $server (state $STATE_DIR, tcp $HOST:$TCP_PORT, tls $HOST:$TLS_PORT, http $HOST:$HTTP_PORT)"
  echo "===== $(date -u '+%Y-%m-%dT%H:%M:%SZ') start as $(id -un)" >>"$STDOUT_LOG"
  # setsid gives the server its own session: no controlling terminal, so a Ctrl-C in the
  # caller's terminal does not reach it. A background job of a script (no job control) is not a
  # process group leader, so setsid does not fork and $! is the server's own pid. The server runs
  # in the foreground (not --daemon) so that errors before its logger is up land in stdout.log.
  # fd 9 (the lock) is closed so the server does not hold it.
  (cd "$STATE_DIR" && exec setsid "$server" "--config-file=$CONFIG" </dev/null >>"$STDOUT_LOG" 2>&1 9>&-) &
  pid=$!
  echo "$pid" >"$PID_FILE"

  if ! wait_ready "$pid"; then
    terminate "$pid"
    rm -f "$PID_FILE"
    exit 1
  fi
  say "ready on $HOST:$TCP_PORT (tls $TLS_PORT, CA $TLS_DIR/ca.crt; http $HTTP_PORT), pid $pid"
}

cmd_stop() {
  local pid
  if [[ ! -d $STATE_DIR ]]; then
    say "not running (no state dir $STATE_DIR)"
    return 0
  fi
  take_lock
  if ! pid=$(running_pid); then
    if [[ -f $PID_FILE ]]; then
      say "not running (removing stale pid file)"
      rm -f "$PID_FILE"
    else
      say "not running"
    fi
    return 0
  fi
  say "stopping pid $pid"
  terminate "$pid"
  rm -f "$PID_FILE"
  say "stopped"
}

cmd_status() {
  local pid
  if pid=$(running_pid); then
    CLIENT=$(client_bin)
    if answers; then
      say "running (pid $pid), answering on $HOST:$TCP_PORT (http $HTTP_PORT), state $STATE_DIR"
    else
      say "running (pid $pid), not answering on $HOST:$TCP_PORT yet, state $STATE_DIR"
    fi
    return 0
  fi
  say "not running (state $STATE_DIR)"
  return 3
}

cmd_pid() {
  local pid
  pid=$(running_pid) || return 3
  echo "$pid"
}

cmd_wait() {
  local pid=""
  pid=$(running_pid) || die "not running (state $STATE_DIR); use start"
  CLIENT=$(client_bin)
  wait_ready "$pid" || exit 1
  say "ready on $HOST:$TCP_PORT"
}

cmd_client() {
  CLIENT=$(client_bin)
  exec "$CLIENT" --host "$HOST" --port "$TCP_PORT" "$@"
}

usage() {
  sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'
}

case ${1:-} in
  start) cmd_start ;;
  stop) cmd_stop ;;
  restart)
    cmd_stop
    exec 9>&-
    cmd_start
    ;;
  status) cmd_status ;;
  pid) cmd_pid ;;
  wait) cmd_wait ;;
  client)
    shift
    cmd_client "$@"
    ;;
  -h | --help | help) usage ;;
  *)
    usage >&2
    exit 2
    ;;
esac
