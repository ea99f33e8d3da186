"""Runs chgate inside the runtime root filesystem built by runtime_rootfs.sh, as UID/GID 10001, and
checks what a container of the image must do: health answers, the image's health check passes, an
insert commits in ClickHouse, and SIGTERM drains a held batch and exits 0.

The chroot shares this machine's network, so chgate reaches the local ClickHouse on 127.0.0.1 and
the checks reach chgate on free loopback ports. Run with /usr/bin/python3 (Debian's grpc modules).
"""

import argparse
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
import e2e_support as e2e  # noqa: E402

DATABASE = "chgate_ops"
UID = 10001


class RootfsChgate(e2e.ChgateProcess):
    """chgate started by `chroot --userspec=10001:10001 ROOTFS /usr/local/bin/chgate` (chroot
    execs chgate, so the pid is chgate's own)."""

    def __init__(self, rootfs, clickhouse, args):
        super().__init__(str(Path(rootfs) / "usr/local/bin/chgate"), clickhouse, args,
                         health_host="0.0.0.0", name="rootfs", database=DATABASE)
        self.rootfs = rootfs

    def command(self):
        return ["chroot", f"--userspec={UID}:{UID}", self.rootfs, "/usr/local/bin/chgate",
                f"--listen=127.0.0.1:{self.api_port}",
                f"--health-listen=0.0.0.0:{self.health_port}",
                f"--metrics-listen=127.0.0.1:{self.metrics_port}",
                f"--endpoints={self.clickhouse.address}",
                f"--database={self.database}",
                *self.args]


def in_rootfs(rootfs, argv, stdin=None):
    """Runs argv inside the root filesystem as the image's user."""
    return subprocess.run(["chroot", f"--userspec={UID}:{UID}", rootfs, *argv], input=stdin,
                          capture_output=True, text=True, timeout=60)


def say(text):
    print(f"rootfs-check: {text}", flush=True)


def check(cond, text):
    if not cond:
        raise SystemExit(f"rootfs-check: FAIL: {text}")


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rootfs", required=True)
    ap.add_argument("--clickhouse", default=None)
    args = ap.parse_args()

    ch = e2e.ClickHouse(args.clickhouse)
    why = ch.check_reachable()
    check(why is None, f"ClickHouse at {ch.address} is unreachable: {why}")
    ch.query(f"CREATE DATABASE IF NOT EXISTS {DATABASE}")
    ch.query(f"DROP TABLE IF EXISTS {DATABASE}.rootfs")
    ch.query(f"CREATE TABLE {DATABASE}.rootfs (id UInt64, s String) ENGINE = MergeTree ORDER BY id")
    stubs = e2e.load_stubs()
    V = e2e.V

    table = f"{DATABASE}.rootfs"
    cli = Path(args.rootfs) / "usr/local/bin/chgate-cli"

    # 1. Serving: the user, health, the image's health check, a committed insert, chgate-cli.
    proc = RootfsChgate(args.rootfs, ch, ["--batch-max-delay=200ms"])
    proc.start()
    try:
        status = Path(f"/proc/{proc.pid}/status").read_text()
        uid_line = next(line for line in status.splitlines() if line.startswith("Uid:"))
        check(uid_line.split()[1:] == [str(UID)] * 4, f"chgate does not run as {UID}: {uid_line}")
        root = os.readlink(f"/proc/{proc.pid}/root")
        check(Path(root).resolve() == Path(args.rootfs).resolve(), f"chgate's root is {root}")
        say(f"chgate pid {proc.pid} runs as uid/gid {UID} inside the root filesystem")

        for service in ("", "liveness", "readiness", "buffer"):
            st = proc.health(service)
            check(st == "SERVING", f"health {service!r}: {st}")
        say("health '', liveness, readiness, buffer: SERVING")

        # The image's HEALTHCHECK command, run inside the root filesystem as the image's user:
        # passes against this chgate, fails against a port nothing listens on.
        def healthcheck(health_port, metrics_port):
            return in_rootfs(args.rootfs, ["/usr/bin/env", f"CHGATE_HEALTH_LISTEN=0.0.0.0:{health_port}",
                                           f"CHGATE_METRICS_LISTEN=127.0.0.1:{metrics_port}",
                                           "/usr/local/bin/chgate-healthcheck"])
        hc = healthcheck(proc.health_port, proc.metrics_port)
        check(hc.returncode == 0, f"the image's health check failed: {hc.stderr}")
        dead = e2e.free_ports(1)[0]
        hc_dead = healthcheck(dead, dead)
        check(hc_dead.returncode != 0, "the image's health check passed against a port nothing listens on")
        mode = "gRPC liveness via chgate-cli" if cli.exists() else "/metrics"
        say(f"image health check ({mode}): exit 0 against chgate, {hc_dead.returncode} against a dead port")

        with proc.channel() as channel:
            stub = stubs.pb_grpc.IngestStub(channel)
            t = time.monotonic()
            resp = stub.Insert(e2e.rows_request(table, ["id", "s"], [[V.u(i), V.s("committed")]
                                                                     for i in range(100)]), timeout=10)
            check(resp.rows == 100, f"the insert response counts {resp.rows} rows, not 100")
            check(ch.scalar(f"SELECT count() FROM {table} WHERE s = 'committed'") == "100",
                  "the committed insert is not in ClickHouse")
            say(f"insert of 100 rows committed in {time.monotonic() - t:.2f}s, query id {resp.query_id}")

        if cli.exists():
            # The compose quickstart (docs/operations.md), with the image's chgate-cli: health, JSON lines in,
            # a query back.
            api = f"--addr=127.0.0.1:{proc.api_port}"
            # A probe gets a few tries, as the kubelet's do; a chgate that died fails them all.
            for attempt in range(3):
                h = in_rootfs(args.rootfs, ["/usr/local/bin/chgate-cli", f"--addr=127.0.0.1:{proc.health_port}",
                                            "health", "--service", "readiness"])
                if h.returncode == 0 or proc.proc.poll() is not None:
                    break
                time.sleep(0.5)
            check(h.returncode == 0 and "SERVING" in h.stdout,
                  f"chgate-cli health: rc {h.returncode} {h.stdout}{h.stderr}(chgate "
                  f"{'running' if proc.proc.poll() is None else f'exited with {proc.proc.returncode}'}):\n"
                  f"{proc.log_tail()}")
            i = in_rootfs(args.rootfs, ["/usr/local/bin/chgate-cli", api, "insert", "--table", table],
                          stdin='{"id": 7001, "s": "cli"}\n{"id": 7002, "s": "cli"}\n')
            check(i.returncode == 0, f"chgate-cli insert: rc {i.returncode} {i.stdout}{i.stderr}")
            q = in_rootfs(args.rootfs, ["/usr/local/bin/chgate-cli", api, "query",
                                        f"SELECT count() FROM {table} WHERE s = 'cli'"])
            check(q.returncode == 0 and q.stdout.strip() == "2", f"chgate-cli query: rc {q.returncode} {q.stdout!r}{q.stderr}")
            say("chgate-cli in the root filesystem: health SERVING, 2 JSON lines inserted, query reads them back")
        else:
            say("chgate-cli not built: its checks are skipped")
        rc = proc.stop(timeout=40)
        check(rc == 0, f"chgate exited with {rc} after SIGTERM:\n{proc.log_tail()}")
    finally:
        proc.kill()

    # 2. Draining: a long batch delay keeps rows buffered until SIGTERM flushes them.
    proc = RootfsChgate(args.rootfs, ch, ["--batch-max-delay=60s", "--drain-timeout=20s"])
    proc.start()
    try:
        channel = proc.channel()
        stub = stubs.pb_grpc.IngestStub(channel)
        # SIGTERM with a batch held: the Insert below waits (its deadline is far), chgate must
        # flush it while draining, answer OK, and exit 0.
        result = {}

        def held_insert():
            try:
                stub.Insert(e2e.rows_request(table, ["id", "s"], [[V.u(1000 + i), V.s("drained")]
                                                                  for i in range(500)]), timeout=120)
                result["ok"] = True
            except Exception as e:  # noqa: BLE001 - reported below
                result["error"] = e

        th = threading.Thread(target=held_insert)
        th.start()
        e2e.wait_until(lambda: (e2e.metric_sum(proc.scrape(), "chgate_buffered_rows") or 0) >= 500, 15)
        buffered = e2e.metric_sum(proc.scrape(), "chgate_buffered_rows")
        check(buffered == 500, f"expected 500 buffered rows before SIGTERM, got {buffered}")
        t = time.monotonic()
        rc = proc.stop(timeout=40)
        th.join(30)
        elapsed = time.monotonic() - t
        check(rc == 0, f"chgate exited with {rc} after SIGTERM:\n{proc.log_tail()}")
        check(result.get("ok"), f"the held insert failed during the drain: {result.get('error')}")
        check(ch.scalar(f"SELECT count() FROM {table} WHERE s = 'drained'") == "500",
              "the drained rows are not in ClickHouse")
        say(f"SIGTERM with 500 rows held: drained, insert answered OK, exit 0 in {elapsed:.2f}s")
        channel.close()
    finally:
        proc.kill()
    ch.query(f"DROP TABLE IF EXISTS {DATABASE}.rootfs")
    print("rootfs-check: 1 passed, 0 failed")


if __name__ == "__main__":
    main()
