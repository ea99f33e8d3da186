#!/usr/bin/python3
"""End-to-end tests of resends under idempotency keys: the real chgate and ClickHouse behind a
proxy that cuts every connection between caller and chgate at random moments, so that requests
are cut off before chgate has them, while chgate holds them, and after they committed with the
ack on its way. Whatever the callers resend under the same key lands once.

  /usr/bin/python3 tests/e2e/resend_e2e_test.py --chgate build/server/chgate \
      [--cli build/client/chgate-cli] [unittest args]

Callers: chgate-cli insert (--idempotency-prefix), the SDK's Producer (chgate-cli bench --mode
producer) and a Python client that resends each request until it is acknowledged, in the
accepted, committed and persisted ack modes, the last with chgate killed (SIGKILL) and restarted
on its spool twice under load. Each test starts its own chgate on free loopback ports and stops
exactly that process. Without a reachable ClickHouse the run is skipped (exit code 77) unless
CHGATE_REQUIRE_CLICKHOUSE=1.
"""

import json
import random
import shutil
import socket
import subprocess
import sys
import threading
import time
import unittest
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import e2e_support as e2e  # noqa: E402
from e2e_support import DATABASE, V  # noqa: E402

CHGATE = e2e.default_chgate_binary()
CLI = str(Path(CHGATE).parent.parent / "client" / "chgate-cli")
ROWS_PER_REQUEST = 50


def report(text):
    print(f"  [resend] {text}", file=sys.stderr, flush=True)


class CuttingProxy:
    """A TCP forwarder on 127.0.0.1 to `target` (host:port, changeable while it runs). cut()
    closes every connection it carries, both ends, at once: the caller sees its stream break,
    chgate sees its calls cancelled."""

    def __init__(self, target, cut_at_bytes=()):
        self.target = target
        self.cuts = 0  # cuts that closed at least one connection
        # Cuts made when the bytes forwarded from callers to chgate pass each of these totals:
        # cuts at given points of a caller's input, however fast it goes.
        self._cut_at = sorted(cut_at_bytes)
        self._forwarded = 0
        self._lock = threading.Lock()
        self._pairs = []
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(128)
        self.address = f"127.0.0.1:{self._listener.getsockname()[1]}"
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            host, port = self.target.rsplit(":", 1)
            try:
                upstream = socket.create_connection((host, int(port)), timeout=2)
            except OSError:
                client.close()  # chgate is down (restarting): the caller sees a refusal
                continue
            upstream.settimeout(None)
            for s in (client, upstream):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                if self._closed:
                    client.close()
                    upstream.close()
                    return
                self._pairs.append((client, upstream))
            for src, dst, upward in ((client, upstream, True), (upstream, client, False)):
                threading.Thread(target=self._pump, args=(src, dst, upward), daemon=True).start()

    @staticmethod
    def _close(*sockets):
        for s in sockets:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def _pump(self, src, dst, upward):
        try:
            while True:
                data = src.recv(1 << 16)
                if not data:
                    break
                dst.sendall(data)
                if upward and self._count_up(len(data)):
                    self.cut()
        except OSError:
            pass
        with self._lock:
            self._pairs = [p for p in self._pairs if src not in p]
        self._close(src, dst)

    def _count_up(self, n):
        """Adds `n` forwarded bytes; True when that passed the next cut point."""
        with self._lock:
            self._forwarded += n
            if self._cut_at and self._forwarded >= self._cut_at[0]:
                del self._cut_at[0]
                return True
            return False

    def cut(self):
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for client, upstream in pairs:
            self._close(client, upstream)
        if pairs:
            self.cuts += 1
        return len(pairs)

    def cut_repeatedly(self, stop, low, high):
        """Starts a thread that cuts every `low`..`high` seconds until `stop` is set."""
        def run():
            while not stop.wait(random.uniform(low, high)):
                self.cut()
        t = threading.Thread(target=run, daemon=True)
        t.start()
        return t

    def close(self):
        with self._lock:
            self._closed = True
            pairs, self._pairs = self._pairs, []
        self._listener.close()
        for client, upstream in pairs:
            self._close(client, upstream)


class ResendingWriters:
    """Python callers that send unary Inserts of ROWS_PER_REQUEST rows with ids
    request*ROWS_PER_REQUEST.. and key `<prefix>-<request>`, each resent under its key after any
    failure until it is acknowledged (as a careful caller does), so that every request taken is
    acknowledged in the end."""

    RETRIED = ("UNAVAILABLE", "DEADLINE_EXCEEDED", "CANCELLED", "UNKNOWN", "INTERNAL", "ABORTED",
               "RESOURCE_EXHAUSTED")

    def __init__(self, pb, pb_grpc, address, table, ack_mode, threads=4):
        import grpc

        self.pb, self.table, self.ack_mode = pb, table, ack_mode
        self.prefix = uuid.uuid4().hex[:8]
        self.channel = grpc.insecure_channel(address, options=[
            ("grpc.initial_reconnect_backoff_ms", 50), ("grpc.min_reconnect_backoff_ms", 50),
            ("grpc.max_reconnect_backoff_ms", 300)])
        self.stub = pb_grpc.IngestStub(self.channel)
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.next_request = 0
        self.acked = set()
        self.deduplicated = 0  # acks that said the key had been seen (the resend was a no-op)
        self.resends = 0
        self.errors = []  # unexpected outcomes
        self.threads = [threading.Thread(target=self._run, daemon=True) for _ in range(threads)]
        for t in self.threads:
            t.start()

    def _request(self, n):
        first = n * ROWS_PER_REQUEST
        rows = [self.pb.Row(values=[V.u(first + i), V.s(f"r{first + i}")])
                for i in range(ROWS_PER_REQUEST)]
        return self.pb.InsertRequest(table=self.table, columns=["id", "msg"],
                                     rows=self.pb.RowSet(rows=rows), ack_mode=self.ack_mode,
                                     idempotency_key=f"{self.prefix}-{n}")

    def _run(self):
        import grpc

        while not self.stop.is_set():
            with self.lock:
                n = self.next_request
                self.next_request += 1
            request = self._request(n)
            deadline = time.monotonic() + 90
            while True:
                try:
                    resp = self.stub.Insert(request, timeout=10)
                    break
                except grpc.RpcError as e:
                    if e.code().name not in self.RETRIED or time.monotonic() > deadline:
                        with self.lock:
                            self.errors.append(f"request {n}: {e.code().name} {e.details()}")
                        return
                    with self.lock:
                        self.resends += 1
                    time.sleep(0.05)
            with self.lock:
                if resp.rows != ROWS_PER_REQUEST:
                    self.errors.append(f"request {n}: ack for {resp.rows} rows")
                self.acked.add(n)
                self.deduplicated += int(resp.deduplicated)

    def finish(self, timeout=120):
        self.stop.set()
        for t in self.threads:
            t.join(timeout)
        self.channel.close()


class ResendTestCase(unittest.TestCase):
    CHGATE_ARGS = ["--batch-max-delay=50ms", "--retry-max-backoff=500ms"]

    @classmethod
    def setUpClass(cls):
        cls.ch = e2e.reachable_clickhouse()
        cls.ch.ensure_database()
        cls.stubs = e2e.load_stubs()

    def setUp(self):
        self.procs = []
        self.spool_dir = e2e.work_dir() / f"resend-{self.id().split('.')[-1]}-{uuid.uuid4().hex[:8]}"

    def tearDown(self):
        for p in self.procs:
            if p.running():
                p.kill()
        shutil.rmtree(self.spool_dir, ignore_errors=True)

    def start_chgate(self, *extra):
        p = e2e.ChgateProcess(CHGATE, self.ch, [*self.CHGATE_ARGS, *extra],
                              name=f"resend-{self.id().split('.')[-1]}").start()
        self.procs.append(p)
        return p

    def stop_chgate(self, proc):
        rc = proc.stop()
        self.assertEqual(rc, 0, proc.log_tail())

    def table(self, name, replicated=False):
        engine = "MergeTree ORDER BY id"
        if replicated:
            engine = (f"ReplicatedMergeTree('/clickhouse/tables/{{shard}}/{DATABASE}.{name}', "
                      f"'{{replica}}') ORDER BY id")
        self.ch.recreate_table(name, "id UInt64, msg String", engine=engine)
        return f"{DATABASE}.{name}"

    def counts(self, table):
        """(rows, distinct ids) in the table."""
        rows, ids = self.ch.query(f"SELECT count(), uniqExact(id) FROM {table}").split()
        return int(rows), int(ids)

    def cli(self, address, *argv, stdin=b"", timeout=180):
        return subprocess.run([CLI, "--addr", address, *argv], input=stdin, capture_output=True,
                              timeout=timeout)


class CliInsertTest(ResendTestCase):
    def test_each_batch_lands_once_across_cut_connections(self):
        chgate = self.start_chgate()
        # Four cuts at points spread over the input (about 1.2 MB on the wire): the CLI resends
        # a batch at most 3 times, and a batch is in flight at one cut at most (a cut is made
        # when more has been sent than the batches in flight at the one before it).
        proxy = CuttingProxy(f"127.0.0.1:{chgate.api_port}",
                             cut_at_bytes=[150_000, 400_000, 650_000, 900_000])
        table = self.table("resend_cli")
        total = 60_000
        lines = "".join(json.dumps({"id": i, "msg": f"m{i}"}) + "\n" for i in range(total))
        try:
            r = self.cli(proxy.address, "insert", "--table", table, "--batch-rows", "200",
                         "--max-in-flight", "8", "--idempotency-prefix", uuid.uuid4().hex[:8],
                         "--ack-mode", "committed", stdin=lines.encode())
        finally:
            proxy.close()
        err = r.stderr.decode(errors="replace")
        self.assertEqual(r.returncode, 0, err)
        self.assertEqual(self.counts(table), (total, total), err)
        self.assertEqual(proxy.cuts, 4, err)
        self.assertIn("sending it again", err)
        self.stop_chgate(chgate)


class ProducerTest(ResendTestCase):
    def test_every_acknowledged_send_lands_once_across_cut_connections(self):
        chgate = self.start_chgate()
        proxy = CuttingProxy(f"127.0.0.1:{chgate.api_port}")
        table = self.table("resend_producer")
        stop = threading.Event()
        proxy.cut_repeatedly(stop, 0.3, 0.7)
        try:
            r = self.cli(proxy.address, "bench", "--table", table, "--mode", "producer",
                         "--streams", "2", "--duration", "4s", "--rows-per-request", "200",
                         "--max-in-flight", "4000", "--ack-mode", "committed", "--json")
        finally:
            stop.set()
            proxy.close()
        err = r.stderr.decode(errors="replace")
        self.assertEqual(r.returncode, 0, err)
        result = json.loads(r.stdout.decode().strip().splitlines()[-1])
        self.assertEqual(result["requests_failed"], 0, err)
        self.assertGreater(proxy.cuts, 2)
        # The bench sends one row again and again: every acknowledged send is one row, and a
        # resend that inserted its request again would make more rows than acknowledged sends.
        self.assertEqual(self.counts(table)[0], result["requests_ok"])
        report(f"producer: {result['requests_ok']} sends acknowledged across {proxy.cuts} cuts; "
               f"every one once")
        self.stop_chgate(chgate)


class PythonCallerTest(ResendTestCase):
    def run_mode(self, ack_mode_name, seconds=4):
        pb = self.stubs.pb
        chgate = self.start_chgate()
        proxy = CuttingProxy(f"127.0.0.1:{chgate.api_port}")
        table = self.table(f"resend_{ack_mode_name.lower()}")
        writers = ResendingWriters(pb, self.stubs.pb_grpc, proxy.address, table,
                                   getattr(pb, f"ACK_MODE_{ack_mode_name}"))
        stop = threading.Event()
        proxy.cut_repeatedly(stop, 0.2, 0.5)
        time.sleep(seconds)
        stop.set()
        writers.finish()
        proxy.close()
        self.assertEqual(writers.errors, [])
        self.assertGreater(proxy.cuts, 3)
        self.assertGreater(writers.resends, 0)
        expected = len(writers.acked) * ROWS_PER_REQUEST
        # Accepted acks come before the commit: wait for the rows, then for any stragglers.
        e2e.wait_until(lambda: self.counts(table)[0] >= expected, 60, 0.2)
        time.sleep(0.5)
        self.assertEqual(self.counts(table), (expected, expected))
        report(f"{ack_mode_name.lower()}: {len(writers.acked)} requests acknowledged, "
               f"{proxy.cuts} cuts, {writers.resends} resends, {writers.deduplicated} answered "
               f"as deduplicated; every row once")
        self.stop_chgate(chgate)
        return writers

    def test_accepted(self):
        self.run_mode("ACCEPTED")

    def test_committed(self):
        self.run_mode("COMMITTED")


class PersistedCrashTest(ResendTestCase):
    def test_resends_across_kills_land_once(self):
        """Persisted acks on a Replicated table (chgate's replays rely on its block
        deduplication), connections cut every 0.2-0.5 s, and chgate killed with SIGKILL and
        restarted on the same spool twice while the callers resend: a request persisted before a
        kill and resent after it is known by its key, and lands once."""
        pb = self.stubs.pb
        spool = [f"--spool-dir={self.spool_dir}", "--spool-segment-bytes=1MiB"]
        chgate = self.start_chgate(*spool)
        proxy = CuttingProxy(f"127.0.0.1:{chgate.api_port}")
        table = self.table("resend_persisted", replicated=True)
        writers = ResendingWriters(pb, self.stubs.pb_grpc, proxy.address, table,
                                   pb.ACK_MODE_PERSISTED)
        stop = threading.Event()
        proxy.cut_repeatedly(stop, 0.2, 0.5)
        for _ in range(2):
            time.sleep(random.uniform(1.5, 2.5))
            chgate.kill()
            chgate = self.start_chgate(*spool)
            proxy.target = f"127.0.0.1:{chgate.api_port}"
        time.sleep(1.5)
        stop.set()
        writers.finish()
        proxy.close()
        self.assertEqual(writers.errors, [])
        self.assertGreater(writers.resends, 0)
        # Every acknowledged request is in the spool or in the table: wait until it drained.
        deadline = time.monotonic() + 120
        while e2e.metric_sum(chgate.scrape(), "chgate_spool_pending_records") != 0:
            self.assertLess(time.monotonic(), deadline, chgate.log_tail())
            time.sleep(0.2)
        expected = len(writers.acked) * ROWS_PER_REQUEST
        self.assertEqual(self.counts(table), (expected, expected), chgate.log_tail())
        report(f"persisted, 2 SIGKILLs: {len(writers.acked)} requests acknowledged, {proxy.cuts} "
               f"cuts, {writers.resends} resends, {writers.deduplicated} answered as "
               f"deduplicated; every row once")
        self.stop_chgate(chgate)


def main():
    global CHGATE, CLI
    CHGATE, CLI, argv = e2e.test_main_args_with_cli(__doc__.splitlines()[0])
    unittest.main(argv=argv, verbosity=2)


if __name__ == "__main__":
    main()
