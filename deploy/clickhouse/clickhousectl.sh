#!/usr/bin/env bash
# Controls the local, test-only ClickHouse server that chgate's run command and integration
# tests use: Debian's clickhouse-server, loopback only, non-default ports, all state in one
# directory of the checkout. Next to it runs a standalone ZooKeeper (Debian's zookeeper), so
# ReplicatedMergeTree tables, and with them block deduplication, work in every test.
#
# Usage: deploy/clickhouse/clickhousectl.sh COMMAND [args...]
#
#   start      start ZooKeeper, then the server, unless they already run; wait until both
#              answer and the server reaches ZooKeeper
#   stop       stop the server, then ZooKeeper (each by the pid in its pid file: TERM, then
#              KILL after 30 s)
#   restart    stop and start the server only; ZooKeeper keeps running (started when it is not),
#              as it would while a ClickHouse server restarts in production
#   status     print the state of both; exit 0 when both run, 3 when not
#   pid        print the server's pid; exit 3 when not running
#   wait       wait until the server answers a query; non-zero on timeout
#   client     run clickhouse-client against this server, e.g. `client -q 'SELECT version()'`
#   zk-status  print ZooKeeper's state; exit 0 when it answers, 3 when not running, 4 when
#              running but not answering (paused, or still starting)
#   zk-pid     print ZooKeeper's pid; exit 3 when not running
#   zk-pause   SIGSTOP ZooKeeper (fault tests: the server's ZooKeeper requests then hang and
#              time out); the caller must zk-resume it, stop sends SIGCONT too
#   zk-resume  SIGCONT ZooKeeper and wait until it answers again
#
# Environment:
#   CHGATE_CH_STATE_DIR      state dir (default: <checkout>/.local/clickhouse)
#   CHGATE_CH_TCP_PORT       native protocol port (default 29000)
#   CHGATE_CH_HTTP_PORT      HTTP port (default 28123)
#   CHGATE_CH_TLS_PORT       secure (TLS) native protocol port (default 29440); its certificate
#                            and the CA that signed it are made at start under <state>/tls/
#                            (ca.crt is what clients verify against)
#   CHGATE_CH_INTERSERVER_PORT  interserver HTTP port (default 29009): Replicated tables need one
#                            to activate their replica, though no other replica ever connects
#   CHGATE_ZK_PORT           ZooKeeper's client port (default 29181)
#   CHGATE_CH_START_TIMEOUT  seconds to wait for the server, and for ZooKeeper, to answer
#                            (default 60)
#   CHGATE_CH_SERVER         server binary (default: clickhouse-server from PATH or /usr/sbin)
#   CHGATE_CH_CLIENT         client binary (default: clickhouse-client from PATH)
#
# The server runs in the foreground of its own session (setsid), so it survives the shell
# that started it and a Ctrl-C in that terminal; its pid is written to <state>/clickhouse-server.pid.
# ZooKeeper's JVM runs the same way (256 MiB heap at most), with config, data, log and pid file
# under <state>/zookeeper/. Both are only ever stopped or signalled by those pids, never by
# process name. Config templates live next to this script; the absolute paths ClickHouse and
# ZooKeeper need are filled in at start.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$SCRIPT_DIR/../.." && pwd)

STATE_DIR=${CHGATE_CH_STATE_DIR:-$REPO_ROOT/.local/clickhouse}
TCP_PORT=${CHGATE_CH_TCP_PORT:-29000}
HTTP_PORT=${CHGATE_CH_HTTP_PORT:-28123}
TLS_PORT=${CHGATE_CH_TLS_PORT:-29440}
INTERSERVER_PORT=${CHGATE_CH_INTERSERVER_PORT:-29009}
ZK_PORT=${CHGATE_ZK_PORT:-29181}
START_TIMEOUT=${CHGATE_CH_START_TIMEOUT:-60}
STOP_TIMEOUT=30
HOST=127.0.0.1
CLIENT=""

die() {
  echo "clickhousectl: error: $*" >&2
  exit 1
}
say() { echo "clickhousectl: $*"; }

SERVER_PORTS=("$TCP_PORT" "$HTTP_PORT" "$TLS_PORT" "$INTERSERVER_PORT")
for port in "${SERVER_PORTS[@]}" "$ZK_PORT"; do
  if ! [[ $port =~ ^[1-9][0-9]{0,4}$ ]] || ((port > 65535)); then
    die "invalid port '$port'"
  fi
done
[[ $(printf '%s\n' "${SERVER_PORTS[@]}" "$ZK_PORT" | sort -u | wc -l) == 5 ]] ||
  die "the TCP, HTTP, TLS, interserver and ZooKeeper ports must differ" \
    "(${SERVER_PORTS[*]}, $ZK_PORT)"
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

ZK_DIR=$STATE_DIR/zookeeper
ZK_CFG=$ZK_DIR/zoo.cfg
ZK_PID_FILE=$ZK_DIR/zookeeper.pid
ZK_LOG_DIR=$ZK_DIR/logs
ZK_LOG=$ZK_LOG_DIR/zookeeper.log
# Debian's zookeeper package: the jar's manifest names its dependencies; slf4j-simple (from
# libslf4j-java, a dependency) makes it log to stderr, which goes to ZK_LOG. The package's
# zkServer.sh is not used: it sends its log to /var/log/zookeeper whatever ZOO_LOG_DIR says.
ZK_JAR=/usr/share/java/zookeeper.jar
ZK_LOGGER_JAR=/usr/share/java/slf4j-simple.jar
ZK_MAIN=org.apache.zookeeper.server.quorum.QuorumPeerMain
# A small heap and the serial collector: test data only, on a 2-core box that also builds.
ZK_JVM_OPTS=(-Xms32m -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:-UsePerfData
  -XX:+ExitOnOutOfMemoryError -Dorg.slf4j.simpleLogger.showDateTime=true
  "-Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd'T'HH:mm:ss.SSSZ")
ZK_INSTALL_HINT="run deploy/install-deps.sh, or as root: apt-get update && apt-get install -y --no-install-recommends zookeeper"

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

# Prints the state letter of process $1 (R, S, T for stopped, Z, ...), or returns 1.
proc_state() {
  [[ $1 =~ ^[0-9]+$ && -r /proc/$1/stat ]] || return 1
  # Field 3 of /proc/<pid>/stat is the state; the command name before it may contain spaces.
  sed -E 's/^.*\) ([A-Za-z]).*$/\1/' "/proc/$1/stat" 2>/dev/null
}

# True when $1 is a live (not zombie) process whose command line ends with $2 (the space tr
# appends makes the match exact).
is_live_with_tail() {
  local pid=$1 state cmdline
  state=$(proc_state "$pid") || return 1
  [[ -n $state && $state != Z && $state != X ]] || return 1
  cmdline=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
  [[ $cmdline == *" $2 " ]]
}

# Our server: its last argument is --config-file=<our generated config>.
is_our_server() { is_live_with_tail "$1" "--config-file=$CONFIG"; }
# Our ZooKeeper: its last arguments are the main class and our generated zoo.cfg.
is_our_zk() { is_live_with_tail "$1" "$ZK_MAIN $ZK_CFG"; }

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
  text=${text//@INTERSERVER_PORT@/"$INTERSERVER_PORT"}
  text=${text//@ZK_PORT@/"$ZK_PORT"}
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

# --- ZooKeeper --------------------------------------------------------------------------------

# Prints the pid of our running ZooKeeper (from its pid file, checked), or returns 1.
zk_running_pid() {
  local pid
  [[ -f $ZK_PID_FILE ]] || return 1
  pid=$(tr -dc '0-9' <"$ZK_PID_FILE")
  is_our_zk "$pid" || return 1
  echo "$pid"
}

# Sends the four-letter command $1 to ZooKeeper and prints the reply; prints nothing when there
# is none within 2 s (a paused ZooKeeper's port still accepts connections: the kernel does that).
zk_4lw() {
  # shellcheck disable=SC2016 # the inner shell expands them
  timeout 2 bash -c 'exec 3<>"/dev/tcp/$0/$1" && printf %s "$2" >&3 && cat <&3' \
    "$HOST" "$ZK_PORT" "$1" 2>/dev/null | tr -d '\0' || true
}

# True when ZooKeeper serves requests. `ruok` is no test of that: it answers imok as soon as the
# port is open, before the server serves requests; `srvr` prints the mode only once it does.
zk_answers() {
  [[ $(zk_4lw srvr) == *"Mode: standalone"* ]]
}

zk_log_tail() {
  if [[ -s $ZK_LOG ]]; then
    echo "----- last lines of $ZK_LOG -----" >&2
    tail -n 30 "$ZK_LOG" >&2
  fi
}

# Prints the java binary; fails loudly, with the command that installs it, when the zookeeper
# package is missing. Nothing is skipped without it: tests rely on Replicated tables.
zk_java() {
  [[ -r $ZK_JAR ]] ||
    die "ZooKeeper is not installed ($ZK_JAR is missing; Debian package zookeeper), and the" \
      "local ClickHouse needs it for Replicated tables: $ZK_INSTALL_HINT"
  command -v java 2>/dev/null ||
    die "java not found (the zookeeper package depends on default-jre): $ZK_INSTALL_HINT"
}

# Waits until ZooKeeper (pid $1) serves requests.
zk_wait_ready() {
  local pid=$1 deadline=$((SECONDS + START_TIMEOUT))
  while ((SECONDS < deadline)); do
    if zk_answers; then
      return 0
    fi
    if ! is_our_zk "$pid"; then
      echo "clickhousectl: error: zookeeper (pid $pid) exited during startup" >&2
      zk_log_tail
      return 1
    fi
    sleep 0.2
  done
  echo "clickhousectl: error: zookeeper (pid $pid) did not answer on $HOST:$ZK_PORT within ${START_TIMEOUT}s" >&2
  zk_log_tail
  return 1
}

# Starts ZooKeeper unless ours runs; returns once it serves requests. Needs the lock.
zk_start() {
  local java pid owner classpath
  if pid=$(zk_running_pid); then
    [[ $(proc_state "$pid") != T ]] ||
      die "zookeeper (pid $pid) is paused (SIGSTOP, from zk-pause); continue it with: $0 zk-resume"
    zk_wait_ready "$pid" || exit 1
    say "zookeeper already running (pid $pid), reusing it"
    return 0
  fi
  rm -f "$ZK_PID_FILE"
  java=$(zk_java)
  if port_open "$ZK_PORT"; then
    owner=$(port_owner "$ZK_PORT")
    die "port $HOST:$ZK_PORT is already in use${owner:+ by $owner}, and not by the ZooKeeper of" \
      "$STATE_DIR. Stop that process, or choose another port with CHGATE_ZK_PORT."
  fi
  mkdir -p "$ZK_DIR/data" "$ZK_LOG_DIR"
  render "$SCRIPT_DIR/zoo.cfg" "$ZK_CFG"
  classpath=$ZK_JAR
  [[ ! -r $ZK_LOGGER_JAR ]] || classpath+=:$ZK_LOGGER_JAR

  say "starting zookeeper ($HOST:$ZK_PORT, state $ZK_DIR)"
  echo "===== $(date -u '+%Y-%m-%dT%H:%M:%SZ') start as $(id -un)" >>"$ZK_LOG"
  # As for the server below: its own session, $! is the JVM's own pid, the lock's fd closed.
  (cd "$ZK_DIR" && exec setsid "$java" "${ZK_JVM_OPTS[@]}" -cp "$classpath" "$ZK_MAIN" "$ZK_CFG" \
    </dev/null >>"$ZK_LOG" 2>&1 9>&-) &
  pid=$!
  echo "$pid" >"$ZK_PID_FILE"
  if ! zk_wait_ready "$pid"; then
    terminate "$pid" is_our_zk
    rm -f "$ZK_PID_FILE"
    exit 1
  fi
  say "zookeeper ready on $HOST:$ZK_PORT, pid $pid"
}

# Stops our ZooKeeper, if it runs. Needs the lock.
zk_stop() {
  local pid
  if ! pid=$(zk_running_pid); then
    if [[ -f $ZK_PID_FILE ]]; then
      say "zookeeper not running (removing stale pid file)"
      rm -f "$ZK_PID_FILE"
    fi
    return 0
  fi
  say "stopping zookeeper pid $pid"
  terminate "$pid" is_our_zk
  rm -f "$ZK_PID_FILE"
  say "zookeeper stopped"
}

# Prints ZooKeeper's state; returns 0 when it answers, 3 when not running, 4 when it runs but
# does not answer (paused, or starting).
zk_report() {
  local pid info nodes
  if ! pid=$(zk_running_pid); then
    say "zookeeper not running ($HOST:$ZK_PORT, state $ZK_DIR)"
    return 3
  fi
  if [[ $(proc_state "$pid") == T ]]; then
    say "zookeeper paused (pid $pid, SIGSTOP; zk-resume continues it) on $HOST:$ZK_PORT"
    return 4
  fi
  info=$(zk_4lw srvr)
  if [[ $info == *"Mode: standalone"* ]]; then
    nodes=$(sed -n 's/^Node count: *//p' <<<"$info")
    say "zookeeper running (pid $pid), answering on $HOST:$ZK_PORT (${nodes:-?} znodes), state $ZK_DIR"
    return 0
  fi
  say "zookeeper running (pid $pid), not answering on $HOST:$ZK_PORT yet"
  return 4
}

# --- ClickHouse and ZooKeeper together -----------------------------------------------------------

# start and stop hold this lock, so concurrent callers (parallel tests) start one server.
take_lock() {
  exec 9>"$STATE_DIR/.lock"
  flock -w $((2 * START_TIMEOUT + 2 * STOP_TIMEOUT + 30)) 9 ||
    die "timed out waiting for $STATE_DIR/.lock"
}

# TERM, wait up to STOP_TIMEOUT seconds, then KILL: exactly this pid, and only while it is ours
# ($2 is the check: is_our_server or is_our_zk). CONT follows TERM so that a process paused with
# SIGSTOP (a fault test that did not resume it) handles the TERM now, not after 30 s.
terminate() {
  local pid=$1 ours=${2:-is_our_server} ticks=0
  "$ours" "$pid" || return 0
  kill -TERM "$pid" 2>/dev/null || true
  kill -CONT "$pid" 2>/dev/null || true
  while "$ours" "$pid"; do
    if ((ticks >= STOP_TIMEOUT * 10)); then
      say "pid $pid still running after ${STOP_TIMEOUT}s, sending KILL"
      kill -KILL "$pid" 2>/dev/null || true
      ticks=0
      while "$ours" "$pid"; do
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

# Waits until the server reaches ZooKeeper: its system.zookeeper table reads the root znode.
# $1 is true when the server was already running (it may predate the ZooKeeper config).
wait_server_zk() {
  local reused=$1 out="" deadline=$((SECONDS + START_TIMEOUT))
  while ((SECONDS < deadline)); do
    out=$(timeout 15 "$CLIENT" --host "$HOST" --port "$TCP_PORT" \
      -q "SELECT count() FROM system.zookeeper WHERE path = '/'" 2>&1) || true
    if [[ $out =~ ^[1-9][0-9]*$ ]]; then
      return 0
    fi
    # A server started without a <zookeeper> section has no system.zookeeper table, and never
    # gets one by waiting.
    [[ $out != *"system.zookeeper doesn't exist"* ]] || break
    sleep 0.5
  done
  echo "clickhousectl: error: the server on $HOST:$TCP_PORT does not reach ZooKeeper on" \
    "$HOST:$ZK_PORT: $out" >&2
  if $reused; then
    echo "clickhousectl: it was already running, perhaps started without the ZooKeeper config;" \
      "restart it: $0 restart" >&2
  fi
  return 1
}

# A port in the kernel's ephemeral range can be taken by any outgoing connection, even by a
# client retrying this very port while nothing listens (Linux walks the source ports towards the
# same destination: sooner or later it picks the destination port, and the socket connects to
# itself). Its TIME_WAIT then keeps the server from binding for a minute.
warn_ephemeral_ports() {
  local low high port
  read -r low high 2>/dev/null </proc/sys/net/ipv4/ip_local_port_range || return 0
  for port in "${SERVER_PORTS[@]}" "$ZK_PORT"; do
    if ((port >= low && port <= high)); then
      say "warning: port $port is in the ephemeral port range ($low-$high), where a connection" \
        "attempt to it can connect to itself and block it; prefer ports below $low"
    fi
  done
}

# Waits until no Replicated table is read-only. After ZooKeeper comes back (restarted under a
# running server), each table waits for its restarting thread to open a new session and
# reactivate the replica, up to ~10 s in 18.16; until then INSERTs fail with "Table is in
# readonly mode". A table whose ZooKeeper metadata is gone stays read-only: only a warning.
wait_replicas_writable() {
  local out="" deadline=$((SECONDS + START_TIMEOUT))
  while ((SECONDS < deadline)); do
    out=$(timeout 15 "$CLIENT" --host "$HOST" --port "$TCP_PORT" \
      -q "SELECT concat(database, '.', table) FROM system.replicas WHERE is_readonly" 2>&1) || true
    [[ -n $out ]] || return 0
    sleep 0.5
  done
  say "warning: still read-only after ${START_TIMEOUT}s: $(tr '\n' ' ' <<<"$out")(their" \
    "ZooKeeper metadata may be gone: drop them, or delete $STATE_DIR with the server stopped)"
}

cmd_start() {
  local server pid port owner
  server=$(server_bin)
  CLIENT=$(client_bin)
  zk_java >/dev/null
  mkdir -p "$STATE_DIR" || die "cannot create state dir $STATE_DIR"
  [[ -w $STATE_DIR ]] || die "state dir $STATE_DIR is not writable by $(id -un)"
  take_lock
  warn_ephemeral_ports

  # ZooKeeper first: the server retries its ZooKeeper connection, but a Replicated CREATE or
  # INSERT in the meantime fails.
  zk_start

  if pid=$(running_pid); then
    say "already running (pid $pid), reusing it"
    wait_ready "$pid" || exit 1
    wait_server_zk true || exit 1
    wait_replicas_writable
    say "ready on $HOST:$TCP_PORT (tls $TLS_PORT, http $HTTP_PORT; zookeeper $ZK_PORT)"
    return 0
  fi
  rm -f "$PID_FILE"

  for port in "${SERVER_PORTS[@]}"; do
    if port_open "$port"; then
      owner=$(port_owner "$port")
      die "port $HOST:$port is already in use${owner:+ by $owner}, and not by the server of $STATE_DIR." \
        "Stop that process, or choose other ports with CHGATE_CH_TCP_PORT, CHGATE_CH_HTTP_PORT," \
        "CHGATE_CH_TLS_PORT or CHGATE_CH_INTERSERVER_PORT."
    fi
  done

  mkdir -p "$LOG_DIR" "$DATA_DIR"
  make_certificates
  render "$SCRIPT_DIR/config.xml" "$CONFIG"
  render "$SCRIPT_DIR/users.xml" "$USERS"

  say "starting $server (state $STATE_DIR, tcp $HOST:$TCP_PORT, tls $HOST:$TLS_PORT, http" \
    "$HOST:$HTTP_PORT, interserver $HOST:$INTERSERVER_PORT)"
  echo "===== $(date -u '+%Y-%m-%dT%H:%M:%SZ') start as $(id -un)" >>"$STDOUT_LOG"
  # setsid gives the server its own session: no controlling terminal, so a Ctrl-C in the
  # caller's terminal does not reach it. A background job of a script (no job control) is not a
  # process group leader, so setsid does not fork and $! is the server's own pid. The server runs
  # in the foreground (not --daemon) so that errors before its logger is up land in stdout.log.
  # fd 9 (the lock) is closed so the server does not hold it.
  (cd "$STATE_DIR" && exec setsid "$server" "--config-file=$CONFIG" </dev/null >>"$STDOUT_LOG" 2>&1 9>&-) &
  pid=$!
  echo "$pid" >"$PID_FILE"

  if ! wait_ready "$pid" || ! wait_server_zk false; then
    terminate "$pid"
    rm -f "$PID_FILE"
    exit 1
  fi
  wait_replicas_writable
  say "ready on $HOST:$TCP_PORT (tls $TLS_PORT, CA $TLS_DIR/ca.crt; http $HTTP_PORT;" \
    "zookeeper $ZK_PORT), pid $pid"
}

# Stops our server, if it runs. Needs the lock.
server_stop() {
  local pid
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

# The server first: it should not spend its shutdown on a ZooKeeper that is gone.
cmd_stop() {
  if [[ ! -d $STATE_DIR ]]; then
    say "not running (no state dir $STATE_DIR)"
    return 0
  fi
  take_lock
  server_stop
  zk_stop
}

# The server only: tests restart it under load and expect ZooKeeper (and the Replicated tables'
# state there) to stay, as in production. start then reuses ZooKeeper, or starts it if it is down.
cmd_restart() {
  if [[ -d $STATE_DIR ]]; then
    take_lock
    server_stop
    exec 9>&-
  fi
  cmd_start
}

cmd_status() {
  local pid rc=0
  if pid=$(running_pid); then
    CLIENT=$(client_bin)
    if answers; then
      say "running (pid $pid), answering on $HOST:$TCP_PORT (http $HTTP_PORT), state $STATE_DIR"
    else
      say "running (pid $pid), not answering on $HOST:$TCP_PORT yet, state $STATE_DIR"
    fi
  else
    say "not running (state $STATE_DIR)"
    rc=3
  fi
  zk_report || (($? != 3)) || rc=3
  return "$rc"
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

cmd_zk_pid() {
  local pid
  pid=$(zk_running_pid) || return 3
  echo "$pid"
}

cmd_zk_pause() {
  local pid ticks=0
  pid=$(zk_running_pid) || die "zookeeper is not running (state $ZK_DIR)"
  kill -STOP "$pid"
  while [[ $(proc_state "$pid") != T ]]; do
    ((ticks < 50)) || die "zookeeper (pid $pid) did not stop within 5 s of SIGSTOP"
    sleep 0.1
    ticks=$((ticks + 1))
  done
  say "zookeeper paused (pid $pid); continue it with zk-resume"
}

cmd_zk_resume() {
  local pid
  pid=$(zk_running_pid) || die "zookeeper is not running (state $ZK_DIR)"
  kill -CONT "$pid"
  zk_wait_ready "$pid" || exit 1
  say "zookeeper running (pid $pid), answering on $HOST:$ZK_PORT"
}

usage() {
  sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'
}

case ${1:-} in
  start) cmd_start ;;
  stop) cmd_stop ;;
  restart) cmd_restart ;;
  status) cmd_status ;;
  pid) cmd_pid ;;
  wait) cmd_wait ;;
  zk-status) zk_report ;;
  zk-pid) cmd_zk_pid ;;
  zk-pause) cmd_zk_pause ;;
  zk-resume) cmd_zk_resume ;;
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
