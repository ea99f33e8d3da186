#!/usr/bin/python3
"""Load generator: chgate's InsertStream against direct small INSERTs with clickhouse-client.

  /usr/bin/python3 tests/e2e/load_test.py --chgate build/server/chgate [--streams 8] [--duration 10]
      [--rows-per-request 10] [--window 512] [--direct-requests 200] [--form rows|block] [--smoke]

Starts its own chgate (free loopback ports, chgate's default batching unless --chgate-arg is given)
against the local ClickHouse, then:

  1. N concurrent InsertStream streams send small requests (R rows each) for --duration seconds,
     each stream keeping at most --window requests unacknowledged. Reported: rows/s, requests/s,
     ack latency (request handed to gRPC -> its ack) p50/p99/max, and chgate's peak memory (VmHWM
     of its pid).
  2. The same rows, request by request, as direct INSERTs: one `clickhouse-client --query "INSERT
     ... FORMAT TabSeparated"` per request, sequentially, for --direct-requests requests. Reported:
     rows/s and per-INSERT latency (which includes starting clickhouse-client: that is what a
     producer without a sidecar pays per small INSERT from a shell).
  3. The ratio of the two rates, and a check that the table holds exactly the rows acknowledged
     plus the rows inserted directly.

--smoke (used by ctest) runs about 5 seconds with small numbers. The Python client may be the
bottleneck at high rates; --form block (columnar requests) costs the client less than rows.
Exit code: 0 on success, 1 on errors or a row count mismatch, 77 when ClickHouse is unreachable
(unless CHGATE_REQUIRE_CLICKHOUSE=1, then 1).
"""

import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import e2e_support as e2e  # noqa: E402
from e2e_support import DATABASE, V  # noqa: E402

TABLE = "load"
COLUMNS = ["id", "ts", "name", "value"]
DDL = "id UInt64, ts DateTime, name String, value Float64"


def percentile(sorted_values, q):
    if not sorted_values:
        return float("nan")
    k = min(len(sorted_values) - 1, max(0, int(round(q * (len(sorted_values) - 1)))))
    return sorted_values[k]


def make_rows(stream, k, n, now):
    """Plain Python rows for request k of `stream` (ids unique over the run)."""
    rng = random.Random(stream * 1_000_003 + k)
    base = (stream + 1) * 10_000_000_000 + k * n
    return [(base + r, now, f"user{rng.randrange(1000)}", round(rng.random() * 1000, 3)) for r in range(n)]


def to_request(table, rows, sequence, form):
    if form == "block":
        return e2e.block_request(table, [
            ("id", "UInt64", [r[0] for r in rows]), ("ts", "DateTime", [r[1] for r in rows]),
            ("name", "String", [r[2] for r in rows]), ("value", "Float64", [r[3] for r in rows])],
            sequence=sequence)
    return e2e.rows_request(table, COLUMNS, [[V.u(r[0]), V.u(r[1]), V.s(r[2]), V.d(r[3])] for r in rows],
                            sequence=sequence)


def to_tsv(rows):
    import datetime

    out = []
    for i, ts, name, value in rows:
        t = datetime.datetime.fromtimestamp(ts, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
        out.append(f"{i}\t{t}\t{name}\t{value!r}\n")
    return "".join(out).encode()


def stream_requests(table, stream, rows_per_request, form, deadline, templates):
    """Requests until `deadline`; `templates` pre-built rows (the client's cost stays low)."""
    k = 0
    while time.monotonic() < deadline:
        rows = templates[k % len(templates)]
        # Unique ids per request: shift the template's ids by the round number.
        if k >= len(templates):
            shift = (k // len(templates)) * 1_000_000
            rows = [(r[0] + shift, *r[1:]) for r in rows]
        yield to_request(table, rows, k, form)
        k += 1


def run_chgate(args, clickhouse, table):
    stubs = e2e.load_stubs()
    chgate = e2e.ChgateProcess(os.path.abspath(args.chgate), clickhouse, args.chgate_arg, name="load").start()
    try:
        channel = chgate.channel()
        stub = stubs.pb_grpc.IngestStub(channel)
        # Warm up: a connection and the table's header.
        stub.Insert(to_request(table, make_rows(0, 0, 1, int(time.time())), 0, args.form), timeout=30)
        warm_rows = 1
        now = int(time.time())
        templates = [[make_rows(s + 1, k, args.rows_per_request, now) for k in range(64)]
                     for s in range(args.streams)]
        started = time.monotonic()
        deadline = started + args.duration
        drivers = [e2e.StreamDriver(stub, stream_requests(table, s + 1, args.rows_per_request, args.form,
                                                          deadline, templates[s]),
                                    timeout=args.duration + 300, window=args.window).start()
                   for s in range(args.streams)]
        peak = 0
        while any(d.thread.is_alive() for d in drivers):
            for d in drivers:
                d.join(0.2)
            try:
                peak = max(peak, chgate.memory_kib()["VmHWM"])
            except OSError:
                break
        elapsed = time.monotonic() - started
        mem = chgate.memory_kib()
        samples = chgate.scrape()
        channel.close()
    finally:
        rc = chgate.stop()
    latencies, ok_rows, ok_requests, errors, unacked = [], 0, 0, {}, 0
    stream_errors = []
    for d in drivers:
        if d.final_code is None or d.final_code.name != "OK":
            stream_errors.append(f"{d.final_code}: {d.final_details}")
        unacked += len(d.sent) - len(d.acks)
        for seq, ack in d.acks.items():
            if ack.status.code == 0:
                ok_requests += 1
                ok_rows += ack.rows
                latencies.append(d.ack_at[seq] - d.sent_at[seq])
            else:
                errors[ack.status.code] = errors.get(ack.status.code, 0) + 1
    latencies.sort()
    batches = e2e.metric_sum(samples, "chgate_batches_flushed_total") or 0
    batch_rows_sum = e2e.metric_sum(samples, "chgate_batch_rows_sum") or 0

    def mean_of(histogram):
        total = e2e.metric_sum(samples, histogram + "_sum")
        count = e2e.metric_sum(samples, histogram + "_count")
        return total / count if total is not None and count else float("nan")
    return {
        "requests": ok_requests, "rows": ok_rows + warm_rows, "acked_rows": ok_rows, "seconds": elapsed,
        "latencies": latencies, "errors": errors, "unacked": unacked, "stream_errors": stream_errors,
        "hwm_kib": max(peak, mem["VmHWM"]), "exit_code": rc, "batches": batches,
        "rows_per_batch": batch_rows_sum / batches if batches else 0,
        "flush_seconds": mean_of("chgate_flush_duration_seconds"),
        "commit_seconds": mean_of("chgate_request_commit_latency_seconds"),
        "log": chgate.log_tail(),
    }


def run_direct(args, clickhouse, table):
    now = int(time.time())
    latencies = []
    rows_total = 0
    started = time.monotonic()
    for k in range(args.direct_requests):
        data = to_tsv(make_rows(0, 1_000_000 + k, args.rows_per_request, now))
        t = time.monotonic()
        clickhouse.query(f"INSERT INTO {table} FORMAT TabSeparated", data=data)
        latencies.append(time.monotonic() - t)
        rows_total += args.rows_per_request
    elapsed = time.monotonic() - started
    latencies.sort()
    return {"requests": args.direct_requests, "rows": rows_total, "seconds": elapsed, "latencies": latencies}


def ms(x):
    return f"{x * 1000:.1f} ms"


def main():
    ap = e2e.parse_common_args(sys.argv[1:], __doc__.splitlines()[0])
    ap.add_argument("--streams", type=int, default=8)
    ap.add_argument("--duration", type=float, default=10.0, help="seconds of streaming")
    ap.add_argument("--rows-per-request", type=int, default=10)
    ap.add_argument("--window", type=int, default=512, help="unacknowledged requests per stream")
    ap.add_argument("--direct-requests", type=int, default=200)
    ap.add_argument("--form", choices=["rows", "block"], default="rows")
    ap.add_argument("--chgate-arg", action="append", default=[],
                    help="extra chgate flag, e.g. --chgate-arg=--batch-max-delay=50ms (repeatable)")
    ap.add_argument("--smoke", action="store_true", help="a ~5 s run with small numbers (ctest)")
    args = ap.parse_args()
    if args.smoke:
        args.streams, args.duration, args.direct_requests, args.window = 4, 1.0, 6, 64
    clickhouse = e2e.ClickHouse(args.clickhouse)
    e2e.ensure_clickhouse_or_exit(clickhouse)
    clickhouse.ensure_database()
    clickhouse.recreate_table(TABLE, DDL)
    table = f"{DATABASE}.{TABLE}"

    c = run_chgate(args, clickhouse, table)
    d = run_direct(args, clickhouse, table)
    in_table = int(clickhouse.scalar(f"SELECT count() FROM {table}"))
    expected = c["rows"] + d["rows"]

    c_rate = c["acked_rows"] / c["seconds"] if c["seconds"] else 0
    d_rate = d["rows"] / d["seconds"] if d["seconds"] else 0
    print(f"\nchgate load test: {args.streams} streams x {args.duration:g}s, {args.rows_per_request} rows per "
          f"request ({args.form}), at most {args.window} unacknowledged per stream; chgate flags: "
          f"{' '.join(args.chgate_arg) or '(defaults)'}; ClickHouse {clickhouse.address}\n")
    print("| path | requests | rows | seconds | rows/s | requests/s | latency p50 | p99 | max |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, r in ((f"chgate InsertStream, {args.streams} streams", c),
                    ("clickhouse-client, one INSERT per request", d)):
        lat = r["latencies"]
        rows = r["acked_rows"] if "acked_rows" in r else r["rows"]
        print(f"| {name} | {r['requests']} | {rows} | {r['seconds']:.2f} | {rows / r['seconds']:.0f} | "
              f"{r['requests'] / r['seconds']:.0f} | {ms(percentile(lat, 0.5))} | {ms(percentile(lat, 0.99))} | "
              f"{ms(lat[-1] if lat else float('nan'))} |")
    ratio = c_rate / d_rate if d_rate else float("inf")
    print(f"\nratio (chgate rows/s / direct rows/s): {ratio:.1f}x")
    print(f"chgate peak memory (VmHWM): {c['hwm_kib'] / 1024:.1f} MiB; batches flushed: {c['batches']:.0f} "
          f"({c['rows_per_batch']:.0f} rows per batch on average, mean flush {ms(c['flush_seconds'])}); mean ack "
          f"latency {ms(statistics.mean(c['latencies'])) if c['latencies'] else '-'} at the client, "
          f"{ms(c['commit_seconds'])} request-to-commit inside chgate")
    print(f"rows in {table}: {in_table} (expected {expected}: {c['rows']} via chgate, {d['rows']} direct)")

    problems = []
    if c["errors"]:
        problems.append(f"failed acks by code: {c['errors']}")
    if c["unacked"]:
        problems.append(f"{c['unacked']} requests without an ack")
    if c["stream_errors"]:
        problems.append(f"streams ended with errors: {c['stream_errors']}")
    if c["exit_code"] != 0:
        problems.append(f"chgate exited with {c['exit_code']}:\n{c['log']}")
    if in_table != expected:
        problems.append(f"row count mismatch: {in_table} in the table, {expected} expected")
    if c["requests"] == 0:
        problems.append("no request was acknowledged")
    if problems:
        print("FAIL:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
