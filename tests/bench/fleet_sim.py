#!/usr/bin/python3
"""A simulated fleet of chgate sidecars against the local ClickHouse, next to the capacity model
(tests/bench/capacity_model.py): N chgate processes, each fed R rows/s in single-row requests
(open loop, `chgate-cli bench --rate`), all writing one MergeTree table. The parts their INSERTs
made are counted on the server's side (system.part_log, NewPart events) and compared with the
model's INSERTs per second. Prints one table.

  /usr/bin/python3 tests/bench/fleet_sim.py [--chgate build/server/chgate] \
      [--cli build/client/chgate-cli] [--duration 10] [--check] [--smoke]

--check exits 1 when a fleet's measured rate is outside 0.6-1.4 x the model's (the model is a
mean; a few seconds of flushes are a sample). --smoke runs one small fleet for a moment to prove
the script works and checks nothing.
"""

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "e2e"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import capacity_model  # noqa: E402
import e2e_support as e2e  # noqa: E402
import small_bench  # noqa: E402

DATABASE = e2e.DATABASE


def run_fleet(args, ch, pods, rows_per_s, delay):
    table = f"fleet_{uuid.uuid4().hex[:8]}"
    ch.query(f"CREATE TABLE {DATABASE}.{table} (id UInt64, msg String) ENGINE = MergeTree ORDER BY id")
    procs = [e2e.ChgateProcess(args.chgate, ch, [f"--batch-max-delay={int(delay * 1000)}ms",
                                                 f"--batch-max-delay-ceiling={int(delay * 1000)}ms"],
                               name=f"fleet-{i}").start() for i in range(pods)]
    row = json.dumps({"id": 1, "msg": "0123456789abcdef"})
    try:
        start = time.monotonic()
        loads = [subprocess.Popen(
            [args.cli, "--addr", p.api_address, "bench", "--table", f"{DATABASE}.{table}",
             "--duration", f"{args.duration}s", "--rate", f"{rows_per_s:g}", "--streams", "1",
             "--rows-per-request", "1", "--max-in-flight", "8192", "--row", row, "--json"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE) for p in procs]
        for load in loads:
            out, err = load.communicate(timeout=args.duration + 120)
            if load.returncode != 0:
                raise RuntimeError(f"chgate-cli bench exited {load.returncode}: {err.decode()}")
        wall = time.monotonic() - start
    finally:
        for p in procs:
            p.stop()
    ch.query("SYSTEM FLUSH LOGS")
    parts = int(ch.scalar(f"SELECT count() FROM system.part_log WHERE event_type = 1 AND "
                          f"database = '{DATABASE}' AND table = '{table}'"))
    rows = int(ch.scalar(f"SELECT count() FROM {DATABASE}.{table}"))
    ch.query(f"DROP TABLE {DATABASE}.{table}")
    measured = parts / wall
    # The bench sends on a fixed schedule: the model's periodic arrivals.
    model = capacity_model.fleet_parts_per_second(pods, rows_per_s, delay, 100000, periodic=True)
    return {"pods": pods, "rows_per_s": rows_per_s, "delay": delay, "rows": rows, "parts": parts,
            "measured": measured, "model": model}


def main():
    parser = small_bench.bench_parser(__doc__, 10)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    ch, exit_code = small_bench.local_clickhouse()
    if ch is None:
        return exit_code
    if args.smoke:
        args.duration = 1.0
        fleets = [(2, 50, 0.2)]
    else:
        fleets = [(4, 50, 0.2), (4, 50, 1.0), (8, 20, 0.5), (8, 2, 0.2)]
    results = [run_fleet(args, ch, *f) for f in fleets]
    print()
    header = (f"{'sidecars':>8} {'rows/s each':>11} {'delay':>7} {'rows':>8} {'parts':>6} "
              f"{'parts/s measured':>16} {'model':>7} {'ratio':>6}")
    print(header)
    print("-" * len(header))
    bad = []
    for r in results:
        ratio = r["measured"] / r["model"] if r["model"] > 0 else float("nan")
        print(f"{r['pods']:>8} {r['rows_per_s']:>11g} {r['delay'] * 1000:>5.0f}ms {r['rows']:>8} "
              f"{r['parts']:>6} {r['measured']:>16.2f} {r['model']:>7.2f} {ratio:>6.2f}")
        if not 0.6 <= ratio <= 1.4:
            bad.append(r)
    print("\nparts: NewPart events of the table in system.part_log (one per INSERT here: one "
          "partition); model: capacity_model.fleet_parts_per_second for the same fleet.")
    if args.check and bad:
        print(f"{len(bad)} fleet(s) outside 0.6-1.4 x the model", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
