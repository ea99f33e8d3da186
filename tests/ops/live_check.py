"""Live checks of what the deployment files promise, against the real chgate binary and the local
ClickHouse:

  exposure    with the default API address (loopback) the API port refuses connections on this
              machine's non-loopback address while the health port answers there; health names
              "", "liveness", "readiness", "buffer" are SERVING and an unknown name is NOT_FOUND
  metrics     a live /metrics scrape passes `promtool check metrics`; every metric family the
              dashboard and the alert rules use is exported (a # TYPE line), and the ones with
              samples are listed
  prometheus  a real Prometheus server (Debian's) scrapes chgate every second with the alert rules
              loaded; while rows are inserted its HTTP query API returns a non-zero ingest rate;
              every rule is healthy; every dashboard query evaluates without error, and the core
              ingest panels return data

chgate, Prometheus and their files live under .local/ops/ and are stopped by pid. Run with
/usr/bin/python3 (Debian's grpc modules). Needs: the chgate binary, ClickHouse
(deploy/clickhouse/clickhousectl.sh start), prometheus/promtool, node (the dashboard's metric list).
"""

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
import e2e_support as e2e  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DATABASE = "chgate_ops"
passed = 0
failed = 0


def check(cond, text, detail=""):
    global passed, failed
    if cond:
        passed += 1
        print(f"live-check: ok   {text}", flush=True)
    else:
        failed += 1
        print(f"live-check: FAIL {text}" + (f"\n    {detail}" if detail else ""), flush=True)
    return bool(cond)


def dashboard_queries():
    """(title, expr) of every dashboard target, with Grafana's variables substituted."""
    dash = json.loads((ROOT / "deploy/kubernetes/monitoring/chgate-dashboard.json").read_text())
    out = []
    for p in dash["panels"]:
        for q in [p, *p.get("panels", [])]:
            for t in q.get("targets", []):
                expr = re.sub(r"\$__rate_interval|\$__interval|\$__range", "15s", t["expr"])
                expr = re.sub(r"\$\{?(\w+)\}?", ".*", expr)
                out.append((f'{q["title"]} {t["refId"]}', expr))
    return out


def used_metric_families():
    r = subprocess.run(["node", str(ROOT / "tests/ops/check_dashboard.mjs"), "--metrics"],
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise RuntimeError(f"check_dashboard.mjs --metrics failed: {r.stderr}")
    return [line for line in r.stdout.split() if line]


class Prometheus:
    """Debian's prometheus on a free loopback port, scraping one target every second."""

    def __init__(self, workdir, target):
        self.dir = workdir
        self.port = e2e.free_ports(1)[0]
        (workdir / "rules").mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / "deploy/prometheus/chgate-alerts.yml", workdir / "rules/chgate-alerts.yml")
        (workdir / "prometheus.yml").write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            "rule_files:\n  - rules/*.yml\n"
            "scrape_configs:\n  - job_name: chgate\n    static_configs:\n"
            f"      - targets: ['{target}']\n")
        self.log = open(workdir / "prometheus.log", "wb")
        self.proc = subprocess.Popen(
            ["prometheus", f"--config.file={workdir / 'prometheus.yml'}",
             f"--storage.tsdb.path={workdir / 'data'}", f"--web.listen-address=127.0.0.1:{self.port}",
             "--storage.tsdb.retention.time=1h"],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT,
            preexec_fn=e2e._die_with_parent)

    def get(self, path, **params):
        url = f"http://127.0.0.1:{self.port}{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.read().decode()

    def query(self, expr):
        try:
            body = json.loads(self.get("/api/v1/query", query=expr))
        except urllib.error.HTTPError as e:
            body = json.loads(e.read().decode())
        return body

    def wait_ready(self, timeout=60):
        def ready():
            if self.proc.poll() is not None:
                raise RuntimeError(f"prometheus exited with {self.proc.returncode}")
            try:
                return "Ready" in self.get("/-/ready")
            except OSError:
                return False
        return e2e.wait_until(ready, timeout, 0.2)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode


def scalar_value(body):
    res = body.get("data", {}).get("result", [])
    return float(res[0]["value"][1]) if res else None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chgate", default=e2e.default_chgate_binary())
    ap.add_argument("--clickhouse", default=None)
    ap.add_argument("--seconds", type=float, default=8, help="how long rows are inserted")
    args = ap.parse_args()

    ch = e2e.ClickHouse(args.clickhouse)
    why = ch.check_reachable()
    if why is not None:
        print(f"live-check: FAIL ClickHouse at {ch.address} is unreachable: {why}")
        return 1
    ch.query(f"CREATE DATABASE IF NOT EXISTS {DATABASE}")
    ch.query(f"DROP TABLE IF EXISTS {DATABASE}.live")
    ch.query(f"CREATE TABLE {DATABASE}.live (id UInt64, s String) ENGINE = MergeTree ORDER BY id")
    ch.query(f"DROP TABLE IF EXISTS {DATABASE}.poison_guard")
    ch.query(f"DROP TABLE IF EXISTS {DATABASE}.poison")
    ch.query(f"CREATE TABLE {DATABASE}.poison (id UInt64, s String) ENGINE = MergeTree ORDER BY id")
    ch.query(f"CREATE MATERIALIZED VIEW {DATABASE}.poison_guard ENGINE = Null AS "
             f"SELECT throwIf(s = 'boom') AS refused FROM {DATABASE}.poison")
    # A Replicated table for one persisted request: its deduplication window is read at its first
    # spooled flush (chgate_dedup_window_seconds, ChgateDedupWindowShort).
    ch.query(f"DROP TABLE IF EXISTS {DATABASE}.live_repl")
    ch.query(f"CREATE TABLE {DATABASE}.live_repl (id UInt64, s String) ENGINE = "
             f"ReplicatedMergeTree('/clickhouse/tables/{{shard}}/{DATABASE}.live_repl_{os.getpid()}', "
             f"'{{replica}}') ORDER BY id")
    stubs = e2e.load_stubs()
    V = e2e.V
    import grpc

    workdir = ROOT / ".local/ops" / f"live-{os.getpid()}"
    workdir.mkdir(parents=True, exist_ok=True)
    # The API serves TLS, as a gateway's does: the certificate series (the Security row, the
    # certificate alerts) exist only then. A self-signed certificate for the name chgate.test.
    tls = workdir / "tls"
    tls.mkdir(exist_ok=True)
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-keyout", str(tls / "api.key"), "-out", str(tls / "api.crt"), "-days", "30",
                    "-subj", "/CN=chgate.test", "-addext", "subjectAltName=DNS:chgate.test"],
                   check=True, capture_output=True)
    # With a spool: its series (the dashboard's Spool row, the spool alerts) exist only then.
    chgate = e2e.ChgateProcess(args.chgate, ch, ["--batch-max-delay=100ms", f"--spool-dir={workdir / 'spool'}",
                                                 f"--api-tls-cert-file={tls / 'api.crt'}",
                                                 f"--api-tls-key-file={tls / 'api.key'}"],
                               health_host="0.0.0.0", name="live", database=DATABASE)
    chgate.start()
    prom = None
    try:
        # --- exposure ----------------------------------------------------------------------------
        addr = e2e.non_loopback_ipv4()
        if addr is None:
            print("live-check: SKIP exposure from outside loopback: this machine has no non-loopback IPv4 address")
        else:
            try:
                socket.create_connection((addr, chgate.api_port), timeout=3).close()
                api_open = True
            except OSError:
                api_open = False
            check(not api_open, f"API {chgate.api_address} (loopback, the default) refuses {addr}:{chgate.api_port}")
            check(chgate.health("readiness", host=addr) == "SERVING",
                  f"health port answers on {addr}:{chgate.health_port} (readiness SERVING)")
        for name in ("", "liveness", "readiness", "buffer"):
            check(chgate.health(name) == "SERVING", f'health service "{name}" is SERVING')
        try:
            chgate.health("no-such-service")
            unknown = "SERVING?"
        except grpc.RpcError as e:
            unknown = e.code().name
        check(unknown == "NOT_FOUND", f"an unregistered health service name is NOT_FOUND ({unknown})")

        # --- Prometheus scraping chgate while rows flow ---------------------------------------------
        prom = Prometheus(workdir / "prometheus", f"127.0.0.1:{chgate.metrics_port}")
        check(prom.wait_ready(), f"Prometheus ready on 127.0.0.1:{prom.port}")
        # A caller without TLS fails the handshake, and is counted.
        with grpc.insecure_channel(chgate.api_address) as plain:
            try:
                stubs.pb_grpc.IngestStub(plain).Insert(
                    e2e.rows_request(f"{DATABASE}.live", ["id"], [[V.u(1)]]), timeout=3)
                plain_result = "OK"
            except grpc.RpcError as e:
                plain_result = e.code().name
        check(plain_result == "UNAVAILABLE",
              f"a caller without TLS is refused at the handshake ({plain_result})")
        channel = grpc.secure_channel(
            chgate.api_address, grpc.ssl_channel_credentials(root_certificates=(tls / "api.crt").read_bytes()),
            options=[("grpc.ssl_target_name_override", "chgate.test")])
        stub = stubs.pb_grpc.IngestStub(channel)
        stop = threading.Event()
        sent = {"rows": 0, "errors": []}

        def producer():
            k = 0
            while not stop.is_set():
                try:
                    stub.Insert(e2e.rows_request(f"{DATABASE}.live", ["id", "s"],
                                                 [[V.u(k * 50 + i), V.s("live")] for i in range(50)]),
                                timeout=10)
                    sent["rows"] += 50
                except grpc.RpcError as e:
                    sent["errors"].append(e.code().name)
                k += 1
                time.sleep(0.02)

        th = threading.Thread(target=producer, daemon=True)
        th.start()
        persisted = e2e.rows_request(f"{DATABASE}.live_repl", ["id", "s"], [[V.u(1), V.s("p")]])
        persisted.ack_mode = stubs.pb.ACK_MODE_PERSISTED
        stub.Insert(persisted, timeout=10)
        # One Query RPC, so the query metrics have samples when the RPC is served.
        query_result = "not run"
        try:
            n = 0
            for _ in stub.Query(stubs.pb.QueryRequest(sql="SELECT number FROM system.numbers LIMIT 1000"), timeout=30):
                n += 1
            query_result = f"ok ({n} messages)"
        except grpc.RpcError as e:
            query_result = e.code().name
        print(f"live-check: Query RPC: {query_result}")

        rate_expr = 'sum(rate(chgate_ingest_rows_total{job="chgate", result="ok"}[5s]))'
        deadline = time.monotonic() + max(args.seconds, 5) + 20
        rate = None
        while time.monotonic() < deadline:
            rate = scalar_value(prom.query(rate_expr))
            if rate and rate > 0 and time.monotonic() > deadline - 20:
                break
            time.sleep(0.5)
        check(rate is not None and rate > 0, f"Prometheus query API: {rate_expr} = {rate}")
        up = scalar_value(prom.query('up{job="chgate"}'))
        check(up == 1, f'Prometheus: up{{job="chgate"}} = {up}')

        # One batch that ClickHouse refuses (a materialized view throws on s = 'boom'), so the
        # error series (labelled, created at their first event) exist for the checks below.
        try:
            stub.Insert(e2e.rows_request(f"{DATABASE}.poison", ["id", "s"], [[V.u(1), V.s("boom")]]), timeout=10)
            poison = "OK"
        except grpc.RpcError as e:
            poison = e.code().name
        check(poison != "OK", f"a batch ClickHouse refuses fails its request ({poison})")
        # A caller error: an unknown table, counted under table="" (the dashboard keeps it visible
        # whatever table is picked).
        try:
            stub.Insert(e2e.rows_request(f"{DATABASE}.no_such_table", ["id"], [[V.u(1)]]), timeout=10)
            unknown_table = "OK"
        except grpc.RpcError as e:
            unknown_table = e.code().name
        check(unknown_table == "NOT_FOUND", f"an insert into an unknown table fails with NOT_FOUND ({unknown_table})")
        time.sleep(3)  # two scrapes with the new series

        # Every dashboard query evaluates; the core ingest panels have data.
        results = {}
        errors = []
        # Panels drawn from kube-state-metrics and cAdvisor have no data without a cluster; they
        # must still evaluate.
        k8s_only = {title for title, expr in dashboard_queries()
                    if not re.search(r"\bchgate_", expr) and re.search(r"\b(kube|container)_\w+\{", expr)}
        for title, expr in dashboard_queries():
            body = prom.query(expr)
            if body.get("status") != "success":
                errors.append(f"{title}: {body.get('error')}")
            results[title] = len(body.get("data", {}).get("result", []))
        check(not errors, f"all {len(results)} dashboard queries evaluate in Prometheus", "\n    ".join(errors))
        empty = [t for t, n in results.items() if n == 0 and t not in k8s_only]
        print(f"live-check: {len(k8s_only)} Kubernetes-only dashboard queries (kube-state-metrics, cAdvisor) "
              "are evaluated, not expected to return data here")
        if query_result == "UNIMPLEMENTED":
            # A build without the Query RPC: its panels stay empty (its metrics are still declared).
            print("live-check: the Query RPC is not served by this build: query panels may be empty")
            empty = [t for t in empty if not t.startswith(("Queries", "Query "))]
        check(not empty, f"every dashboard query returns data from the live chgate ({len(results) - len(empty)} of {len(results)})",
              "empty: " + ", ".join(empty))

        # Rules loaded and healthy.
        rules = json.loads(prom.get("/api/v1/rules"))["data"]["groups"]
        health = [(r["name"], r.get("health"), r.get("lastError", "")) for g in rules for r in g["rules"]]
        check(len(health) >= 7 and all(h == "ok" for _, h, _ in health),
              f"Prometheus evaluates the {len(health)} alert rules without error",
              "; ".join(f"{n}: {h} {e}" for n, h, e in health if h != "ok"))
        stop.set()
        th.join(15)
        check(not sent["errors"], f"{sent['rows']} rows inserted without error", ", ".join(sent["errors"][:5]))

        # --- the scrape itself --------------------------------------------------------------------
        with urllib.request.urlopen(f"http://127.0.0.1:{chgate.metrics_port}/metrics", timeout=10) as r:
            text = r.read().decode()
        (workdir / "metrics.txt").write_text(text)
        pc = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
        check(pc.returncode == 0, "promtool check metrics accepts a live scrape", (pc.stdout + pc.stderr).strip())
        typed = set(re.findall(r"^# TYPE (\S+) ", text, re.M))
        sampled = {re.sub(r"_(bucket|sum|count)$", "", n) for n in re.findall(r"^([a-zA-Z_:][\w:]*)[{ ]", text, re.M)}
        used = used_metric_families()
        missing = [m for m in used if m not in typed]
        check(not missing, f"all {len(used)} metric families used by the dashboard and alerts are exported by chgate",
              "missing from /metrics: " + ", ".join(missing))
        failures = sum(float(v) for v in re.findall(
            r"^chgate_api_tls_handshake_failures_total(?:\{[^}]*\})? (\S+)$", text, re.M))
        check(failures >= 1, f"the refused plain-text caller is counted as a failed handshake ({failures:.0f})")
        expiry = re.findall(r"^chgate_api_tls_certificate_expiry_timestamp_seconds(?:\{[^}]*\})? (\S+)$", text, re.M)
        days = (float(expiry[0]) - time.time()) / 86400 if expiry else -1
        check(29 < days <= 30, f"the API certificate's expiry is exported ({days:.1f} days ahead)")
        no_samples = [m for m in used if m in typed and m not in sampled]
        print("live-check: families declared without samples in this run (labelled series appear at "
              f"their first event): {', '.join(no_samples) or 'none'}")
    finally:
        if prom is not None:
            prom.stop()
        rc = chgate.stop()
        check(rc == 0, f"chgate exits 0 on SIGTERM (rc {rc})", chgate.log_tail())
    for t in ("live", "poison_guard", "poison"):
        ch.query(f"DROP TABLE IF EXISTS {DATABASE}.{t}")
    if failed == 0:
        shutil.rmtree(workdir, ignore_errors=True)
    else:
        print(f"live-check: files kept in {workdir.relative_to(ROOT)}")
    print(f"live-check: {passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
