#!/usr/bin/python3
"""Small-request benchmark: chgate's insert paths driven by `chgate-cli bench`, next to the same
rows as one native insert through chgate's ClickHouse library (the upper bound) and to
clickhouse-client sending one INSERT per request (the status quo a sidecar replaces). Prints one
table.

  /usr/bin/python3 tests/bench/small_bench.py [--chgate build/server/chgate] \
      [--cli build/client/chgate-cli] [--native build/tests/chgate_native_bench] \
      [--duration 6] [--smoke]

Cases, each against a fresh chgate and a Null table `(id UInt64, msg String)`:
  stream 1        1-row requests over 4 InsertStreams, closed loop (8,192 in flight each)
  stream 1 unix   the same over a Unix socket (--listen=unix:PATH) instead of loopback TCP
  stream 1 @half  stream 1 as an open loop at half the rate the closed loop reached: latency
                  counts from each request's due time, so its p99 is what a caller sees then
  unary 1 @20ms   1-row unary Insert calls (4 senders, 256 calls outstanding each), chgate with
                  --batch-max-delay=20ms
  unary 1 unix    the same over a Unix socket
  producer 1      one row per send through the SDK's coalescing Producer (4 sender threads),
                  gathered into requests of up to 1,000 rows; a "request" is one send
  producer block  the same with a one-row columnar Block per send (Producer::SendBlock),
                  gathered into request Blocks of up to 1,000 rows
  stream 100      100-row requests
  block 1000      columnar Blocks of 1,000 rows (UInt64, 16-byte String)
  native          the rows of `block 1000` in one INSERT through the native library
  ch-client       clickhouse-client, one INSERT of one row per statement, one connection

chgate's CPU comes from /proc/<pid>/stat before and after the bench (the drain of the last
requests included), context switches from /proc/<pid>/task/*/status, the generator's CPU from its
own getrusage. Nothing here asserts
a timing; --smoke runs each case for a moment to prove the script works.
"""

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "e2e"))

import e2e_support as e2e  # noqa: E402

TABLE = "chgate_e2e.small_bench_null"
BUILD = Path(e2e.default_chgate_binary()).parent.parent
MSG16 = "0123456789abcdef"


def context_switches(pid):
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            for line in (task / "status").read_text().splitlines():
                if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                    total += int(line.split()[1])
        except FileNotFoundError:  # the thread ended meanwhile
            pass
    return total


def run_bench(args, ch, name, bench_args, chgate_args=(), unix=False):
    """One `chgate-cli bench` against a fresh chgate; `unix`: the API on a Unix socket."""
    socket_path = str(e2e.work_dir() / "bench.sock") if unix else None
    chgate = e2e.ChgateProcess(args.chgate, ch, list(chgate_args), name=f"small-{name}",
                               socket_path=socket_path).start()
    try:
        ctx0 = context_switches(chgate.pid)
        cpu0 = chgate.cpu_seconds()
        out = subprocess.run(
            [args.cli, "--addr", chgate.api_address, "bench", "--table", TABLE,
             "--duration", f"{args.duration}s", "--json", *bench_args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False, timeout=args.duration + 120)
        cpu1 = chgate.cpu_seconds()
        ctx1 = context_switches(chgate.pid)
    finally:
        chgate.stop()
    if out.returncode != 0:
        raise RuntimeError(f"{name}: chgate-cli bench exited {out.returncode}: "
                           f"{out.stderr.decode(errors='replace')}")
    r = json.loads(out.stdout.decode().strip().splitlines()[-1])
    answered = max(1, r["requests_ok"] + r["requests_failed"])
    rows = r["requests_ok"] * r["rows_per_request"]
    r["chgate_cpu_us_per_request"] = (cpu1 - cpu0) * 1e6 / answered
    r["chgate_cpu_ns_per_row"] = (cpu1 - cpu0) * 1e9 / rows if rows > 0 else None
    r["ctx_per_request"] = (ctx1 - ctx0) / answered
    r["case"] = name
    return r


def run_native(args, ch):
    """The upper bound: one INSERT of 1,000,000 rows (UInt64 and a short String; 10,000 with
    --smoke) through chgate's native library: chgate_native_bench's SmallColStr case, best of its
    repetitions."""
    rows = 10_000 if args.smoke else 1_000_000
    name = f"insert SmallColStr {rows} none nomerge"
    out = subprocess.run([args.native, f"--clickhouse={ch.host}:{ch.port}", f"--only={name}",
                          f"--scale={'smoke' if args.smoke else 'full'}"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False, timeout=600)
    for line in out.stdout.decode().splitlines():
        if name in line and line.lstrip().startswith("clickhouse"):
            fields = line.split(name, 1)[1].split()
            seen, seconds = int(fields[0]), float(fields[2])
            return {"case": "native", "rows_per_request": seen, "requests_per_s": 1 / seconds,
                    "rows_per_s": seen / seconds}
    raise RuntimeError(f"chgate_native_bench printed no '{name}' row:\n{out.stdout.decode()}"
                       f"{out.stderr.decode()}")


def run_clickhouse_client(args, ch, statements):
    """One clickhouse-client process on one connection, one single-row INSERT per statement."""
    sql = "".join(f"INSERT INTO {TABLE} VALUES ({i}, '{MSG16}');\n" for i in range(statements))
    start = time.monotonic()
    proc = subprocess.run([args.client, "--host", ch.host, "--port", str(ch.port), "--multiquery"],
                          input=sql.encode(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          check=False, timeout=600)
    wall = time.monotonic() - start
    if proc.returncode != 0:
        raise RuntimeError(f"clickhouse-client exited {proc.returncode}: {proc.stderr.decode()}")
    return {"case": "ch-client", "rows_per_request": 1, "requests_per_s": statements / wall,
            "rows_per_s": statements / wall}


def bench_parser(doc, duration):
    """The options every chgate-cli-driven bench script takes: --chgate, --cli, --duration and
    --smoke (short runs that prove the script works)."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--chgate", default=e2e.default_chgate_binary())
    parser.add_argument("--cli", default=str(BUILD / "client" / "chgate-cli"))
    parser.add_argument("--duration", type=float, default=duration)
    parser.add_argument("--smoke", action="store_true", help="short runs; proves the script works")
    return parser


def local_clickhouse():
    """(the ClickHouse to bench against, None) or (None, the exit code when it is unreachable:
    1 under CHGATE_REQUIRE_CLICKHOUSE=1, else 77, ctest's skip)."""
    ch = e2e.ClickHouse()
    problem = ch.check_reachable()
    if problem is not None:
        print(f"ClickHouse at {ch.address} is unreachable: {problem}", file=sys.stderr)
        return None, 1 if ch.required else 77
    ch.ensure_database()
    return ch, None


def run_cases(args, ch):
    """Every case of this script against `ch`; (results, the @half case's rate)."""
    ch.query(f"CREATE TABLE IF NOT EXISTS {TABLE} (id UInt64, msg String) ENGINE = Null")
    row = json.dumps({"id": 1, "msg": MSG16})

    results = []
    peak = run_bench(args, ch, "stream 1", ["--rows-per-request", "1", "--max-in-flight", "8192",
                                             "--row", row])
    results.append(peak)
    half = max(1.0, peak["requests_per_s"] / 2)
    results.append(run_bench(args, ch, "stream 1 unix",
                             ["--rows-per-request", "1", "--max-in-flight", "8192", "--row", row],
                             unix=True))
    results.append(run_bench(args, ch, "stream 1 @half",
                             ["--rows-per-request", "1", "--max-in-flight", "16384",
                              "--rate", f"{half:.0f}", "--row", row]))
    # A committed unary call lasts about the batch delay, so the rate is at most calls in flight
    # / delay; more calls in flight cost gRPC 1.51 (as Debian builds it) a scan of every
    # outstanding operation per completion, so the delay is shortened instead.
    results.append(run_bench(args, ch, "unary 1 @20ms",
                             ["--mode", "unary", "--rows-per-request", "1", "--max-in-flight",
                              "256", "--row", row], ["--batch-max-delay=20ms"]))
    results.append(run_bench(args, ch, "unary 1 unix",
                             ["--mode", "unary", "--rows-per-request", "1", "--max-in-flight",
                              "256", "--row", row], ["--batch-max-delay=20ms"], unix=True))
    # One row per send through the SDK's Producer, gathered into 1,000-row requests: committed
    # acks come after chgate's 200 ms batch delay, so the window is rate x 0.2 s.
    results.append(run_bench(args, ch, "producer 1",
                             ["--mode", "producer", "--rows-per-request", "1000",
                              "--max-in-flight", "65536", "--row", row]))
    # The same through Producer::SendBlock: a one-row columnar Block per send, gathered into
    # request Blocks.
    results.append(run_bench(args, ch, "producer block",
                             ["--mode", "producer-block", "--types", "UInt64,String",
                              "--rows-per-request", "1000", "--max-in-flight", "65536",
                              "--row", row]))
    results.append(run_bench(args, ch, "stream 100", ["--rows-per-request", "100",
                                                       "--max-in-flight", "1024", "--row", row]))
    results.append(run_bench(args, ch, "block 1000",
                             ["--mode", "block", "--types", "UInt64,String", "--rows-per-request",
                              "1000", "--max-in-flight", "64", "--row", row]))
    results.append(run_native(args, ch))
    results.append(run_clickhouse_client(args, ch, 50 if args.smoke else 2000))
    return results, half


def print_results(results, half):
    print()
    header = (f"{'case':<16} {'requests/s':>11} {'rows/s':>12} {'chgate us/req':>13} "
              f"{'chgate ns/row':>13} {'ctx/req':>8} {'client us/req':>13} "
              f"{'p50 ms':>8} {'p99 ms':>8}")
    print(header)
    print("-" * len(header))

    def num(value, fmt):
        return "" if value is None else format(value, fmt)

    for r in results:
        print(f"{r['case']:<16} {r['requests_per_s']:>11.0f} {r['rows_per_s']:>12.0f} "
              f"{num(r.get('chgate_cpu_us_per_request'), '.1f'):>13} "
              f"{num(r.get('chgate_cpu_ns_per_row'), '.0f'):>13} "
              f"{num(r.get('ctx_per_request'), '.3f'):>8} "
              f"{num(r.get('client_cpu_us_per_request'), '.1f'):>13} "
              f"{num(r.get('latency_p50_ms'), '.1f'):>8} {num(r.get('latency_p99_ms'), '.1f'):>8}")
    print(f"\nstream 1 @half: open loop at {half:.0f} requests/s; latency from each request's due "
          "time, with chgate's --batch-max-delay of 200 ms.")
    print("native: one INSERT of that many rows through chgate's native library (the upper "
          "bound); ch-client: clickhouse-client on one connection, one single-row INSERT each.")


def add_arguments(parser):
    """This script's options beyond bench_parser's."""
    parser.add_argument("--native", default=str(BUILD / "tests" / "chgate_native_bench"))
    parser.add_argument("--client", default="clickhouse-client")


def main():
    parser = bench_parser(__doc__, 6)
    add_arguments(parser)
    args = parser.parse_args()
    if args.smoke:
        args.duration = 0.5

    ch, exit_code = local_clickhouse()
    if ch is None:
        return exit_code
    print_results(*run_cases(args, ch))
    return 0


if __name__ == "__main__":
    sys.exit(main())
