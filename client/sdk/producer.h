// Producer: one row per call from the application (or a columnar block of rows, SendBlock), one
// request per batch on the wire. Sends to a table are gathered into one InsertRequest of up to
// `batch_rows` rows or `batch_bytes` bytes, or whatever arrived within `linger` of the batch's
// first row, written on one InsertStream; each send's callback (or future) gets the outcome of the
// request that carried its row. For services that emit one event at a time: a gRPC message per
// event costs the application and chgate tens of microseconds each, a coalesced row well under one.
//
//   std::unique_ptr<Producer> producer = *Producer::Create(client.get(), {.batch_rows = 1000});
//   ProducerTable* events = producer->Table("app.events", {"id", "msg"});
//   events->Send(MakeRow({MakeValue(uint64_t{1}), MakeValue("click")}),
//                [](absl::StatusOr<InsertResult> r) { if (!r.ok()) LOG(ERROR) << r.status(); });
//   ...
//   producer->Close();  // sends what is gathered, waits for every outcome
//
// Outcomes:
//   - OK: the request carrying the row was acknowledged in the ack mode asked for; the result
//     is that request's (its `rows` count the whole request).
//   - One bad row never fails another send: chgate refuses a whole request for one row it cannot
//     convert (INVALID_ARGUMENT naming the row); the producer then fails only the send that
//     carried the row, with the server's error (the detail's row_index set to the row's index in
//     that send: 0 for Send, its row in the block for SendBlock), and sends the other sends'
//     rows again as a new request. An error that names no row (unknown table or
//     column, PERMISSION_DENIED, ...) fails every send of the request.
//   - Retries are exactly once: every request carries the idempotency key
//     `<key_prefix><n>` (a random prefix per Producer unless set). A request whose outcome is
//     unknown or temporary (the stream broke, UNAVAILABLE, RESOURCE_EXHAUSTED,
//     DEADLINE_EXCEEDED, ABORTED) is sent again with the same key on a new stream, with backoff,
//     until `retry_timeout`; chgate inserts a key once while it remembers it (see
//     InsertRequest.idempotency_key: 10 minutes; across a restart of chgate only for the
//     persisted ack mode). After `retry_timeout` the request's sends fail with the last error,
//     and the rows may or may not be committed.
//
// Backpressure: rows sent and not yet settled are bounded by `max_pending_rows`. At the bound,
// Send waits for room (`block_when_full`, the default) or fails at once with RESOURCE_EXHAUSTED.
// It also waits while chgate's flow control holds the stream (chgate's buffer full).
//
// Thread-safe: any thread may Send to any table. One thread of the Producer's own writes the
// requests and fires the linger timer; callbacks run on it or on gRPC's callback threads: they
// must be short and must not call Send, Flush or Close.
#pragma once

#include <cstddef>
#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "chgate/v1/chgate.pb.h"
#include "client/sdk/insert_stream.h"
#include "client/sdk/options.h"

namespace chgate::client {

class Client;

struct ProducerOptions {
  // A table's batch is written when it holds this many rows or this many bytes (the rows'
  // encoded size), or when its first row has waited `linger`. A SendBlock is never split: the
  // batch it ends may pass these by that block.
  size_t batch_rows = 1000;
  size_t batch_bytes = 1 << 20;
  absl::Duration linger = absl::Milliseconds(5);
  // Rows sent and not yet settled (gathered, written or waiting for their ack), over all tables.
  size_t max_pending_rows = 1 << 20;
  // At max_pending_rows: wait for room (true) or fail the send with RESOURCE_EXHAUSTED (false).
  bool block_when_full = true;
  // The ack mode of every request (UNSPECIFIED: chgate's --default-ack).
  v1::AckMode ack_mode = v1::ACK_MODE_UNSPECIFIED;
  // Idempotency keys are this prefix and a request number; empty: a random 16-hex-digit prefix
  // and "-". Two producers must not share a prefix.
  std::string key_prefix;
  // How long a request with a temporary failure is sent again before its sends fail.
  absl::Duration retry_timeout = absl::Seconds(60);
  // Backoff between attempts: doubles from the first to the most.
  absl::Duration initial_backoff = absl::Milliseconds(50);
  absl::Duration max_backoff = absl::Seconds(2);
};

// Counters of a Producer, for its owner's metrics.
struct ProducerStats {
  uint64_t sends = 0;            // Send calls that gathered a row
  uint64_t requests = 0;         // requests written (first attempts)
  uint64_t resent_requests = 0;  // attempts after a temporary failure
  uint64_t isolated_rows = 0;    // rows failed alone after the server named them
  uint64_t failed_sends = 0;     // sends that got an error
  uint64_t pending_rows = 0;     // rows sent and not settled, now
};

class Producer;

// The sends to one table with one column list; made by Producer::Table, valid as long as the
// Producer.
class ProducerTable {
 public:
  // Gathers `row` (one value per column of the list) into this table's batch; `done` gets the
  // outcome. The row is encoded on the calling thread and its message freed before Send
  // returns: a batch holds bytes, not messages. Waits or fails at the pending bound
  // (ProducerOptions::block_when_full). After Close, `done` gets FailedPrecondition at once, on
  // this thread.
  void Send(v1::Row row, AckCallback done);
  std::future<absl::StatusOr<InsertResult>> Send(v1::Row row);

  // The columnar variant: gathers every row of `block` (columns in the order of the table's
  // column list, each with its type, as BlockBuilder makes them) into this table's columnar
  // batch, one request Block of up to batch_rows rows from many such sends; `done` gets the
  // outcome of the request that carried them, once for the whole block. The block is checked
  // first (rows, columns, each column's layout for its type): a malformed one fails at once with
  // INVALID_ARGUMENT and never reaches a request. Blocks with other column types than the batch
  // being gathered start a new request. When chgate refuses a request for a row, the send that
  // carried the row fails alone (the detail's row_index is the row's index in that block) and the
  // other sends are sent again. A block of more rows than max_pending_rows fails with
  // INVALID_ARGUMENT; otherwise waits or fails at the pending bound as Send does.
  void SendBlock(v1::Block block, AckCallback done);
  std::future<absl::StatusOr<InsertResult>> SendBlock(v1::Block block);

  const std::string& table() const { return table_; }
  const std::vector<std::string>& columns() const { return columns_; }

 private:
  friend class Producer;
  ProducerTable(Producer* producer, std::string table, std::vector<std::string> columns,
                size_t index)
      : producer_(producer),
        table_(std::move(table)),
        columns_(std::move(columns)),
        index_(index) {}

  Producer* const producer_;
  const std::string table_;
  const std::vector<std::string> columns_;
  const size_t index_;  // in Producer's table list
};

class Producer {
 public:
  // A producer writing through `client` (which must outlive it). InvalidArgument for
  // batch_rows or max_pending_rows of 0, a negative linger or retry timeout, or a batch larger
  // than the pending bound.
  static absl::StatusOr<std::unique_ptr<Producer>> Create(Client* client,
                                                          ProducerOptions options = {});

  Producer(const Producer&) = delete;
  Producer& operator=(const Producer&) = delete;
  // Close()s.
  ~Producer();

  // The sender for `table` (as in InsertRequest.table) with `columns` (as in
  // InsertRequest.columns; empty: every column but MATERIALIZED and ALIAS, in table order). The
  // same (table, columns) gives the same object.
  ProducerTable* Table(std::string_view table, std::vector<std::string> columns = {});

  // Writes every gathered batch now and waits until every send made before has its outcome.
  void Flush();

  // Flushes, then closes the stream; later sends fail with FailedPrecondition. Returns the
  // first error any send got since the Producer was made (OK when none did). Idempotent.
  absl::Status Close();

  ProducerStats stats() const;

 private:
  friend class ProducerTable;
  class Impl;
  explicit Producer(std::unique_ptr<Impl> impl);
  void Send(size_t table, v1::Row row, AckCallback done);

  std::unique_ptr<Impl> impl_;
};

}  // namespace chgate::client
