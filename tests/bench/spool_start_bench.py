#!/usr/bin/python3
"""How long chgate takes to start on a full spool: the number the startupProbe is sized from.

  /usr/bin/python3 tests/bench/spool_start_bench.py --chgate build/server/chgate [--bytes 1GiB]

Fills a spool to --spool-max-bytes with persisted 1,000-row requests while the local ClickHouse is
stopped (SIGSTOP), kills chgate, then starts it again on that spool (ClickHouse still stopped, so
nothing drains) and reports, from chgate's own log lines, how long the spool's recovery took
(`spool opened`), how long the replay bookkeeping took (`spool replayed`), and the time from the
process start to `chgate: serving the API`; the page cache is warm (the usual case after a
container restart) unless --drop-caches (root) is given. Then ClickHouse is resumed and chgate
drains, and the spool directory is removed.
"""

import argparse
import os
import re
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "e2e"))

import e2e_support as e2e  # noqa: E402
from e2e_support import DATABASE, V  # noqa: E402


def parse_size(text):
    m = re.fullmatch(r"(\d+)(KiB|MiB|GiB)?", text)
    if not m:
        raise argparse.ArgumentTypeError(f"not a size: {text}")
    return int(m.group(1)) * {None: 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}[m.group(2)]


def log_ms(text, message):
    m = re.search(re.escape(message) + r".* took=([\d.]+)(ms|s)", text)
    if not m:
        return None
    return float(m.group(1)) * (1000 if m.group(2) == "s" else 1)


def main():
    def extra(p):
        p.add_argument("--bytes", type=parse_size, default=parse_size("1GiB"),
                       help="the spool's bound to fill (default 1GiB)")
        p.add_argument("--keep", action="store_true",
                       help="keep the filled spool (and do not drain it): a later run with "
                            "--keep starts on it again without filling")
        p.add_argument("--drop-caches", action="store_true",
                       help="drop the page cache before the start (needs root)")
    args, _ = e2e.test_main_args(__doc__.splitlines()[0], extra)
    ch = e2e.reachable_clickhouse()
    ch.ensure_database()
    stubs = e2e.load_stubs()
    table = "spool_start_bench"
    ch.recreate_table(table, "id UInt64, writer UInt32, payload String")
    spool_dir = e2e.SOURCE_DIR / ".local" / "spool-start-bench"
    reuse = args.keep and any(spool_dir.glob("*.wal"))
    if not reuse:
        shutil.rmtree(spool_dir, ignore_errors=True)
    spool_args = [f"--spool-dir={spool_dir}", f"--spool-max-bytes={args.bytes}",
                  "--max-message-bytes=16MiB", "--memory-budget=256MiB"]
    proc = e2e.ChgateProcess(args.chgate, ch, args=spool_args, name="chgate-start-bench")
    if not reuse:
        proc.start()
    try:
        if not reuse:
            # The table's header first, so requests are converted while ClickHouse is stopped.
            import grpc
            channel = grpc.insecure_channel(proc.api_address)
            stubs.pb_grpc.IngestStub(channel).Insert(stubs.pb.InsertRequest(
                table=f"{DATABASE}.{table}", columns=["id", "writer", "payload"],
                rows=stubs.pb.RowSet(rows=[stubs.pb.Row(values=[V.u(0), V.u(0), V.s("")])])),
                timeout=30)
            channel.close()
        with e2e.PausedClickHouse(ch, max_seconds=900):
            started = time.monotonic()
            if reuse:
                requests, size = 0, sum(f.stat().st_size for f in spool_dir.glob("*.wal"))
            else:
                requests, size = e2e.fill_spool(proc, table, spool_dir)
            filled = time.monotonic() - started
            proc.kill()
            if args.drop_caches:
                os.sync()
                Path("/proc/sys/vm/drop_caches").write_text("3\n")
            t0 = time.monotonic()
            proc = e2e.ChgateProcess(args.chgate, ch, args=spool_args,
                                     name="chgate-start-bench").start(timeout=600)
            serving = time.monotonic() - t0
            text = proc.log_text()
        print(f"spool filled: {requests} requests of 1,000 rows, {size / (1 << 20):.0f} MiB of "
              f"segments in {filled:.1f} s")
        print(f"{'step':<44}{'ms':>10}")
        print(f"{'spool opened (scan, recovery)':<44}{log_ms(text, 'spool opened') or 0:>10.0f}")
        print(f"{'spool replayed (records queued)':<44}{log_ms(text, 'spool replayed') or 0:>10.0f}")
        print(f"{'process start to serving the API':<44}{serving * 1000:>10.0f}")
        if args.keep:
            proc.kill()
            return
        e2e.wait_until(lambda: e2e.metric_sum(proc.scrape(), "chgate_spool_pending_records") == 0,
                       timeout=600, interval=1)
    finally:
        proc.stop()
        if not args.keep:
            shutil.rmtree(spool_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
