#!/usr/bin/python3
"""End-to-end tests of chgate's ingest path: the real binary, the local ClickHouse, and a Python
gRPC client (Debian's python3-grpcio) generated from proto/chgate/v1/chgate.proto at run time.

  /usr/bin/python3 tests/e2e/ingest_e2e_test.py --chgate build/server/chgate [unittest args]

Each test class starts its own chgate on free loopback ports and stops exactly that process. Tables
live in the database `chgate_e2e`. Some cases pause the ClickHouse server (SIGSTOP on the pid that
clickhousectl.sh reports; SIGCONT always follows) or restart it. See e2e_support.py for the
environment variables; without a reachable ClickHouse the run is skipped (exit code 77) unless
CHGATE_REQUIRE_CLICKHOUSE=1, which makes it fail.
"""

import datetime
import math
import os
import random
import re
import signal
import sys
import threading
import time
import unittest
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import e2e_support as e2e  # noqa: E402
from e2e_support import DATABASE, V  # noqa: E402

CHGATE = e2e.default_chgate_binary()
MiB = 1 << 20
# Known server bugs are reported and their tests skipped, unless CHGATE_E2E_STRICT=1 makes them fail.
STRICT = os.environ.get("CHGATE_E2E_STRICT") == "1"


def report(text):
    """Findings worth seeing in the ctest log even when the test passes."""
    print(f"  [e2e] {text}", file=sys.stderr, flush=True)


def tsv_escape(s):
    out = []
    for ch in s:
        out.append({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\0": "\\0", "'": "\\'",
                    "\r": "\\r", "\b": "\\b", "\f": "\\f"}.get(ch, ch))
    return "".join(out)


_clickhouse = None
_clickhouse_problem = None


def clickhouse():
    """The shared ClickHouse; skips (or, with CHGATE_REQUIRE_CLICKHOUSE=1, fails) when unreachable."""
    global _clickhouse, _clickhouse_problem
    if _clickhouse is None:
        _clickhouse = e2e.ClickHouse()
        _clickhouse_problem = _clickhouse.check_reachable()
        if _clickhouse_problem is None:
            _clickhouse.ensure_database()
    if _clickhouse_problem is not None:
        msg = f"ClickHouse at {_clickhouse.address} is unreachable: {_clickhouse_problem}"
        if _clickhouse.required:
            raise RuntimeError(msg + " (CHGATE_REQUIRE_CLICKHOUSE=1)")
        raise unittest.SkipTest(msg)
    return _clickhouse


class ChgateTestCase(unittest.TestCase):
    """Starts one chgate for the class (with CHGATE_ARGS) and a channel to it."""

    CHGATE_ARGS = ["--batch-max-delay=50ms"]
    HEALTH_HOST = "127.0.0.1"
    START_CHGATE = True

    @classmethod
    def setUpClass(cls):
        cls.ch = clickhouse()
        cls.stubs = e2e.load_stubs()
        cls.pb = cls.stubs.pb
        cls.chgate = None
        cls.channel = None
        if cls.START_CHGATE:
            cls.start_chgate()

    @classmethod
    def start_chgate(cls, args=None):
        cls.chgate = e2e.ChgateProcess(CHGATE, cls.ch, args if args is not None else cls.CHGATE_ARGS,
                                       health_host=cls.HEALTH_HOST, name=cls.__name__).start()
        cls.channel = cls.chgate.channel()
        cls.stub = cls.stubs.pb_grpc.IngestStub(cls.channel)
        return cls.chgate

    @classmethod
    def stop_chgate(cls):
        if cls.channel is not None:
            cls.channel.close()
            cls.channel = None
        if cls.chgate is not None:
            chgate, cls.chgate = cls.chgate, None
            t = time.monotonic()
            rc = chgate.stop()
            if rc not in (0, None):
                raise AssertionError(f"{cls.__name__}: chgate exited with {rc} "
                                     f"{time.monotonic() - t:.1f}s after SIGTERM:\n{chgate.log_tail()}")

    @classmethod
    def tearDownClass(cls):
        cls.stop_chgate()

    def table(self, name):
        return f"{DATABASE}.{name}"

    def query_lines(self, sql):
        out = self.ch.query(sql + " FORMAT TabSeparated")
        return out.split("\n")[:-1] if out else []

    def known_bug(self, description):
        """A server bug this suite knows about: reported; skipped, or failed with CHGATE_E2E_STRICT=1."""
        report(f"KNOWN BUG: {description}")
        if STRICT:
            self.fail(description)
        self.skipTest(f"known bug: {description}")

    def assertRpcCode(self, fn, code, *args, **kw):
        import grpc

        with self.assertRaises(grpc.RpcError) as cm:
            fn(*args, **kw)
        self.assertEqual(cm.exception.code(), code, cm.exception.details())
        return cm.exception


# ---------------------------------------------------------------------------------------------
# 1. Every type, by rows and by block
# ---------------------------------------------------------------------------------------------

T0 = 1714564800  # 2024-05-01T12:00:00Z
ENUM = "Enum8('a' = 1, 'b' = 2, 'neg' = -3, 'with space' = 100)"


def days(y, m, d):
    return (datetime.date(y, m, d) - datetime.date(1970, 1, 1)).days


UUIDS = ["01234567-89ab-cdef-0123-456789abcdef", "6ba7b810-9dad-11d1-80b4-00c04fd430c8",
         "6ba7b811-9dad-11d1-80b4-00c04fd430c8", "00000000-0000-0000-0000-000000000000",
         "ffffffff-ffff-ffff-ffff-ffffffffffff"]


def all_types_columns():
    """[(name, type, [(row Value, block value, expected TabSeparated text)] * 5)]."""
    u = uuid.UUID
    return [
        ("id", "UInt32", [(V.u(i), i, str(i)) for i in range(5)]),
        ("u8", "UInt8", [(V.u(0), 0, "0"), (V.u(255), 255, "255"), (V.i(7), 7, "7"),
                         (V.s("200"), 200, "200"), (V.i(128), 128, "128")]),
        ("u16", "UInt16", [(V.u(0), 0, "0"), (V.u(65535), 65535, "65535"), (V.i(1000), 1000, "1000"),
                           (V.s("65534"), 65534, "65534"), (V.u(256), 256, "256")]),
        ("u32", "UInt32", [(V.u(0), 0, "0"), (V.u(2**32 - 1), 2**32 - 1, "4294967295"),
                           (V.i(123456), 123456, "123456"), (V.s("4000000000"), 4000000000, "4000000000"),
                           (V.u(65536), 65536, "65536")]),
        ("u64", "UInt64", [(V.u(0), 0, "0"), (V.u(2**64 - 1), 2**64 - 1, "18446744073709551615"),
                           (V.i(42), 42, "42"),
                           (V.s("18446744073709551614"), 2**64 - 2, "18446744073709551614"),
                           (V.u(2**63), 2**63, "9223372036854775808")]),
        ("i8", "Int8", [(V.i(-128), -128, "-128"), (V.i(127), 127, "127"), (V.u(5), 5, "5"),
                        (V.s("-1"), -1, "-1"), (V.i(0), 0, "0")]),
        ("i16", "Int16", [(V.i(-32768), -32768, "-32768"), (V.i(32767), 32767, "32767"),
                          (V.u(300), 300, "300"), (V.s("-300"), -300, "-300"), (V.i(0), 0, "0")]),
        ("i32", "Int32", [(V.i(-2**31), -2**31, "-2147483648"), (V.i(2**31 - 1), 2**31 - 1, "2147483647"),
                          (V.u(7), 7, "7"), (V.s("-123456789"), -123456789, "-123456789"),
                          (V.i(0), 0, "0")]),
        ("i64", "Int64", [(V.i(-2**63), -2**63, "-9223372036854775808"),
                          (V.i(2**63 - 1), 2**63 - 1, "9223372036854775807"),
                          (V.u(2**63 - 1), 2**63 - 1, "9223372036854775807"),
                          (V.s("-9223372036854775807"), -2**63 + 1, "-9223372036854775807"),
                          (V.i(0), 0, "0")]),
        ("f32", "Float32", [(V.d(0.5), 0.5, "0.5"), (V.d(-1.25), -1.25, "-1.25"), (V.i(3), 3.0, "3"),
                            (V.s("1.5e3"), 1500.0, "1500"), (V.u(16777216), 16777216.0, "16777216")]),
        ("f64", "Float64", [(V.d(3.141592653589793), 3.141592653589793, "3.141592653589793"),
                            (V.d(0.1), 0.1, "0.1"), (V.u(2**53), float(2**53), "9007199254740992"),
                            (V.s("inf"), math.inf, "inf"), (V.s("-inf"), -math.inf, "-inf")]),
        ("s", "String", [(V.s(""), "", ""), (V.s("héllo wörld ✓"), "héllo wörld ✓", "héllo wörld ✓"),
                         (V.b(b"\x00\xff"), b"\x00\xff", "\\0\udcff"),
                         (V.s("tab\there\nnew"), "tab\there\nnew", "tab\\there\\nnew"),
                         (V.s("quote'back\\slash"), "quote'back\\slash", "quote\\'back\\\\slash")]),
        ("fs", "FixedString(4)", [(V.s("ab"), "ab", "ab\\0\\0"), (V.s("abcd"), "abcd", "abcd"),
                                  (V.s("ñ"), "ñ", "ñ\\0\\0"), (V.b(b"xyz"), b"xyz", "xyz\\0"),
                                  (V.s(""), "", "\\0\\0\\0\\0")]),
        ("d", "Date", [(V.s("1970-01-02"), 1, "1970-01-02"),
                       (V.s("2024-02-29"), days(2024, 2, 29), "2024-02-29"),
                       (V.i(days(2024, 5, 1)), days(2024, 5, 1), "2024-05-01"),
                       (V.ts(T0 + 11 * 3600 + 59), days(2024, 5, 1), "2024-05-01"),
                       (V.u(days(2100, 12, 31)), days(2100, 12, 31), "2100-12-31")]),
        ("dt", "DateTime", [(V.s("2024-05-01T12:00:00Z"), T0, "2024-05-01 12:00:00"),
                            (V.s("2024-05-01T21:00:01+09:00"), T0 + 1, "2024-05-01 12:00:01"),
                            (V.i(T0 + 2), T0 + 2, "2024-05-01 12:00:02"),
                            (V.ts(T0 + 3, 999000000), T0 + 3, "2024-05-01 12:00:03"),
                            (V.s("2024-05-01 12:00:04"), T0 + 4, "2024-05-01 12:00:04")]),
        ("dtz", "DateTime('Asia/Tokyo')",
         [(V.s("2024-05-01T12:00:00Z"), T0, "2024-05-01 21:00:00"),
          (V.s("2024-05-01 21:00:01"), T0 + 1, "2024-05-01 21:00:01"),
          (V.u(T0 + 2), T0 + 2, "2024-05-01 21:00:02"),
          (V.ts(T0 + 3), T0 + 3, "2024-05-01 21:00:03"),
          (V.s("2024-05-01T12:00:04+00:00"), T0 + 4, "2024-05-01 21:00:04")]),
        ("d9", "Decimal(9, 2)", [(V.s("1234567.89"), "1234567.89", "1234567.89"),
                                 (V.i(-7), -7, "-7.00"), (V.d(3.14159), "3.14", "3.14"),
                                 (V.d(-0.25), "-0.25", "-0.25"),
                                 (V.s("-9999999.99"), "-9999999.99", "-9999999.99")]),
        ("d18", "Decimal(18, 4)", [(V.s("-12345678901234.5678"), "-12345678901234.5678",
                                    "-12345678901234.5678"),
                                   (V.u(42), 42, "42.0000"), (V.d(0.1), "0.1", "0.1000"),
                                   (V.s("0.0001"), "0.0001", "0.0001"),
                                   (V.s("99999999999999.9999"), "99999999999999.9999",
                                    "99999999999999.9999")]),
        ("d38", "Decimal(38, 10)",
         [(V.s("1234567890123456789012345678.0123456789"), "1234567890123456789012345678.0123456789",
           "1234567890123456789012345678.0123456789"),
          (V.s("-0.0000000001"), "-0.0000000001", "-0.0000000001"),
          (V.i(-5), -5, "-5.0000000000"), (V.d(2.5), "2.5", "2.5000000000"),
          (V.s("9999999999999999999999999999.9999999999"), "9999999999999999999999999999.9999999999",
           "9999999999999999999999999999.9999999999")]),
        ("uid", "UUID", [(V.s(UUIDS[0]), UUIDS[0], UUIDS[0]),
                         (V.b(u(UUIDS[1]).bytes), UUIDS[1], UUIDS[1]),
                         (V.s(UUIDS[2].upper()), UUIDS[2], UUIDS[2]),
                         (V.b(u(UUIDS[3]).bytes), UUIDS[3], UUIDS[3]),
                         (V.s(UUIDS[4]), UUIDS[4], UUIDS[4])]),
        ("e", ENUM, [(V.s("a"), 1, "a"), (V.i(2), 2, "b"), (V.s("neg"), -3, "neg"), (V.i(-3), -3, "neg"),
                     (V.s("with space"), 100, "with space")]),
        ("ns", "Nullable(String)", [(V.null(), None, "\\N"), (V.s("x"), "x", "x"), (V.null(), None, "\\N"),
                                    (V.s(""), "", ""), (V.s("nü"), "nü", "nü")]),
        ("ani", "Array(Nullable(Int32))",
         [(V.arr([V.i(1), V.null(), V.i(-3)]), [1, None, -3], "[1,NULL,-3]"),
          (V.arr([]), [], "[]"), (V.arr([V.null()]), [None], "[NULL]"),
          (V.arr([V.i(2**31 - 1)]), [2**31 - 1], "[2147483647]"),
          (V.arr([V.i(-2**31), V.s("0")]), [-2**31, 0], "[-2147483648,0]")]),
        ("aas", "Array(Array(String))",
         [(V.arr([V.arr([V.s("a"), V.s("b")]), V.arr([])]), [["a", "b"], []], "[['a','b'],[]]"),
          (V.arr([]), [], "[]"), (V.arr([V.arr([V.s("")])]), [[""]], "[['']]"),
          (V.arr([V.arr([V.s("x'y")])]), [["x'y"]], "[['x\\'y']]"),
          (V.arr([V.arr([V.s("ü")]), V.arr([V.s("v"), V.b(b"w")])]), [["ü"], ["v", "w"]],
           "[['ü'],['v','w']]")]),
        ("t", "Tuple(UInt8, String)",
         [(V.tup([V.u(1), V.s("x")]), (1, "x"), "(1,'x')"),
          (V.tup([V.u(255), V.s("")]), (255, ""), "(255,'')"),
          (V.tup([V.i(0), V.s("t\tab")]), (0, "t\tab"), "(0,'t\\tab')"),
          (V.tup([V.s("7"), V.b(b"b")]), (7, "b"), "(7,'b')"),
          (V.tup([V.u(2), V.s("ü")]), (2, "ü"), "(2,'ü')")]),
        ("lc", "LowCardinality(String)", [(V.s("red"), "red", "red"), (V.s("green"), "green", "green"),
                                          (V.s("red"), "red", "red"), (V.s(""), "", ""),
                                          (V.s("✓"), "✓", "✓")]),
        ("lcn", "LowCardinality(Nullable(String))",
         [(V.null(), None, "\\N"), (V.s("a"), "a", "a"), (V.null(), None, "\\N"), (V.s("a"), "a", "a"),
          (V.s(""), "", "")]),
    ]


class AllTypesTest(ChgateTestCase):
    """Case 1: every type the 18.16 server supports, by rows and by columnar block."""

    def setUp(self):
        self.columns = all_types_columns()
        ddl = ", ".join(f"{n} {t}" for n, t, _ in self.columns)
        for name in ("types_rows", "types_block"):
            self.ch.recreate_table(name, ddl)
        self.names = [n for n, _, _ in self.columns]

    def check_table(self, table):
        lines = self.query_lines(f"SELECT {', '.join(self.names)} FROM {self.table(table)} ORDER BY id")
        self.assertEqual(len(lines), 5, lines)
        mismatches = []
        for r, line in enumerate(lines):
            cells = line.split("\t")
            self.assertEqual(len(cells), len(self.columns), line)
            for (name, type_text, values), got in zip(self.columns, cells):
                want = values[r][2]
                if got != want:
                    mismatches.append(f"row {r} {name} {type_text}: want {want!r}, got {got!r}")
        self.assertEqual(mismatches, [], "\n".join(mismatches))

    def test_rows(self):
        rows = [[values[r][0] for _, _, values in self.columns] for r in range(5)]
        resp = self.stub.Insert(e2e.rows_request(self.table("types_rows"), self.names, rows), timeout=30)
        self.assertEqual(resp.rows, 5)
        self.assertEqual(resp.ack_mode, self.pb.ACK_MODE_COMMITTED)
        self.assertTrue(resp.query_id)
        self.assertTrue(resp.HasField("commit_time"))
        self.check_table("types_rows")

    def test_block(self):
        # Column.type as the server prints it (Enum elements sorted by value, for one).
        types = self.ch.column_types("types_block")
        cols = [(n, types[n], [v[1] for v in values]) for n, _, values in self.columns]
        # `columns` left empty: the block's column names are the column list.
        resp = self.stub.Insert(e2e.block_request(self.table("types_block"), cols), timeout=30)
        self.assertEqual(resp.rows, 5)
        self.check_table("types_block")

    def test_block_type_is_required(self):
        """Column.type is required on insert: the columnar layout depends on it."""
        self.ch.recreate_table("types_untyped", "id UInt32, s String")
        req = e2e.block_request(self.table("types_untyped"), [("id", "UInt32", [1, 2]), ("s", "String", ["x", ""])])
        for c in req.block.columns:
            c.type = ""
        import grpc

        with self.assertRaises(grpc.RpcError) as ctx:
            self.stub.Insert(req, timeout=30)
        self.assertEqual(ctx.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("type", ctx.exception.details())
        self.assertEqual(self.query_lines(f"SELECT count() FROM {self.table('types_untyped')}"), ["0"])

    def test_block_with_column_list_and_typed_fields(self):
        """The insert-only convenience fields (int64s, uint64s, float64s, strings), with `columns`
        set and the block columns unnamed."""
        pb = self.pb
        self.ch.recreate_table("types_conv", f"id UInt32, i8 Int8, u16 UInt16, f32 Float32, s String, "
                                             f"fs FixedString(3), dt DateTime, d9 Decimal(9, 2), e {ENUM}")
        block = pb.Block(rows=3, columns=[
            pb.Column(uint64s=[0, 1, 2]),
            pb.Column(int64s=[-128, 127, 0]),
            pb.Column(uint64s=[0, 65535, 7]),
            pb.Column(float64s=[0.5, -2.0, 1e3]),
            pb.Column(strings=[b"", "ü".encode(), b"x"]),
            pb.Column(strings=[b"ab", b"abc", b""]),
            pb.Column(uint64s=[T0, T0 + 1, T0 + 2]),
            pb.Column(int64s=[12345, -1, 0]),
            pb.Column(int64s=[1, 2, 100]),
        ])
        names = ["id", "i8", "u16", "f32", "s", "fs", "dt", "d9", "e"]
        types = self.ch.column_types("types_conv")
        for name, column in zip(names, block.columns):
            column.type = types[name]
        req = pb.InsertRequest(table=self.table("types_conv"), columns=names, block=block)
        self.assertEqual(self.stub.Insert(req, timeout=30).rows, 3)
        self.assertEqual(self.query_lines(f"SELECT * FROM {self.table('types_conv')} ORDER BY id"), [
            "0\t-128\t0\t0.5\t\tab\\0\t2024-05-01 12:00:00\t123.45\ta",
            "1\t127\t65535\t-2\tü\tabc\t2024-05-01 12:00:01\t-0.01\tb",
            "2\t0\t7\t1000\tx\t\\0\\0\\0\t2024-05-01 12:00:02\t0.00\twith space",
        ])


# ---------------------------------------------------------------------------------------------
# 2. Bad rows
# ---------------------------------------------------------------------------------------------

class BadRowsTest(ChgateTestCase):
    """Case 2: a request with one bad value is rejected whole, with the row, column, value and type
    in the message and in the chgate-status-bin trailer; unknown table/column."""

    COLUMNS = ["id", "u8", "fs", "e", "d", "s"]

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.ch.recreate_table("bad", "id UInt32, u8 UInt8, fs FixedString(2), e Enum8('a' = 1, 'b' = 2), "
                                     "d Date, s String")
        cls.types = cls.ch.column_types("bad")

    def good_row(self, i):
        return [V.u(i), V.u(1), V.s("ok"), V.s("a"), V.s("2024-05-01"), V.s(f"row {i}")]

    def test_bad_values_reject_the_whole_request(self):
        import grpc

        cases = [  # column, bad value, its text in the error (None: not checked)
            ("u8", V.u(256), "256"),
            ("u8", V.i(-1), "-1"),
            ("u8", V.d(1.0), None),  # doubles are not accepted for integers
            ("fs", V.s("abc"), "abc"),
            ("e", V.s("c"), "c"),
            ("e", V.i(3), "3"),
            ("d", V.s("2024-13-01"), "2024-13-01"),
            ("d", V.s("yesterday"), "yesterday"),
            ("s", V.null(), None),  # null into a non-Nullable column
        ]
        next_id = 100
        for column, bad, text in cases:
            with self.subTest(column=column, value=str(bad).strip()):
                ids = list(range(next_id, next_id + 3))
                next_id += 10
                rows = [self.good_row(i) for i in ids]
                rows[2][self.COLUMNS.index(column)] = bad
                err = self.assertRpcCode(self.stub.Insert, grpc.StatusCode.INVALID_ARGUMENT,
                                         e2e.rows_request(self.table("bad"), self.COLUMNS, rows), timeout=10)
                msg = err.details()
                type_text = self.types[column]
                self.assertIn("row 2", msg)
                self.assertIn(column, msg)
                self.assertIn(type_text, msg)
                if text is not None:
                    self.assertIn(text, msg)
                st = e2e.status_detail(err)
                self.assertIsNotNone(st, "no chgate-status-bin trailer")
                self.assertEqual(st.code, grpc.StatusCode.INVALID_ARGUMENT.value[0])
                self.assertTrue(st.HasField("value_error"), st)
                self.assertTrue(st.value_error.HasField("row_index"), st)
                self.assertEqual(st.value_error.row_index, 2)
                self.assertEqual(st.value_error.column, column)
                self.assertEqual(st.value_error.type, type_text)
                if text is not None:
                    self.assertEqual(st.value_error.value, text)
                if column == "s":
                    report(f"null into String is reported as value {st.value_error.value!r}: {msg}")

        # A good request afterwards is committed, and commits whatever was buffered before it:
        # none of the rejected requests' rows may show up.
        resp = self.stub.Insert(e2e.rows_request(self.table("bad"), self.COLUMNS,
                                                 [self.good_row(1), self.good_row(2)]), timeout=30)
        self.assertEqual(resp.rows, 2)
        self.assertEqual(self.query_lines(f"SELECT id FROM {self.table('bad')} WHERE id IN (1, 2) ORDER BY id"),
                         ["1", "2"])
        self.assertEqual(self.query_lines(f"SELECT id FROM {self.table('bad')} WHERE id >= 100 AND id < 200"), [],
                         "rows of rejected requests were inserted")

    def test_bad_block_value(self):
        import grpc

        pb = self.pb
        t = self.types
        block = pb.Block(rows=3, columns=[pb.Column(name="id", type=t["id"], uint64s=[200, 201, 202]),
                                          pb.Column(name="u8", type=t["u8"], uint64s=[1, 256, 3])])
        err = self.assertRpcCode(self.stub.Insert, grpc.StatusCode.INVALID_ARGUMENT,
                                 pb.InsertRequest(table=self.table("bad"), block=block), timeout=10)
        st = e2e.status_detail(err)
        self.assertIsNotNone(st)
        self.assertEqual(st.value_error.row_index, 1, st)
        self.assertEqual(st.value_error.column, "u8")
        # An inconsistent layout: 3 rows but a String column with 2 offsets.
        block = pb.Block(rows=3, columns=[pb.Column(name="id", type=t["id"], uint64s=[203, 204, 205]),
                                          pb.Column(name="s", type=t["s"], data=b"ab", offsets=[1, 2])])
        self.assertRpcCode(self.stub.Insert, grpc.StatusCode.INVALID_ARGUMENT,
                           pb.InsertRequest(table=self.table("bad"), block=block), timeout=10)
        # A declared type that is not the column's type.
        block = pb.Block(rows=1, columns=[pb.Column(name="id", type="UInt64", uint64s=[206])])
        self.assertRpcCode(self.stub.Insert, grpc.StatusCode.INVALID_ARGUMENT,
                           pb.InsertRequest(table=self.table("bad"), block=block), timeout=10)
        self.stub.Insert(e2e.rows_request(self.table("bad"), self.COLUMNS, [self.good_row(3)]), timeout=30)
        self.assertEqual(self.ch.scalar(f"SELECT count() FROM {self.table('bad')} WHERE id >= 200"), "0")

    def test_unknown_table_and_column(self):
        import grpc

        row = [[V.u(1)]]
        err = self.assertRpcCode(self.stub.Insert, grpc.StatusCode.NOT_FOUND,
                                 e2e.rows_request(self.table("no_such_table"), ["id"], row), timeout=10)
        st = e2e.status_detail(err)
        report(f"unknown table: {err.details()!r}; trailer clickhouse_code="
               f"{st.clickhouse_code if st else None}")
        self.assertRpcCode(self.stub.Insert, grpc.StatusCode.NOT_FOUND,
                           e2e.rows_request("no_such_database_e2e.bad", ["id"], row), timeout=10)
        err = self.assertRpcCode(self.stub.Insert, grpc.StatusCode.INVALID_ARGUMENT,
                                 e2e.rows_request(self.table("bad"), ["id", "no_such_column"],
                                                  [[V.u(1), V.u(2)]]), timeout=10)
        self.assertIn("no_such_column", err.details())
        # A row with the wrong number of values.
        self.assertRpcCode(self.stub.Insert, grpc.StatusCode.INVALID_ARGUMENT,
                           e2e.rows_request(self.table("bad"), ["id", "u8"], [[V.u(300)]]), timeout=10)
        # A malformed table name.
        self.assertRpcCode(self.stub.Insert, grpc.StatusCode.INVALID_ARGUMENT,
                           e2e.rows_request("a.b.c", ["id"], row), timeout=10)

    def test_stream_reports_bad_request_and_goes_on(self):
        rows_bad = [self.good_row(300), self.good_row(301)]
        rows_bad[1][1] = V.u(1000)
        reqs = [e2e.rows_request(self.table("bad"), self.COLUMNS, rows_bad, sequence=1),
                e2e.rows_request(self.table("bad"), self.COLUMNS, [self.good_row(310)], sequence=2),
                e2e.rows_request(self.table("no_such_table"), ["id"], [[V.u(1)]], sequence=3)]
        acks = {a.sequence: a for a in self.stub.InsertStream(iter(reqs), timeout=30)}
        self.assertEqual(sorted(acks), [1, 2, 3])
        self.assertEqual(acks[1].status.code, 3)
        self.assertEqual(acks[1].status.value_error.row_index, 1)
        self.assertEqual(acks[1].status.value_error.column, "u8")
        self.assertEqual(acks[1].status.value_error.value, "1000")
        self.assertEqual(acks[1].rows, 0)
        self.assertEqual(acks[2].status.code, 0)
        self.assertEqual(acks[2].rows, 1)
        self.assertEqual(acks[3].status.code, 5)
        self.assertEqual(self.ch.scalar(f"SELECT count() FROM {self.table('bad')} WHERE id >= 300 AND id < 400"),
                         "1")

    def test_nested_elements_of_different_sizes_fail_only_their_request(self):
        """ClickHouse refuses a whole INSERT whose Nested elements (`n.a`, `n.b`) differ in size in
        a row: chgate refuses that request alone, so the requests batched with it (committed,
        accepted alike) still land."""
        import grpc

        pb = self.pb
        self.ch.recreate_table("nested", "id UInt32, n Nested(a UInt8, b String)")
        table = self.table("nested")
        cols = ["id", "n.a", "n.b"]

        def row(i, a, b):
            return [V.u(i), V.arr(V.u(x) for x in a), V.arr(V.s(x) for x in b)]

        modes = {1: pb.ACK_MODE_COMMITTED, 2: pb.ACK_MODE_COMMITTED, 3: pb.ACK_MODE_ACCEPTED,
                 4: pb.ACK_MODE_COMMITTED}
        reqs = [e2e.rows_request(table, cols, [row(1, [1], ["a"])], sequence=1, ack_mode=modes[1]),
                e2e.rows_request(table, cols, [row(2, [1], ["a"]), row(20, [1, 2], ["a"])],
                                 sequence=2, ack_mode=modes[2]),
                e2e.rows_request(table, cols, [row(3, [], [])], sequence=3, ack_mode=modes[3]),
                e2e.rows_request(table, cols, [row(4, [5, 6], ["x", "y"])], sequence=4,
                                 ack_mode=modes[4])]
        acks = {a.sequence: a for a in self.stub.InsertStream(iter(reqs), timeout=30)}
        self.assertEqual(sorted(acks), [1, 2, 3, 4])
        self.assertEqual(acks[2].status.code, 3, acks[2])
        self.assertIn("n.a", acks[2].status.message)
        self.assertEqual(acks[2].status.value_error.row_index, 1)
        self.assertEqual(acks[2].status.value_error.column, "n.b")
        for seq in (1, 3, 4):
            self.assertEqual(acks[seq].status.code, 0, acks[seq])
        # The typed-block path: offsets [2] against [1] in its one row.
        block = pb.Block(rows=1, columns=[
            pb.Column(name="id", type="UInt32", uint64s=[30]),
            pb.Column(name="n.a", type="Array(UInt8)", offsets=[2],
                      children=[pb.Column(uint64s=[1, 2])]),
            pb.Column(name="n.b", type="Array(String)", offsets=[1],
                      children=[pb.Column(strings=[b"a"])])])
        err = self.assertRpcCode(self.stub.Insert, grpc.StatusCode.INVALID_ARGUMENT,
                                 pb.InsertRequest(table=table, block=block), timeout=10)
        self.assertIn("Nested structure 'n'", err.details())
        self.stub.Insert(e2e.rows_request(table, cols, [row(5, [7], ["z"])]), timeout=30)
        self.assertEqual(self.query_lines(f"SELECT id, n.a, n.b FROM {table} ORDER BY id"),
                         ["1\t[1]\t['a']", "3\t[]\t[]", "4\t[5,6]\t['x','y']", "5\t[7]\t['z']"])

    def test_an_unparseable_message_ends_the_stream_after_the_acks_owed(self):
        """docs/api.md: a message that is not an InsertRequest ends InsertStream with
        INVALID_ARGUMENT, after the acks of the requests before it (committed, with their rows in
        the table)."""
        import grpc

        table = self.table("bad")
        ids = [60, 61, 62]
        good = [e2e.rows_request(table, self.COLUMNS,
                                 [[V.u(i), V.u(1), V.s("ab"), V.s("a"), V.s("2020-01-01"), V.s("s")]],
                                 sequence=n + 1).SerializeToString()
                for n, i in enumerate(ids)]
        garbage = b"\x0a\x64abc"  # a length-delimited field that promises 100 bytes and has 3
        call = self.chgate.channel().stream_stream(
            "/chgate.v1.Ingest/InsertStream", request_serializer=lambda b: b,
            response_deserializer=self.pb.InsertAck.FromString)
        acks = []
        with self.assertRaises(grpc.RpcError) as cm:
            for ack in call(iter(good + [garbage]), timeout=30):
                acks.append(ack)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("chgate.v1.InsertRequest", cm.exception.details())
        self.assertEqual(sorted(a.sequence for a in acks), [1, 2, 3])
        for a in acks:
            self.assertEqual(a.status.code, 0, a)
        got = self.query_lines(f"SELECT id FROM {table} WHERE id IN (60, 61, 62) ORDER BY id")
        self.assertEqual(got, ["60", "61", "62"])


class AckedQueryIdTest(ChgateTestCase):
    """An ACCEPTED ack names the query id of the INSERT that carries its rows (the API says it is
    known at the ack): ClickHouse's query_log has that INSERT, into that table, with those rows.
    chgate connects as `audited`, whose profile logs every query."""

    CHGATE_ARGS = ["--batch-max-delay=50ms", "--user=audited"]

    def test_an_accepted_ack_names_the_insert_clickhouse_logged(self):
        pb = self.pb
        self.ch.recreate_table("acked_id", "id UInt64, s String")
        table = self.table("acked_id")
        reqs = [e2e.rows_request(table, ["id", "s"], [[V.u(i), V.s("x")]], sequence=i,
                                 ack_mode=pb.ACK_MODE_ACCEPTED) for i in range(1, 4)]
        acks = {a.sequence: a for a in self.stub.InsertStream(iter(reqs), timeout=30)}
        self.assertEqual(sorted(acks), [1, 2, 3])
        ids = set()
        for a in acks.values():
            self.assertEqual(a.status.code, 0, a)
            self.assertEqual(a.ack_mode, pb.ACK_MODE_ACCEPTED)
            self.assertRegex(a.query_id, r"^chgate-[0-9a-f]{32}$")
            ids.add(a.query_id)
        deadline = time.monotonic() + 30
        while self.query_lines(f"SELECT count() FROM {table}") != ["3"]:
            self.assertLess(time.monotonic(), deadline, "the accepted rows did not land")
            time.sleep(0.1)
        self.ch.query("SYSTEM FLUSH LOGS")
        quoted = ", ".join(f"'{i}'" for i in sorted(ids))
        logged = self.query_lines(
            "SELECT query_id, sum(written_rows) FROM system.query_log WHERE type = 2 AND "
            f"query_id IN ({quoted}) AND position(query, 'acked_id') > 0 GROUP BY query_id")
        self.assertEqual(sorted(line.split("\t")[0] for line in logged), sorted(ids), logged)
        self.assertEqual(sum(int(line.split("\t")[1]) for line in logged), 3, logged)


# ---------------------------------------------------------------------------------------------
# 3. Concurrent streams
# ---------------------------------------------------------------------------------------------

PAYLOAD_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789 üñ✓'\\\t"


def payload(rng, n_max=40):
    return "".join(rng.choice(PAYLOAD_CHARS) for _ in range(rng.randint(0, n_max)))


class ConcurrentStreamsTest(ChgateTestCase):
    """Case 3: 16 concurrent InsertStreams into 4 tables; no row lost or duplicated."""

    STREAMS = 16
    TABLES = 4
    REQUESTS_PER_STREAM = 150

    def test_sixteen_streams_four_tables(self):
        for t in range(self.TABLES):
            self.ch.recreate_table(f"conc_{t}", "id UInt64, stream UInt16, payload String")
        expected = {t: [] for t in range(self.TABLES)}
        plans = []
        for s in range(self.STREAMS):
            rng = random.Random(s)
            reqs = []
            for k in range(self.REQUESTS_PER_STREAM):
                t = (s + k) % self.TABLES
                n = rng.randint(1, 5)
                rows = []
                for r in range(n):
                    row_id = s * 1_000_000 + k * 10 + r
                    p = payload(rng)
                    rows.append([V.u(row_id), V.u(s), V.s(p)])
                    expected[t].append((row_id, s, p))
                reqs.append(e2e.rows_request(self.table(f"conc_{t}"), ["id", "stream", "payload"], rows,
                                             sequence=k))
            plans.append(reqs)
        started = time.monotonic()
        drivers = [e2e.StreamDriver(self.stub, iter(reqs), timeout=120).start() for reqs in plans]
        for d in drivers:
            self.assertTrue(d.join(150), "a stream did not finish")
        elapsed = time.monotonic() - started
        for s, (d, reqs) in enumerate(zip(drivers, plans)):
            self.assertEqual(d.final_code.name, "OK", f"stream {s}: {d.final_details}")
            self.assertEqual(d.extra_acks, [], f"stream {s}: acks for unknown or repeated sequences")
            self.assertEqual(sorted(d.acks), list(range(len(reqs))), f"stream {s}: missing acks")
            for k, ack in d.acks.items():
                self.assertEqual(ack.status.code, 0, f"stream {s} seq {k}: {ack.status}")
                self.assertEqual(ack.rows, len(reqs[k].rows.rows))
                self.assertEqual(ack.ack_mode, self.pb.ACK_MODE_COMMITTED)
                self.assertTrue(ack.query_id)
        total = 0
        for t in range(self.TABLES):
            rows = sorted(expected[t])
            total += len(rows)
            got = self.ch.scalar(f"SELECT count(), sum(id), uniqExact(id), sum(length(payload)) "
                                 f"FROM {self.table(f'conc_{t}')}")
            want = f"{len(rows)}\t{sum(r[0] for r in rows)}\t{len(rows)}\t" \
                   f"{sum(len(r[2].encode()) for r in rows)}"
            self.assertEqual(got, want, f"conc_{t}: count, sum(id), uniqExact(id), sum(length(payload))")
            lines = self.query_lines(f"SELECT id, stream, payload FROM {self.table(f'conc_{t}')} ORDER BY id")
            self.assertEqual(lines, [f"{i}\t{s}\t{tsv_escape(p)}" for i, s, p in rows], f"conc_{t} contents")
        report(f"concurrent streams: {self.STREAMS} streams, {self.STREAMS * self.REQUESTS_PER_STREAM} "
               f"requests, {total} rows in {elapsed:.2f}s; every ack OK, exactly one per sequence, "
               f"tables match row for row")


# ---------------------------------------------------------------------------------------------
# 4. Deadlines
# ---------------------------------------------------------------------------------------------

class DeadlineTest(ChgateTestCase):
    """Case 4: deadlines. A long --batch-max-delay shows the early flush a deadline forces."""

    CHGATE_ARGS = ["--batch-max-delay=5s"]

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.ch.recreate_table("deadline", "id UInt64, s String")

    def insert(self, ids, timeout):
        return self.stub.Insert(e2e.rows_request(self.table("deadline"), ["id", "s"],
                                                 [[V.u(i), V.s("x")] for i in ids]), timeout=timeout)

    def count(self, lo, hi):
        return int(self.ch.scalar(f"SELECT count() FROM {self.table('deadline')} WHERE id >= {lo} AND id < {hi}"))

    def test_1_tiny_deadline(self):
        import grpc

        try:
            self.insert([1, 2, 3], timeout=0.001)
            outcome = "OK"
            self.assertEqual(self.count(1, 4), 3, "acked OK but the rows are not in the table")
        except grpc.RpcError as e:
            self.assertEqual(e.code(), grpc.StatusCode.DEADLINE_EXCEEDED, e.details())
            outcome = "DEADLINE_EXCEEDED"
            self.insert([4], timeout=3.0)  # flushes whatever the 1 ms call may have buffered
            outcome += f"; its rows in the table afterwards: {self.count(1, 4)} of 3"
        report(f"1 ms deadline: {outcome}")

    def test_2_deadline_forces_early_flush(self):
        import grpc

        started = time.monotonic()
        try:
            resp = self.insert([10, 11], timeout=1.0)
            self.assertEqual(resp.rows, 2)
            outcome = "OK"
        except grpc.RpcError as e:
            # chgate flushes 100 ms before the deadline; a slow INSERT (a sanitizer build, a busy
            # machine) can miss it. The flush must still have started long before the 5 s delay.
            self.assertEqual(e.code(), grpc.StatusCode.DEADLINE_EXCEEDED, e.details())
            outcome = "DEADLINE_EXCEEDED"
        elapsed = time.monotonic() - started
        self.assertTrue(e2e.wait_until(lambda: self.count(10, 12) == 2, timeout=2.5, interval=0.05),
                        "the rows were not flushed before --batch-max-delay")
        committed_after = time.monotonic() - started
        self.assertLess(committed_after, 4.0)
        report(f"1 s deadline with --batch-max-delay=5s: {outcome} after {elapsed * 1000:.0f} ms; rows "
               f"visible after {committed_after * 1000:.0f} ms")

    def test_3_deadline_while_clickhouse_paused(self):
        import grpc

        self.insert([20], timeout=2)  # a warm connection and a cached header
        with e2e.PausedClickHouse(self.ch):
            started = time.monotonic()
            err = self.assertRpcCode(self.insert, grpc.StatusCode.DEADLINE_EXCEEDED, [21, 22], timeout=1.0)
            elapsed = time.monotonic() - started
            self.assertLess(elapsed, 1.5, err.details())
        report(f"1 s deadline with ClickHouse paused: DEADLINE_EXCEEDED after {elapsed * 1000:.0f} ms")
        # chgate recovers once ClickHouse is back; the timed-out rows may or may not be committed.
        # The deadline outlives the 5 s batch delay: with 5 s exactly, success hung on the flush
        # made 100 ms before the deadline, which a loaded machine missed once (test_2 covers that
        # early flush, with the same tolerance).
        resp = self.insert([30], timeout=8)
        self.assertEqual(resp.rows, 1)
        late = e2e.wait_until(lambda: self.count(21, 23) == 2, timeout=5, interval=0.2)
        report(f"rows of the timed-out insert committed after ClickHouse resumed: {bool(late)}")


# ---------------------------------------------------------------------------------------------
# 5. Backpressure
# ---------------------------------------------------------------------------------------------

class BackpressureTest(ChgateTestCase):
    """Case 5: ClickHouse paused, a 1 MiB buffer: streams stop being read, unary inserts fail with
    RESOURCE_EXHAUSTED, health "buffer" turns NOT_SERVING while "readiness" stays SERVING, memory
    stays bounded; nothing acked is lost."""

    BUDGET = 1 * MiB
    CHGATE_ARGS = [f"--memory-budget={BUDGET}", "--max-message-bytes=256KiB", "--batch-max-bytes=256KiB",
                   "--batch-max-delay=50ms"]
    ROWS_PER_REQUEST = 16
    PAYLOAD_BYTES = 1000
    # The bound on chgate's RSS growth while ClickHouse is stopped: the buffer itself (<= budget,
    # including the batch in flight), the same rows once more while a flush encodes and compresses
    # them, and one converted request per stream waiting for room: together below 3x the budget.
    # 64 MiB is a fixed allowance for what does not scale with the data: gRPC's own buffers (a
    # stream that is not read still fills its HTTP/2 window), completion queues, thread stacks and
    # allocator arenas.
    RSS_BOUND = 3 * BUDGET + 64 * MiB

    def requests(self, table, stream):
        k = 0
        while True:
            rows = []
            for r in range(self.ROWS_PER_REQUEST):
                row_id = stream * 10_000_000 + k * 100 + r
                rows.append([V.u(row_id), V.s(("%08d" % row_id) + "x" * (self.PAYLOAD_BYTES - 8))])
            yield e2e.rows_request(table, ["id", "payload"], rows, sequence=k)
            k += 1

    def run_paused(self, table_name, streams, check_unary=True):
        """Pauses ClickHouse, streams from `streams` producers until every write blocks (or RSS
        passes RSS_BOUND), checks readiness and a unary insert, resumes ClickHouse, drains the
        streams and checks that every acked row is in the table. Returns the measurements."""
        import grpc

        table = self.table(table_name)
        self.ch.recreate_table(table_name, "id UInt64, payload String")
        # Warm up: the table's header is cached and a connection is open.
        self.stub.Insert(e2e.rows_request(table, ["id", "payload"], [[V.u(1), V.s("warm")]]), timeout=30)
        time.sleep(0.5)
        m = {"idle_rss": self.chgate.memory_kib()["VmRSS"] * 1024, "streams": streams}
        request_bytes = self.ROWS_PER_REQUEST * self.PAYLOAD_BYTES
        drivers, samples = [], []
        try:
            with e2e.PausedClickHouse(self.ch) as paused:
                drivers = [e2e.StreamDriver(self.stub, self.requests(table, s)).start() for s in range(streams)]

                def total_sent():
                    return sum(d.counts()[0] for d in drivers)

                # Writes stop: the number of requests handed to gRPC stays the same for 2 s.
                plateau_since, last, started = None, -1, time.monotonic()
                m["over_bound"] = False
                while time.monotonic() - started < 30:
                    now_sent = total_sent()
                    samples.append(self.chgate.memory_kib()["VmRSS"] * 1024)
                    if samples[-1] - m["idle_rss"] > self.RSS_BOUND:
                        m["over_bound"] = True
                        break
                    if now_sent != last:
                        last, plateau_since = now_sent, time.monotonic()
                    elif time.monotonic() - plateau_since >= 2.0:
                        break
                    time.sleep(0.1)
                m["blocked_after"] = time.monotonic() - started
                m["sent_while_paused"] = total_sent()
                m["payload_while_paused"] = m["sent_while_paused"] * request_bytes
                m["plateau"] = not m["over_bound"] and time.monotonic() - plateau_since >= 2.0
                m["acks_while_paused"] = sum(d.counts()[1] for d in drivers)
                m["buffered_bytes"] = e2e.metric_sum(self.chgate.scrape(), "chgate_buffered_bytes")
                if check_unary and not m["over_bound"]:
                    # The buffer's health name turns NOT_SERVING (refreshed every 500 ms); the pod's
                    # readiness, "" and liveness stay SERVING: a slow ClickHouse must not take the
                    # application out of its Services.
                    m["buffer"] = e2e.wait_until(
                        lambda: self.chgate.health("buffer") == "NOT_SERVING", timeout=5, interval=0.1)
                    m["readiness"] = self.chgate.health("readiness")
                    m["overall"] = self.chgate.health("")
                    m["liveness"] = self.chgate.health("liveness")
                    # A unary insert with a short deadline fails with RESOURCE_EXHAUSTED, before it.
                    t = time.monotonic()
                    try:
                        self.stub.Insert(e2e.rows_request(table, ["id", "payload"], [[V.u(2), V.s("unary")]]),
                                         timeout=1.5)
                        m["unary"] = "OK"
                    except grpc.RpcError as e:
                        m["unary"] = e.code().name
                    m["unary_elapsed"] = time.monotonic() - t
                    for _ in range(10):
                        samples.append(self.chgate.memory_kib()["VmRSS"] * 1024)
                        time.sleep(0.1)
                    m["sent_later"] = total_sent()
                mem = self.chgate.memory_kib()
                m["hwm"] = mem["VmHWM"] * 1024
                samples.append(mem["VmRSS"] * 1024)
                m["paused_for"] = time.monotonic() - paused.paused_at
            # ClickHouse resumed: everything drains.
            m["peak_rss"] = max(samples)
            m["growth"] = m["peak_rss"] - m["idle_rss"]
            for d in drivers:
                d.stop()
            for d in drivers:
                self.assertTrue(d.join(120), "a stream did not finish after ClickHouse resumed")
        finally:
            for d in drivers:
                d.stop()
                if not d.join(1):
                    d.cancel()
        present = set(int(x) for x in self.query_lines(f"SELECT id FROM {table}"))
        m["acked"], m["failed"], missing = 0, {}, []
        for s, d in enumerate(drivers):
            self.assertEqual(d.final_code.name, "OK", d.final_details)
            self.assertEqual(d.extra_acks, [])
            self.assertEqual(len(d.acks), len(d.sent), f"stream {s}: unacknowledged requests")
            for seq, ack in d.acks.items():
                if ack.status.code != 0:
                    m["failed"][ack.status.code] = m["failed"].get(ack.status.code, 0) + 1
                    continue
                m["acked"] += 1
                missing += [i for i in request_ids(d.sent[seq]) if i not in present]
        self.assertEqual(missing[:10], [], f"{len(missing)} acked rows are missing")
        report(f"backpressure, {streams} stream(s), budget {self.BUDGET // 1024} KiB: "
               f"{m['sent_while_paused']} requests ({m['payload_while_paused'] / MiB:.1f} MiB of payload) "
               f"written before {'writes blocked' if m['plateau'] else 'giving up'} "
               f"({m['blocked_after']:.1f}s); chgate_buffered_bytes {m['buffered_bytes']:.0f}; "
               + (f"unary insert {m['unary']} after {m['unary_elapsed'] * 1000:.0f} ms; " if "unary" in m else "")
               + f"RSS idle "
               f"{m['idle_rss'] / MiB:.1f} MiB, peak {m['peak_rss'] / MiB:.1f} MiB (VmHWM {m['hwm'] / MiB:.1f}),"
               f" growth {m['growth'] / MiB:.1f} MiB vs bound {self.RSS_BOUND / MiB:.0f} MiB; ClickHouse "
               f"paused {m['paused_for']:.1f}s; afterwards {m['acked']} acked OK (all rows present), "
               f"failed {m['failed']}")
        return m

    def test_backpressure_with_clickhouse_paused(self):
        m = self.run_paused("bp", streams=1)
        self.assertTrue(m["plateau"], "the stream never stopped being written while ClickHouse was stopped")
        self.assertEqual(m["acks_while_paused"], 0, "acks arrived while ClickHouse was stopped")
        self.assertTrue(m["buffer"], 'health "buffer" stayed SERVING with the buffer full')
        self.assertEqual(m["readiness"], "SERVING", "the pod's readiness followed the buffer")
        self.assertEqual(m["overall"], "SERVING")
        self.assertEqual(m["liveness"], "SERVING")
        self.assertEqual(m["unary"], "RESOURCE_EXHAUSTED")
        self.assertLess(m["unary_elapsed"], 1.5)
        # "Blocked" is detected by a pause in the writes; a slow (sanitized) server may still let
        # a few small requests through gRPC's 64 KiB stream window afterwards, never more.
        self.assertLessEqual(m["sent_later"] - m["sent_while_paused"], 8,
                             "writes went on while ClickHouse was stopped")
        self.assertLessEqual(m["buffered_bytes"], self.BUDGET)
        if e2e.is_sanitized(CHGATE):
            report("chgate is built with AddressSanitizer: its RSS is reported, not checked")
        else:
            self.assertLess(m["growth"], self.RSS_BOUND)
        self.assertEqual(m["failed"], {}, "requests failed although ClickHouse came back in time")
        self.assertTrue(e2e.wait_until(lambda: self.chgate.health("buffer") == "SERVING", timeout=5),
                        'health "buffer" did not return to SERVING')

    def test_memory_bounded_with_many_streams(self):
        """The same bound with 32 producers: a stream chgate stops reading must not keep flowing
        into gRPC's buffers (BDP probing is off, so each stream's HTTP/2 window stays small)."""
        if e2e.is_sanitized(CHGATE):
            self.skipTest("chgate is built with AddressSanitizer: its RSS says little")
        streams = 32
        m = self.run_paused("bp_many", streams=streams, check_unary=False)
        self.assertLessEqual(m["buffered_bytes"], self.BUDGET)
        self.assertLess(m["growth"], self.RSS_BOUND,
                        f"{streams} streams grew chgate's RSS by {m['growth'] / MiB:.0f} MiB with a "
                        f"{self.BUDGET // 1024} KiB --memory-budget")
        self.assertTrue(m["plateau"])


# ---------------------------------------------------------------------------------------------
# 6. ClickHouse restarted mid-stream
# ---------------------------------------------------------------------------------------------

def paced_requests(table, stream, interval, rows_per_request=5, stop=None):
    """Endless requests with unique ids, one every `interval` seconds."""
    k = 0
    next_at = time.monotonic()
    while stop is None or not stop.is_set():
        delay = next_at - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        next_at += interval
        rows = [[V.u(stream * 10_000_000 + k * 100 + r), V.s(f"s{stream} k{k} r{r}")]
                for r in range(rows_per_request)]
        yield e2e.rows_request(table, ["id", "payload"], rows, sequence=k)
        k += 1


def request_ids(req):
    return [r.values[0].uint64_value for r in req.rows.rows]


class ClickHouseRestartTest(ChgateTestCase):
    """Case 6: ClickHouse restarted while a stream writes: every acked request is in the table."""

    CHGATE_ARGS = ["--batch-max-delay=50ms", "--retry-max-backoff=1s"]

    def test_restart_mid_stream(self):
        self.ch.server_pid()  # skips unless clickhousectl.sh controls this server
        self.ch.recreate_table("restart", "id UInt64, payload String")
        table = self.table("restart")
        drivers = [e2e.StreamDriver(self.stub, paced_requests(table, s, 0.01), timeout=300).start()
                   for s in range(2)]
        try:
            time.sleep(1.5)
            before = sum(d.counts()[1] for d in drivers)
            t = time.monotonic()
            try:
                self.ch.restart()
            finally:
                if self.ch.check_reachable() is not None:
                    self.ch.start()  # never leave the shared server down
            restart_took = time.monotonic() - t
            self.ch.wait_ready()
            time.sleep(2.0)
        finally:
            for d in drivers:
                d.stop()
        for d in drivers:
            self.assertTrue(d.join(120), "a stream did not finish after the restart")
        present = {}
        for line in self.query_lines(f"SELECT id, count() FROM {table} GROUP BY id"):
            i, c = line.split("\t")
            present[int(i)] = int(c)
        acked_ok, failed_codes, missing, ghost = 0, {}, [], 0
        unacked = 0
        for d in drivers:
            self.assertEqual(d.extra_acks, [])
            for seq, req in d.sent.items():
                ack = d.acks.get(seq)
                ids = request_ids(req)
                if ack is None:
                    unacked += 1
                elif ack.status.code == 0:
                    acked_ok += 1
                    missing += [i for i in ids if i not in present]
                else:
                    failed_codes[ack.status.code] = failed_codes.get(ack.status.code, 0) + 1
                    if all(i in present for i in ids):
                        ghost += 1
        total_rows = sum(present.values())
        duplicates = total_rows - len(present)
        report(f"restart: clickhousectl restart took {restart_took:.1f}s; acks OK before it {before}; "
               f"requests acked OK {acked_ok}, failed {failed_codes} (of which {ghost} were committed "
               f"anyway), unacked {unacked}; stream results "
               f"{[d.final_code.name for d in drivers]}; rows in table {total_rows}, distinct ids "
               f"{len(present)}, duplicated rows {duplicates}")
        self.assertEqual(missing[:10], [], f"{len(missing)} rows of acked requests are missing")
        self.assertGreater(acked_ok, 0)
        for d in drivers:
            self.assertIn(d.final_code.name, ("OK", "UNAVAILABLE"), d.final_details)


# ---------------------------------------------------------------------------------------------
# 7. SIGTERM drain
# ---------------------------------------------------------------------------------------------

class HealthWatch:
    """A grpc.health.v1.Health/Watch on chgate's health port, read on a thread: the statuses
    received (ServingStatus numbers) and how the stream ended."""

    def __init__(self, service):
        self.service = service
        self.statuses = []
        self.final = None
        self._thread = None

    def start(self, chgate):
        import grpc

        channel = grpc.insecure_channel(f"127.0.0.1:{chgate.health_port}")
        request = (b"\x0a" + bytes([len(self.service)]) + self.service.encode()) if self.service else b""
        call = channel.unary_stream("/grpc.health.v1.Health/Watch",
                                    request_serializer=lambda b: b,
                                    response_deserializer=lambda b: b)(request, timeout=60)

        def read():
            try:
                for message in call:
                    # HealthCheckResponse: field 1 varint, absent when 0.
                    self.statuses.append(message[1] if len(message) >= 2 else 0)
                self.final = "OK"
            except grpc.RpcError as e:
                self.final = e.code().name

        self._thread = threading.Thread(target=read, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self.statuses and time.monotonic() < deadline:
            time.sleep(0.01)

    def join(self, timeout):
        self._thread.join(timeout)
        return not self._thread.is_alive()


class DrainTest(ChgateTestCase):
    """Case 7: SIGTERM mid-stream: chgate flushes, acks, and exits 0 within the drain timeout (1
    when the drain could not flush everything)."""

    DRAIN = 5.0
    CHGATE_ARGS = ["--batch-max-delay=1s", f"--drain-timeout={int(DRAIN)}s"]
    START_CHGATE = False

    def tearDown(self):
        self.stop_chgate()

    def run_drain(self, table_name, paused=False, watch=None):
        self.start_chgate()
        if watch is not None:
            watch.start(self.chgate)
        self.ch.recreate_table(table_name, "id UInt64, payload String")
        table = self.table(table_name)
        # Warm up: a cached header and an open connection.
        self.stub.Insert(e2e.rows_request(table, ["id", "payload"], [[V.u(0), V.s("warm")]]), timeout=30)
        drivers = [e2e.StreamDriver(self.stub, paced_requests(table, s + 1, 0.005), timeout=120).start()
                   for s in range(2)]
        pause = e2e.PausedClickHouse(self.ch) if paused else None
        try:
            time.sleep(1.3)
            if pause:
                pause.__enter__()
                time.sleep(0.3)
            t = time.monotonic()
            self.chgate.signal(signal.SIGTERM)
            rc = self.chgate.wait(self.DRAIN + 30)
            drain_took = time.monotonic() - t
        finally:
            if pause:
                pause.resume()
            for d in drivers:
                d.stop()
        for d in drivers:
            self.assertTrue(d.join(30), "a stream did not end after chgate exited")
        log = self.chgate.log_tail()
        self.assertIsNotNone(rc, f"chgate did not exit within {self.DRAIN + 30}s of SIGTERM")
        # It has exited: its exit code is judged here, not again by tearDown.
        chgate, type(self).chgate = self.chgate, None
        chgate.stop()
        if paused:
            # A flush blocked on the paused server may outlive the drain: then chgate says so and
            # exits 1 (its rows' fate is open), else 0.
            self.assertIn(rc, (0, 1), log)
            if rc == 1:
                self.assertIn("exiting 1: the drain did not flush everything", log)
        else:
            self.assertEqual(rc, 0, log)
        if paused:
            time.sleep(1.0)  # ClickHouse may still commit the INSERT it had received when stopped
        present = set(int(x) for x in self.query_lines(f"SELECT id FROM {table}"))
        acked_ok, failed, unacked, missing, unacked_present = 0, {}, 0, [], 0
        for d in drivers:
            self.assertEqual(d.extra_acks, [])
            for seq, req in d.sent.items():
                ack = d.acks.get(seq)
                if ack is None:
                    unacked += 1
                    unacked_present += all(i in present for i in request_ids(req))
                elif ack.status.code == 0:
                    acked_ok += 1
                    missing += [i for i in request_ids(req) if i not in present]
                else:
                    failed[ack.status.code] = failed.get(ack.status.code, 0) + 1
        report(f"drain{' (ClickHouse paused)' if paused else ''}: exit code {rc} after "
               f"{drain_took:.2f}s (drain timeout {self.DRAIN:.0f}s); acked OK {acked_ok}, failed "
               f"{failed}, unacked {unacked} (committed anyway: {unacked_present}); stream results "
               f"{[d.final_code.name for d in drivers]}; "
               f"log: {log.splitlines()[-1] if log else ''}")
        self.assertEqual(missing[:10], [], f"{len(missing)} rows of acked requests are missing")
        return drain_took, acked_ok

    def test_sigterm_mid_stream(self):
        drain_took, acked_ok = self.run_drain("drain")
        self.assertGreater(acked_ok, 0)
        self.assertLess(drain_took, self.DRAIN + 3)

    def test_sigterm_with_a_health_watch_open(self):
        """A grpc.health.v1 Watch (grpc_health_probe -watch, a mesh) sees the drain's NOT_SERVING
        and ends with the listeners; it used to hold the exit until the drain deadline."""
        watch = HealthWatch("readiness")
        drain_took, acked_ok = self.run_drain("drain_watch", watch=watch)
        self.assertGreater(acked_ok, 0)
        self.assertTrue(watch.join(10), "the Watch did not end after chgate exited")
        report(f"health Watch during the drain: statuses {watch.statuses}, ended with "
               f"{watch.final}; exit after {drain_took:.2f}s")
        self.assertEqual(watch.statuses[:1], [1], "SERVING first")
        self.assertIn(2, watch.statuses, "NOT_SERVING once the drain began")
        self.assertEqual(watch.final, "OK")
        self.assertLess(drain_took, self.DRAIN - 2, "the exit waited for the drain deadline")

    def test_sigterm_with_clickhouse_paused(self):
        """The drain deadline bounds the exit even when the flush in flight cannot finish."""
        self.ch.server_pid()
        drain_took, _ = self.run_drain("drain_paused", paused=True)
        self.assertLess(drain_took, self.DRAIN + 3,
                        "chgate outlived its drain deadline while a flush was blocked on ClickHouse")

    def test_accepted_rows_the_drain_cannot_flush_make_the_exit_1_with_their_count(self):
        """Rows acknowledged as ACCEPTED that the drain cannot write (ClickHouse paused) are not
        lost in silence: chgate exits 1 and its last lines count them (docs/configuration.md,
        --drain-timeout)."""
        self.start_chgate()
        self.ch.recreate_table("drain_accepted", "id UInt64, payload String")
        table = self.table("drain_accepted")
        self.stub.Insert(e2e.rows_request(table, ["id", "payload"], [[V.u(0), V.s("warm")]]),
                         timeout=30)
        sent = 0
        with e2e.PausedClickHouse(self.ch):
            for r in range(10):
                rows = [[V.u(1000 + r * 5 + i), V.s("x")] for i in range(5)]
                resp = self.stub.Insert(e2e.rows_request(table, ["id", "payload"], rows,
                                                         ack_mode=self.pb.ACK_MODE_ACCEPTED),
                                        timeout=10)
                self.assertEqual(resp.ack_mode, self.pb.ACK_MODE_ACCEPTED)
                sent += len(rows)
            t = time.monotonic()
            self.chgate.signal(signal.SIGTERM)
            rc = self.chgate.wait(self.DRAIN + 30)
            took = time.monotonic() - t
        log = self.chgate.log_tail()
        chgate, type(self).chgate = self.chgate, None
        chgate.stop()
        self.assertEqual(rc, 1, log)
        self.assertLess(took, self.DRAIN + 3, log)
        line = [ln for ln in log.splitlines() if "exiting 1: the drain did not flush everything" in ln]
        self.assertTrue(line, log)
        counts = dict(re.findall(r"(rows_dropped|rows_in_flight|flushes_in_flight)=(\d+)", line[-1]))
        lost_or_open = int(counts.get("rows_dropped", 0)) + int(counts.get("rows_in_flight", 0))
        report(f"drain with {sent} accepted rows and ClickHouse paused: exit {rc} after {took:.2f}s;"
               f" {line[-1].split('everything', 1)[-1].strip()}")
        # Every accepted row is counted: dropped, or in a flush whose fate ClickHouse decides.
        self.assertEqual(lost_or_open, sent, line[-1])
        self.assertIn("drain finished", log)


# ---------------------------------------------------------------------------------------------
# 8. Health and listeners
# ---------------------------------------------------------------------------------------------

class HealthTest(ChgateTestCase):
    """Case 8: grpc.health.v1 on the health port; the API bound to loopback only."""

    HEALTH_HOST = "0.0.0.0"

    def test_health_services(self):
        import grpc

        for service in ("", "liveness", "readiness", "buffer"):
            self.assertEqual(self.chgate.health(service), "SERVING", service)
        with self.assertRaises(grpc.RpcError) as cm:
            self.chgate.health("no-such-service")
        self.assertEqual(cm.exception.code(), grpc.StatusCode.NOT_FOUND)
        # The API listener answers health checks too.
        self.assertEqual(self.chgate.health("liveness", port=self.chgate.api_port), "SERVING")

    def test_api_is_loopback_only(self):
        import socket

        addr = e2e.non_loopback_ipv4()
        if addr is None:
            self.skipTest("this machine has no non-loopback IPv4 address")
        with self.assertRaises(OSError, msg=f"the API port accepts connections on {addr}"):
            socket.create_connection((addr, self.chgate.api_port), timeout=3).close()
        socket.create_connection((addr, self.chgate.health_port), timeout=3).close()
        self.assertEqual(self.chgate.health("readiness", host=addr), "SERVING")
        report(f"listeners: API refused on {addr}, health on 0.0.0.0 answers there")

    def test_remote_api_needs_opt_in(self):
        import subprocess

        port = e2e.free_ports(1)[0]
        r = subprocess.run([CHGATE, f"--listen=0.0.0.0:{port}", f"--endpoints={self.ch.address}"],
                           capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("--allow-remote-api", r.stderr)

    def test_default_listen_address(self):
        """Without --listen the API binds 127.0.0.1:50051 (checked only when that port is free)."""
        import socket

        probe = socket.socket()
        try:
            probe.bind(("0.0.0.0", 50051))
        except OSError:
            self.skipTest("port 50051 is in use")
        finally:
            probe.close()
        p = e2e.ChgateProcess(CHGATE, self.ch, [], name="default-listen")
        p.command = lambda: [p.binary, f"--health-listen=127.0.0.1:{p.health_port}",
                             f"--metrics-listen=127.0.0.1:{p.metrics_port}",
                             f"--endpoints={self.ch.address}", f"--database={DATABASE}"]
        p.start()
        try:
            socket.create_connection(("127.0.0.1", 50051), timeout=3).close()
            addr = e2e.non_loopback_ipv4()
            if addr is not None:
                with self.assertRaises(OSError):
                    socket.create_connection((addr, 50051), timeout=3).close()
        finally:
            self.assertEqual(p.stop(), 0, p.log_tail())


# ---------------------------------------------------------------------------------------------
# 9. Metrics
# ---------------------------------------------------------------------------------------------


class LivenessTest(unittest.TestCase):
    """docs/configuration.md, --liveness-stall-timeout: a flush thread stuck inside one task (here
    made to hang before its INSERT by the flush_stalled failpoint) turns liveness NOT_SERVING, so
    the kubelet restarts chgate; readiness is not what reports it."""

    def test_a_stuck_flush_turns_liveness_not_serving(self):
        ch = e2e.reachable_clickhouse()
        ch.ensure_database()
        ch.recreate_table("liveness_stuck", "id UInt64")
        stubs = e2e.load_stubs()
        proc = e2e.ChgateProcess(CHGATE, ch, [
            "--batch-max-delay=50ms", "--retry-max-elapsed=1s", "--read-timeout=1s",
            "--liveness-stall-timeout=3s", "--drain-timeout=2s"],
            env={"CHGATE_FAILPOINTS": "flush_stalled=1"}, name="chgate-liveness")
        proc.start()
        try:
            self.assertEqual(proc.health("liveness"), "SERVING")
            import grpc

            with grpc.insecure_channel(proc.api_address) as channel:
                stubs.pb_grpc.IngestStub(channel).Insert(e2e.rows_request(
                    f"{DATABASE}.liveness_stuck", ["id"], [[V.u(1)]],
                    ack_mode=stubs.pb.ACK_MODE_ACCEPTED), timeout=10)
            t = time.monotonic()
            self.assertTrue(e2e.wait_until(lambda: proc.health("liveness") == "NOT_SERVING",
                                           timeout=15), proc.log_tail())
            took = time.monotonic() - t
            log = proc.log_text()
            self.assertIn("failpoint flush_stalled: this thread hangs", log)
            self.assertIn("liveness NOT_SERVING", log)
            report(f"liveness NOT_SERVING {took:.1f}s after the flush hung (stall timeout 3s)")
            self.assertGreater(took, 2.0, "NOT_SERVING before the stall timeout")
        finally:
            proc.kill()


class DualStackTest(ChgateTestCase):
    """Health and metrics on "[::]" (the defaults) answer over IPv6 and IPv4, so probes work on
    IPv6-first clusters as on IPv4 ones."""

    HEALTH_HOST = "[::]"

    @classmethod
    def start_chgate(cls, args=None):
        cls.chgate = e2e.ChgateProcess(CHGATE, cls.ch, args if args is not None else cls.CHGATE_ARGS,
                                       health_host=cls.HEALTH_HOST, name=cls.__name__,
                                       metrics_host="[::]").start()
        cls.channel = cls.chgate.channel()
        cls.stub = cls.stubs.pb_grpc.IngestStub(cls.channel)
        return cls.chgate

    def test_health_and_metrics_over_ipv6_and_ipv4(self):
        for host in ("[::1]", "127.0.0.1"):
            self.assertEqual(self.chgate.health("liveness", host=host), "SERVING", host)
            samples = self.chgate.scrape(host=host)
            self.assertIsNotNone(e2e.metric_sum(samples, "chgate_memory_budget_bytes"), host)
        report("health and metrics on [::] answer on ::1 and 127.0.0.1")

class MetricsTest(ChgateTestCase):
    """Case 9: /metrics after inserts."""

    # One table with a delay of its own: chgate_batch_max_delay_seconds exports it.
    CHGATE_ARGS = ["--batch-max-delay=50ms", f"--table-limits={DATABASE}.metrics:delay=120ms"]

    def test_metrics_after_inserts(self):
        import grpc

        self.ch.recreate_table("metrics", "id UInt64, s String")
        table = self.table("metrics")
        rows_sent = 0
        for k in range(10):
            n = k + 1
            self.stub.Insert(e2e.rows_request(table, ["id", "s"], [[V.u(k * 100 + r), V.s("m")] for r in range(n)]),
                             timeout=30)
            rows_sent += n
        reqs = [e2e.rows_request(table, ["id", "s"], [[V.u(5000 + k), V.s("st")]], sequence=k) for k in range(20)]
        acks = list(self.stub.InsertStream(iter(reqs), timeout=30))
        self.assertTrue(all(a.status.code == 0 for a in acks))
        rows_sent += 20
        with self.assertRaises(grpc.RpcError):
            self.stub.Insert(e2e.rows_request(table, ["id", "s"], [[V.i(-1), V.s("bad")]]), timeout=10)
        samples = self.chgate.scrape()
        ok_requests = e2e.metric_sum(samples, "chgate_ingest_requests_total", table=table, result="ok")
        ok_rows = e2e.metric_sum(samples, "chgate_ingest_rows_total", table=table, result="ok")
        self.assertEqual(ok_requests, 30, "chgate_ingest_requests_total{result=ok}")
        self.assertEqual(ok_rows, rows_sent, "chgate_ingest_rows_total{result=ok}")
        self.assertIsNotNone(e2e.metric_sum(samples, "chgate_ingest_requests_total", result="invalid"),
                             "no result=invalid series after a rejected request")
        flushed = e2e.metric_sum(samples, "chgate_batches_flushed_total", table=table)
        self.assertIsNotNone(flushed)
        self.assertGreater(flushed, 0)
        # The alerts' yardsticks and denominators exist from the table's first batch.
        self.assertEqual(e2e.metric_sum(samples, "chgate_batch_max_delay_seconds", table=table), 0.12)
        self.assertEqual(e2e.metric_sum(samples, "chgate_batches_failed_total", table=table), 0)
        self.assertEqual(e2e.metric_sum(samples, "chgate_batches_flushed_total", table=table, reason="shutdown"), 0)
        sent = e2e.metric_sum(samples, "chgate_clickhouse_sent_bytes_total")
        self.assertIsNotNone(sent)
        self.assertGreater(sent, 0)
        self.assertIsNotNone(e2e.metric_sum(samples, "chgate_pool_connections"), "chgate_pool_connections")
        self.assertEqual(self.ch.scalar(f"SELECT count() FROM {table}"), str(rows_sent))
        names = sorted({n for n, _, _ in samples if n.startswith("chgate_")})
        report(f"metrics: {ok_requests:.0f} ok requests, {ok_rows:.0f} rows, {flushed:.0f} batches, "
               f"{sent:.0f} bytes sent; {len(names)} chgate_ series")


def main():
    global CHGATE
    args, argv = e2e.test_main_args(__doc__.splitlines()[0])
    CHGATE = args.chgate
    stubs = e2e.load_stubs()
    report(f"chgate {CHGATE}; ClickHouse {e2e.ClickHouse().address}; stubs by {stubs.generator}")
    unittest.main(argv=argv, verbosity=2)


if __name__ == "__main__":
    main()
