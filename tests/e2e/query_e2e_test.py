#!/usr/bin/python3
"""End-to-end tests of chgate's Query RPC: the real binary, the local ClickHouse, an independent
Python gRPC client and chgate-cli (the C++ SDK) reading the same results.

  /usr/bin/python3 tests/e2e/query_e2e_test.py --chgate build/server/chgate \
      --cli build/client/chgate-cli [unittest args]

Each test class starts its own chgate on free loopback ports and stops exactly that process.
Without a reachable ClickHouse the run is skipped (exit code 77) unless CHGATE_REQUIRE_CLICKHOUSE=1.
"""

import datetime
import os
import signal
import stat
import struct
import subprocess
import sys
import threading
import time
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import e2e_support as e2e  # noqa: E402
from e2e_support import DATABASE  # noqa: E402

CHGATE = e2e.default_chgate_binary()
CLI = str(Path(CHGATE).parent.parent / "client" / "chgate-cli")
MiB = 1 << 20


def tsv_escape(s):
    out = []
    for ch in s:
        out.append({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\0": "\\0", "'": "\\'"}.get(ch, ch))
    return "".join(out)


def decode_column(col, rows):
    """Python values of a result Column for the simple types these tests use (None for NULL)."""
    t = col.type
    nullable = t.startswith("Nullable(")
    inner = t[len("Nullable("):-1] if nullable else t
    if inner.startswith("LowCardinality("):
        inner = inner[len("LowCardinality("):-1]
    if inner.startswith("Array("):
        elem = col.children[0]
        offsets = list(col.offsets)
        values = decode_column(elem, offsets[-1] if offsets else 0)
        out, begin = [], 0
        for end in offsets:
            out.append(values[begin:end])
            begin = end
        return out
    if inner == "String":
        out, begin = [], 0
        for end in col.offsets:
            out.append(col.data[begin:end].decode("utf-8", errors="surrogateescape"))
            begin = end
    elif inner in ("UInt64", "Int64", "UInt32", "Int32", "UInt8", "Float64"):
        fmt = {"UInt64": "<Q", "Int64": "<q", "UInt32": "<I", "Int32": "<i", "UInt8": "<B",
               "Float64": "<d"}[inner]
        width = struct.calcsize(fmt)
        out = [struct.unpack_from(fmt, col.data, i * width)[0] for i in range(rows)]
    elif inner.startswith("DateTime"):
        out = [datetime.datetime.fromtimestamp(struct.unpack_from("<I", col.data, i * 4)[0],
                                               datetime.timezone.utc) for i in range(rows)]
    else:
        raise AssertionError(f"type {t} not handled by this test's decoder")
    if nullable and col.nulls:
        out = [None if col.nulls[i] else v for i, v in enumerate(out)]
    return out


def tsv_value(v, nested=False):
    if v is None:
        return "NULL" if nested else "\\N"
    if isinstance(v, list):
        return "[" + ",".join(tsv_value(x, True) for x in v) + "]"
    if isinstance(v, str):
        return f"'{tsv_escape(v)}'" if nested else tsv_escape(v)
    if isinstance(v, float):
        return str(int(v)) if v == int(v) else repr(v)
    if isinstance(v, datetime.datetime):
        return v.strftime("%Y-%m-%d %H:%M:%S")
    return str(v)


class QueryTestCase(unittest.TestCase):
    CHGATE_ARGS = ["--compression=lz4"]
    UNIX_SOCKET = False  # the API on a Unix socket (--listen=unix:PATH) instead of TCP

    @classmethod
    def setUpClass(cls):
        cls.ch = e2e.reachable_clickhouse()
        cls.ch.ensure_database()
        cls.stubs = e2e.load_stubs()
        cls.pb = cls.stubs.pb
        socket_path = str(e2e.work_dir() / f"{cls.__name__}.sock") if cls.UNIX_SOCKET else None
        cls.chgate = e2e.ChgateProcess(CHGATE, cls.ch, cls.CHGATE_ARGS, name=cls.__name__,
                                       socket_path=socket_path).start()
        cls.channel = cls.chgate.channel()
        cls.stub = cls.stubs.pb_grpc.IngestStub(cls.channel)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        rc = cls.chgate.stop()
        if rc not in (0, None):
            raise AssertionError(f"chgate exited with {rc}:\n{cls.chgate.log_tail()}")

    def python_query(self, sql, **kw):
        """(header, rows as lists of Python values, summary) through the Python client."""
        header, rows, summary = None, [], None
        for r in self.stub.Query(self.pb.QueryRequest(sql=sql, **kw), timeout=120):
            kind = r.WhichOneof("kind")
            if kind == "header":
                header = r.header
            elif kind == "block":
                cols = [decode_column(c, r.block.rows) for c in r.block.columns]
                rows.extend(list(row) for row in zip(*cols))
            elif kind == "summary":
                summary = r.summary
        return header, rows, summary

    def cli(self, *argv, stdin=b""):
        return subprocess.run([CLI, "--addr", self.chgate.api_address, *argv], input=stdin,
                              capture_output=True, timeout=120)


class PythonAndSdkAgreeTest(QueryTestCase):
    def test_python_client_and_chgate_cli_read_what_clickhouse_holds(self):
        table = f"{DATABASE}.query_agree"
        self.ch.query(f"DROP TABLE IF EXISTS {table}")
        self.ch.query(f"""CREATE TABLE {table} (id UInt64, name String, code Nullable(Int32),
            tags Array(String), ratio Float64, at DateTime('UTC'), svc LowCardinality(String))
            ENGINE = MergeTree ORDER BY id""")
        self.ch.query(f"""INSERT INTO {table} SELECT number, concat('name\\t', toString(number)),
            if(number % 3 = 0, NULL, toInt32(number) - 500), arrayMap(x -> toString(x),
            range(number % 4)), number / 4, toDateTime(1700000000 + number, 'UTC'),
            concat('svc', toString(number % 3)) FROM system.numbers LIMIT 50000""")
        sql = f"SELECT * FROM {table} ORDER BY id"
        expected = self.ch.query(sql + " FORMAT TabSeparated")

        header, rows, summary = self.python_query(sql)
        self.assertEqual([c.type for c in header.columns],
                         ["UInt64", "String", "Nullable(Int32)", "Array(String)", "Float64",
                          "DateTime('UTC')", "LowCardinality(String)"])
        python_tsv = "".join("\t".join(tsv_value(v) for v in row) + "\n" for row in rows)
        self.assertEqual(python_tsv, expected)
        self.assertEqual(summary.rows, 50000)

        r = self.cli("query", sql, "--format", "tsv")
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        self.assertEqual(r.stdout.decode("utf-8", errors="surrogateescape"), expected)

    def test_errors_reach_both_clients_with_the_same_code(self):
        with self.assertRaises(Exception) as ctx:
            self.python_query("SELECT * FROM chgate_e2e.no_such_table")
        self.assertEqual(ctx.exception.code().name, "NOT_FOUND")
        r = self.cli("query", "SELECT * FROM chgate_e2e.no_such_table")
        self.assertEqual(r.returncode, 1)
        self.assertIn("NOT_FOUND", r.stderr.decode())
        with self.assertRaises(Exception) as ctx:
            self.python_query(f"DROP TABLE {DATABASE}.query_agree")
        self.assertEqual(ctx.exception.code().name, "PERMISSION_DENIED")


class UnixSocketTest(QueryTestCase):
    """The API on a Unix socket, as the sidecar manifests share it with the application: the SDK
    (chgate-cli) and the Python client insert and query through it; its mode lets the group
    connect; a second server and a file that is not a socket are refused; a socket left by kill -9
    is replaced at restart, and a stop removes it."""

    UNIX_SOCKET = True

    def test_sdk_and_python_insert_and_query_through_the_socket(self):
        table = f"{DATABASE}.unix_socket_rows"
        self.ch.recreate_table("unix_socket_rows", "id UInt64, msg String")
        lines = b"".join(b'{"id":%d,"msg":"cli %d"}\n' % (i, i) for i in range(1000))
        r = self.cli("insert", "--table", table, stdin=lines)
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        rows = [[self.pb.Value(uint64_value=1000 + i), self.pb.Value(string_value=f"py {i}")]
                for i in range(500)]
        response = self.stub.Insert(e2e.rows_request(table, ["id", "msg"], rows), timeout=60)
        self.assertEqual(response.rows, 500)
        self.assertEqual(self.ch.query(f"SELECT count(), uniqExact(id) FROM {table}"), "1500\t1500\n")
        r = self.cli("query", f"SELECT count() FROM {table} WHERE msg LIKE 'py %'")
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        self.assertEqual(r.stdout, b"500\n")
        header, got, _ = self.python_query(f"SELECT max(id) FROM {table}")
        self.assertEqual(got, [[1499]])

    def test_mode_and_refusals(self):
        st = os.lstat(self.chgate.socket_path)
        self.assertTrue(stat.S_ISSOCK(st.st_mode))
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o660)
        # A second chgate on the same path must not take the socket over.
        second = subprocess.run([CHGATE, f"--listen={self.chgate.api_address}",
                                 "--health-listen=127.0.0.1:0", "--metrics-listen=",
                                 f"--endpoints={self.ch.address}"],
                                capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
        self.assertNotEqual(second.returncode, 0)
        self.assertIn(b"another server accepts connections", second.stdout + second.stderr)
        self.assertTrue(stat.S_ISSOCK(os.lstat(self.chgate.socket_path).st_mode))
        r = self.cli("query", "SELECT 1")
        self.assertEqual((r.returncode, r.stdout), (0, b"1\n"), r.stderr.decode())
        # A file that is not a socket is never removed.
        plain = e2e.work_dir() / "not-a-socket"
        plain.write_text("keep me")
        other = subprocess.run([CHGATE, f"--listen=unix:{plain}", "--health-listen=127.0.0.1:0",
                                "--metrics-listen=", f"--endpoints={self.ch.address}"],
                               capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
        self.assertNotEqual(other.returncode, 0)
        self.assertIn(b"is not a socket", other.stdout + other.stderr)
        self.assertEqual(plain.read_text(), "keep me")

    def test_a_killed_chgate_leaves_a_socket_the_next_one_replaces(self):
        path = str(e2e.work_dir() / "restart.sock")
        first = e2e.ChgateProcess(CHGATE, self.ch, [], name="unix-kill", socket_path=path).start()
        first.kill()  # SIGKILL: no chance to remove the file
        self.assertTrue(stat.S_ISSOCK(os.lstat(path).st_mode))
        second = e2e.ChgateProcess(CHGATE, self.ch, [], name="unix-restart",
                                   socket_path=path).start()
        try:
            r = subprocess.run([CLI, "--addr", second.api_address, "query", "SELECT 2"],
                               capture_output=True, timeout=60)
            self.assertEqual((r.returncode, r.stdout), (0, b"2\n"), r.stderr.decode())
        finally:
            self.assertEqual(second.stop(), 0, second.log_tail())
        self.assertFalse(os.path.lexists(path), "a stopped chgate leaves its socket behind")


class ProducerTest(QueryTestCase):
    """The SDK's coalescing Producer against chgate and ClickHouse (chgate-cli bench --mode
    producer and producer-block, committed acks): every send it counts as acknowledged is in the
    table, once."""

    def test_every_acknowledged_send_is_in_the_table_once(self):
        import json

        table = f"{DATABASE}.producer_rows"
        self.ch.recreate_table("producer_rows", "id UInt64, msg String")
        r = self.cli("bench", "--table", table, "--mode", "producer", "--streams", "2",
                     "--duration", "1s", "--rows-per-request", "500", "--max-in-flight", "20000",
                     "--ack-mode", "committed", "--json")
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        result = json.loads(r.stdout.decode().strip().splitlines()[-1])
        self.assertEqual(result["mode"], "producer")
        self.assertEqual(result["requests_failed"], 0)
        self.assertGreater(result["requests_ok"], 1000)
        self.assertEqual(self.ch.query(f"SELECT count() FROM {table}"),
                         f"{result['requests_ok']}\n")


    def test_every_acknowledged_block_send_is_in_the_table_once(self):
        import json

        table = f"{DATABASE}.producer_blocks"
        self.ch.recreate_table("producer_blocks", "id UInt64, msg String")
        r = self.cli("bench", "--table", table, "--mode", "producer-block", "--types",
                     "UInt64,String", "--row", '{"id": 7, "msg": "block"}', "--streams", "2",
                     "--duration", "1s", "--rows-per-request", "500", "--max-in-flight",
                     "20000", "--ack-mode", "committed", "--json")
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        result = json.loads(r.stdout.decode().strip().splitlines()[-1])
        self.assertEqual(result["mode"], "producer-block")
        self.assertEqual(result["requests_failed"], 0)
        self.assertGreater(result["requests_ok"], 1000)
        # Every acknowledged one-row block is a row, with its values intact.
        self.assertEqual(self.ch.query(f"SELECT count(), countIf(id = 7 AND msg = 'block') "
                                       f"FROM {table}"),
                         f"{result['requests_ok']}\t{result['requests_ok']}\n")


class SlowReaderTest(QueryTestCase):
    CHGATE_ARGS = ["--compression=none", "--query-buffer-bytes=1MiB"]

    def test_memory_stays_bounded_while_the_caller_reads_slowly(self):
        before = self.chgate.memory_kib()["VmRSS"]
        responses = self.stub.Query(self.pb.QueryRequest(
            sql="SELECT number, toString(number) FROM system.numbers",
            max_response_bytes=256 << 10), timeout=60)
        received = []
        rss = []
        try:
            for i, _ in enumerate(responses):
                if i >= 6:
                    break
                time.sleep(0.5)  # the slow caller
                samples = self.chgate.scrape()
                received.append(e2e.metric_sum(samples, "chgate_clickhouse_received_bytes_total"))
                rss.append(self.chgate.memory_kib()["VmRSS"])
        finally:
            responses.cancel()
        print(f"  [e2e] slow reader: received bytes at each read {received}; chgate RSS KiB "
              f"{before} -> {rss}", file=sys.stderr, flush=True)
        # chgate stopped reading ClickHouse: the byte count settles instead of growing with the
        # (infinite) result, and its memory stays within a few MiB of where it started.
        self.assertLess(received[-1] - received[2], 8 * MiB, received)
        self.assertLess(max(rss) - before, 48 * 1024, (before, rss))
        # And the connection was drained and reused: a next query answers.
        _, rows, _ = self.python_query("SELECT 7")
        self.assertEqual(rows, [[7]])


class ShutdownTest(QueryTestCase):
    def test_sigterm_ends_a_running_query_with_unavailable_and_exits_zero(self):
        responses = self.stub.Query(self.pb.QueryRequest(sql="SELECT number FROM system.numbers"),
                                    timeout=60)
        codes = []

        def read():
            try:
                for _ in responses:
                    time.sleep(0.01)
            except Exception as e:  # grpc.RpcError
                codes.append(e.code().name)

        t = threading.Thread(target=read)
        t.start()
        time.sleep(0.5)
        self.chgate.signal(signal.SIGTERM)
        t.join(30)
        self.assertEqual(codes, ["UNAVAILABLE"])
        self.assertEqual(self.chgate.wait(30), 0)

    def test_sigterm_the_moment_chgate_serves_drains_and_exits_zero(self):
        # A pod deleted right as it starts: the signal must reach the drain, never a thread that
        # takes it with the default action (the process then dies by the signal, undrained).
        # Threads start at different points of the start, so try it several times.
        for attempt in range(12):
            proc = e2e.ChgateProcess(CHGATE, self.ch, ["--drain-timeout=5s"],
                                     name=f"sigterm-at-start-{attempt}").start()
            proc.signal(signal.SIGTERM)
            rc = proc.wait(30)
            self.assertEqual(rc, 0, f"attempt {attempt}: exit {rc}:\n{proc.log_tail()}")
            self.assertIn("chgate: SIGTERM: draining", proc.log_text())


def main():
    global CHGATE, CLI
    CHGATE, CLI, argv = e2e.test_main_args_with_cli(__doc__.splitlines()[0])
    unittest.main(argv=argv, verbosity=2)


if __name__ == "__main__":
    main()
