#!/usr/bin/python3
"""End-to-end test of the adaptive flush delay against real part pressure: the local ClickHouse
with merges stopped on a table whose MergeTree settings refuse INSERTs at a handful of active
parts (TOO_MANY_PARTS), so chgate must raise that table's flush delay, keep every row, and lower
the delay again once merges run.

  /usr/bin/python3 tests/e2e/pressure_e2e_test.py --chgate build/server/chgate [unittest args]
"""

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


def report(text):
    print(f"  [pressure] {text}", file=sys.stderr, flush=True)


class PartPressureTest(unittest.TestCase):
    def test_too_many_parts_raises_the_delay_and_merges_lower_it(self):
        import grpc

        ch = e2e.reachable_clickhouse()
        ch.ensure_database()
        stubs = e2e.load_stubs()
        table = f"pressure_{uuid.uuid4().hex[:8]}"
        ch.recreate_table(table, "id UInt64",
                          engine="MergeTree ORDER BY id SETTINGS parts_to_delay_insert = 4, "
                                 "parts_to_throw_insert = 6")
        ch.query(f"SYSTEM STOP MERGES {DATABASE}.{table}")
        proc = e2e.ChgateProcess(CHGATE, ch, ["--batch-max-delay=50ms",
                                              "--batch-max-delay-ceiling=800ms",
                                              "--retry-max-backoff=200ms"],
                                 name="chgate-pressure").start()
        acked, lock, stop = [], threading.Lock(), threading.Event()

        def writer(k):
            with grpc.insecure_channel(proc.api_address) as channel:
                stub = stubs.pb_grpc.IngestStub(channel)
                i = 0
                while not stop.is_set():
                    ids = list(range(k * 10**9 + i * 10, k * 10**9 + i * 10 + 10))
                    i += 1
                    req = stubs.pb.InsertRequest(
                        table=f"{DATABASE}.{table}", columns=["id"],
                        rows=stubs.pb.RowSet(rows=[stubs.pb.Row(values=[V.u(x)]) for x in ids]))
                    try:
                        stub.Insert(req, timeout=60)
                    except grpc.RpcError as e:
                        raise AssertionError(f"insert failed: {e.code()} {e.details()}")
                    with lock:
                        acked.extend(ids)
                    time.sleep(0.01)

        threads = [threading.Thread(target=writer, args=(k,), daemon=True) for k in range(2)]
        merges_stopped = True
        try:
            for t in threads:
                t.start()

            def delay():
                return e2e.metric_sum(proc.scrape(), "chgate_batch_max_delay_seconds",
                                      table=f"{DATABASE}.{table}") or 0

            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and "reason=too_many_parts" not in proc.log_text():
                time.sleep(0.2)
            self.assertIn("flush delay raised", proc.log_text())
            self.assertIn("reason=too_many_parts", proc.log_text())
            raised = delay()
            self.assertGreater(raised, 0.05)
            ch.query(f"SYSTEM START MERGES {DATABASE}.{table}")
            merges_stopped = False
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline and "flush delay lowered" not in proc.log_text():
                time.sleep(0.5)
            self.assertIn("flush delay lowered", proc.log_text())
            lowered = delay()
        finally:
            stop.set()
            for t in threads:
                t.join(timeout=120)
            if merges_stopped:
                ch.query(f"SYSTEM START MERGES {DATABASE}.{table}")
            exit_code = proc.stop()
        self.assertEqual(exit_code, 0, proc.log_tail())
        counts = ch.query(f"SELECT count(), uniqExact(id) FROM {DATABASE}.{table} "
                          "FORMAT TabSeparated").split()
        self.assertEqual(int(counts[0]), len(acked))
        self.assertEqual(int(counts[1]), len(acked))
        retries = proc.log_text().count("batch retry")
        report(f"delay raised to {raised * 1000:.0f} ms under TOO_MANY_PARTS, lowered to "
               f"{lowered * 1000:.0f} ms after merges resumed; {len(acked)} rows acked, each once "
               f"in the table; {retries} retry lines logged")
        ch.query(f"DROP TABLE {DATABASE}.{table}")


def main():
    global CHGATE
    args, argv = e2e.test_main_args(__doc__.splitlines()[0])
    CHGATE = args.chgate
    unittest.main(argv=argv, verbosity=2)


if __name__ == "__main__":
    main()
