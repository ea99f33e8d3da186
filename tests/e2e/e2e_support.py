"""Shared machinery of chgate's end-to-end tests and load generator.

Everything here drives the real `chgate` binary and the local ClickHouse from the outside, with
Debian's python3-grpcio as the client (an independent gRPC implementation):

  - Stubs: Python modules generated from proto/chgate/v1/chgate.proto (and grpc.health.v1) at run
    time into a temporary directory.
  - ClickHouse: clickhouse-client for DDL and read-back; clickhousectl.sh for the server's pid
    (SIGSTOP/SIGCONT), stops, starts and restarts.
  - ChgateProcess: one chgate on free loopback ports, stopped by its own pid.
  - encode_column(): ClickHouse types to the columnar `Block` layout described in the .proto.

Environment:
  CHGATE_CLICKHOUSE           host:port of ClickHouse's native protocol (default 127.0.0.1:29000)
  CHGATE_REQUIRE_CLICKHOUSE   1: an unreachable ClickHouse fails the tests instead of skipping them
  CHGATE_CLICKHOUSE_CTL       path of clickhousectl.sh (default: deploy/clickhouse/ in the checkout)
  CHGATE_CLICKHOUSE_CLIENT    clickhouse-client binary (default: clickhouse-client from PATH)
  CHGATE_SOURCE_DIR           the checkout (default: two levels above this file)
  CHGATE_BINARY               chgate binary when --chgate is not given (default: build/server/chgate)
  CHGATE_E2E_KEEP_LOGS        1: keep chgate's logs and the generated stubs (their dir is printed)
  CHGATE_E2E_DATABASE         database for the test tables (default chgate_e2e)
  CHGATE_E2E_STRICT           1: tests of known server bugs fail instead of being skipped

Run it with /usr/bin/python3: Debian's grpc modules are not visible to other interpreters.
"""

import os

# gRPC's fork handlers wait for its thread pool to go idle before every fork, which a test
# starting chgate (a fork) while writer threads keep gRPC busy can wait on forever. The tests
# never use gRPC in a forked child.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

import atexit
import ctypes
import decimal
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import types
import unittest
import urllib.request
import uuid as uuidlib
from pathlib import Path

DATABASE = os.environ.get("CHGATE_E2E_DATABASE") or "chgate_e2e"
STATUS_TRAILER = "chgate-status-bin"

SOURCE_DIR = Path(os.environ.get("CHGATE_SOURCE_DIR") or Path(__file__).resolve().parents[2])

_work_dir = None


def work_dir():
    """A per-run temporary directory for stubs and logs (removed at exit unless kept)."""
    global _work_dir
    if _work_dir is None:
        _work_dir = Path(tempfile.mkdtemp(prefix="chgate-e2e-"))
        if os.environ.get("CHGATE_E2E_KEEP_LOGS") == "1":
            print(f"e2e: keeping logs and stubs in {_work_dir}", file=sys.stderr)
        else:
            atexit.register(shutil.rmtree, _work_dir, True)
    return _work_dir


# ---------------------------------------------------------------------------------------------
# Generated stubs
# ---------------------------------------------------------------------------------------------

_stubs = None

# grpc.health.v1 as published by gRPC, for systems without Debian's grpc-proto package.
_HEALTH_PROTO = """\
syntax = "proto3";
package grpc.health.v1;
message HealthCheckRequest { string service = 1; }
message HealthCheckResponse {
  enum ServingStatus { UNKNOWN = 0; SERVING = 1; NOT_SERVING = 2; SERVICE_UNKNOWN = 3; }
  ServingStatus status = 1;
}
service Health {
  rpc Check(HealthCheckRequest) returns (HealthCheckResponse);
  rpc Watch(HealthCheckRequest) returns (stream HealthCheckResponse);
}
"""


def _well_known_include():
    """Directory holding google/protobuf/{timestamp,duration,struct}.proto."""
    candidates = []
    try:
        import grpc_tools

        candidates.append(Path(grpc_tools.__file__).parent / "_proto")
    except ImportError:
        pass
    candidates += [Path("/usr/include"), Path("/usr/local/include")]
    for c in candidates:
        if (c / "google/protobuf/timestamp.proto").is_file():
            return c
    raise RuntimeError("no google/protobuf/*.proto found (install python3-grpc-tools or libprotobuf-dev)")


def _run_protoc(argv_tail):
    """Runs `python3 -m grpc_tools.protoc`; if that fails (python3-grpc-tools 1.14 bundles protoc
    3.5, which rejects proto3 `optional` fields such as ValueError.row_index), runs the system's
    protoc with grpc_python_plugin (Debian protobuf-compiler and protobuf-compiler-grpc)."""
    errors = []
    cmd = [sys.executable, "-m", "grpc_tools.protoc", *argv_tail]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode == 0:
        return "grpc_tools.protoc"
    errors.append(f"{' '.join(cmd)}: {r.stderr.strip()}")
    protoc = shutil.which("protoc")
    plugin = shutil.which("grpc_python_plugin")
    if protoc and plugin:
        cmd = [protoc, f"--plugin=protoc-gen-grpc_python={plugin}", *argv_tail]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode == 0:
            return "protoc + grpc_python_plugin"
        errors.append(f"{' '.join(cmd)}: {r.stderr.strip()}")
    else:
        errors.append("no system protoc/grpc_python_plugin to fall back to")
    raise RuntimeError("cannot generate Python stubs:\n  " + "\n  ".join(errors))


def load_stubs():
    """Generates and imports the stubs once per process. Returns a namespace with pb (chgate.v1
    messages), pb_grpc (IngestStub), health_pb, health_grpc and generator (which protoc ran)."""
    global _stubs
    if _stubs is not None:
        return _stubs
    out = work_dir() / "stubs"
    out.mkdir(parents=True, exist_ok=True)
    proto_root = SOURCE_DIR / "proto"
    if not (proto_root / "chgate/v1/chgate.proto").is_file():
        raise RuntimeError(f"chgate.proto not found under {proto_root} (set CHGATE_SOURCE_DIR)")
    wkt = _well_known_include()
    generator = _run_protoc([f"-I{proto_root}", f"-I{wkt}", f"--python_out={out}",
                             f"--grpc_python_out={out}", "chgate/v1/chgate.proto"])
    # The health service: Debian's grpc-proto copy when present. It is compiled from a directory
    # not named `grpc`, so the generated package cannot shadow the grpc module itself.
    health_src = out / "health_src" / "chgate_e2e_health"
    health_src.mkdir(parents=True, exist_ok=True)
    debian_health = Path("/usr/share/grpc-proto/grpc/health/v1/health.proto")
    text = debian_health.read_text() if debian_health.is_file() else _HEALTH_PROTO
    (health_src / "health.proto").write_text(text)
    _run_protoc([f"-I{out / 'health_src'}", f"--python_out={out}", f"--grpc_python_out={out}",
                 "chgate_e2e_health/health.proto"])
    sys.path.insert(0, str(out))
    import grpc  # noqa: F401  (fail early with a clear error if python3-grpcio is missing)
    from chgate.v1 import chgate_pb2, chgate_pb2_grpc
    from chgate_e2e_health import health_pb2, health_pb2_grpc

    _stubs = types.SimpleNamespace(pb=chgate_pb2, pb_grpc=chgate_pb2_grpc, health_pb=health_pb2,
                                   health_grpc=health_pb2_grpc, generator=generator)
    return _stubs


# ---------------------------------------------------------------------------------------------
# ClickHouse
# ---------------------------------------------------------------------------------------------

class ClickHouseError(RuntimeError):
    pass


def _parse_host_port(text, default_port):
    text = text.strip()
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        return host, int(rest[1:]) if rest.startswith(":") else default_port
    if text.count(":") == 1:
        host, port = text.split(":")
        return host, int(port)
    return text, default_port


class ClickHouse:
    """The ClickHouse server the tests run against, through clickhouse-client and clickhousectl."""

    def __init__(self, address=None, ctl=None):
        address = address or os.environ.get("CHGATE_CLICKHOUSE") or "127.0.0.1:29000"
        self.host, self.port = _parse_host_port(address, 9000)
        self.address = f"{self.host}:{self.port}"
        self.client = os.environ.get("CHGATE_CLICKHOUSE_CLIENT") or "clickhouse-client"
        ctl = ctl or os.environ.get("CHGATE_CLICKHOUSE_CTL")
        self.ctl = Path(ctl) if ctl else SOURCE_DIR / "deploy/clickhouse/clickhousectl.sh"

    @property
    def required(self):
        return os.environ.get("CHGATE_REQUIRE_CLICKHOUSE") == "1"

    def query(self, sql, data=None, timeout=120, settings=None):
        """Runs one statement; returns stdout as text (non-UTF-8 bytes as surrogate escapes)."""
        cmd = [self.client, "--host", self.host, "--port", str(self.port), "--query", sql]
        for k, v in (settings or {}).items():
            cmd.append(f"--{k}={v}")
        try:
            r = subprocess.run(cmd, input=data if data is not None else b"",
                               capture_output=True, timeout=timeout)
        except FileNotFoundError as e:
            raise ClickHouseError(f"{self.client} not found: {e}") from e
        except subprocess.TimeoutExpired as e:
            raise ClickHouseError(f"clickhouse-client timed out after {timeout}s: {sql}") from e
        if r.returncode != 0:
            raise ClickHouseError(f"clickhouse-client failed (rc {r.returncode}) on {sql!r}: "
                                  f"{r.stderr.decode(errors='replace').strip()}")
        return r.stdout.decode("utf-8", errors="surrogateescape")

    def scalar(self, sql, **kw):
        return self.query(sql, **kw).strip()

    def check_reachable(self, timeout=10):
        """Returns None when ClickHouse answers, else why not."""
        try:
            out = self.query("SELECT 1", timeout=timeout).strip()
        except ClickHouseError as e:
            return str(e)
        return None if out == "1" else f"unexpected answer to SELECT 1: {out!r}"

    def wait_ready(self, timeout=120):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            last = self.check_reachable(timeout=10)
            if last is None:
                return
            time.sleep(0.5)
        raise ClickHouseError(f"ClickHouse at {self.address} did not answer within {timeout}s: {last}")

    def ensure_database(self):
        self.query(f"CREATE DATABASE IF NOT EXISTS {DATABASE}")

    def recreate_table(self, name, columns_sql, engine="MergeTree ORDER BY id"):
        self.query(f"DROP TABLE IF EXISTS {DATABASE}.{name}")
        # LowCardinality is experimental in 18.16 (the local server's profile allows it anyway);
        # newer servers accept the setting as obsolete.
        settings = {"allow_experimental_low_cardinality_type": 1} if "LowCardinality" in columns_sql else None
        self.query(f"CREATE TABLE {DATABASE}.{name} ({columns_sql}) ENGINE = {engine}", settings=settings)

    def column_types(self, table):
        """{column: type} of DATABASE.table, as the server prints the types."""
        out = self.query(f"SELECT name, type FROM system.columns WHERE database = '{DATABASE}' "
                         f"AND table = '{table}' FORMAT TabSeparatedRaw")
        return dict(line.split("\t", 1) for line in out.splitlines())

    # --- the server process, through clickhousectl.sh -------------------------------------------

    def _ctl(self, *args, timeout=180):
        if not self.ctl.is_file():
            raise ClickHouseError(f"clickhousectl.sh not found at {self.ctl} (set CHGATE_CLICKHOUSE_CTL)")
        env = dict(os.environ)
        # The ctl script serves the port it is told; make it the one the tests use.
        env.setdefault("CHGATE_CH_TCP_PORT", str(self.port))
        return subprocess.run([str(self.ctl), *args], capture_output=True, text=True,
                              timeout=timeout, env=env, stdin=subprocess.DEVNULL)

    def server_pid(self):
        """The pid of the ClickHouse server, or raises unittest.SkipTest when it cannot be
        controlled (no ctl script, or its server is not the one on our port)."""
        if self.host not in ("127.0.0.1", "localhost", "::1"):
            raise unittest.SkipTest(f"ClickHouse at {self.address} is not local: cannot pause it")
        try:
            r = self._ctl("pid", timeout=30)
        except ClickHouseError as e:
            raise unittest.SkipTest(str(e))
        if r.returncode != 0 or not r.stdout.strip().isdigit():
            raise unittest.SkipTest(f"{self.ctl} pid: no server of its own ({r.stdout.strip()} "
                                    f"{r.stderr.strip()})")
        pid = int(r.stdout.strip())
        listens = pid_listens_on(pid, self.port)
        if listens is False:
            raise unittest.SkipTest(f"the server of {self.ctl} (pid {pid}) does not listen on "
                                    f"port {self.port}")
        return pid

    def start(self):
        """clickhousectl.sh start: reuses a running server, else starts one and waits for it."""
        r = self._ctl("start", timeout=240)
        if r.returncode != 0:
            raise ClickHouseError(f"clickhousectl.sh start failed: {r.stdout}{r.stderr}")

    def stop(self):
        """clickhousectl.sh stop: TERM to the server's pid, KILL after 30 s. Callers must start it
        again (in a finally), the other tests share it."""
        r = self._ctl("stop", timeout=120)
        if r.returncode != 0:
            raise ClickHouseError(f"clickhousectl.sh stop failed: {r.stdout}{r.stderr}")

    def restart(self):
        r = self._ctl("restart", timeout=240)
        if r.returncode != 0:
            raise ClickHouseError(f"clickhousectl.sh restart failed: {r.stdout}{r.stderr}")
        return r.stdout + r.stderr


def reachable_clickhouse():
    """The ClickHouse to test against, for a setUpClass: raises SkipTest when it cannot be reached,
    or RuntimeError when CHGATE_REQUIRE_CLICKHOUSE=1 says it must be there."""
    ch = ClickHouse()
    problem = ch.check_reachable()
    if problem is not None:
        if ch.required:
            raise RuntimeError(f"ClickHouse unreachable: {problem}")
        raise unittest.SkipTest(f"ClickHouse unreachable: {problem}")
    return ch


def pid_listens_on(pid, port):
    """True if process `pid` owns a TCP socket listening on `port`, False if not, None if that
    cannot be told (no permission to read its fds)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    parts = line.split()
                    local, state, inode = parts[1], parts[3], parts[9]
                    if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
                        inodes.add(inode)
        except OSError:
            continue
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return None
    for fd in fds:
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:[") and link[8:-1] in inodes:
            return True
    return False


class PausedClickHouse:
    """Context manager: SIGSTOP on the ClickHouse server's pid, SIGCONT on exit, always.

    A detached watchdog process also sends SIGCONT after `max_seconds`, so the server is resumed
    even if this test process is killed while it is stopped; the watchdog is killed (by its pid)
    on a normal exit."""

    def __init__(self, clickhouse, max_seconds=120):
        self.clickhouse = clickhouse
        self.max_seconds = max_seconds
        self.pid = None
        self.watchdog = None
        self.paused_at = None

    def __enter__(self):
        self.pid = self.clickhouse.server_pid()
        self.watchdog = subprocess.Popen(
            ["sh", "-c", f"sleep {int(self.max_seconds)}; kill -CONT {self.pid}"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        os.kill(self.pid, signal.SIGSTOP)
        self.paused_at = time.monotonic()
        return self

    def resume(self):
        if self.pid is not None:
            try:
                os.kill(self.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
            self.pid = None
        if self.watchdog is not None:
            if self.watchdog.poll() is None:
                try:
                    os.killpg(self.watchdog.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self.watchdog.wait()
            self.watchdog = None

    def __exit__(self, *exc):
        self.resume()
        return False


# ---------------------------------------------------------------------------------------------
# The chgate process
# ---------------------------------------------------------------------------------------------

def free_ports(n, host="127.0.0.1"):
    """n distinct ports that were free a moment ago (bound to port 0, then released)."""
    socks, ports = [], []
    try:
        while len(ports) < n:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((host, 0))
            socks.append(s)
            ports.append(s.getsockname()[1])
    finally:
        for s in socks:
            s.close()
    return ports


def non_loopback_ipv4():
    """An IPv4 address of this machine that is not loopback, or None."""
    try:
        out = subprocess.run(["hostname", "-I"], capture_output=True, text=True, timeout=5).stdout
        for word in out.split():
            if re.fullmatch(r"\d+\.\d+\.\d+\.\d+", word) and not word.startswith("127."):
                return word
    except (OSError, subprocess.SubprocessError):
        pass
    # The UDP connect trick: no packet is sent, the kernel only picks a source address.
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))
            addr = s.getsockname()[0]
            if not addr.startswith("127.") and addr != "0.0.0.0":
                return addr
    except OSError:
        pass
    return None


_PR_SET_PDEATHSIG = 1


def _die_with_parent():
    # In the child before exec: if the test runner dies, the kernel kills chgate too.
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except Exception:  # noqa: BLE001 - best effort only
        pass


_sanitized = {}


def is_sanitized(binary):
    """Whether `binary` was built with AddressSanitizer (its RSS then says little: freed memory
    sits in ASan's quarantine)."""
    if binary not in _sanitized:
        import mmap

        try:
            with open(binary, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
                _sanitized[binary] = m.find(b"__asan_init") >= 0
        except (OSError, ValueError):
            _sanitized[binary] = False
    return _sanitized[binary]


def default_chgate_binary():
    return os.environ.get("CHGATE_BINARY") or str(SOURCE_DIR / "build/server/chgate")


class ChgateProcess:
    """One chgate on free ports: API on 127.0.0.1, health on `health_host`, metrics on 127.0.0.1."""

    def __init__(self, binary, clickhouse, args=(), health_host="127.0.0.1", name="chgate",
                 database=DATABASE, metrics_host="127.0.0.1", env=None, socket_path=None):
        self.binary = binary
        self.socket_path = socket_path  # the API on this Unix socket instead of 127.0.0.1:port
        self.extra_env = dict(env or {})  # set on top of the environment (CHGATE_* removed)
        self.clickhouse = clickhouse
        self.args = list(args)
        self.health_host = health_host
        self.metrics_host = metrics_host
        self.name = name
        self.database = database
        self.proc = None
        self.api_port = self.health_port = self.metrics_port = None
        self.log_path = None
        self._log = None
        self.exit_code = None

    @property
    def pid(self):
        return self.proc.pid

    @property
    def api_address(self):
        if self.socket_path is not None:
            return f"unix:{self.socket_path}"
        return f"127.0.0.1:{self.api_port}"

    def command(self):
        return [self.binary,
                f"--listen={self.api_address}",
                f"--health-listen={self.health_host}:{self.health_port}",
                f"--metrics-listen={self.metrics_host}:{self.metrics_port}",
                f"--endpoints={self.clickhouse.address}",
                f"--database={self.database}",
                *self.args]

    def start(self, timeout=30, on_spawn=None):
        """Starts chgate and waits until it serves the API. `on_spawn(self)` is called as soon as
        the process exists (its ports chosen), before it serves."""
        if not os.access(self.binary, os.X_OK):
            raise RuntimeError(f"chgate binary {self.binary} is missing or not executable "
                               "(build it, or pass --chgate)")
        for attempt in range(3):  # a port picked by free_ports() may have been taken since
            self.api_port, self.health_port, self.metrics_port = free_ports(3)
            self.log_path = work_dir() / f"{self.name}-{int(time.time() * 1000)}.log"
            self._log = open(self.log_path, "wb")
            env = {k: v for k, v in os.environ.items() if not k.startswith("CHGATE_")}
            env.update(self.extra_env)
            self.proc = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL, stdout=self._log,
                                         stderr=subprocess.STDOUT, env=env,
                                         preexec_fn=_die_with_parent)
            if on_spawn is not None:
                on_spawn(self)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    break
                if b"chgate: serving the API" in self.log_path.read_bytes():
                    return self
                time.sleep(0.05)
            if self.proc.poll() is None:
                self.kill()
                raise RuntimeError(f"chgate did not start within {timeout}s:\n{self.log_tail()}")
            log = self.log_tail()
            self._close_log()
            if "cannot listen" not in log or attempt == 2:
                raise RuntimeError(f"chgate exited with {self.proc.returncode} at start:\n{log}")
        raise AssertionError("unreachable")

    def log_text(self):
        try:
            return self.log_path.read_bytes().decode(errors="replace")
        except (OSError, AttributeError):
            return ""

    def log_tail(self, lines=40):
        return "\n".join(self.log_text().splitlines()[-lines:])

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig):
        os.kill(self.proc.pid, sig)

    def wait(self, timeout):
        """Waits for exit; returns the exit code, or None on timeout."""
        try:
            self.exit_code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        self._close_log()
        return self.exit_code

    def stop(self, timeout=60):
        """SIGTERM, then SIGKILL after `timeout` s; only this process. Returns the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            try:
                self.signal(signal.SIGTERM)
            except ProcessLookupError:
                pass
            if self.wait(timeout) is None:
                self.kill()
        self.exit_code = self.proc.wait()
        self._close_log()
        return self.exit_code

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.proc.kill()
            except ProcessLookupError:
                pass
            self.proc.wait()
        self._close_log()

    def _close_log(self):
        if self._log is not None:
            self._log.close()
            self._log = None

    def cpu_seconds(self):
        """User plus system CPU time of the process so far (all threads), from /proc/<pid>/stat."""
        with open(f"/proc/{self.proc.pid}/stat") as f:
            stat = f.read()
        # The command name is in parentheses and may hold spaces: fields count after the last ')'.
        fields = stat[stat.rindex(")") + 2:].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def memory_kib(self):
        """{'VmRSS': kib, 'VmHWM': kib, ...} from /proc/<pid>/status."""
        out = {}
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("Vm"):
                    key, _, rest = line.partition(":")
                    out[key] = int(rest.split()[0])
        return out

    # --- clients ---------------------------------------------------------------------------------

    def channel(self, **options):
        import grpc

        opts = [("grpc.max_receive_message_length", 64 << 20),
                ("grpc.max_send_message_length", 64 << 20)]
        opts += list(options.items())
        return grpc.insecure_channel(self.api_address, options=opts)

    def health(self, service, host="127.0.0.1", port=None, timeout=5):
        """The grpc.health.v1 status name for `service` (raises grpc.RpcError on errors)."""
        import grpc

        stubs = load_stubs()
        with grpc.insecure_channel(f"{host}:{port or self.health_port}") as ch:
            stub = stubs.health_grpc.HealthStub(ch)
            r = stub.Check(stubs.health_pb.HealthCheckRequest(service=service), timeout=timeout)
            return stubs.health_pb.HealthCheckResponse.ServingStatus.Name(r.status)

    def scrape(self, timeout=10, host="127.0.0.1"):
        with urllib.request.urlopen(f"http://{host}:{self.metrics_port}/metrics",
                                    timeout=timeout) as r:
            return parse_prometheus(r.read().decode())


_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def fill_spool(proc, table, spool_dir, writers=4):
    """Sends persisted 1,000-row requests (id UInt64, writer UInt32, payload String of 200 bytes)
    to `table` from `writers` threads until chgate refuses one with RESOURCE_EXHAUSTED (its spool
    is full: ClickHouse must not be taking rows). Returns (requests acked, bytes of segments)."""
    import grpc

    stubs = load_stubs()
    pb, pb_grpc = stubs.pb, stubs.pb_grpc
    payload = "x" * 200
    stop = threading.Event()
    sent = [0]
    errors = []

    def run(worker):
        channel = grpc.insecure_channel(proc.api_address)
        stub = pb_grpc.IngestStub(channel)
        n = 0
        while not stop.is_set():
            first = (worker * 1_000_000 + n) * 1000
            rows = [pb.Row(values=[V.u(first + i), V.u(worker), V.s(payload)]) for i in range(1000)]
            try:
                stub.Insert(pb.InsertRequest(table=f"{DATABASE}.{table}",
                                             columns=["id", "writer", "payload"],
                                             rows=pb.RowSet(rows=rows),
                                             ack_mode=pb.ACK_MODE_PERSISTED), timeout=30)
                sent[0] += 1
            except grpc.RpcError as e:
                if e.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
                    errors.append(e)
                stop.set()
                break
            n += 1
        channel.close()

    threads = [threading.Thread(target=run, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return sent[0], sum(f.stat().st_size for f in Path(spool_dir).glob("*.wal"))


def parse_prometheus(text):
    """[(name, {label: value}, float)] of the samples in a text exposition."""
    samples = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if m:
            labels = dict(_LABEL.findall(m.group(3) or ""))
            samples.append((m.group(1), labels, float(m.group(4))))
    return samples


def metric_sum(samples, name, **labels):
    """Sum of the samples of `name` whose labels include `labels`; None if there is none."""
    values = [v for n, l, v in samples if n == name and all(l.get(k) == x for k, x in labels.items())]
    return sum(values) if values else None


# ---------------------------------------------------------------------------------------------
# Values and blocks
# ---------------------------------------------------------------------------------------------

class V:
    """Short constructors for chgate.v1.Value (call after load_stubs())."""

    @staticmethod
    def pb():
        return load_stubs().pb

    @classmethod
    def null(cls):
        return cls.pb().Value(null_value=0)

    @classmethod
    def i(cls, x):
        return cls.pb().Value(int64_value=x)

    @classmethod
    def u(cls, x):
        return cls.pb().Value(uint64_value=x)

    @classmethod
    def d(cls, x):
        return cls.pb().Value(double_value=x)

    @classmethod
    def s(cls, x):
        return cls.pb().Value(string_value=x)

    @classmethod
    def b(cls, x):
        return cls.pb().Value(bytes_value=x)

    @classmethod
    def bool(cls, x):
        return cls.pb().Value(bool_value=x)

    @classmethod
    def ts(cls, seconds, nanos=0):
        from google.protobuf import timestamp_pb2

        return cls.pb().Value(timestamp_value=timestamp_pb2.Timestamp(seconds=seconds, nanos=nanos))

    @classmethod
    def arr(cls, items):
        return cls.pb().Value(array_value=cls.pb().ValueList(values=list(items)))

    @classmethod
    def tup(cls, items):
        return cls.pb().Value(tuple_value=cls.pb().ValueList(values=list(items)))


def rows_request(table, columns, rows, sequence=0, **kw):
    """An InsertRequest with `rows` as lists of Values."""
    pb = load_stubs().pb
    return pb.InsertRequest(table=table, columns=list(columns), sequence=sequence,
                            rows=pb.RowSet(rows=[pb.Row(values=list(r)) for r in rows]), **kw)


def parse_type(text):
    """'Array(Nullable(Int32))' -> ('Array', ['Nullable(Int32)']); 'UInt8' -> ('UInt8', [])."""
    text = text.strip()
    p = text.find("(")
    if p < 0:
        return text, []
    name, inner = text[:p].strip(), text[p + 1:text.rindex(")")]
    args, depth, quote, cur = [], 0, None, ""
    i = 0
    while i < len(inner):
        c = inner[i]
        if quote:
            cur += c
            if c == "\\" and i + 1 < len(inner):
                cur += inner[i + 1]
                i += 1
            elif c == quote:
                quote = None
        elif c in "'`\"":
            quote = c
            cur += c
        elif c == "(":
            depth += 1
            cur += c
        elif c == ")":
            depth -= 1
            cur += c
        elif c == "," and depth == 0:
            args.append(cur.strip())
            cur = ""
        else:
            cur += c
        i += 1
    if cur.strip():
        args.append(cur.strip())
    return name, args


_FIXED = {"UInt8": "B", "UInt16": "H", "UInt32": "I", "UInt64": "Q", "Int8": "b", "Int16": "h",
          "Int32": "i", "Int64": "q", "Float32": "f", "Float64": "d", "Date": "H", "DateTime": "I",
          "Enum8": "b", "Enum16": "h"}


def _default(type_text):
    name, args = parse_type(type_text)
    if name in ("String", "FixedString"):
        return b""
    if name == "UUID":
        return uuidlib.UUID(int=0)
    if name == "Array":
        return []
    if name == "Tuple":
        return tuple(_default(a) for a in args)
    if name in ("Nullable", "LowCardinality"):
        return _default(args[0])
    return 0


def _as_bytes(v):
    return v.encode() if isinstance(v, str) else bytes(v)


def encode_column(type_text, values, name="", top_level=True):
    """A chgate.v1.Column holding `values` (Python values) of ClickHouse type `type_text` in the
    layout of the proto's Column comment: fixed-width little-endian `data`, UUID in RFC order,
    String as data + end offsets, Nullable as `nulls` beside the values, Array as offsets +
    children[0], Tuple as children, LowCardinality as its inner type.

    Python values: ints for integers, Enum (element value), Date (days or datetime.date) and
    DateTime (Unix seconds); floats; str/bytes for strings; Decimal/str/int for Decimal (exact);
    uuid.UUID/str for UUID; None for NULL; lists for Array; tuples for Tuple."""
    import datetime

    pb = load_stubs().pb
    col = pb.Column(name=name, type=type_text if top_level else "")
    tname, args = parse_type(type_text)
    if tname == "LowCardinality":
        inner = encode_column(args[0], values, top_level=False)
        inner.name, inner.type = col.name, col.type
        return inner
    if tname == "Nullable":
        nulls = bytes(1 if v is None else 0 for v in values)
        slot = _default(args[0])
        inner = encode_column(args[0], [slot if v is None else v for v in values], top_level=False)
        inner.name, inner.type = col.name, col.type
        if any(nulls):
            inner.nulls = nulls
        return inner
    if tname == "Array":
        total, offsets, flat = 0, [], []
        for v in values:
            total += len(v)
            offsets.append(total)
            flat.extend(v)
        col.offsets.extend(offsets)
        col.children.append(encode_column(args[0], flat, top_level=False))
        return col
    if tname == "Tuple":
        for i, t in enumerate(args):
            col.children.append(encode_column(t, [v[i] for v in values], top_level=False))
        return col
    if tname == "String":
        data, offsets = b"", []
        for v in values:
            data += _as_bytes(v)
            offsets.append(len(data))
        col.data = data
        col.offsets.extend(offsets)
        return col
    if tname == "FixedString":
        n = int(args[0])
        col.data = b"".join(_as_bytes(v).ljust(n, b"\0") for v in values)
        return col
    if tname == "UUID":
        col.data = b"".join((v if isinstance(v, uuidlib.UUID) else uuidlib.UUID(v)).bytes
                            for v in values)
        return col
    if tname == "Decimal":
        precision, scale = int(args[0]), int(args[1])
        width = 4 if precision <= 9 else 8 if precision <= 18 else 16 if precision <= 38 else 32
        out = b""
        for v in values:
            # The default context keeps 28 digits; Decimal(76, S) needs 77.
            scaled = decimal.Decimal(v).scaleb(scale, context=decimal.Context(prec=100))
            if scaled != scaled.to_integral_value():
                raise ValueError(f"{v} has more than {scale} fractional digits")
            out += int(scaled).to_bytes(width, "little", signed=True)
        col.data = out
        return col
    if tname in _FIXED:
        conv = []
        for v in values:
            if tname == "Date" and isinstance(v, datetime.date):
                v = (v - datetime.date(1970, 1, 1)).days
            conv.append(v)
        col.data = struct.pack("<" + _FIXED[tname] * len(conv), *conv)
        return col
    raise ValueError(f"encode_column: type {type_text} is not supported by this helper")


def block_request(table, columns, sequence=0, **kw):
    """An InsertRequest with a Block; `columns` is [(name, type, values)]."""
    pb = load_stubs().pb
    rows = len(columns[0][2]) if columns else 0
    block = pb.Block(rows=rows, columns=[encode_column(t, v, name=n) for n, t, v in columns])
    return pb.InsertRequest(table=table, block=block, sequence=sequence, **kw)


def status_detail(rpc_error):
    """The chgate.v1.Status from a failed call's `chgate-status-bin` trailer, or None."""
    pb = load_stubs().pb
    for key, value in rpc_error.trailing_metadata() or ():
        if key == STATUS_TRAILER:
            st = pb.Status()
            st.ParseFromString(value)
            return st
    return None


# ---------------------------------------------------------------------------------------------
# Running the tests
# ---------------------------------------------------------------------------------------------

SKIP_EXIT_CODE = 77  # ctest's SKIP_RETURN_CODE for a run without ClickHouse


def parse_common_args(argv, description):
    import argparse

    ap = argparse.ArgumentParser(description=description, add_help=True)
    ap.add_argument("--chgate", default=default_chgate_binary(), help="chgate binary")
    ap.add_argument("--clickhouse", default=None,
                    help="ClickHouse native host:port (default: $CHGATE_CLICKHOUSE or 127.0.0.1:29000)")
    return ap


def test_main_args(description, add_options=None):
    """The command line of a test file: --chgate and --clickhouse (and what `add_options(parser)`
    adds), --clickhouse exported as CHGATE_CLICKHOUSE, and exit 77 (or 1 when required) if
    ClickHouse is unreachable. Returns (args with an absolute args.chgate, argv for
    unittest.main)."""
    ap = parse_common_args(sys.argv[1:], description)
    if add_options is not None:
        add_options(ap)
    args, rest = ap.parse_known_args()
    args.chgate = os.path.abspath(args.chgate)
    if args.clickhouse:
        os.environ["CHGATE_CLICKHOUSE"] = args.clickhouse
    ensure_clickhouse_or_exit(ClickHouse())
    return args, [sys.argv[0]] + rest


def test_main_args_with_cli(description):
    """test_main_args with --cli too: returns (chgate binary, chgate-cli binary, argv for
    unittest.main); chgate-cli defaults to the one built beside chgate."""
    args, argv = test_main_args(description, lambda ap: ap.add_argument("--cli", default=None))
    cli = (os.path.abspath(args.cli) if args.cli
           else str(Path(args.chgate).parent.parent / "client" / "chgate-cli"))
    return args.chgate, cli, argv


def ensure_clickhouse_or_exit(clickhouse):
    """Exits 77 (skip) when ClickHouse is unreachable and not required; exits 1 when required."""
    why = clickhouse.check_reachable()
    if why is None:
        return
    if clickhouse.required:
        print(f"FAIL: ClickHouse at {clickhouse.address} is unreachable and "
              f"CHGATE_REQUIRE_CLICKHOUSE=1: {why}", file=sys.stderr)
        sys.exit(1)
    print(f"SKIP: ClickHouse at {clickhouse.address} is unreachable ({why}); start it with "
          f"`make clickhouse-start`, or set CHGATE_CLICKHOUSE", file=sys.stderr)
    sys.exit(SKIP_EXIT_CODE)


def wait_until(predicate, timeout, interval=0.05):
    """Polls until predicate() is truthy; returns its last value."""
    deadline = time.monotonic() + timeout
    while True:
        v = predicate()
        if v or time.monotonic() >= deadline:
            return v
        time.sleep(interval)


class StreamDriver:
    """Drives one InsertStream from a thread: `requests` is an iterable of InsertRequests (it may
    block or be endless until stop() is called). Records the send time of each sequence, every ack
    (and acks for unknown or repeated sequences), and the stream's final status."""

    def __init__(self, stub, requests, timeout=None, window=None):
        self.stub = stub
        self._requests = requests
        self.timeout = timeout
        self.window = threading.Semaphore(window) if window else None
        self.lock = threading.Lock()
        self.sent = {}        # sequence -> InsertRequest
        self.sent_at = {}     # sequence -> monotonic time the request was handed to gRPC
        self.acks = {}        # sequence -> InsertAck (first one)
        self.ack_at = {}
        self.extra_acks = []  # acks for sequences acked before or never sent
        self.final_code = None
        self.final_details = None
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.call = None

    def _gen(self):
        for req in self._requests:
            if self._stop.is_set():
                return
            if self.window is not None:
                while not self.window.acquire(timeout=0.1):
                    if self._stop.is_set():
                        return
            with self.lock:
                self.sent[req.sequence] = req
                self.sent_at[req.sequence] = time.monotonic()
            yield req
            if self._stop.is_set():
                return

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        """Stops sending: the stream is half-closed after the request being written."""
        self._stop.set()

    def _run(self):
        import grpc

        try:
            self.call = self.stub.InsertStream(self._gen(), timeout=self.timeout)
            for ack in self.call:
                now = time.monotonic()
                with self.lock:
                    if ack.sequence in self.acks or ack.sequence not in self.sent:
                        self.extra_acks.append(ack)
                    else:
                        self.acks[ack.sequence] = ack
                        self.ack_at[ack.sequence] = now
                if self.window is not None:
                    self.window.release()
            self.final_code = grpc.StatusCode.OK
        except grpc.RpcError as e:
            self.final_code = e.code()
            self.final_details = e.details()

    def join(self, timeout):
        self.thread.join(timeout)
        return not self.thread.is_alive()

    def cancel(self):
        if self.call is not None:
            self.call.cancel()

    def counts(self):
        with self.lock:
            return len(self.sent), len(self.acks)

    def ok_sequences(self):
        with self.lock:
            return [s for s, a in self.acks.items() if a.status.code == 0]
