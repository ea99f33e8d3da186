#!/usr/bin/python3
"""End-to-end tests of the persisted ack mode: chgate with a spool, killed with SIGKILL again and
again under steady load, against the local ClickHouse with a ReplicatedMergeTree table (ZooKeeper
run by clickhousectl.sh) and a plain MergeTree table.

  /usr/bin/python3 tests/e2e/spool_e2e_test.py --chgate build/server/chgate [unittest args]

Environment (besides e2e_support.py's):
  CHGATE_SPOOL_CRASHES   rounds of the crash loop (default 12: CI's bounded run, 4 under the
                         sanitizers (make test-asan); the documented full run is 100)
  CHGATE_SPOOL_SEED      the random seed of the crash loop (default: the time; printed)

The crash loop. Writer threads send 100-row requests with ACK_MODE_PERSISTED to both tables and
record which were acknowledged. Each round kills chgate at one of its kill points and starts it
again on the same spool directory, with segments of 1 MiB so they roll and are deleted all along:
  - a SIGKILL from outside at a random moment (mid-append, mid-flush, anywhere), 0.5-3 s into
    the round;
  - every fourth round an outage: ClickHouse is stopped (SIGSTOP) while the writers go on, so a
    backlog builds in the spool, chgate is killed in the outage, and the next round starts with
    that backlog draining (the moment a kill right after a commit is most likely);
  - failpoints (CHGATE_FAILPOINTS) that make chgate kill itself exactly: after the spool's write
    and before its fdatasync, after the fdatasync and before the ack, after the batch intent and
    before the INSERT, after ClickHouse committed and before the spool recorded it.
Requests without an ack are not resent: their rows may or may not be in ClickHouse, and the test
reports how many there were. At the end every acknowledged row must be in the Replicated table
exactly once; the plain table must have every acknowledged row at least once, and the test
reports its duplicates (a crash after a commit and before the spool recorded it re-sends that
batch, which only Replicated tables drop).
"""

import os
import random
import shutil
import signal
import struct
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
CRASHES = int(os.environ.get("CHGATE_SPOOL_CRASHES", "12"))
ROWS_PER_REQUEST = 100
KILL_POINTS = ["outside", "spool_written_before_sync", "persisted_before_ack",
               "spool_intent_before_insert", "insert_committed_before_mark"]


def report(text):
    print(f"  [spool] {text}", file=sys.stderr, flush=True)


class Writers:
    """Threads that insert persisted requests into `tables` through whichever chgate runs now."""

    def __init__(self, stubs, tables, threads=4):
        self.pb = stubs.pb
        self.pb_grpc = stubs.pb_grpc
        self.tables = tables
        self.lock = threading.Lock()
        self.address = None
        self.generation = 0
        self.acked = {t: set() for t in tables}  # request ids acknowledged, per table
        self.unacked = {t: set() for t in tables}  # sent, no ack (the rows' fate is open)
        self.refused = 0  # requests refused with an error status (nothing persisted)
        self.stop_flag = threading.Event()
        self.next_request = 0
        self.threads = [threading.Thread(target=self._run, args=(i,), daemon=True)
                        for i in range(threads)]

    def point_at(self, address):
        with self.lock:
            self.address = address
            self.generation += 1

    def start(self):
        for t in self.threads:
            t.start()

    def stop(self):
        self.stop_flag.set()
        for t in self.threads:
            t.join(timeout=60)

    def wait_acked(self, n=1, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if sum(len(a) for a in self.acked.values()) >= n:
                    return
            time.sleep(0.05)
        raise AssertionError(f"fewer than {n} requests acknowledged within {timeout}s")

    def _take_id(self):
        with self.lock:
            self.next_request += 1
            return self.next_request

    def _run(self, index):
        import grpc

        channel = stub = None
        generation = -1
        while not self.stop_flag.is_set():
            with self.lock:
                address, gen = self.address, self.generation
            if address is None:
                time.sleep(0.05)
                continue
            if gen != generation:
                if channel is not None:
                    channel.close()
                channel = grpc.insecure_channel(address)
                stub = self.pb_grpc.IngestStub(channel)
                generation = gen
            request_id = self._take_id()
            table = self.tables[request_id % len(self.tables)]
            first = request_id * ROWS_PER_REQUEST
            rows = [self.pb.Row(values=[V.u(first + i), V.u(index), V.s(f"r{first + i}")])
                    for i in range(ROWS_PER_REQUEST)]
            request = self.pb.InsertRequest(
                table=f"{DATABASE}.{table}", columns=["id", "writer", "payload"],
                rows=self.pb.RowSet(rows=rows), ack_mode=self.pb.ACK_MODE_PERSISTED,
                idempotency_key=f"req-{request_id}")
            try:
                resp = stub.Insert(request, timeout=10)
            except grpc.RpcError as e:
                code = e.code()
                with self.lock:
                    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
                                grpc.StatusCode.CANCELLED, grpc.StatusCode.UNKNOWN,
                                grpc.StatusCode.INTERNAL):
                        # The connection broke (chgate died): the request may have been persisted.
                        self.unacked[table].add(request_id)
                    else:
                        self.refused += 1
                time.sleep(0.05)
                continue
            if resp.ack_mode != self.pb.ACK_MODE_PERSISTED or resp.rows != ROWS_PER_REQUEST:
                raise AssertionError(f"unexpected ack {resp}")
            with self.lock:
                self.acked[table].add(request_id)
        if channel is not None:
            channel.close()


class SpoolTestCase(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.ch = e2e.reachable_clickhouse()
        cls.ch.ensure_database()
        cls.stubs = e2e.load_stubs()
        cls.pb = cls.stubs.pb

    def setUp(self):
        self.spool_dir = e2e.work_dir() / f"spool-{self.id().split('.')[-1]}-{uuid.uuid4().hex[:8]}"
        self.procs = []

    def tearDown(self):
        for p in self.procs:
            p.kill()
        shutil.rmtree(self.spool_dir, ignore_errors=True)

    def make_tables(self, suffix):
        repl = f"spool_repl_{suffix}"
        plain = f"spool_plain_{suffix}"
        columns = "id UInt64, writer UInt32, payload String"
        self.ch.recreate_table(
            repl, columns,
            engine=f"ReplicatedMergeTree('/clickhouse/tables/{{shard}}/{DATABASE}.{repl}', "
                   f"'{{replica}}') ORDER BY id")
        self.ch.recreate_table(plain, columns)
        return repl, plain

    def chgate(self, failpoints=None, extra_args=()):
        """Starts chgate on the spool. With `failpoints` it may die before it serves (a failpoint
        on the replay's path): then the process is returned dead."""
        env = {"CHGATE_FAILPOINTS": failpoints} if failpoints else None
        p = e2e.ChgateProcess(CHGATE, self.ch,
                              args=[f"--spool-dir={self.spool_dir}", "--batch-max-delay=100ms",
                                    "--retry-max-backoff=500ms", *extra_args],
                              env=env, name="chgate-spool")
        self.procs.append(p)
        try:
            return p.start()
        except RuntimeError:
            if failpoints and "failpoint" in p.log_text():
                return p
            raise

    def drain(self, proc, timeout=120):
        """Waits until the spool holds nothing pending (every persisted row committed)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pending = e2e.metric_sum(proc.scrape(), "chgate_spool_pending_records")
            if pending == 0:
                return
            time.sleep(0.2)
        self.fail(f"the spool still holds {pending} records after {timeout}s:\n{proc.log_tail()}")

    def request_counts(self, table):
        """{request id: rows of it in the table} (ids are id // 100)."""
        out = self.ch.query(f"SELECT intDiv(id, {ROWS_PER_REQUEST}) AS r, count() FROM "
                            f"{DATABASE}.{table} GROUP BY r FORMAT TabSeparated")
        counts = {}
        for line in out.splitlines():
            r, c = line.split("\t")
            counts[int(r)] = int(c)
        return counts

    def duplicated_rows(self, table):
        return int(self.ch.scalar(f"SELECT count() - uniqExact(id) FROM {DATABASE}.{table}"))


class CrashLoopTest(SpoolTestCase):
    SEGMENT = ["--spool-segment-bytes=1MiB"]

    def test_every_acknowledged_row_exactly_once_on_replicated_across_crashes(self):
        repl, plain = self.make_tables(uuid.uuid4().hex[:8])
        writers = Writers(self.stubs, [repl, plain])
        proc = self.chgate(extra_args=self.SEGMENT)
        writers.point_at(proc.api_address)
        writers.start()
        writers.wait_acked()  # both tables' headers are known (saved beside the spool)
        seed = int(os.environ.get("CHGATE_SPOOL_SEED", str(int(time.time()))))
        report(f"crash loop: {CRASHES} rounds, seed {seed}")
        rng = random.Random(seed)
        kills = {p: 0 for p in KILL_POINTS}
        outages = 0
        try:
            for crash in range(CRASHES):
                point = KILL_POINTS[crash % len(KILL_POINTS)]
                if crash % 4 == 3:
                    # An outage: the spool fills while ClickHouse is stopped; chgate dies in it.
                    with e2e.PausedClickHouse(self.ch):
                        time.sleep(rng.uniform(1.0, 3.0))
                        proc.kill()
                    outages += 1
                    point = "outside"
                elif point == "outside":
                    time.sleep(rng.uniform(0.5, 3.0))  # steady load on the running chgate
                    proc.kill()
                else:
                    time.sleep(rng.uniform(0.5, 1.5))
                    proc.kill()  # stopped before it is started again with the failpoint armed
                    proc = self.chgate(failpoints=f"{point}=0.05", extra_args=self.SEGMENT)
                    writers.point_at(proc.api_address)
                    if proc.wait(timeout=30) is None:  # the failpoint did not fire
                        proc.kill()
                kills[point] += 1
                proc = self.chgate(extra_args=self.SEGMENT)
                writers.point_at(proc.api_address)
            time.sleep(1.0)
            writers.stop()
            self.drain(proc)
            self.assertEqual(proc.stop(), 0, proc.log_tail())
        finally:
            writers.stop()
        log = "".join(p.log_text() for p in self.procs)
        for point in KILL_POINTS[1:]:
            fired = log.count(f"failpoint {point}")
            report(f"kill point {point}: {fired} of {kills[point]} rounds died there")
            # A failpoint that never fires would leave its step of the loop untested: each armed
            # one must kill chgate in at least half of its rounds (every one, in practice).
            if kills[point]:
                self.assertGreaterEqual(fired, max(1, (kills[point] + 1) // 2),
                                        f"failpoint {point} did not fire in its rounds")
        report(f"kills from outside: {kills['outside']}, {outages} of them in an outage")
        damaged = log.count("spooled batch damaged")
        self.assertEqual(damaged, 0, "a batch intent lost records in the spool")
        for table, replicated in ((repl, True), (plain, False)):
            counts = self.request_counts(table)
            acked = writers.acked[table]
            missing = [r for r in acked if counts.get(r, 0) == 0]
            partial = [r for r, c in counts.items() if c % ROWS_PER_REQUEST != 0]
            duplicated = self.duplicated_rows(table)
            unacked_present = sum(1 for r in writers.unacked[table] if counts.get(r, 0) > 0)
            report(f"{table}: {len(acked)} requests acknowledged ({len(acked) * ROWS_PER_REQUEST} "
                   f"rows), {len(writers.unacked[table])} sent without an ack "
                   f"({unacked_present} of them in the table anyway), {duplicated} duplicate rows")
            self.assertGreater(len(acked), 0)
            self.assertEqual(missing, [], f"acknowledged requests missing from {table}")
            self.assertEqual(partial, [], f"requests partly in {table}")
            if replicated:
                self.assertEqual(duplicated, 0, f"duplicates in the Replicated table {table}")
        report(f"requests refused with an error status: {writers.refused}")


class FaultTest(SpoolTestCase):
    def run_load(self, proc, tables, _seconds):
        writers = Writers(self.stubs, tables, threads=2)
        writers.point_at(proc.api_address)
        writers.start()
        return writers

    def check_exactly_once(self, writers, table):
        counts = self.request_counts(table)
        acked = writers.acked[table]
        self.assertGreater(len(acked), 0)
        self.assertEqual([r for r in acked if counts.get(r, 0) == 0], [])
        self.assertEqual(self.duplicated_rows(table), 0)
        return len(acked)

    def test_clickhouse_restarted_under_load(self):
        repl, _ = self.make_tables(uuid.uuid4().hex[:8])
        proc = self.chgate()
        writers = self.run_load(proc, [repl], 0)
        try:
            time.sleep(1.0)
            self.ch.restart()
            time.sleep(1.5)
        finally:
            writers.stop()
        self.drain(proc)
        self.assertEqual(proc.stop(), 0, proc.log_tail())
        report(f"ClickHouse restarted: {self.check_exactly_once(writers, repl)} requests acked, "
               f"each once")

    def test_zookeeper_paused_under_load(self):
        repl, _ = self.make_tables(uuid.uuid4().hex[:8])
        proc = self.chgate()
        writers = self.run_load(proc, [repl], 0)
        paused = False
        try:
            time.sleep(1.0)
            r = self.ch._ctl("zk-pause", timeout=60)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            paused = True
            time.sleep(12)  # past ZooKeeper's operation timeout: INSERTs fail with 999, then 242
            acked_while_paused = sum(len(a) for a in writers.acked.values())
        finally:
            if paused:
                r = self.ch._ctl("zk-resume", timeout=120)
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            time.sleep(1.0)
            writers.stop()
        self.drain(proc)
        self.assertEqual(proc.stop(), 0, proc.log_tail())
        n = self.check_exactly_once(writers, repl)
        report(f"ZooKeeper paused 12 s: {acked_while_paused} requests acked by then, {n} in all, "
               f"each once")

    def test_an_outage_longer_than_the_stall_timeout_keeps_liveness_serving(self):
        """A spooled batch retried through a long outage is progress, not a stall: liveness stays
        SERVING (the kubelet must not restart chgate while it holds the backlog), and the backlog
        lands once ClickHouse is back."""
        repl, _ = self.make_tables(uuid.uuid4().hex[:8])
        stall = 6
        proc = self.chgate(extra_args=[f"--liveness-stall-timeout={stall}s", "--read-timeout=2s",
                                       "--connect-timeout=2s", "--retry-max-elapsed=3s"])
        writers = self.run_load(proc, [repl], 0)
        writers.wait_acked()
        # The Replicated table's deduplication window is read at its first persisted flush, while
        # ClickHouse answers: 100 blocks at the INSERT rate system.part_log shows.
        dedup = lambda: e2e.metric_sum(proc.scrape(), "chgate_dedup_window_seconds",  # noqa: E731
                                       table=f"{DATABASE}.{repl}")
        self.assertTrue(e2e.wait_until(lambda: (dedup() or 0) > 0, timeout=60), proc.log_tail())
        states = []
        try:
            with e2e.PausedClickHouse(self.ch):
                acked_before = sum(len(a) for a in writers.acked.values())
                deadline = time.monotonic() + 3 * stall
                while time.monotonic() < deadline:
                    states.append(proc.health("liveness"))
                    time.sleep(0.5)
                acked_in_outage = sum(len(a) for a in writers.acked.values()) - acked_before
        finally:
            writers.stop()
        self.assertEqual(set(states), {"SERVING"}, proc.log_tail())
        self.assertNotIn("liveness NOT_SERVING", proc.log_text())
        self.assertGreater(acked_in_outage, 0, "nothing was acknowledged during the outage")
        self.drain(proc)
        self.assertEqual(proc.stop(), 0, proc.log_tail())
        n = self.check_exactly_once(writers, repl)
        report(f"outage of {3 * stall} s (stall timeout {stall} s): liveness SERVING in all "
               f"{len(states)} checks, {acked_in_outage} requests acked in the outage, {n} in all, "
               f"each once")

    def test_shutdown_ends_within_the_drain_timeout_with_clickhouse_paused(self):
        """SIGTERM with ClickHouse stopped mid-conversation (connections open, silent) and a
        request waiting for its table's header: the process is gone within --drain-timeout + 1 s,
        and rows it had acknowledged stay in the spool for the next start."""
        repl, _ = self.make_tables(uuid.uuid4().hex[:8])
        unknown = f"spool_unknown_{uuid.uuid4().hex[:8]}"
        self.ch.recreate_table(unknown, "id UInt64, writer UInt32, payload String")
        drain = 4
        proc = self.chgate(extra_args=[f"--drain-timeout={drain}s", "--read-timeout=60s"])
        writers = self.run_load(proc, [repl], 0)
        writers.wait_acked()
        import grpc
        with e2e.PausedClickHouse(self.ch):
            time.sleep(1.0)  # flushes now wait for the silent server
            # A table chgate has never seen: its header lookup waits for the server too.
            channel = grpc.insecure_channel(proc.api_address)
            stub = self.stubs.pb_grpc.IngestStub(channel)
            rows = [self.pb.Row(values=[V.u(1), V.u(0), V.s("x")])]
            call = stub.Insert.future(self.pb.InsertRequest(
                table=f"{DATABASE}.{unknown}", columns=["id", "writer", "payload"],
                rows=self.pb.RowSet(rows=rows), ack_mode=self.pb.ACK_MODE_PERSISTED), timeout=60)
            time.sleep(0.5)
            writers.stop()
            started = time.monotonic()
            proc.signal(signal.SIGTERM)
            code = proc.wait(timeout=drain + 30)
            took = time.monotonic() - started
            try:
                call.result(timeout=5)
            except grpc.RpcError:
                pass
            channel.close()
        self.assertIsNotNone(code, "chgate did not exit")
        report(f"SIGTERM with ClickHouse paused: exited {code} after {took:.2f} s "
               f"(--drain-timeout={drain}s)")
        self.assertLess(took, drain + 1.0 + 0.5, proc.log_tail())
        # Ended by its own drain path (the pool's operations interrupted), not by the backstop
        # that kills a process still running a second after the deadline.
        self.assertNotIn("still not stopped after the drain deadline", proc.log_text())
        # The next start sends whatever was left.
        proc = self.chgate()
        self.drain(proc)
        self.assertEqual(proc.stop(), 0, proc.log_tail())
        self.check_exactly_once(writers, repl)

    def test_a_full_spool_refuses_and_never_exceeds_its_bound(self):
        repl, _ = self.make_tables(uuid.uuid4().hex[:8])
        max_bytes = 4 << 20
        segment = 1 << 20
        proc = self.chgate(extra_args=[f"--spool-max-bytes={max_bytes}",
                                       f"--spool-segment-bytes={segment}"])
        writers = self.run_load(proc, [repl], 0)
        writers.wait_acked()  # the table's header is known before ClickHouse stops answering
        largest = 0
        try:
            with e2e.PausedClickHouse(self.ch):
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline and writers.refused == 0:
                    largest = max(largest, sum(f.stat().st_size for f in self.spool_dir.glob("*.wal")))
                    time.sleep(0.05)
                largest = max(largest, sum(f.stat().st_size for f in self.spool_dir.glob("*.wal")))
                refused_while_paused = writers.refused
        finally:
            writers.stop()
        self.assertGreater(refused_while_paused, 0, "no request was refused with the spool full")
        self.assertLessEqual(largest, max_bytes + segment)
        samples = proc.scrape()
        self.assertGreater(e2e.metric_sum(samples, "chgate_spool_refusals_total"), 0)
        self.drain(proc)
        self.assertEqual(proc.stop(), 0, proc.log_tail())
        n = self.check_exactly_once(writers, repl)
        report(f"spool full: {refused_while_paused} requests refused with RESOURCE_EXHAUSTED, "
               f"largest spool {largest} bytes (bound {max_bytes} + one segment {segment}); "
               f"{n} acked requests, each once")

    def test_health_is_answered_while_a_full_spool_is_recovered(self):
        """The startupProbe must not fail while chgate reads a large spool: the health listener
        answers from before the recovery, live but not ready, and ready once the API serves."""
        import grpc
        table = f"spool_start_{uuid.uuid4().hex[:8]}"
        self.ch.recreate_table(table, "id UInt64, writer UInt32, payload String")
        spool_args = ["--spool-max-bytes=160MiB", "--max-message-bytes=16MiB",
                      "--memory-budget=256MiB"]
        proc = self.chgate(extra_args=spool_args)
        channel = grpc.insecure_channel(proc.api_address)
        self.stubs.pb_grpc.IngestStub(channel).Insert(  # the table's header, saved by the spool
            e2e.rows_request(f"{DATABASE}.{table}", ["id", "writer", "payload"],
                             [[V.u(0), V.u(0), V.s("")]]), timeout=30)
        channel.close()
        health = self.stubs.health_pb
        serving = health.HealthCheckResponse.SERVING
        samples = []  # (liveness, readiness): a status, or None while nothing answers
        stop = threading.Event()

        def poll(p):
            def check(stub, name):
                try:
                    return stub.Check(health.HealthCheckRequest(service=name), timeout=1).status
                except grpc.RpcError:
                    return None
            while not stop.is_set():
                # A channel per probe, as the kubelet does: a channel that failed to connect
                # waits a second before it tries again, longer than the recovery takes.
                with grpc.insecure_channel(f"127.0.0.1:{p.health_port}") as channel:
                    stub = self.stubs.health_grpc.HealthStub(channel)
                    samples.append((check(stub, "liveness"), check(stub, "readiness")))
                time.sleep(0.002)

        with e2e.PausedClickHouse(self.ch, max_seconds=300):
            requests, size = e2e.fill_spool(proc, table, self.spool_dir)
            proc.kill()
            restarted = e2e.ChgateProcess(
                CHGATE, self.ch, name="chgate-spool",
                args=[f"--spool-dir={self.spool_dir}", "--batch-max-delay=100ms", *spool_args])
            self.procs.append(restarted)
            poller = None

            def spawned(p):
                nonlocal poller
                poller = threading.Thread(target=poll, args=(p,))
                poller.start()
            try:
                restarted.start(timeout=120, on_spawn=spawned)
                e2e.wait_until(lambda: samples and samples[-1] == (serving, serving), timeout=10)
            finally:
                stop.set()
                if poller is not None:
                    poller.join()
        log = restarted.log_text()
        self.assertLess(log.index("health served while chgate starts"), log.index("spool opened"))
        starting = [s for s in samples if s == (serving, health.HealthCheckResponse.NOT_SERVING)]
        self.assertTrue(starting, f"no probe saw chgate starting: {sorted(set(samples), key=str)}"
                                  f"\n{restarted.log_tail()}")
        answered = [s for s in samples if s != (None, None)]
        first_ready = answered.index((serving, serving))
        self.assertTrue(all(s == starting[0] for s in answered[:first_ready]), answered[:first_ready])
        self.assertTrue(all(None not in s for s in answered[first_ready:]), answered[first_ready:])
        self.drain(restarted, timeout=300)
        self.assertEqual(restarted.stop(), 0, restarted.log_tail())
        self.assertEqual(int(self.ch.scalar(f"SELECT count() FROM {DATABASE}.{table}")),
                         1 + requests * 1000)
        report(f"health during recovery: {requests} requests ({size >> 20} MiB) spooled; "
               f"{len(starting)} probes saw live-not-ready while the spool was read, then ready")

    def test_a_corrupt_record_is_quarantined_and_the_rest_replayed(self):
        repl, _ = self.make_tables(uuid.uuid4().hex[:8])
        proc = self.chgate(extra_args=["--spool-segment-bytes=256KiB"])
        # ClickHouse paused: everything stays in the spool.
        writers = self.run_load(proc, [repl], 0)
        writers.wait_acked()
        with e2e.PausedClickHouse(self.ch):
            time.sleep(1.5)
            writers.stop()
            proc.kill()
        segments = sorted(self.spool_dir.glob("*.wal"))
        self.assertGreater(len(segments), 1)
        victim = segments[len(segments) // 2]
        data = bytearray(victim.read_bytes())
        self.assertGreater(len(data), 4096)
        # Flip a payload byte of the record at the middle of the segment (walking the records:
        # u32 length, u32 CRC, u64 LSN, u8 type, payload, after a 32-byte header).
        middle, offset = len(data) // 2, 32
        while True:
            size = 17 + struct.unpack_from("<I", data, offset)[0]
            if offset + size > middle:
                break
            offset += size
        data[offset + 17 + (size - 17) // 2] ^= 0xFF
        victim.write_bytes(bytes(data))
        proc = self.chgate()
        self.drain(proc)
        samples = proc.scrape()
        quarantined = e2e.metric_sum(samples, "chgate_spool_quarantined_bytes_total")
        # That record alone is moved aside: the records after it in its segment are replayed.
        self.assertEqual(quarantined, size)
        self.assertTrue(list(self.spool_dir.glob("*.corrupt*")), "no .corrupt file")
        self.assertIn("spool: corrupt bytes moved aside", proc.log_text())
        self.assertIn("records_after_kept_in", proc.log_text())
        self.assertEqual(proc.stop(), 0, proc.log_tail())
        counts = self.request_counts(repl)
        acked = writers.acked[repl]
        lost = [r for r in acked if counts.get(r, 0) == 0]
        self.assertEqual(self.duplicated_rows(repl), 0)
        self.assertLess(len(lost), len(acked), "nothing after the damage was replayed")
        report(f"corrupt segment: {quarantined:.0f} bytes quarantined; {len(acked)} acked requests, "
               f"{len(lost)} lost with the damaged bytes, the rest once")


class WaitDrainedCommandTest(SpoolTestCase):
    """`chgate spool wait-drained` (the sidecar's preStop hook): exit 1 naming the count while
    persisted records wait for ClickHouse, 0 once they are sent, 0 for a chgate without a spool."""

    def wait_drained(self, proc, *args):
        env = {k: v for k, v in os.environ.items() if not k.startswith("CHGATE_")}
        r = subprocess.run([CHGATE, "spool", "wait-drained", f"--spool-dir={self.spool_dir}",
                            f"--metrics-listen=127.0.0.1:{proc.metrics_port}", *args],
                           capture_output=True, text=True, timeout=90, env=env)
        return r.returncode, r.stdout + r.stderr

    def test_waits_for_the_persisted_backlog(self):
        import grpc

        table = f"spool_wait_{uuid.uuid4().hex[:8]}"
        self.ch.recreate_table(table, "id UInt64")
        proc = self.chgate()
        stub = self.stubs.pb_grpc.IngestStub(grpc.insecure_channel(proc.api_address))
        # The table's header first, while ClickHouse answers.
        stub.Insert(self.pb.InsertRequest(table=f"{DATABASE}.{table}", rows=self.pb.RowSet(
            rows=[self.pb.Row(values=[V.u(0)])])), timeout=30)
        with e2e.PausedClickHouse(self.ch):
            for i in range(1, 6):
                stub.Insert(self.pb.InsertRequest(
                    table=f"{DATABASE}.{table}", ack_mode=self.pb.ACK_MODE_PERSISTED,
                    rows=self.pb.RowSet(rows=[self.pb.Row(values=[V.u(i)])])), timeout=10)
            rc, text = self.wait_drained(proc, "--timeout=2s")
            self.assertEqual(rc, 1, text)
            self.assertRegex(text, r"\d+ records still pending")
        rc, text = self.wait_drained(proc, "--timeout=60s")
        self.assertEqual(rc, 0, text)
        self.assertIn("spool drained", text)
        self.assertEqual(self.ch.scalar(f"SELECT count() FROM {DATABASE}.{table}"), "6")
        self.assertEqual(proc.stop(), 0, proc.log_tail())
        report("wait-drained: exit 1 while ClickHouse was paused, 0 once the backlog landed")

    def test_a_chgate_without_a_spool_is_drained(self):
        proc = e2e.ChgateProcess(CHGATE, self.ch, name="chgate-no-spool")
        self.procs.append(proc)
        proc.start()
        rc, text = self.wait_drained(proc, "--timeout=10s")
        self.assertEqual(rc, 0, text)
        self.assertIn("without a spool", text)


class DeadLetterCommandsTest(SpoolTestCase):
    """`chgate spool list/show/reinsert/delete` on batches ClickHouse refused for good: the table's
    column narrowed between the ack and the INSERT (70000 does not fit the new UInt16), and a
    widened column that takes the acknowledged rows as they are."""

    def spool_command(self, *args):
        env = {k: v for k, v in os.environ.items() if not k.startswith("CHGATE_")}
        r = subprocess.run([CHGATE, "spool", *args, f"--spool-dir={self.spool_dir}",
                            f"--endpoints={self.ch.address}", f"--database={DATABASE}"],
                           capture_output=True, text=True, timeout=60, env=env)
        return r.returncode, r.stdout, r.stderr

    def persisted(self, proc, table, first, rows):
        import grpc
        channel = grpc.insecure_channel(proc.api_address)
        stub = self.stubs.pb_grpc.IngestStub(channel)
        request = self.pb.InsertRequest(
            table=f"{DATABASE}.{table}", columns=["id", "writer", "payload"],
            rows=self.pb.RowSet(rows=[self.pb.Row(values=[V.u(first + i), V.u(70000),
                                                          V.s(f"p{i}")])
                                      for i in range(rows)]),
            ack_mode=self.pb.ACK_MODE_PERSISTED)
        self.assertEqual(stub.Insert(request, timeout=10).rows, rows)
        channel.close()

    def dead_letter_after_a_type_change(self, proc, table, first, rows):
        self.persisted(proc, table, first, rows)
        # Before the batch's delay passes: the INSERT then meets a UInt16 column.
        self.ch.query(f"ALTER TABLE {DATABASE}.{table} MODIFY COLUMN writer UInt16")
        before = set(self.spool_dir.glob("dead-letter/*.batch"))
        self.assertTrue(e2e.wait_until(
            lambda: set(self.spool_dir.glob("dead-letter/*.batch")) - before, timeout=30),
            proc.log_tail())
        return (set(self.spool_dir.glob("dead-letter/*.batch")) - before).pop().name

    def test_list_show_reinsert_and_delete(self):
        suffix = uuid.uuid4().hex[:8]
        table, other = f"spool_dl_{suffix}", f"spool_dl_other_{suffix}"
        columns = "id UInt64, writer UInt32, payload String"
        self.ch.recreate_table(table, columns)
        self.ch.recreate_table(other, columns)
        proc = self.chgate(extra_args=[
            f"--table-limits={DATABASE}.{table}:delay=2s;{DATABASE}.{other}:delay=2s"])
        name = self.dead_letter_after_a_type_change(proc, table, 1000, 20)
        # The file is renamed into place before the line saying so is written.
        self.assertTrue(e2e.wait_until(
            lambda: "moved to the dead-letter directory" in proc.log_text(), timeout=10),
            proc.log_tail())

        rc, out, err = self.spool_command("list")
        self.assertEqual(rc, 0, err)
        lines = out.splitlines()
        self.assertEqual(lines[0].split("\t")[:5], ["file", "time", "table", "records", "rows"])
        row = next(line.split("\t") for line in lines[1:] if line.startswith(name))
        self.assertEqual(row[2], f"{DATABASE}.{table}")
        self.assertEqual(row[4], "20")

        rc, out, err = self.spool_command("show", name, "--format=jsonl")
        self.assertEqual(rc, 0, err)
        import json
        shown = [json.loads(line) for line in out.splitlines()]
        self.assertEqual([r["id"] for r in shown], [str(1000 + i) for i in range(20)])
        self.assertEqual(shown[3], {"id": "1003", "writer": "70000", "payload": "p3"})
        rc, out, err = self.spool_command("show", name)
        self.assertEqual(rc, 0, err)
        self.assertEqual(out.splitlines()[0], "id\twriter\tpayload")

        # Once the cause is known: into a table of the old layout, then the file is gone.
        rc, out, err = self.spool_command("reinsert", name, f"--into={DATABASE}.{other}")
        self.assertEqual(rc, 0, err)
        self.assertIn("inserted 20 rows", out)
        self.assertEqual(self.ch.scalar(f"SELECT count(), sum(id) FROM {DATABASE}.{other}"),
                         f"20\t{sum(range(1000, 1020))}")
        self.assertFalse((self.spool_dir / "dead-letter" / name).exists())

        # Into its own table once its layout is back, under the batch's identity.
        name = self.dead_letter_after_a_type_change(proc, other, 2000, 5)
        self.ch.query(f"ALTER TABLE {DATABASE}.{other} MODIFY COLUMN writer UInt32")
        rc, out, err = self.spool_command("reinsert", name, "--keep")
        self.assertEqual(rc, 0, err)
        self.assertEqual(self.ch.scalar(f"SELECT count() FROM {DATABASE}.{other} WHERE id >= 2000"),
                         "5")
        self.assertTrue((self.spool_dir / "dead-letter" / name).exists())
        rc, out, err = self.spool_command("delete", name)
        self.assertEqual(rc, 0, err)
        self.assertFalse((self.spool_dir / "dead-letter" / name).exists())
        rc, out, err = self.spool_command("show", name)
        self.assertEqual(rc, 1)
        rc, out, err = self.spool_command("frobnicate")
        self.assertEqual(rc, 2)
        self.assertIn("unknown command", err)
        self.assertEqual(proc.stop(), 0, proc.log_tail())
        report(f"dead letters: listed, shown, re-inserted into another table and into their own, "
               f"deleted")

    def test_a_widened_column_takes_the_acknowledged_rows(self):
        table = f"spool_widen_{uuid.uuid4().hex[:8]}"
        self.ch.recreate_table(table, "id UInt64, writer UInt32, payload String")
        proc = self.chgate(extra_args=[f"--table-limits={DATABASE}.{table}:delay=2s"])
        self.persisted(proc, table, 0, 10)
        self.ch.query(f"ALTER TABLE {DATABASE}.{table} MODIFY COLUMN writer UInt64")
        self.drain(proc)
        self.assertIn("table changed: spooled batch converted to its new columns", proc.log_text())
        self.assertEqual(self.ch.scalar(f"SELECT count(), sum(writer) FROM {DATABASE}.{table}"),
                         "10\t700000")
        self.assertFalse(list(self.spool_dir.glob("dead-letter/*.batch")))
        self.assertEqual(proc.stop(), 0, proc.log_tail())
        report("a widened column: the acknowledged rows converted and inserted, none set aside")


def main():
    global CHGATE
    args, argv = e2e.test_main_args(__doc__.splitlines()[0])
    CHGATE = args.chgate
    unittest.main(argv=argv, verbosity=2)


if __name__ == "__main__":
    main()
