#!/usr/bin/python3
"""Persisted-ack benchmark: 100-row requests acknowledged after commit (the committed mode) and
after the spool's fdatasync (the persisted mode), closed loop for the peak and open loop at half
of it for the latency a caller sees, with the disk's own fdatasync latency measured beside them
in the same directory. Prints one table and the ratios.

  /usr/bin/python3 tests/bench/persisted_bench.py [--chgate build/server/chgate] \
      [--cli build/client/chgate-cli] [--duration 6] [--spool-dir DIR] \
      [--group-commit-delay 2ms] [--smoke]

Each case runs a fresh chgate against a Null table `(id UInt64, msg String)` over 4 InsertStreams
(chgate-cli bench). The persisted cases give chgate a spool in --spool-dir (default: a directory
of the e2e work dir, on the disk the checkout's temp dir is on). Nothing here asserts a timing;
--smoke runs each case for a moment to prove the script works. --group-commit-delay sets chgate's
--spool-group-commit-delay (default: chgate's own, 2ms; 0 turns group-commit waiting off).
"""

import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "e2e"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import e2e_support as e2e  # noqa: E402
import small_bench  # noqa: E402

ROWS = 100


def fdatasync_latency(directory, count):
    """Appends one 4 KiB block and fdatasyncs it `count` times; (p50, p99) in ms."""
    path = Path(directory) / "fsync-probe"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    samples = []
    try:
        block = b"x" * 4096
        for _ in range(count):
            os.write(fd, block)
            t0 = time.perf_counter()
            os.fdatasync(fd)
            samples.append((time.perf_counter() - t0) * 1000)
    finally:
        os.close(fd)
        path.unlink()
    samples.sort()
    return statistics.median(samples), samples[min(len(samples) - 1, int(len(samples) * 0.99))]


def add_arguments(parser):
    """This script's options beyond small_bench.bench_parser's."""
    parser.add_argument("--spool-dir", default=None)
    parser.add_argument("--group-commit-delay", default=None, help="default: chgate's own")


def run_cases(args, ch):
    """The four cases against `ch`: (results, spool root, fdatasync p50 ms, p99 ms)."""
    ch.query(f"CREATE TABLE IF NOT EXISTS {small_bench.TABLE} (id UInt64, msg String) ENGINE = Null")
    row = json.dumps({"id": 1, "msg": small_bench.MSG16})
    spool_root = Path(args.spool_dir) if args.spool_dir else e2e.work_dir() / "persisted-bench"
    spool_root.mkdir(parents=True, exist_ok=True)

    def case(name, ack, rate=None):
        spool = spool_root / f"spool-{name.replace(' ', '-').replace('@', '')}"
        shutil.rmtree(spool, ignore_errors=True)
        bench = ["--rows-per-request", str(ROWS), "--row", row, "--ack-mode", ack]
        if rate is None:
            bench += ["--max-in-flight", "1024"]
        else:
            bench += ["--rate", f"{rate:.0f}", "--max-in-flight", "8192"]
        try:
            flags = [f"--spool-dir={spool}"]
            if args.group_commit_delay is not None:
                flags.append(f"--spool-group-commit-delay={args.group_commit_delay}")
            return small_bench.run_bench(args, ch, name, bench, flags)
        finally:
            shutil.rmtree(spool, ignore_errors=True)

    committed = case("committed", "committed")
    persisted = case("persisted", "persisted")
    results = [committed, persisted]
    results.append(case("committed @half", "committed", max(1.0, committed["requests_per_s"] / 2)))
    results.append(case("persisted @half", "persisted", max(1.0, persisted["requests_per_s"] / 2)))
    p50, p99 = fdatasync_latency(spool_root, 20 if args.smoke else 500)
    return results, spool_root, p50, p99


def cpu_ratio(results, suffix=""):
    """persisted / committed chgate CPU per request for the closed loop ("") or "@half"; None
    when a case has no CPU figure."""
    by_case = {r["case"]: r.get("chgate_cpu_us_per_request") for r in results}
    name = f" {suffix}" if suffix else ""
    committed, persisted = by_case.get(f"committed{name}"), by_case.get(f"persisted{name}")
    return persisted / committed if committed and persisted else None


def print_results(results, spool_root, p50, p99):
    committed, persisted = results[0], results[1]
    print()
    header = (f"{'case':<16} {'requests/s':>11} {'rows/s':>12} {'chgate us/req':>13} "
              f"{'client us/req':>13} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} {'failed':>7}")
    print(header)
    print("-" * len(header))
    for r in results:
        print(f"{r['case']:<16} {r['requests_per_s']:>11.0f} {r['rows_per_s']:>12.0f} "
              f"{r.get('chgate_cpu_us_per_request') or 0:>13.1f} "
              f"{r.get('client_cpu_us_per_request') or 0:>13.1f} "
              f"{r['latency_p50_ms']:>8.2f} {r['latency_p90_ms']:>8.2f} {r['latency_p99_ms']:>8.2f} "
              f"{r['requests_failed']:>7}")
    print(f"\npersisted / committed throughput: "
          f"{persisted['requests_per_s'] / committed['requests_per_s']:.2f}")
    for suffix, what in (("", "closed loop"), ("@half", "open loop at half rate")):
        ratio = cpu_ratio(results, suffix)
        if ratio is not None:
            print(f"persisted / committed chgate CPU per request, {what}: {ratio:.2f}")
    print(f"disk fdatasync of a 4 KiB append in {spool_root}: p50 {p50:.3f} ms, p99 {p99:.3f} ms")
    print("@half: open loop at half the closed loop's rate; latency from each request's due time. "
          "committed acks wait for the batch (--batch-max-delay 200 ms); persisted ones for the "
          "spool's group-committed fdatasync.")


def main():
    parser = small_bench.bench_parser(__doc__, 6)
    add_arguments(parser)
    args = parser.parse_args()
    if args.smoke:
        args.duration = 0.5
    ch, exit_code = small_bench.local_clickhouse()
    if ch is None:
        return exit_code
    print_results(*run_cases(args, ch))
    return 0


if __name__ == "__main__":
    sys.exit(main())
