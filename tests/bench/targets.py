#!/usr/bin/python3
"""Every performance target in one run: the cases of small_bench.py, persisted_bench.py,
query_bench.py and chgate_native_bench's live select, with their peers measured in the same run
(clickhouse-client, the native library, the single-row InsertStream, the committed mode, loopback
TCP), then one table: each target, what was measured, the peer, the ratio and whether the target
holds. The machine it ran on is printed first.

  /usr/bin/python3 tests/bench/targets.py [--duration 6] [--numbers 100000000] [--markdown]
      [--chgate build/server/chgate] [--cli build/client/chgate-cli]
      [--native build/tests/chgate_native_bench] [--reader build/tests/chgate_query_bench]
      [--smoke]

The secure port for the TLS row comes from CHGATE_CLICKHOUSE_SECURE and
CHGATE_CLICKHOUSE_SECURE_CA (as for the tests); without them the TLS target is reported as not
measured. clickhouse-cpp is not packaged for Debian 12, so it is not a peer here; the native
select is compared with clickhouse-client. Nothing here asserts a timing (machines are noisy; the
table is for reading): the exit code is 0 whenever every case ran. --smoke runs tiny sizes to prove
the script works. --markdown prints the summary as a Markdown table too (docs/benchmarks.md).
"""

import os
import platform
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "e2e"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import persisted_bench  # noqa: E402
import query_bench  # noqa: E402
import small_bench  # noqa: E402


def machine():
    """One line about the machine: CPU model, cores, memory, kernel."""
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
        mem_kib = int(Path("/proc/meminfo").read_text().split()[1])
    except (OSError, ValueError, IndexError):
        mem_kib = 0
    return (f"{model}, {os.cpu_count()} cores, {mem_kib / (1 << 20):.0f} GiB, "
            f"Linux {platform.release()}")


SELECT_FIELDS = re.compile(r"^\s*(\d+)\s+([\d.]+)\s+([\d.]+)\s+(\d+)\s+([\d.]+)\s+(\S+)\s+([\d.]+)")


def native_select(args, ch):
    """chgate_native_bench's live select of system.numbers, plain and over TLS, and
    clickhouse-client's; {"plain"|"tls"|"ch-client": client CPU seconds}, and the rows read."""
    rows = 1_000_000 if args.smoke else 200_000_000
    name = f"select_numbers {rows} none"
    command = [args.native, f"--clickhouse={ch.host}:{ch.port}", f"--only={name}",
               f"--scale={'smoke' if args.smoke else 'full'}"]
    secure, ca = os.environ.get("CHGATE_CLICKHOUSE_SECURE"), os.environ.get(
        "CHGATE_CLICKHOUSE_SECURE_CA")
    if secure and ca:
        command += [f"--clickhouse-tls={secure}", f"--clickhouse-tls-ca={ca}"]
    out = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False,
                         timeout=900)
    cpu = {}
    for line in out.stdout.decode().splitlines():
        if not line.startswith("clickhouse"):
            continue
        for key, label in (("ch-client", f"clickhouse-client {name}"), ("tls", f"{name} tls"),
                           ("plain", name)):
            if f" {label} " in line and key not in cpu:
                m = SELECT_FIELDS.match(line.split(label, 1)[1])
                if m:
                    cpu[key] = float(m.group(7))
                break
    if "plain" not in cpu or "ch-client" not in cpu:
        raise RuntimeError(f"chgate_native_bench printed no '{name}' rows:\n"
                           f"{out.stdout.decode()}{out.stderr.decode()}")
    return cpu, rows


class Summary:
    """The targets table: one row per target."""

    def __init__(self):
        self.rows = []

    def add(self, target, measured, peer, ratio, holds):
        self.rows.append((target, measured, peer, ratio,
                          "n/a" if holds is None else ("yes" if holds else "no")))

    def print(self, markdown):
        headers = ("target", "measured", "peer, same run", "ratio", "holds")
        widths = [max(len(h), *(len(r[i]) for r in self.rows)) for i, h in enumerate(headers)]
        print()
        print("  ".join(h.ljust(w) for h, w in zip(headers, widths)))
        print("  ".join("-" * w for w in widths))
        for r in self.rows:
            print("  ".join(c.ljust(w) for c, w in zip(r, widths)))
        if markdown:
            print()
            print("| " + " | ".join(headers) + " |")
            print("|" + "---|" * len(headers))
            for r in self.rows:
                print("| " + " | ".join(r) + " |")


def summarize(small, persisted, query, select):
    s = Summary()
    by = {r["case"]: r for r in small}
    stream, producer = by["stream 1"], by["producer 1"]
    s.add("producer: >= 1,000,000 single-row sends/s", f"{producer['requests_per_s']:,.0f}/s",
          f"stream 1: {stream['requests_per_s']:,.0f}/s",
          f"{producer['requests_per_s'] / stream['requests_per_s']:.1f}x (>= 40x)",
          producer["requests_per_s"] >= 1e6
          and producer["requests_per_s"] >= 40 * stream["requests_per_s"])
    app = producer.get("client_cpu_us_per_request")
    s.add("producer: application CPU <= 1 us/send", f"{app:.2f} us",
          f"stream 1: {stream['client_cpu_us_per_request']:.1f} us", "", app <= 1.0)
    ns = producer.get("chgate_cpu_ns_per_row")
    s.add("producer: chgate CPU <= 300 ns/row", f"{ns:.0f} ns",
          f"stream 1: {stream['chgate_cpu_ns_per_row']:.0f} ns", "", ns <= 300)
    columnar = by["producer block"]
    s.add("producer, columnar sends (SendBlock): sends/s, application and chgate CPU",
          f"{columnar['requests_per_s']:,.0f}/s, {columnar['client_cpu_us_per_request']:.2f} us, "
          f"{columnar['chgate_cpu_ns_per_row']:.0f} ns/row",
          f"row sends: {producer['requests_per_s']:,.0f}/s",
          f"{columnar['requests_per_s'] / stream['requests_per_s']:.1f}x stream 1",
          columnar["requests_per_s"] >= 1e6 and columnar["client_cpu_us_per_request"] <= 1.0
          and columnar["chgate_cpu_ns_per_row"] <= 300)
    unix = by["stream 1 unix"]
    s.add("unix socket: requests/s and chgate CPU vs TCP (no target)",
          f"{unix['requests_per_s']:,.0f}/s, {unix['chgate_cpu_us_per_request']:.1f} us",
          f"TCP: {stream['requests_per_s']:,.0f}/s, {stream['chgate_cpu_us_per_request']:.1f} us",
          f"{unix['requests_per_s'] / stream['requests_per_s']:.2f}x", None)
    block, native = by["block 1000"], by["native"]
    s.add("columnar Blocks of 1,000 rows: chgate <= 50 ns/row",
          f"{block['chgate_cpu_ns_per_row']:.0f} ns",
          f"native library: {native['rows_per_s'] / 1e6:.1f} M rows/s",
          f"{block['rows_per_s'] / native['rows_per_s']:.2f}x of native rows/s",
          block["chgate_cpu_ns_per_row"] <= 50)

    cpu, rows = select
    s.add("native select, no compression: CPU <= the peer's",
          f"{cpu['plain']:.2f} s ({rows:,} rows)", f"clickhouse-client: {cpu['ch-client']:.2f} s",
          f"{cpu['plain'] / cpu['ch-client']:.2f}x", cpu["plain"] <= cpu["ch-client"])
    if "tls" in cpu:
        s.add("native select over TLS: CPU <= 1.5x plain", f"{cpu['tls']:.2f} s",
              f"plain: {cpu['plain']:.2f} s", f"{cpu['tls'] / cpu['plain']:.2f}x",
              cpu["tls"] <= 1.5 * cpu["plain"])
    else:
        s.add("native select over TLS: CPU <= 1.5x plain", "not measured (no secure port given)",
              "", "", None)

    columns = next(r for r in query if r["path"].endswith("columns"))
    peer = next(r for r in query if r["path"].startswith("clickhouse-client"))
    per_gb = columns["chgate_cpu"] / (columns["decoded"] / 1e9)
    s.add("Query: chgate <= 0.35 s CPU per GB", f"{per_gb:.2f} s/GB",
          f"clickhouse-client wall {peer['wall']:.2f} s",
          f"wall {columns['wall'] / peer['wall']:.2f}x", per_gb <= 0.35)

    results = persisted[0]
    for suffix, what in (("", "closed loop"), ("@half", "half rate")):
        ratio = persisted_bench.cpu_ratio(results, suffix)
        committed = next(r for r in results if r["case"] == ("committed " + suffix).strip())
        s.add(f"persisted acks: chgate CPU <= 1.2x committed, {what}",
              "" if ratio is None else f"{ratio * committed['chgate_cpu_us_per_request']:.1f} us/req",
              f"committed: {committed['chgate_cpu_us_per_request']:.1f} us/req",
              "" if ratio is None else f"{ratio:.2f}x", None if ratio is None else ratio <= 1.2)
    return s


def main():
    parser = small_bench.bench_parser(__doc__, 6)
    small_bench.add_arguments(parser)
    persisted_bench.add_arguments(parser)
    query_bench.add_arguments(parser, client=False)
    parser.set_defaults(numbers=100_000_000)
    parser.add_argument("--markdown", action="store_true", help="the summary as Markdown too")
    args = parser.parse_args()
    if args.smoke:
        args.duration, args.numbers = 0.5, 200_000

    ch, exit_code = small_bench.local_clickhouse()
    if ch is None:
        return exit_code
    print(f"machine: {machine()}")
    print(f"ClickHouse: {ch.query('SELECT version()').strip()} at {ch.address}")

    small = small_bench.run_cases(args, ch)
    small_bench.print_results(*small)
    persisted = persisted_bench.run_cases(args, ch)
    persisted_bench.print_results(*persisted)
    query = query_bench.run_cases(args, ch, cases=("numbers",), compressions=("none",))
    query_bench.print_results(query)
    select = native_select(args, ch)
    summarize(small[0], persisted, query, select).print(args.markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
