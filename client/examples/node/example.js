// chgate from Node.js with @grpc/grpc-js and @grpc/proto-loader (the .proto is loaded at run
// time, no generated code):
//
//   1. creates the example table through Query (when chgate runs with --query-allow-writes=true;
//      otherwise the table must exist already, see TABLE_DDL below),
//   2. sends rows over an InsertStream and waits for their acks,
//   3. sends a columnar Block over the same stream and waits for its ack,
//   3b. emits events one at a time and gathers them into one request per batch (Gatherer),
//   4. reads this run's rows back with Query and checks that every inserted row is there.
//
// Usage: node example.js [ADDRESS] [TABLE]
//   ADDRESS  chgate's API, host:port (or CHGATE_ADDRESS; default 127.0.0.1:50051)
//   TABLE    "db.table" (or CHGATE_TABLE; default chgate_examples.node_events)
// Environment:
//   CHGATE_TOKEN      bearer token, sent as `authorization: Bearer ...` (chgate with --api-tokens-file)
//   CHGATE_PROTO_DIR  folder holding chgate/v1/chgate.proto (default: proto/ of this checkout)
//
// Exits 0 when every step succeeded, 1 otherwise.
'use strict';

const crypto = require('node:crypto');
const path = require('node:path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

const address = process.argv[2] || process.env.CHGATE_ADDRESS || '127.0.0.1:50051';
const table = process.argv[3] || process.env.CHGATE_TABLE || 'chgate_examples.node_events';
const protoDir = process.env.CHGATE_PROTO_DIR || path.resolve(__dirname, '../../../proto');
const CALL_SECONDS = 30;

// `run` tells this run's rows from those of earlier runs in the same table.
const TABLE_DDL = `CREATE TABLE IF NOT EXISTS ${table} (run String, id UInt64, msg String, ` +
  'at DateTime DEFAULT now()) ENGINE = MergeTree ORDER BY (run, id)';

// keepCase: the proto's field names (table, idempotency_key, ...) as they are written there.
// longs: String: uint64 values (sequence, rows, offsets) travel as decimal strings, exactly.
// oneofs: a virtual field names the member that is set (QueryResponse.kind: 'header', 'block', ...).
const packageDefinition = protoLoader.loadSync('chgate/v1/chgate.proto', {
  includeDirs: [protoDir],
  keepCase: true,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
});
const chgate = grpc.loadPackageDefinition(packageDefinition).chgate.v1;
const client = new chgate.Ingest(address, grpc.credentials.createInsecure());

function metadata() {
  const md = new grpc.Metadata();
  if (process.env.CHGATE_TOKEN) md.add('authorization', `Bearer ${process.env.CHGATE_TOKEN}`);
  return md;
}

function deadline() {
  return new Date(Date.now() + CALL_SECONDS * 1000);
}

function describe(err) {
  const code = Object.keys(grpc.status).find((k) => grpc.status[k] === err.code) || err.code;
  return `${code}: ${err.details || err.message}`;
}

// Runs one statement; resolves with { header, blocks, summary }.
function query(sql) {
  return new Promise((resolve, reject) => {
    const result = { header: null, blocks: [], summary: null };
    const call = client.Query({ sql }, metadata(), { deadline: deadline() });
    call.on('data', (response) => {
      if (response.kind === 'header') result.header = response.header;
      else if (response.kind === 'block') result.blocks.push(response.block);
      else if (response.kind === 'summary') result.summary = response.summary;
    });
    call.on('error', reject);
    call.on('end', () => resolve(result));
  });
}

// An InsertStream whose send() resolves with the ack of that request (matched by sequence).
function openInsertStream() {
  const pending = new Map();
  const call = client.InsertStream(metadata(), { deadline: deadline() });
  let ended = null;
  const done = new Promise((resolve, reject) => {
    call.on('data', (ack) => {
      const waiter = pending.get(ack.sequence);
      if (!waiter) return reject(new Error(`ack for unknown sequence ${ack.sequence}`));
      pending.delete(ack.sequence);
      const status = ack.status;
      if (status && status.code !== 0) {
        waiter.reject(new Error(`request ${ack.sequence} failed: code ${status.code}: ${status.message}`));
      } else {
        waiter.resolve(ack);
      }
    });
    call.on('error', (err) => {
      ended = err;
      for (const waiter of pending.values()) waiter.reject(err);
      pending.clear();
      reject(err);
    });
    call.on('end', resolve);
  });
  done.catch(() => {}); // reported through send() or close()
  return {
    send(request) {
      if (ended) return Promise.reject(ended);
      return new Promise((resolve, reject) => {
        pending.set(String(request.sequence), { resolve, reject });
        call.write(request);
      });
    },
    // Half-closes the stream and waits until chgate ends it (OK once every request is acked).
    close() {
      call.end();
      return done;
    },
    // Abandons the stream (requests without an ack may or may not be committed).
    cancel() {
      call.cancel();
    },
  };
}

function checkAck(ack, rows) {
  if (ack.rows !== String(rows)) throw new Error(`ack ${ack.sequence}: ${ack.rows} rows, expected ${rows}`);
  if (ack.ack_mode !== 'ACK_MODE_COMMITTED') throw new Error(`ack ${ack.sequence}: ${ack.ack_mode}`);
}

// A String column in the Block layout: values concatenated in `data`, cumulative end offsets.
function stringColumn(name, values) {
  const parts = values.map((v) => Buffer.from(v, 'utf8'));
  const offsets = [];
  let end = 0;
  for (const p of parts) {
    end += p.length;
    offsets.push(String(end));
  }
  return { name, type: 'String', data: Buffer.concat(parts), offsets };
}

// A UInt64 column: 8 bytes per row, little-endian.
function uint64Column(name, values) {
  const data = Buffer.alloc(8 * values.length);
  values.forEach((v, i) => data.writeBigUInt64LE(BigInt(v), 8 * i));
  return { name, type: 'UInt64', data };
}

// Reads rows of (UInt64, String) result columns out of a Block.
function readRows(block) {
  const [ids, msgs] = block.columns;
  const rows = [];
  for (let i = 0; i < Number(block.rows); i++) {
    const start = i === 0 ? 0 : Number(msgs.offsets[i - 1]);
    rows.push({
      id: ids.data.readBigUInt64LE(8 * i),
      msg: msgs.data.subarray(start, Number(msgs.offsets[i])).toString('utf8'),
    });
  }
  return rows;
}

// One row at a time in, one request per batch out: rows are gathered until `maxRows`, or until
// `lingerMs` has passed since the batch's first row (a timer sends it then), and `send(rows)`
// gets each batch. A request per event costs chgate and the caller tens of microseconds each; a
// gathered row well under one.
class Gatherer {
  constructor(send, { maxRows = 500, lingerMs = 5 } = {}) {
    Object.assign(this, { send, maxRows, lingerMs, rows: [], timer: null });
  }

  add(row) {
    this.rows.push(row);
    if (this.rows.length >= this.maxRows) this.flush();
    else if (this.timer === null) this.timer = setTimeout(() => this.flush(), this.lingerMs);
  }

  flush() {
    clearTimeout(this.timer);
    this.timer = null;
    if (this.rows.length > 0) this.send(this.rows.splice(0));
  }
}

// Steps 2 and 3: rows, then a Block, on one InsertStream. Returns the number of rows inserted
// (ids 1..n of this run).
async function insert(stream, run) {
  const columns = ['run', 'id', 'msg'];

  // 2. Rows: three requests of two rows each, acknowledged once ClickHouse committed them.
  const rowAcks = [];
  let id = 0;
  for (let seq = 1; seq <= 3; seq++) {
    const rows = [];
    for (let r = 0; r < 2; r++) {
      id++;
      rows.push({ values: [{ string_value: run }, { uint64_value: String(id) }, { string_value: `row ${id}` }] });
    }
    rowAcks.push(stream.send({
      table,
      columns,
      rows: { rows },
      sequence: String(seq),
      idempotency_key: `${run}-${seq}`, // makes a resend after a lost stream safe
      ack_mode: 'ACK_MODE_COMMITTED',
    }));
  }
  for (const ack of await Promise.all(rowAcks)) {
    checkAck(ack, 2);
    console.log(`ack ${ack.sequence}: ${ack.rows} rows committed (query id ${ack.query_id})`);
  }

  // 3. A columnar Block of three rows. `run` uses the insert-only `strings` form, `id` and `msg`
  // ClickHouse's own layout.
  const blockIds = [id + 1, id + 2, id + 3];
  id += 3;
  const blockAck = await stream.send({
    table,
    columns,
    block: {
      rows: String(blockIds.length),
      columns: [
        { name: 'run', type: 'String', strings: blockIds.map(() => Buffer.from(run)) },
        uint64Column('id', blockIds),
        stringColumn('msg', blockIds.map((i) => `block row ${i}`)),
      ],
    },
    sequence: '4',
    idempotency_key: `${run}-4`,
    ack_mode: 'ACK_MODE_COMMITTED',
  });
  checkAck(blockAck, blockIds.length);
  console.log(`ack ${blockAck.sequence}: ${blockAck.rows} rows committed (block)`);

  // 3b. 1,200 events, emitted one at a time, go out as 3 requests (500, 500, 200 rows).
  const gathered = [];
  const gatherer = new Gatherer((rows) => {
    const seq = 5 + gathered.length;
    gathered.push(stream.send({
      table,
      columns,
      rows: { rows },
      sequence: String(seq),
      idempotency_key: `${run}-${seq}`,
      ack_mode: 'ACK_MODE_COMMITTED',
    }).then((ack) => {
      checkAck(ack, rows.length);
      return rows.length;
    }));
  }, { maxRows: 500, lingerMs: 1000 });
  for (let n = 0; n < 1200; n++) {
    id++;
    gatherer.add({ values: [{ string_value: run }, { uint64_value: String(id) }, { string_value: `event ${id}` }] });
  }
  gatherer.flush();
  const sizes = await Promise.all(gathered);
  console.log(`1200 events in ${sizes.length} requests of [${sizes.join(', ')}] rows, committed`);
  await stream.close();
  return id;
}

async function main() {
  const run = crypto.randomBytes(8).toString('hex');
  console.log(`chgate ${address}, table ${table}, run ${run}`);

  // 1. The table, through Query (DDL needs --query-allow-writes=true on chgate).
  const dot = table.lastIndexOf('.');
  try {
    if (dot > 0) await query(`CREATE DATABASE IF NOT EXISTS ${table.slice(0, dot)}`);
    await query(TABLE_DDL);
    console.log('table ready');
  } catch (err) {
    if (err.code !== grpc.status.PERMISSION_DENIED) throw err;
    console.log(`cannot create the table (${describe(err)}); using it as it is. It needs:\n  ${TABLE_DDL}`);
  }

  const stream = openInsertStream();
  let inserted;
  try {
    inserted = await insert(stream, run);
  } catch (err) {
    stream.cancel(); // do not leave the stream open until its deadline
    throw err;
  }

  // 4. Read this run's rows back.
  const result = await query(`SELECT id, msg FROM ${table} WHERE run = '${run}' ORDER BY id`);
  const types = result.header.columns.map((c) => `${c.name} ${c.type}`).join(', ');
  const rows = result.blocks.flatMap(readRows);
  for (const r of rows) console.log(`  ${r.id} ${r.msg}`);
  console.log(`${rows.length} rows (${types}); summary: ${result.summary.rows} rows in ` +
    `${result.summary.blocks} blocks`);
  if (rows.length !== inserted || result.summary.rows !== String(inserted)) {
    throw new Error(`read back ${rows.length} rows, inserted ${inserted}`);
  }
  rows.forEach((r, i) => {
    if (r.id !== BigInt(i + 1)) throw new Error(`row ${i} has id ${r.id}, expected ${i + 1}`);
  });
  console.log('node example: ok');
}

main()
  .catch((err) => {
    console.error(`node example: FAILED: ${err.code !== undefined ? describe(err) : err.message || err}`);
    process.exitCode = 1;
  })
  .finally(() => client.close());
