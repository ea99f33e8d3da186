#!/usr/bin/python3
"""Query RPC benchmark: the same SELECT through chgate to the C++ SDK's row cursor, and through
clickhouse-client with FORMAT Null, in one run against the local ClickHouse. Prints one table.

  /usr/bin/python3 tests/bench/query_bench.py --chgate build/server/chgate \
      --reader build/tests/chgate_query_bench [--numbers 200000000] [--wide 5000000] [--smoke]

Cases: `SELECT number FROM system.numbers LIMIT N` and `SELECT * FROM` a wide table (DateTime,
UInt64, LowCardinality(String), String of ~60 bytes, Float64, Array(String), Nullable(Int32),
Decimal(18, 4)), each with compression none and lz4 between chgate and ClickHouse (the
clickhouse-client peer uses the same compression). Every case starts a fresh chgate, so its peak
RSS (VmHWM) is that case's. CPU times: chgate's from /proc/<pid>/stat over the query, the
reader's and clickhouse-client's from wait4(). "decoded MiB/s" is the summary's decoded_bytes
(ClickHouse's data after decompression) over the reader's wall time; for clickhouse-client the
same byte count over its wall time. Nothing here asserts a timing; --smoke runs tiny sizes to
prove the script works.
"""

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "e2e"))

import e2e_support as e2e  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
WIDE_TABLE = "chgate_e2e.query_bench_wide"


def proc_cpu(pid):
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def proc_hwm_kib(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def run_child(argv):
    """Runs argv; returns (stdout, wall seconds, user+sys CPU seconds, maxrss KiB)."""
    start = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL)
    out = proc.stdout.read()
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{argv[0]} exited {proc.returncode}: {err.decode(errors='replace')}")
    return out.decode(), wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss


def parse_kv(line):
    return {k: v for k, v in (part.split("=", 1) for part in line.split())}


def prepare_wide(ch, rows):
    ch.ensure_database()
    ch.query(f"DROP TABLE IF EXISTS {WIDE_TABLE}")
    ch.query(f"""CREATE TABLE {WIDE_TABLE} (
        ts DateTime, id UInt64, service LowCardinality(String), message String, value Float64,
        tags Array(String), code Nullable(Int32), amount Decimal(18, 4)) ENGINE = MergeTree
        ORDER BY id""")
    ch.query(f"""INSERT INTO {WIDE_TABLE} SELECT
        toDateTime(1700000000 + number), number,
        concat('service-', toString(number % 20)),
        concat('request ', toString(number), ' handled by worker ', toString(number % 97),
               ' in region eu-west'),
        number / 7, [concat('t', toString(number % 5)), 'prod'],
        if(number % 10 = 0, NULL, toInt32(number % 1000)), toDecimal64(number / 100, 4)
        FROM system.numbers LIMIT {rows}""", timeout=600)


def add_arguments(parser, client=True):
    """This script's options beyond --chgate and --smoke: the reader, the sizes and (with
    `client`, unless another script's parser has it) the clickhouse-client peer."""
    parser.add_argument("--reader", default=str(Path(e2e.default_chgate_binary()).parent.parent
                                                / "tests" / "chgate_query_bench"))
    if client:
        parser.add_argument("--client", default="clickhouse-client")
    parser.add_argument("--numbers", type=int, default=200_000_000)
    parser.add_argument("--wide", type=int, default=5_000_000)


def run_cases(args, ch, cases=("numbers", "wide"), compressions=("none", "lz4")):
    """The cases named in `cases` (numbers, wide) with each compression, each through the SDK's
    row cursor, its columnar path and clickhouse-client: one dict per (case, path)."""
    if "wide" in cases:
        prepare_wide(ch, args.wide)
    host, port = ch.host, str(ch.port)
    statements = {
        "numbers": f"SELECT number FROM system.numbers LIMIT {args.numbers}",
        "wide": f"SELECT * FROM {WIDE_TABLE}",
    }
    rows_out = []
    for name in cases:
        sql = statements[name]
        for compression in compressions:
            chgate = e2e.ChgateProcess(args.chgate, ch, [f"--compression={compression}"],
                                       name=f"bench-{name}-{compression}").start()
            results = []
            try:
                for mode in ("rows", "columns"):
                    cpu0 = proc_cpu(chgate.pid)
                    out, wall, cpu, rss = run_child([args.reader, "--addr", chgate.api_address,
                                                     "--sql", sql, "--mode", mode])
                    results.append((mode, out, wall, cpu, rss, proc_cpu(chgate.pid) - cpu0))
                hwm = proc_hwm_kib(chgate.pid)
            finally:
                chgate.stop()
            for mode, out, wall, cpu, rss, chgate_cpu in results:
                r = parse_kv(out.strip().splitlines()[-1])
                decoded = int(r["decoded_bytes"])
                rows_out.append({
                    "case": f"{name} {compression}",
                    "path": "chgate -> SDK " + ("row cursor" if mode == "rows" else "columns"),
                    "rows": int(r["rows"]), "wall": wall, "mib_s": decoded / wall / (1 << 20),
                    "chgate_cpu": chgate_cpu, "client_cpu": cpu, "chgate_rss": hwm / 1024,
                    "client_rss": rss / 1024, "decoded": decoded,
                })
            out, wall, cpu, rss = run_child([
                args.client, "--host", host, "--port", port, "--compression",
                "0" if compression == "none" else "1", "--query", sql + " FORMAT Null"])
            rows_out.append({
                "case": f"{name} {compression}", "path": "clickhouse-client FORMAT Null",
                "rows": int(r["rows"]), "wall": wall, "mib_s": decoded / wall / (1 << 20),
                "chgate_cpu": None, "client_cpu": cpu, "chgate_rss": None,
                "client_rss": rss / 1024, "decoded": decoded,
            })
    return rows_out


def print_results(rows_out):
    print()
    header = (f"{'case':<12} {'path':<30} {'rows':>11} {'wall s':>8} {'decoded MiB/s':>13} "
              f"{'chgate CPU s':>12} {'reader CPU s':>12} {'chgate RSS MiB':>14} "
              f"{'reader RSS MiB':>14} {'wall vs ch-client':>17}")
    print(header)
    print("-" * len(header))
    for i, r in enumerate(rows_out):
        peer = rows_out[i - i % 3 + 2]  # each case: row cursor, columns, clickhouse-client
        ratio = f"{r['wall'] / peer['wall']:.2f}x"
        chgate_cpu = "" if r["chgate_cpu"] is None else f"{r['chgate_cpu']:.2f}"
        chgate_rss = "" if r["chgate_rss"] is None else f"{r['chgate_rss']:.1f}"
        print(f"{r['case']:<12} {r['path']:<30} {r['rows']:>11} {r['wall']:>8.2f} "
              f"{r['mib_s']:>13.0f} {chgate_cpu:>12} {r['client_cpu']:>12.2f} {chgate_rss:>14} "
              f"{r['client_rss']:>14.1f} {ratio:>17}")
    print("\nwall vs ch-client: chgate path's wall time / clickhouse-client's (lower is faster).")
    print("row cursor: typed getters per value; columns: QueryCursor::NextBlock and the columnar "
          "views (ViewFixed, ViewStrings). chgate RSS is its peak over both reads.")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chgate", default=e2e.default_chgate_binary())
    add_arguments(parser)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes; proves the script works")
    args = parser.parse_args()
    if args.smoke:
        args.numbers, args.wide = 200_000, 20_000

    ch = e2e.ClickHouse()
    problem = ch.check_reachable()
    if problem is not None:
        print(f"ClickHouse at {ch.address} is unreachable: {problem}", file=sys.stderr)
        return 1 if ch.required else 77
    print_results(run_cases(args, ch))
    return 0


if __name__ == "__main__":
    sys.exit(main())
