#!/usr/bin/python3
"""End-to-end tests of the API's TLS, mutual TLS and caller policy: the real chgate binary, the
local ClickHouse, and Python grpcio (ssl_channel_credentials) as an independent client.

  /usr/bin/python3 tests/e2e/security_e2e_test.py --chgate build/server/chgate [unittest args]

Certificates are made by the openssl command in a temporary directory. Each test class starts
its own chgate on free loopback ports and stops exactly that process. Without a reachable
ClickHouse the run is skipped (exit code 77) unless CHGATE_REQUIRE_CLICKHOUSE=1.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import e2e_support as e2e  # noqa: E402
from e2e_support import DATABASE, V  # noqa: E402

CHGATE = e2e.default_chgate_binary()
WRITER_TOKEN = "e2e-writer-token-0123456789"
READER_TOKEN = "e2e-reader-token-0123456789"


class Pki:
    """A CA per name and leaf certificates signed by them, made with the openssl command."""

    def __init__(self):
        self.dir = Path(tempfile.mkdtemp(prefix="chgate-e2e-pki-"))

    def close(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def path(self, name):
        return str(self.dir / name)

    def read(self, name):
        return (self.dir / name).read_bytes()

    def _openssl(self, *args):
        subprocess.run(["openssl", *args], cwd=self.dir, check=True, capture_output=True)

    def ca(self, name):
        self._openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                      "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.crt", "-days", "2",
                      "-subj", f"/CN={name}", "-addext", "basicConstraints=critical,CA:TRUE",
                      "-addext", "keyUsage=critical,keyCertSign")

    def issue(self, name, ca, sans, days=2):
        """days < 0: a certificate whose validity already ended."""
        (self.dir / f"{name}.ext").write_text(
            f"subjectAltName={sans}\nbasicConstraints=CA:FALSE\n"
            "extendedKeyUsage=serverAuth,clientAuth\n")
        self._openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                      "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}")
        self._openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey",
                      f"{ca}.key", "-CAcreateserial", "-out", f"{name}.crt", "-days", str(days),
                      "-extfile", f"{name}.ext")

    def write(self, name, data):
        """Replaces the file atomically (rename), as cert-manager and Secret volumes do."""
        tmp = self.dir / f".{name}.tmp"
        tmp.write_bytes(data if isinstance(data, bytes) else data.encode())
        os.replace(tmp, self.dir / name)


class SecurityTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        import grpc

        cls.grpc = grpc
        cls.ch = e2e.reachable_clickhouse()
        cls.ch.ensure_database()
        for table in ("sec_orders", "sec_audit"):
            cls.ch.recreate_table(table, "id UInt64")
        cls.stubs = e2e.load_stubs()
        cls.pb = cls.stubs.pb
        pki = cls.pki = Pki()
        pki.ca("ca")
        pki.ca("other-ca")
        pki.issue("server", "ca", "DNS:chgate.test")
        # A day longer than server's: the exported expiry tells the served one apart.
        pki.issue("server2", "other-ca", "DNS:chgate.test", days=3)
        pki.issue("writer", "ca", "URI:spiffe://e2e/writer")
        pki.issue("foreign", "other-ca", "URI:spiffe://e2e/writer")
        pki.issue("expired", "ca", "URI:spiffe://e2e/writer", days=-1)
        pki.write("tokens", f"token-writer {WRITER_TOKEN}\ntoken-reader {READER_TOKEN}\n")
        pki.write("policy",
                  f"[spiffe://e2e/writer]\ninsert = {DATABASE}.sec_orders\n"
                  f"[token-writer]\ninsert = {DATABASE}.sec_audit\n"
                  "[token-reader]\nquery = true\n")
        cls.chgate = e2e.ChgateProcess(CHGATE, cls.ch, [
            f"--api-tls-cert-file={pki.path('server.crt')}",
            f"--api-tls-key-file={pki.path('server.key')}",
            f"--api-tls-client-ca-file={pki.path('ca.crt')}",
            "--api-tls-client-auth=optional",
            f"--api-tokens-file={pki.path('tokens')}",
            f"--api-policy-file={pki.path('policy')}",
            "--api-reload-interval=1s",
            "--batch-max-delay=20ms",
        ], name=cls.__name__).start()

    @classmethod
    def tearDownClass(cls):
        rc = cls.chgate.stop()
        cls.pki.close()
        if rc not in (0, None):
            raise AssertionError(f"chgate exited with {rc}:\n{cls.chgate.log_tail()}")

    def channel(self, client=None, ca="ca"):
        """A new TLS channel (its own connection) trusting `ca`, with `client`'s certificate."""
        grpc = self.grpc
        creds = grpc.ssl_channel_credentials(
            root_certificates=self.pki.read(f"{ca}.crt"),
            private_key=self.pki.read(f"{client}.key") if client else None,
            certificate_chain=self.pki.read(f"{client}.crt") if client else None)
        return grpc.secure_channel(self.chgate.api_address, creds, options=[
            ("grpc.ssl_target_name_override", "chgate.test"), ("grpc.use_local_subchannel_pool", 1)])

    def request(self, table, *ids, sequence=0):
        return self.pb.InsertRequest(table=f"{DATABASE}.{table}", sequence=sequence,
                                     rows=self.pb.RowSet(rows=[self.pb.Row(values=[V.u(i)])
                                                             for i in ids]))

    def insert(self, channel, table, *ids, token=None):
        """The gRPC status code name of an Insert (OK on success)."""
        stub = self.stubs.pb_grpc.IngestStub(channel)
        metadata = [("authorization", f"Bearer {token}")] if token else None
        try:
            stub.Insert(self.request(table, *ids), timeout=15, metadata=metadata)
            return "OK"
        except self.grpc.RpcError as e:
            self.last_error = e.details() or ""
            return e.code().name

    def count(self, table):
        return int(self.ch.scalar(f"SELECT count() FROM {DATABASE}.{table}"))

    def failures(self, reason):
        return e2e.metric_sum(self.chgate.scrape(), "chgate_api_auth_failures_total", reason=reason)

    def test_server_tls_and_mutual_tls(self):
        with self.channel("writer") as ch:
            self.assertEqual(self.insert(ch, "sec_orders", 1, 2), "OK")
        # Server-only TLS: no client certificate, a token names the caller instead.
        with self.channel() as ch:
            self.assertEqual(self.insert(ch, "sec_audit", 3, token=WRITER_TOKEN), "OK")
        self.assertGreaterEqual(self.count("sec_orders"), 2)
        # Plaintext never reaches a call.
        with self.grpc.insecure_channel(self.chgate.api_address) as ch:
            self.assertEqual(self.insert(ch, "sec_orders", 4), "UNAVAILABLE")

    def test_wrong_client_ca_and_expired_client_certificate_fail_the_handshake(self):
        before = self.count("sec_orders")
        for client in ("foreign", "expired"):
            with self.channel(client) as ch:
                self.assertEqual(self.insert(ch, "sec_orders", 5), "UNAVAILABLE", client)
        # A client that does not trust chgate's CA does not connect either.
        with self.channel("writer", ca="other-ca") as ch:
            self.assertEqual(self.insert(ch, "sec_orders", 5), "UNAVAILABLE")
        self.assertEqual(self.count("sec_orders"), before)

    def test_tokens_allowed_and_denied_per_table(self):
        before = self.failures("insert_denied")
        with self.channel() as ch:
            self.assertEqual(self.insert(ch, "sec_audit", 10, token=WRITER_TOKEN), "OK")
            self.assertEqual(self.insert(ch, "sec_orders", 11, token=WRITER_TOKEN),
                             "PERMISSION_DENIED")
            self.assertIn("'token-writer'", self.last_error)
            self.assertIn(f"{DATABASE}.sec_orders", self.last_error)
            self.assertEqual(self.insert(ch, "sec_audit", 12, token="e2e-wrong-token-0123456789"),
                             "UNAUTHENTICATED")
            self.assertNotIn("e2e-wrong-token", self.last_error)
            self.assertEqual(self.insert(ch, "sec_audit", 13), "UNAUTHENTICATED")
        self.assertEqual(int(self.ch.scalar(
            f"SELECT count() FROM {DATABASE}.sec_orders WHERE id = 11")), 0)
        self.assertEqual(self.failures("insert_denied"), before + 1)
        self.assertNotIn("e2e-wrong-token", self.chgate.log_text())
        self.assertNotIn(WRITER_TOKEN, self.chgate.log_text())

    def test_query_denied_by_policy(self):
        with self.channel() as ch:
            stub = self.stubs.pb_grpc.IngestStub(ch)
            sql = self.pb.QueryRequest(sql="SELECT 1")
            with self.assertRaises(self.grpc.RpcError) as denied:
                list(stub.Query(sql, timeout=15,
                                metadata=[("authorization", f"Bearer {WRITER_TOKEN}")]))
            self.assertEqual(denied.exception.code().name, "PERMISSION_DENIED")
            self.assertIn("may not run Query", denied.exception.details())
            responses = list(stub.Query(sql, timeout=30,
                                        metadata=[("authorization", f"Bearer {READER_TOKEN}")]))
            self.assertTrue(any(r.WhichOneof("kind") == "summary" for r in responses))

    def test_zz_certificate_rotation_while_a_stream_stays_open(self):
        """Runs last: it rotates chgate's certificate to the second CA's and back."""
        import queue
        import threading

        requests = queue.Queue()

        def gen():
            while True:
                item = requests.get()
                if item is None:
                    return
                yield item

        old = self.channel("writer")
        stub = self.stubs.pb_grpc.IngestStub(old)
        acks = stub.InsertStream(gen(), timeout=120)
        requests.put(self.request("sec_orders", 100, sequence=1))
        self.assertFalse(next(acks).HasField("status"))

        def expiry():
            return e2e.metric_sum(self.chgate.scrape(),
                                  "chgate_api_tls_certificate_expiry_timestamp_seconds")

        first_expiry = expiry()
        self.assertGreater(first_expiry, time.time())
        first_pair = (self.pki.read("server.crt"), self.pki.read("server.key"))
        # The key alone first, as a renewal that rewrites the files one after the other may
        # leave them for a while: the previous pair stays in use (more than two reload intervals).
        self.pki.write("server.key", self.pki.read("server2.key"))
        time.sleep(2.5)
        with self.channel("writer", ca="ca") as ch:
            self.assertEqual(self.insert(ch, "sec_orders", 99), "OK",
                             "a key without its certificate broke new connections")
        self.assertEqual(expiry(), first_expiry)
        self.pki.write("server.crt", self.pki.read("server2.crt"))

        def new_certificate_served():
            with self.channel("writer", ca="other-ca") as ch:
                return self.insert(ch, "sec_orders", 101) == "OK"

        self.assertTrue(e2e.wait_until(new_certificate_served, timeout=30, interval=0.5),
                        "new connections never got the rotated certificate")
        with self.channel("writer", ca="ca") as ch:
            self.assertEqual(self.insert(ch, "sec_orders", 102), "UNAVAILABLE")

        # The stream opened before the rotation goes on over its old connection.
        requests.put(self.request("sec_orders", 103, sequence=2))
        ack = next(acks)
        self.assertEqual(ack.sequence, 2)
        self.assertFalse(ack.HasField("status"), ack.status.message)
        requests.put(None)
        self.assertEqual(list(acks), [])
        old.close()
        self.assertEqual(int(self.ch.scalar(
            f"SELECT count() FROM {DATABASE}.sec_orders WHERE id IN (100, 103)")), 2)

        # The exported expiry is the served certificate's (server2's, a day later), also while
        # the certificate file holds another one that waits for its key.
        second_expiry = expiry()
        self.assertLess(abs(second_expiry - first_expiry - 86_400), 120)
        self.pki.write("server.crt", first_pair[0])
        time.sleep(2.5)
        self.assertEqual(expiry(), second_expiry, "the expiry of a certificate not served yet")
        self.pki.write("server.key", first_pair[1])
        self.assertTrue(e2e.wait_until(lambda: expiry() == first_expiry, timeout=30, interval=0.5),
                        "the expiry did not follow the certificate served")


class RemoteApiTest(unittest.TestCase):
    def test_remote_api_needs_tls_or_an_explicit_insecure_opt_in(self):
        port = e2e.free_ports(1)[0]
        r = subprocess.run([CHGATE, f"--listen=0.0.0.0:{port}", "--allow-remote-api=true",
                            "--endpoints=127.0.0.1:9"], capture_output=True, text=True,
                           timeout=30, stdin=subprocess.DEVNULL)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("--allow-insecure-remote-api", r.stderr)

    def test_unusable_certificate_files_stop_the_start(self):
        pki = Pki()
        try:
            pki.ca("ca")
            pki.issue("a", "ca", "DNS:a.test")
            pki.issue("b", "ca", "DNS:b.test")
            r = subprocess.run([CHGATE, "--listen=127.0.0.1:0", "--health-listen=127.0.0.1:0",
                                "--metrics-listen=", "--endpoints=127.0.0.1:9",
                                f"--api-tls-cert-file={pki.path('a.crt')}",
                                f"--api-tls-key-file={pki.path('b.key')}"],
                               capture_output=True, text=True, timeout=30,
                               stdin=subprocess.DEVNULL)
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn("is not the key of the certificate", r.stderr)
        finally:
            pki.close()


class TlsServer:
    """A TLS server on a free loopback port speaking only the versions [lo, hi] (OpenSSL's
    security level 0, so old versions are really on offer), recording whether each connection's
    handshake succeeded; it then closes the connection."""

    def __init__(self, pki, cert, lo, hi):
        import socket
        import ssl
        import threading

        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(pki.path(f"{cert}.crt"), pki.path(f"{cert}.key"))
        ctx.set_ciphers("DEFAULT:@SECLEVEL=0")
        ctx.minimum_version, ctx.maximum_version = lo, hi
        self.outcomes = []  # True: a handshake made; False: refused
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]

        def serve():
            while True:
                try:
                    conn, _ = self.sock.accept()
                except OSError:
                    return
                conn.settimeout(10)
                try:
                    ctx.wrap_socket(conn, server_side=True).close()
                    self.outcomes.append(True)
                except (ssl.SSLError, OSError):
                    self.outcomes.append(False)
                    conn.close()

        threading.Thread(target=serve, daemon=True).start()

    def close(self):
        self.sock.close()


def tls_client_version(port, hi, ca=None, name="chgate.test"):
    """The version a TLS client offering up to `hi` (and down to TLS 1.0, security level 0)
    settles on with the server at `port`, or None when the handshake fails."""
    import socket
    import ssl

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if ca is None:
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    else:
        ctx.load_verify_locations(ca)
    ctx.set_ciphers("DEFAULT:@SECLEVEL=0")
    ctx.minimum_version, ctx.maximum_version = ssl.TLSVersion.TLSv1, hi
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        try:
            with ctx.wrap_socket(raw, server_hostname=name) as tls:
                return tls.version()
        except (ssl.SSLError, OSError):
            return None


class TlsVersionTest(unittest.TestCase):
    """TLS 1.2 is the least chgate speaks, on its API and towards ClickHouse (docs/security.md).
    Each refusal is set beside a control that shows the old version really was on offer: the
    same client makes a TLS 1.1 handshake with a local server that allows it, and chgate makes
    a TLS 1.2 one with the same kind of server."""

    @classmethod
    def setUpClass(cls):
        import ssl
        import warnings

        warnings.filterwarnings("ignore", category=DeprecationWarning)  # TLSVersion.TLSv1_1
        cls.ssl = ssl
        cls.ch = e2e.reachable_clickhouse()
        cls.ch.ensure_database()
        cls.stubs = e2e.load_stubs()
        cls.pki = Pki()
        cls.pki.ca("ca")
        cls.pki.issue("server", "ca", "DNS:chgate.test,IP:127.0.0.1")

    @classmethod
    def tearDownClass(cls):
        cls.pki.close()

    def test_the_api_refuses_tls_below_1_2(self):
        v = self.ssl.TLSVersion
        old = TlsServer(self.pki, "server", v.TLSv1_1, v.TLSv1_1)
        try:
            self.assertEqual(tls_client_version(old.port, v.TLSv1_1), "TLSv1.1",
                             "control: this client cannot make a TLS 1.1 handshake here")
        finally:
            old.close()
        chgate = e2e.ChgateProcess(CHGATE, self.ch, [
            f"--api-tls-cert-file={self.pki.path('server.crt')}",
            f"--api-tls-key-file={self.pki.path('server.key')}"],
            name=f"{type(self).__name__}-api").start()
        try:
            ca = self.pki.path("ca.crt")
            self.assertIsNone(tls_client_version(chgate.api_port, v.TLSv1_1, ca),
                              "chgate's API made a TLS 1.1 handshake")
            self.assertEqual(tls_client_version(chgate.api_port, v.TLSv1_2, ca), "TLSv1.2")
        finally:
            self.assertEqual(chgate.stop(), 0, chgate.log_tail())

    def test_connections_to_clickhouse_refuse_tls_below_1_2(self):
        v = self.ssl.TLSVersion
        results = {}
        for label, lo, hi in (("1.1", v.TLSv1_1, v.TLSv1_1), ("1.2", v.TLSv1_2, v.TLSv1_2)):
            server = TlsServer(self.pki, "server", lo, hi)
            chgate = e2e.ChgateProcess(CHGATE, self.ch, [
                f"--endpoints=tls://127.0.0.1:{server.port}",
                f"--clickhouse-tls-ca-file={self.pki.path('ca.crt')}"],
                name=f"{type(self).__name__}-ch{label}").start()
            try:
                request = self.stubs.pb.InsertRequest(
                    table=f"{DATABASE}.tls_version", rows=self.stubs.pb.RowSet(
                        rows=[self.stubs.pb.Row(values=[V.u(1)])]))
                import grpc

                with grpc.insecure_channel(chgate.api_address) as ch:
                    with self.assertRaises(grpc.RpcError):  # no ClickHouse behind either server
                        self.stubs.pb_grpc.IngestStub(ch).Insert(request, timeout=15)
                deadline = time.monotonic() + 10
                while not server.outcomes and time.monotonic() < deadline:
                    time.sleep(0.05)
                results[label] = list(server.outcomes)
            finally:
                chgate.stop()
                server.close()
        print(f"  [e2e] handshakes chgate made with a TLS 1.1-only server: {results['1.1']}; with "
              f"a TLS 1.2 one: {results['1.2']}", file=sys.stderr)
        self.assertTrue(results["1.2"] and any(results["1.2"]),
                        f"control: chgate made no TLS 1.2 handshake with the test server: {results}")
        self.assertTrue(results["1.1"], f"chgate never connected to the TLS 1.1 server: {results}")
        self.assertFalse(any(results["1.1"]), f"chgate made a TLS 1.1 handshake: {results}")


class ClickHouseTlsTest(unittest.TestCase):
    """chgate talking to the local ClickHouse's secure native port (CHGATE_CLICKHOUSE_SECURE, with the
    CA in CHGATE_CLICKHOUSE_SECURE_CA): rows inserted through chgate land and read back through
    Query; a wrong CA fails the insert with UNAVAILABLE naming the reason; skip-verify warns at
    start and shows in its metric."""

    @classmethod
    def setUpClass(cls):
        import grpc

        cls.grpc = grpc
        cls.ch = e2e.reachable_clickhouse()
        cls.tls_address = os.environ.get("CHGATE_CLICKHOUSE_SECURE") or "127.0.0.1:29440"
        cls.ca = os.environ.get("CHGATE_CLICKHOUSE_SECURE_CA") or str(
            e2e.SOURCE_DIR / ".local/clickhouse/tls/ca.crt")
        if not os.path.exists(cls.ca):
            raise RuntimeError(f"no CA file {cls.ca} for the local ClickHouse's secure port")
        cls.ch.ensure_database()
        cls.ch.recreate_table("tls_rows", "id UInt64, s String")
        cls.stubs = e2e.load_stubs()
        cls.pb = cls.stubs.pb
        cls.pki = Pki()
        cls.pki.ca("not-clickhouse-ca")

    @classmethod
    def tearDownClass(cls):
        cls.pki.close()

    def start(self, *args):
        return e2e.ChgateProcess(CHGATE, self.ch, [
            f"--endpoints=tls://{self.tls_address}", "--batch-max-delay=20ms", *args],
            name=f"{type(self).__name__}-{self._testMethodName}").start()

    def insert(self, chgate, *ids):
        request = self.pb.InsertRequest(
            table=f"{DATABASE}.tls_rows",
            rows=self.pb.RowSet(rows=[self.pb.Row(values=[V.u(i), V.s(f"row {i}")]) for i in ids]))
        with self.grpc.insecure_channel(chgate.api_address) as ch:
            try:
                self.stubs.pb_grpc.IngestStub(ch).Insert(request, timeout=20)
                return "OK", ""
            except self.grpc.RpcError as e:
                return e.code().name, e.details() or ""

    def test_inserts_and_queries_over_tls(self):
        chgate = self.start(f"--clickhouse-tls-ca-file={self.ca}", "--compression=zstd")
        try:
            self.assertEqual(self.insert(chgate, *range(1, 1001)), ("OK", ""))
            self.assertEqual(self.ch.scalar(
                f"SELECT count(), sum(id) FROM {DATABASE}.tls_rows WHERE id <= 1000"), "1000\t500500")
            with self.grpc.insecure_channel(chgate.api_address) as ch:
                responses = list(self.stubs.pb_grpc.IngestStub(ch).Query(
                    self.pb.QueryRequest(sql=f"SELECT count() FROM {DATABASE}.tls_rows "
                                             "WHERE id <= 1000"), timeout=20))
            self.assertTrue(any(r.HasField("block") for r in responses))
            samples = chgate.scrape()
            self.assertEqual(e2e.metric_sum(samples, "chgate_clickhouse_tls_insecure_skip_verify"), 0)
            self.assertGreater(e2e.metric_sum(samples, "chgate_clickhouse_sent_bytes_total"), 0)
            self.assertEqual(e2e.metric_sum(samples, "chgate_clickhouse_up"), 1)
        finally:
            self.assertEqual(chgate.stop(), 0)

    def test_a_wrong_ca_fails_with_its_reason(self):
        chgate = self.start(f"--clickhouse-tls-ca-file={self.pki.path('not-clickhouse-ca.crt')}",
                            "--retry-max-elapsed=1s", "--default-deadline=5s")
        try:
            code, message = self.insert(chgate, 5000)
            self.assertEqual(code, "UNAVAILABLE", message)
            self.assertIn("unknown CA", message)
            self.assertIn(self.tls_address, message)
            self.assertEqual(self.ch.scalar(
                f"SELECT count() FROM {DATABASE}.tls_rows WHERE id = 5000"), "0")
        finally:
            chgate.stop()

    def test_skip_verify_warns_and_is_visible_in_a_metric(self):
        chgate = self.start("--clickhouse-tls-insecure-skip-verify=true")
        try:
            self.assertRegex(chgate.log_text(),
                             r"WARN \[tls\] --clickhouse-tls-insecure-skip-verify: ClickHouse's "
                             r"certificate is not verified")
            self.assertEqual(self.insert(chgate, 6000), ("OK", ""))
            self.assertEqual(
                e2e.metric_sum(chgate.scrape(), "chgate_clickhouse_tls_insecure_skip_verify"), 1)
        finally:
            self.assertEqual(chgate.stop(), 0)

    def test_tls_settings_without_a_tls_endpoint_are_refused_at_start(self):
        with self.assertRaises(RuntimeError) as refused:
            e2e.ChgateProcess(CHGATE, self.ch, [f"--clickhouse-tls-ca-file={self.ca}"],
                              name="tls-refused").start(timeout=10)
        self.assertIn("no endpoint uses TLS", str(refused.exception))


def main():
    global CHGATE
    args, argv = e2e.test_main_args(__doc__.splitlines()[0])
    CHGATE = args.chgate
    unittest.main(argv=argv, verbosity=2)


if __name__ == "__main__":
    main()
