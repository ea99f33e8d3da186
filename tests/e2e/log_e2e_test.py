#!/usr/bin/python3
"""End-to-end test of chgate's log during a ClickHouse outage: the real binary under steady insert
load, the local ClickHouse stopped for several seconds and started again.

  /usr/bin/python3 tests/e2e/log_e2e_test.py --chgate build/server/chgate [unittest args]

For --log-format=text and --log-format=json, chgate's whole log (stderr) must say what an on-call
engineer needs and no more: the endpoint going down, the retried and failed batches summarized
(throttled, with suppressed counts that add up to the retries counted in the metrics), the endpoint
coming back, the drain; every line well-formed (JSON lines parse, text lines have time, level and
component); far fewer lines than requests. Stops and starts ClickHouse through clickhousectl.sh
(it is always started again); see e2e_support.py for the environment.
"""

import datetime
import json
import re
import sys
import threading
import time
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import e2e_support as e2e  # noqa: E402
from e2e_support import DATABASE, V  # noqa: E402

CHGATE = e2e.default_chgate_binary()

REPEAT = 2.0      # --log-repeat-interval, seconds
OUTAGE = 8.0      # seconds ClickHouse stays stopped under load
DEADLINE = 3.0    # each insert's deadline: batches give up during the outage
THREADS = 6

TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
TEXT_LINE = re.compile(r"^(?P<time>\S+) (?P<level>DEBUG|INFO|WARN|ERROR) \[(?P<component>[a-z]+)\] "
                       r"(?P<rest>.*)$")
TEXT_SUPPRESSED = re.compile(r" \((\d+) similar suppressed in the last ([0-9.]+m?s)"
                             r"(?:, the last at (\S+))?\)$")
TEXT_FIELD = re.compile(r' ([a-z_][a-z0-9_-]*)=("(?:[^"\\]|\\.)*"|[^ ]*)')
COMPONENTS = {"main", "pool", "ingest", "query", "api", "tls", "grpc"}


def report(text):
    print(f"  [e2e] {text}", file=sys.stderr, flush=True)


def parse_text(line):
    """One text line as {time, level, component, msg, suppressed, <fields>} (values as text)."""
    m = TEXT_LINE.match(line)
    if m is None:
        raise AssertionError(f"not a chgate text log line: {line!r}")
    rec = {"time": m["time"], "level": m["level"].lower(), "component": m["component"],
           "suppressed": 0}
    rest = m["rest"]
    s = TEXT_SUPPRESSED.search(rest)
    if s:
        rec["suppressed"] = int(s.group(1))
        rec["suppressed_window"] = s.group(2)
        if s.group(3):
            rec["last_at"] = s.group(3)
        rest = rest[:s.start()]
    first = TEXT_FIELD.search(rest)
    rec["msg"] = rest if first is None else rest[:first.start()]
    if first is not None:
        consumed = rest[first.start():]
        for f in TEXT_FIELD.finditer(consumed):
            value = f.group(2)
            if value.startswith('"'):
                value = re.sub(r'\\(.)', r'\1', value[1:-1])
            rec[f.group(1)] = value
        if "".join(f.group(0) for f in TEXT_FIELD.finditer(consumed)) != consumed:
            raise AssertionError(f"fields of a text line do not parse: {line!r}")
    return rec


def parse_time(text):
    return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ")


def parse_json(line):
    try:
        rec = json.loads(line)
    except json.JSONDecodeError as e:
        raise AssertionError(f"not a JSON line ({e}): {line!r}") from e
    if not isinstance(rec, dict):
        raise AssertionError(f"not a JSON object: {line!r}")
    for key in ("time", "level", "component", "msg"):
        if not isinstance(rec.get(key), str):
            raise AssertionError(f"JSON line without a string {key!r}: {line!r}")
    rec.setdefault("suppressed", 0)
    return rec


def stream_requests(table, stop, interval=0.005):
    """Requests of 3 rows each, one every `interval` s, until `stop` is set."""
    k = 0
    next_at = time.monotonic()
    while not stop.is_set():
        delay = next_at - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        next_at += interval
        rows = [[V.u(k * 10 + r), V.s(f"stream k{k} r{r}")] for r in range(3)]
        yield e2e.rows_request(table, ["id", "payload"], rows, sequence=k)
        k += 1


class Load:
    """THREADS threads of unary Inserts into `table`, one after another, each with a DEADLINE s
    deadline (their batches give up during the outage), and one InsertStream into `stream_table`
    sending 200 requests/s whose deadline outlives the outage (its batches are retried until
    ClickHouse is back)."""

    def __init__(self, stub, table, stream_table):
        self.stub, self.table = stub, table
        self.stop_event = threading.Event()
        self.stream = e2e.StreamDriver(stub, stream_requests(stream_table, self.stop_event),
                                       timeout=300)
        self.lock = threading.Lock()
        self.results = []  # (monotonic time of the answer, status code name)
        self.threads = [threading.Thread(target=self._run, args=(t,), daemon=True)
                        for t in range(THREADS)]

    def _run(self, thread):
        import grpc

        k = 0
        while not self.stop_event.is_set():
            rows = [[V.u(thread * 10_000_000 + k * 10 + r), V.s(f"t{thread} k{k} r{r}")]
                    for r in range(3)]
            try:
                self.stub.Insert(e2e.rows_request(self.table, ["id", "payload"], rows),
                                 timeout=DEADLINE)
                code = "OK"
            except grpc.RpcError as e:
                code = e.code().name
            with self.lock:
                self.results.append((time.monotonic(), code))
            k += 1
            time.sleep(0.02)

    def start(self):
        for t in self.threads:
            t.start()
        self.stream.start()
        return self

    def stop(self):
        self.stop_event.set()
        for t in self.threads:
            t.join(DEADLINE + 30)
        self.stream.stop()
        self.stream.join(60)

    def count(self, code=None, since=0.0):
        """Unary requests answered (with `code`) since `since`."""
        with self.lock:
            return sum(1 for t, c in self.results if t >= since and (code is None or c == code))

    def requests(self):
        """Every request sent, unary and streamed."""
        return self.count() + self.stream.counts()[0]


class OutageLogTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.ch = e2e.reachable_clickhouse()
        cls.ch.server_pid()  # skips unless clickhousectl.sh controls this server
        cls.ch.ensure_database()
        cls.stubs = e2e.load_stubs()

    def run_outage(self, log_format):
        name = f"outage_log_{log_format}"
        self.ch.recreate_table(name, "id UInt64, payload String")
        self.ch.recreate_table(f"{name}_stream", "id UInt64, payload String")
        table, stream_table = f"{DATABASE}.{name}", f"{DATABASE}.{name}_stream"
        chgate = e2e.ChgateProcess(CHGATE, self.ch, [
            f"--log-format={log_format}", f"--log-repeat-interval={REPEAT:g}s",
            "--batch-max-delay=50ms", "--retry-initial-backoff=50ms", "--retry-max-backoff=400ms",
            "--endpoint-probe-interval=1s", "--connect-timeout=1s"], name=name).start()
        channel = chgate.channel()
        load = None
        try:
            load = Load(self.stubs.pb_grpc.IngestStub(channel), table, stream_table).start()
            self.assertTrue(e2e.wait_until(lambda: load.count("OK") >= 30, 30),
                            f"no steady load before the outage:\n{chgate.log_tail()}")
            stopped_at = time.monotonic()
            try:
                self.ch.stop()
                self.assertTrue(e2e.wait_until(lambda: "endpoint down" in chgate.log_text(), 15),
                                f"no endpoint-down line:\n{chgate.log_tail()}")
                time.sleep(max(0.0, OUTAGE - (time.monotonic() - stopped_at)))
            finally:
                self.ch.start()  # never leave the shared server down
            outage = time.monotonic() - stopped_at
            self.ch.wait_ready()
            restarted_at = time.monotonic()
            self.assertTrue(e2e.wait_until(lambda: load.count("OK", since=restarted_at) >= 30, 60),
                            f"inserts did not recover:\n{chgate.log_tail()}")
            self.assertTrue(e2e.wait_until(lambda: "endpoint up" in chgate.log_text().split(
                "endpoint down", 1)[-1], 30), f"no endpoint-up line:\n{chgate.log_tail()}")
            load.stop()
            retries = e2e.metric_sum(chgate.scrape(), "chgate_flush_retries_total", table=table)
        finally:
            if load is not None:
                load.stop()
            channel.close()
            rc = chgate.stop()
        self.assertEqual(rc, 0, chgate.log_tail())
        requests, failed = load.requests(), load.count() - load.count("OK")
        text = chgate.log_text()
        lines = text.splitlines()
        report(f"{log_format}: outage {outage:.1f}s, {requests} requests ({failed} unary ones "
               f"failed), {retries:.0f} flush retries of {table}, {len(lines)} log lines")
        return table, stream_table, lines, outage, requests, failed, retries

    def check_outage_log(self, log_format, parse):
        table, stream_table, lines, outage, requests, failed, retries = self.run_outage(log_format)
        records = [parse(line) for line in lines]
        for rec in records:
            self.assertRegex(rec["time"], TIME)
            self.assertIn(rec["level"], ("debug", "info", "warn", "error"))
            self.assertIn(rec["component"], COMPONENTS)
        times = [parse_time(r["time"]) for r in records]
        self.assertEqual(times, sorted(times), "lines are not in time order")
        for rec, t in zip(records, times):
            # A summary written later shows an event of the past, and says when it was.
            if "last_at" in rec:
                self.assertRegex(rec["last_at"], TIME)
                self.assertLessEqual(parse_time(rec["last_at"]), t)
                self.assertGreater(int(rec["suppressed"]), 0)

        def find(component, msg, **fields):
            return [(i, r) for i, r in enumerate(records) if r["component"] == component
                    and r["msg"] == msg and all(str(r.get(k)) == str(v) for k, v in fields.items())]

        # The start: version and configuration (no password field: it is no option).
        self.assertTrue(any(r["msg"].startswith("chgate: version ") for r in records))
        config = find("main", "configuration")
        self.assertEqual(len(config), 1)
        self.assertEqual(config[0][1]["log-format"], log_format)
        self.assertNotIn("password", config[0][1])

        # The endpoint goes down, then comes back.
        down = find("pool", "endpoint down", endpoint=self.ch.address)
        self.assertEqual(len(down), 1, "one outage, one endpoint-down line")
        self.assertEqual(down[0][1]["level"], "warn")
        self.assertTrue(down[0][1].get("error"), down[0][1])
        up = [(i, r) for i, r in find("pool", "endpoint up", endpoint=self.ch.address)
              if i > down[0][0]]
        self.assertEqual(len(up), 1, "one recovery, one endpoint-up line")
        self.assertIn("down_for", up[0][1])

        # Retries: one line per table and interval, the rest counted as suppressed.
        retry = find("ingest", "batch retry", table=table)
        self.assertGreater(len(retry), 0)
        for _, r in retry:
            self.assertEqual(r["level"], "warn")
            for key in ("batch_id", "attempt", "rows", "callers", "ack_mode", "code", "error"):
                self.assertIn(key, r)
        self.assertTrue(any(int(r["suppressed"]) > 0 for _, r in retry),
                        "no retry line summarizes suppressed retries")
        logged = sum(1 + int(r["suppressed"]) for _, r in retry)
        self.assertGreaterEqual(logged, retries, "suppressed counts do not cover the retries")
        self.assertLess(len(retry), logged / 3, "retries are not summarized")
        span = (times[retry[-1][0]] - times[retry[0][0]]).total_seconds()
        self.assertLessEqual(len(retry), span / REPEAT + 2, "retry lines come faster than "
                             "--log-repeat-interval")

        # Batches whose callers' deadlines passed gave up: rows, callers and ack mode named.
        gave_up = find("ingest", "batch failed", table=table)
        self.assertGreater(len(gave_up), 0)
        self.assertGreater(failed, 0)
        for _, r in gave_up:
            self.assertEqual(r["level"], "error")
            self.assertEqual(r["ack_mode"], "committed")
            self.assertGreater(int(r["rows"]), 0)
            self.assertGreater(int(r["callers"]), 0)
        self.assertLessEqual(len(gave_up), outage / REPEAT + 3)

        # The stream's batches outlived the outage: committed once ClickHouse was back.
        recovered = find("ingest", "batch committed after retries", table=stream_table)
        self.assertGreater(len(recovered), 0)
        self.assertGreater(times[recovered[0][0]], times[down[0][0]])
        self.assertGreater(int(recovered[0][1]["attempts"]), 1)

        # The drain at the end flushed everything.
        self.assertEqual(len(find("ingest", "drain started")), 1)
        finished = find("ingest", "drain finished", rows_failed=0, rows_dropped=0)
        self.assertEqual(len(finished), 1, lines[-5:])

        # No line per request: a handful of lines for hundreds of requests, and no event class
        # written more often than once per interval.
        self.assertGreater(requests, 1000)
        self.assertLess(len(lines), 60, "\n".join(lines))
        self.assertLess(len(lines) * 20, requests)
        per_class = {}
        for rec in records:
            key = (rec["component"], rec["msg"], rec.get("table"), rec.get("endpoint"))
            per_class[key] = per_class.get(key, 0) + 1
        for key, n in per_class.items():
            self.assertLessEqual(n, (outage + 30) / REPEAT, f"{key} written {n} times")
        return records

    def test_text_log_of_an_outage(self):
        records = self.check_outage_log("text", parse_text)
        # The substrings scripts and tests wait for stay in text output.
        self.assertTrue(any(r["msg"].startswith("chgate: serving the API") for r in records))

    def test_json_log_of_an_outage(self):
        records = self.check_outage_log("json", parse_json)
        # JSON keeps numbers and booleans typed.
        retry = [r for r in records if r["msg"] == "batch retry"]
        self.assertIsInstance(retry[0]["attempt"], int)
        self.assertIsInstance(retry[0]["suppressed"], int)
        up = [r for r in records if r["msg"] == "endpoint up"]
        self.assertIsInstance(up[-1]["tls"], bool)


def main():
    global CHGATE
    args, argv = e2e.test_main_args(__doc__.splitlines()[0])
    CHGATE = args.chgate
    e2e.load_stubs()
    unittest.main(argv=argv, verbosity=2)


if __name__ == "__main__":
    main()
