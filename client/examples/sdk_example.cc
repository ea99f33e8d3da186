// The SDK example of client/README.md as a program: inserts rows with Insert and InsertStream,
// then reads them back with Query. Usage: chgate_sdk_example [ADDR] [TABLE]; the table needs
// columns id UInt64, msg String and at DateTime (e.g. default.cli_demo of the README).
#include <iostream>
#include <memory>
#include <string>

#include "client/sdk/client.h"

namespace cc = chgate::client;

absl::Status Example(const std::string& addr, const std::string& table) {
  absl::StatusOr<std::unique_ptr<cc::Client>> client =
      cc::Client::Create(addr, {.default_timeout = absl::Seconds(10)});
  if (!client.ok()) return client.status();

  // One request, all or nothing. The idempotency key makes UNAVAILABLE retries safe.
  chgate::v1::InsertRequest request;
  request.set_table(table);
  request.add_columns("id");
  request.add_columns("msg");
  request.set_idempotency_key("example-1");
  cc::AddRow(&request, {cc::MakeValue(uint64_t{3}), cc::MakeValue("from the SDK")});
  absl::StatusOr<cc::InsertResult> inserted = (*client)->Insert(request);
  if (!inserted.ok()) return inserted.status();

  // A producer stream: one future per request, matched by sequence.
  std::unique_ptr<cc::InsertStream> stream = (*client)->OpenInsertStream();
  cc::BlockBuilder block;
  block.AddColumn("id", "UInt64").AppendUInt64(4).AppendUInt64(5);
  block.AddColumn("msg", "String").AppendString("columnar").AppendString("block");
  absl::StatusOr<chgate::v1::Block> built = block.Build();
  if (!built.ok()) return built.status();
  chgate::v1::InsertRequest columnar;
  columnar.set_table(table);
  *columnar.mutable_block() = *std::move(built);
  std::future<absl::StatusOr<cc::InsertResult>> ack = stream->Send(std::move(columnar));
  if (absl::Status closed = stream->Close(); !closed.ok()) return closed;  // waits for acks
  if (absl::StatusOr<cc::InsertResult> acked = ack.get(); !acked.ok()) return acked.status();

  // A streamed SELECT, row by row. (Servers from ClickHouse 22.x also take query parameters:
  // "WHERE id >= {min:UInt64}" with {.parameters = {{"min", "3"}}}.)
  absl::StatusOr<std::unique_ptr<cc::QueryCursor>> q =
      (*client)->Query("SELECT id, msg, at FROM " + table + " WHERE id >= 3 ORDER BY id");
  if (!q.ok()) return q.status();
  while ((*q)->Next()) {
    const uint64_t id = (*q)->GetUInt64(0).value();
    const std::string_view msg = (*q)->GetString(1).value();  // valid until the next Next()
    std::cout << id << " " << msg << " " << (*q)->FormatValue(2) << "\n";
  }
  if (!(*q)->status().ok()) return (*q)->status();  // error mid-stream, deadline, cancel
  std::cout << (*q)->summary()->rows() << " rows, " << (*q)->received_bytes()
            << " bytes from ClickHouse\n";
  return absl::OkStatus();
}

int main(int argc, char** argv) {
  const absl::Status status =
      Example(argc > 1 ? argv[1] : "127.0.0.1:50051", argc > 2 ? argv[2] : "default.cli_demo");
  if (!status.ok()) {
    std::cerr << cc::FormatError(status) << "\n";
    return 1;
  }
  return 0;
}
