#!/usr/bin/python3
"""chgate from Python with grpcio (Debian: python3-grpcio).

The stubs are generated from proto/chgate/v1/chgate.proto at run time into a temporary folder,
with protoc and grpc_python_plugin (Debian: protobuf-compiler, protobuf-compiler-grpc), or with
`python3 -m grpc_tools.protoc` where that one understands proto3 `optional` (Debian's
python3-grpc-tools 1.14 bundles a protoc too old for it). Then the example:

  1. creates the example table through Query (when chgate runs with --query-allow-writes=true;
     otherwise the table must exist already, see TABLE_DDL below),
  2. sends rows over an InsertStream and waits for their acks,
  3. sends a columnar Block over the same stream and waits for its ack,
  3b. emits events one at a time and gathers them into one request per batch (Gatherer),
  4. reads this run's rows back with Query and checks that every inserted row is there.

Usage: example.py [ADDRESS] [TABLE]
  ADDRESS  chgate's API, host:port (or CHGATE_ADDRESS; default 127.0.0.1:50051)
  TABLE    "db.table" (or CHGATE_TABLE; default chgate_examples.python_events)
Environment:
  CHGATE_TOKEN      bearer token, sent as `authorization: Bearer ...` (chgate with --api-tokens-file)
  CHGATE_PROTO_DIR  folder holding chgate/v1/chgate.proto (default: proto/ of this checkout)

Exits 0 when every step succeeded, 1 otherwise. Run it with /usr/bin/python3: Debian's grpc
module is not visible to other interpreters.
"""

import os
import queue
import secrets
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc

ADDRESS = (sys.argv[1] if len(sys.argv) > 1 else None) or os.environ.get("CHGATE_ADDRESS") \
    or "127.0.0.1:50051"
TABLE = (sys.argv[2] if len(sys.argv) > 2 else None) or os.environ.get("CHGATE_TABLE") \
    or "chgate_examples.python_events"
PROTO_DIR = Path(os.environ.get("CHGATE_PROTO_DIR") or Path(__file__).resolve().parents[3] / "proto")
CALL_SECONDS = 30
STATUS_TRAILER = "chgate-status-bin"

# `run` tells this run's rows from those of earlier runs in the same table.
TABLE_DDL = (f"CREATE TABLE IF NOT EXISTS {TABLE} (run String, id UInt64, msg String, "
             "at DateTime DEFAULT now()) ENGINE = MergeTree ORDER BY (run, id)")


def load_stubs(out):
    """Generates chgate_pb2 / chgate_pb2_grpc into `out` and imports them."""
    include = None  # google/protobuf/{timestamp,duration,struct}.proto
    for d in ("/usr/include", "/usr/local/include"):
        if Path(d, "google/protobuf/timestamp.proto").is_file():
            include = d
    args = [f"-I{PROTO_DIR}", f"--python_out={out}", f"--grpc_python_out={out}"]
    attempts = []
    protoc, plugin = shutil.which("protoc"), shutil.which("grpc_python_plugin")
    if protoc and plugin and include:
        attempts.append([protoc, f"--plugin=protoc-gen-grpc_python={plugin}", f"-I{include}", *args])
    try:
        import grpc_tools

        attempts.append([sys.executable, "-m", "grpc_tools.protoc",
                         f"-I{Path(grpc_tools.__file__).parent / '_proto'}", *args])
    except ImportError:
        pass
    errors = []
    for cmd in attempts:
        r = subprocess.run([*cmd, "chgate/v1/chgate.proto"], capture_output=True, text=True)
        if r.returncode == 0:
            sys.path.insert(0, str(out))
            from chgate.v1 import chgate_pb2, chgate_pb2_grpc

            return chgate_pb2, chgate_pb2_grpc
        errors.append(f"{cmd[0]}: {r.stderr.strip()}")
    raise SystemExit("python example: cannot generate stubs (install protobuf-compiler, "
                     "protobuf-compiler-grpc and libprotobuf-dev):\n  " + "\n  ".join(errors))


class Gatherer:
    """One row at a time in, one request per batch out: rows are gathered until `max_rows`, or
    until `linger` seconds have passed since the batch's first row, and `send(rows)` gets each
    batch. A request per event costs chgate and the caller tens of microseconds each; a gathered
    row well under one. (Here the linger is looked at when a row arrives; a service whose events
    can pause should also call flush() from a timer. The C++ SDK's Producer does all of it.)"""

    def __init__(self, send, max_rows=500, linger=0.005):
        self.send, self.max_rows, self.linger = send, max_rows, linger
        self.rows, self.first = [], 0.0

    def add(self, row):
        if not self.rows:
            self.first = time.monotonic()
        self.rows.append(row)
        if len(self.rows) >= self.max_rows or time.monotonic() - self.first >= self.linger:
            self.flush()

    def flush(self):
        if self.rows:
            self.send(self.rows)
            self.rows = []


def next_ack(acks):
    ack = next(acks, None)
    if ack is None:
        raise RuntimeError("the stream ended before every request was acknowledged")
    return ack


class Example:
    def __init__(self, pb, pb_grpc):
        self.pb = pb
        self.stub = pb_grpc.IngestStub(grpc.insecure_channel(ADDRESS))
        token = os.environ.get("CHGATE_TOKEN")
        self.metadata = [("authorization", f"Bearer {token}")] if token else []
        self.run = secrets.token_hex(8)

    def describe(self, err):
        """A failed call's code and message, with chgate's structured Status when it sent one."""
        text = f"{err.code().name}: {err.details()}"
        for key, value in err.trailing_metadata() or ():
            if key == STATUS_TRAILER:
                status = self.pb.Status.FromString(value)
                if status.clickhouse_code:
                    text += f" [ClickHouse code {status.clickhouse_code}]"
        return text

    def query(self, sql):
        """Runs one statement; returns (header, blocks, summary)."""
        header, blocks, summary = None, [], None
        for response in self.stub.Query(self.pb.QueryRequest(sql=sql), timeout=CALL_SECONDS,
                                        metadata=self.metadata):
            kind = response.WhichOneof("kind")
            if kind == "header":
                header = response.header
            elif kind == "block":
                blocks.append(response.block)
            elif kind == "summary":
                summary = response.summary
        return header, blocks, summary

    # 1. The table, through Query (DDL needs --query-allow-writes=true on chgate).
    def create_table(self):
        database, dot, _ = TABLE.rpartition(".")
        try:
            if dot:
                self.query(f"CREATE DATABASE IF NOT EXISTS {database}")
            self.query(TABLE_DDL)
            print("table ready")
        except grpc.RpcError as err:
            if err.code() != grpc.StatusCode.PERMISSION_DENIED:
                raise
            print(f"cannot create the table ({self.describe(err)}); using it as it is. "
                  f"It needs:\n  {TABLE_DDL}")

    def check_ack(self, ack, sequence, rows):
        if ack.sequence != sequence:
            raise RuntimeError(f"ack for sequence {ack.sequence}, expected {sequence}")
        if ack.status.code != 0:
            raise RuntimeError(f"request {ack.sequence} failed: code {ack.status.code}: "
                               f"{ack.status.message}")
        if ack.rows != rows or ack.ack_mode != self.pb.ACK_MODE_COMMITTED:
            raise RuntimeError(f"ack {ack.sequence}: {ack.rows} rows, mode {ack.ack_mode}")

    # 2 and 3. Rows, then a Block, on one InsertStream. Returns the number of rows inserted.
    def insert(self):
        pb = self.pb
        columns = ["run", "id", "msg"]
        # The request side of the stream: a generator fed from a queue, so requests can be sent
        # after earlier acks arrived. None half-closes the stream.
        requests = queue.Queue()
        acks = self.stub.InsertStream(iter(requests.get, None), timeout=CALL_SECONDS,
                                      metadata=self.metadata)
        try:
            # 2. Rows: three requests of two rows each, acknowledged once ClickHouse committed
            # them. Acks may come in any order (match them by sequence); here all go to one table.
            next_id = 1
            for seq in (1, 2, 3):
                rows = []
                for _ in range(2):
                    rows.append(pb.Row(values=[pb.Value(string_value=self.run),
                                               pb.Value(uint64_value=next_id),
                                               pb.Value(string_value=f"row {next_id}")]))
                    next_id += 1
                requests.put(pb.InsertRequest(
                    table=TABLE, columns=columns, rows=pb.RowSet(rows=rows), sequence=seq,
                    idempotency_key=f"{self.run}-{seq}",  # makes a resend after a lost stream safe
                    ack_mode=pb.ACK_MODE_COMMITTED))
            by_sequence = {}
            for _ in range(3):
                ack = next_ack(acks)
                by_sequence[ack.sequence] = ack
            for seq in (1, 2, 3):
                ack = by_sequence.get(seq) or pb.InsertAck(sequence=0)
                self.check_ack(ack, seq, 2)
                print(f"ack {seq}: {ack.rows} rows committed (query id {ack.query_id})")

            # 3. A columnar Block of three rows. `run` uses the insert-only `strings` form, `id`
            # and `msg` ClickHouse's own layout: UInt64 as 8 little-endian bytes per row, String as
            # the values concatenated plus the cumulative end offset of each.
            ids = [next_id, next_id + 1, next_id + 2]
            next_id += 3
            msgs = [f"block row {i}".encode() for i in ids]
            offsets, end = [], 0
            for m in msgs:
                end += len(m)
                offsets.append(end)
            block = pb.Block(rows=len(ids), columns=[
                pb.Column(name="run", type="String", strings=[self.run.encode()] * len(ids)),
                pb.Column(name="id", type="UInt64", data=struct.pack(f"<{len(ids)}Q", *ids)),
                pb.Column(name="msg", type="String", data=b"".join(msgs), offsets=offsets),
            ])
            requests.put(pb.InsertRequest(table=TABLE, columns=columns, block=block, sequence=4,
                                          idempotency_key=f"{self.run}-4",
                                          ack_mode=pb.ACK_MODE_COMMITTED))
            ack = next_ack(acks)
            self.check_ack(ack, 4, len(ids))
            print(f"ack 4: {ack.rows} rows committed (block)")

            # 3b. 1,200 events, emitted one at a time, go out as 3 requests (500, 500, 200 rows).
            sent = {}  # sequence -> rows of each gathered request

            def send(rows):
                seq = 5 + len(sent)
                sent[seq] = len(rows)
                requests.put(pb.InsertRequest(
                    table=TABLE, columns=columns, rows=pb.RowSet(rows=rows), sequence=seq,
                    idempotency_key=f"{self.run}-{seq}", ack_mode=pb.ACK_MODE_COMMITTED))

            gatherer = Gatherer(send, max_rows=500, linger=1.0)
            for _ in range(1200):
                gatherer.add(pb.Row(values=[pb.Value(string_value=self.run),
                                            pb.Value(uint64_value=next_id),
                                            pb.Value(string_value=f"event {next_id}")]))
                next_id += 1
            gatherer.flush()
            for _ in sent:
                ack = next_ack(acks)
                self.check_ack(ack, ack.sequence, sent.get(ack.sequence))
            print(f"1200 events in {len(sent)} requests of {list(sent.values())} rows, committed")

            # Half-close; the stream then ends with OK (every request was acknowledged).
            requests.put(None)
            for extra in acks:
                raise RuntimeError(f"unexpected ack {extra.sequence}")
            return next_id - 1
        except BaseException:
            acks.cancel()  # do not leave the stream open until its deadline
            raise

    # 4. Read this run's rows back.
    def read_back(self, inserted):
        header, blocks, summary = self.query(
            f"SELECT id, msg FROM {TABLE} WHERE run = '{self.run}' ORDER BY id")
        rows = []
        for block in blocks:
            ids, msgs = block.columns
            values = struct.unpack(f"<{block.rows}Q", ids.data)
            start = 0
            for i in range(block.rows):
                end = msgs.offsets[i]
                rows.append((values[i], msgs.data[start:end].decode()))
                start = end
        for row_id, msg in rows:
            print(f"  {row_id} {msg}")
        types = ", ".join(f"{c.name} {c.type}" for c in header.columns)
        print(f"{len(rows)} rows ({types}); summary: {summary.rows} rows in {summary.blocks} blocks")
        if len(rows) != inserted or summary.rows != inserted:
            raise RuntimeError(f"read back {len(rows)} rows, inserted {inserted}")
        if [r[0] for r in rows] != list(range(1, inserted + 1)):
            raise RuntimeError(f"read back ids {[r[0] for r in rows]}")


def main():
    with tempfile.TemporaryDirectory(prefix="chgate-example-") as tmp:
        pb, pb_grpc = load_stubs(Path(tmp))
        example = Example(pb, pb_grpc)
        print(f"chgate {ADDRESS}, table {TABLE}, run {example.run}")
        try:
            example.create_table()
            inserted = example.insert()
            example.read_back(inserted)
        except grpc.RpcError as err:
            print(f"python example: FAILED: {example.describe(err)}", file=sys.stderr)
            return 1
        except RuntimeError as err:
            print(f"python example: FAILED: {err}", file=sys.stderr)
            return 1
    print("python example: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
