#!/usr/bin/python3
"""Capacity model of a fleet of chgate sidecars: INSERTs (new parts) per second per table.

Every sidecar batches each table's rows on its own and flushes a batch when its oldest row is
--batch-max-delay old (D) or it holds --batch-max-rows (B). For one sidecar and one table with
rows arriving at r rows/s (Poisson), a batch opens with the first row after the last flush (on
average 1/r later), then closes after min(D, B/r): about 1 / (1/r + min(D, B/r)) INSERTs per
second. A fleet of N sidecars sends N times that to each table, and each INSERT makes at least one
part (one per partition it touches). ClickHouse merges comfortably about one INSERT per second
per table (its documentation's advice); far above it, parts pile up until inserts are delayed
(parts_to_delay_insert) and then refused (TOO_MANY_PARTS).

  python3 tests/bench/capacity_model.py                         # docs/operations.md's table
  python3 tests/bench/capacity_model.py --pods 300 --rows 50 --target 1
      # one fleet: its INSERT rate and the smallest delay that keeps it under --target

This is arithmetic. tests/bench/fleet_sim.py checks it against a simulated fleet: chgate
processes against the local server, parts counted in system.part_log.
"""

import argparse
import math
import sys


def inserts_per_second(rows_per_second, delay, max_rows, periodic=False):
    """INSERTs per second from one sidecar for one table. Rows arrive at random (Poisson), or with
    `periodic` every 1/r exactly (a load generator's fixed schedule): then a batch opened by one
    row closes after `delay` holding floor(delay x r) + 1 rows, and the next opens with the row
    after it, so the cycle is that many rows' worth of 1/r."""
    if rows_per_second <= 0:
        return 0.0
    if periodic:
        rows_per_batch = min(max_rows, math.floor(delay * rows_per_second) + 1)
        return rows_per_second / rows_per_batch
    batch_open = min(delay, max_rows / rows_per_second)
    return 1.0 / (1.0 / rows_per_second + batch_open)


def fleet_parts_per_second(pods, rows_per_second, delay, max_rows, partitions=1, periodic=False):
    return pods * inserts_per_second(rows_per_second, delay, max_rows, periodic) * partitions


def delay_for_target(pods, rows_per_second, max_rows, target, partitions=1):
    """The smallest --batch-max-delay (s) that keeps the fleet at or under `target` INSERTs/s per
    table, or None when --batch-max-rows caps the batches first (raise it too)."""
    lo, hi = 0.0, 3600.0
    if fleet_parts_per_second(pods, rows_per_second, hi, max_rows, partitions) > target:
        return None
    for _ in range(100):
        mid = (lo + hi) / 2
        if fleet_parts_per_second(pods, rows_per_second, mid, max_rows, partitions) > target:
            lo = mid
        else:
            hi = mid
    return hi


def fmt_delay(d):
    if d is None:
        return "raise rows"
    if d < 1:
        return f"{d * 1000:.0f} ms"
    return f"{d:.1f} s" if d < 60 else f"{d / 60:.1f} min"


def table(pods_list, rows_list, delays, max_rows, target):
    lines = []
    header = ["pods", "rows/s per pod"] + [f"parts/s at {fmt_delay(d)}" for d in delays] + [
        f"delay for <= {target:g}/s", "rows per INSERT then"]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "---|" * len(header))
    for pods in pods_list:
        for rows in rows_list:
            cells = [f"{pods:,}", f"{rows:,}"]
            for d in delays:
                cells.append(f"{fleet_parts_per_second(pods, rows, d, max_rows):,.1f}")
            need = delay_for_target(pods, rows, max_rows, target)
            cells.append(fmt_delay(need))
            if need is None:
                cells.append("-")
            else:
                per_insert = rows / inserts_per_second(rows, need, max_rows)
                cells.append(f"{per_insert:,.0f}")
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def self_check():
    # Slow tables: a row every 10 s flushes about once per row.
    assert abs(inserts_per_second(0.1, 0.2, 100000) - 1 / 10.2) < 1e-9
    # Busy tables: one INSERT per delay.
    assert abs(inserts_per_second(1e6, 1.0, 1e12) - 1 / (1.0 + 1e-6)) < 1e-6
    # Capped by max rows: B/r per batch.
    assert abs(inserts_per_second(1000, 10, 100) - 1 / (0.001 + 0.1)) < 1e-9
    # The delay found meets the target and a slightly shorter one does not.
    d = delay_for_target(100, 100, 100000, 1.0)
    assert fleet_parts_per_second(100, 100, d, 100000) <= 1.0 + 1e-9
    assert fleet_parts_per_second(100, 100, d * 0.99, 100000) > 1.0
    # Periodic rows: sparser than the delay, each row is an INSERT; denser, a delay's worth + 1.
    assert inserts_per_second(2, 0.2, 100000, periodic=True) == 2
    assert abs(inserts_per_second(50, 0.2, 100000, periodic=True) - 50 / 11) < 1e-9
    # A rows cap too small for the target is reported, not hidden.
    assert delay_for_target(1000, 10000, 1000, 1.0) is None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--pods", type=int, help="one fleet: sidecars writing the table")
    ap.add_argument("--rows", type=float, default=100, help="rows/s per sidecar for the table")
    ap.add_argument("--delay", type=float, default=0.2, help="--batch-max-delay, seconds")
    ap.add_argument("--max-rows", type=float, default=100000, help="--batch-max-rows")
    ap.add_argument("--partitions", type=int, default=1, help="partitions one batch touches")
    ap.add_argument("--target", type=float, default=1.0, help="comfortable INSERTs/s per table")
    ap.add_argument("--check", action="store_true", help="run the model's self-check and exit")
    args = ap.parse_args()
    self_check()
    if args.check:
        print("capacity model: self-check passed")
        return 0
    if args.pods is not None:
        rate = fleet_parts_per_second(args.pods, args.rows, args.delay, args.max_rows,
                                      args.partitions)
        need = delay_for_target(args.pods, args.rows, args.max_rows, args.target, args.partitions)
        print(f"{args.pods} sidecars x {args.rows:g} rows/s, delay {fmt_delay(args.delay)}: "
              f"{rate:,.1f} INSERTs (parts) per second per table")
        print(f"--batch-max-delay for <= {args.target:g}/s: {fmt_delay(need)}"
              + (" (raise --batch-max-rows too)" if need is None else ""))
        return 0
    print(table([10, 100, 1000], [10, 1000], [0.2, 1, 5], args.max_rows, args.target))
    return 0


if __name__ == "__main__":
    sys.exit(main())
