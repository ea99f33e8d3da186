#include "server/service/insert_request.h"

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "server/ingest/value_error.h"
#include "server/proto_convert/wire_check.h"
#include "server/service/raw_messages.h"
#include "text/status_macros.h"

namespace chgate::service {
namespace {

constexpr size_t kMaxIdempotencyKeyBytes = 128;

absl::Status CheckColumnNames(const std::vector<std::string>& names) {
  absl::flat_hash_set<std::string_view> seen;
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i].empty()) {
      return absl::InvalidArgumentError(absl::StrCat("column name ", i, " is empty"));
    }
    if (!seen.insert(names[i]).second) {
      return ingest::WithValueError(
          absl::InvalidArgumentError(
              absl::StrCat("column '", ingest::PrintableName(names[i]), "' is listed twice")),
          {.column = names[i]});
    }
  }
  return absl::OkStatus();
}

absl::Status PrepareBlock(const v1::Block& block, PreparedInsert* out) {
  std::vector<std::string>& columns = out->request.columns;
  std::vector<std::string> names;
  if (columns.empty()) {
    for (int i = 0; i < block.columns_size(); ++i) {
      if (block.columns(i).name().empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "block column ", i, " has no name: name every block column or set `columns`"));
      }
      names.push_back(block.columns(i).name());
    }
    CHGATE_RETURN_IF_ERROR(CheckColumnNames(names));
  } else {
    if (static_cast<size_t>(block.columns_size()) != columns.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "block has ", block.columns_size(), " columns but `columns` names ", columns.size()));
    }
    for (int i = 0; i < block.columns_size(); ++i) {
      const std::string& name = block.columns(i).name();
      const std::string& target = columns[static_cast<size_t>(i)];
      if (!name.empty() && name != target) {
        return ingest::WithValueError(
            absl::InvalidArgumentError(
                absl::StrCat("block column ", i, " is named '", ingest::PrintableName(name),
                             "' but `columns` has '", ingest::PrintableName(target), "' there")),
            {.column = target});
      }
    }
    names = columns;
  }
  if (block.columns_size() == 0) {
    if (block.rows() > 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("block has ", block.rows(), " rows but no columns"));
    }
    return absl::OkStatus();  // no data: resolve the table only
  }
  CHGATE_RETURN_IF_ERROR(proto_convert::ConvertBlock(block, names, &out->block));
  columns = std::move(names);
  out->request.block = &out->block;
  out->row_count = block.rows();
  return absl::OkStatus();
}

}  // namespace

absl::Status ParseInsert(const grpc::ByteBuffer& raw, v1::InsertRequest* message,
                         PreparedInsert* out) {
  out->rows_in_place = false;
  out->refused_sequence.reset();
  // Copied out of gRPC's slices, which may be parts of larger receive buffers that the memory
  // budget does not see: the copy is exactly the message, and gRPC's buffers go at once.
  std::vector<grpc::Slice> slices;
  std::vector<std::string_view> pieces;
  if (raw.Dump(&slices).ok()) {
    for (const grpc::Slice& slice : slices) {
      pieces.emplace_back(reinterpret_cast<const char*>(slice.begin()), slice.size());
    }
  }
  if (proto_convert::CarriesRows(pieces)) {
    out->wire.clear();
    out->wire.reserve(raw.Length());
    for (std::string_view piece : pieces) out->wire.append(piece);
    if (proto_convert::DecodeRowsRequest(out->wire, message, &out->wire_rows)) {
      out->rows_in_place = true;
      return absl::OkStatus();
    }
    out->wire_rows.Clear();
    std::string().swap(out->wire);
  }
  absl::Status parsed = ParseRawMessage(raw, message);
  if (parsed.ok()) return parsed;
  // Why protobuf refused it, where the bytes say: a string field that is not UTF-8 is the
  // caller's one bad value, answered as such (on a stream, for its sequence alone).
  std::string wire;
  for (std::string_view piece : pieces) wire.append(piece);
  const proto_convert::WireCheck check = proto_convert::CheckWire(
      wire, *v1::InsertRequest::descriptor(), v1::InsertRequest::kSequenceFieldNumber);
  if (!check.well_formed || check.bad_utf8_field.empty()) return parsed;
  // Sound framing: no sequence field is sequence 0.
  out->refused_sequence = check.top_level_varint.value_or(0);
  return absl::InvalidArgumentError(
      absl::StrCat("the request's field ", check.bad_utf8_field,
                   " is not valid UTF-8: a protobuf string field must be (send arbitrary bytes as "
                   "Value.bytes_value, or in a Column's data)"));
}

uint64_t ConvertingBytes(const v1::InsertRequest& message, size_t wire,
                         const PreparedInsert& prepared) {
  uint64_t parsed = static_cast<uint64_t>(wire) + 1024;
  if (prepared.rows_in_place) {
    parsed += prepared.wire_rows.memory_bytes();
  } else if (message.has_rows()) {
    parsed += 64 * static_cast<uint64_t>(message.rows().rows_size());
    for (const v1::Row& row : message.rows().rows()) {
      parsed += 48 * static_cast<uint64_t>(row.values_size());
    }
  }
  return parsed + wire;
}

// Validates `message` and fills `out`. Returns InvalidArgument for a request that cannot be
// submitted (see ConvertBlock for the columnar checks).
absl::Status Prepare(const v1::InsertRequest& message, absl::Time deadline,
                     const std::optional<text::TraceContext>& trace, PreparedInsert* out) {
  if (message.table().empty()) return absl::InvalidArgumentError("`table` is required");
  if (message.idempotency_key().size() > kMaxIdempotencyKeyBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("`idempotency_key` has ", message.idempotency_key().size(), " bytes, at most ",
                     kMaxIdempotencyKeyBytes, " are allowed"));
  }
  ingest::Request& request = out->request;
  request.table = message.table();
  request.idempotency_key = message.idempotency_key();
  request.deadline = deadline;
  request.trace = trace;
  out->requested_ack = message.ack_mode();
  switch (message.ack_mode()) {
    case v1::ACK_MODE_UNSPECIFIED:
      break;
    case v1::ACK_MODE_COMMITTED:
      request.ack = ingest::AckMode::kCommitted;
      break;
    case v1::ACK_MODE_ACCEPTED:
      request.ack = ingest::AckMode::kAccepted;
      break;
    case v1::ACK_MODE_PERSISTED:
      request.ack = ingest::AckMode::kPersisted;
      break;
    default:
      // Rather than weaken a guarantee the caller may have asked for.
      return absl::InvalidArgumentError(
          absl::StrCat("unknown `ack_mode` ", static_cast<int>(message.ack_mode())));
  }
  request.columns.assign(message.columns().begin(), message.columns().end());
  CHGATE_RETURN_IF_ERROR(CheckColumnNames(request.columns));
  switch (message.data_case()) {
    case v1::InsertRequest::kRows:
      if (out->rows_in_place) {
        request.rows = &out->wire_rows;
      } else {
        out->rows.emplace(&message.rows());
        request.rows = &*out->rows;
      }
      out->row_count = static_cast<uint64_t>(request.rows->row_count());
      break;
    case v1::InsertRequest::kBlock:
      CHGATE_RETURN_IF_ERROR(PrepareBlock(message.block(), out));
      break;
    case v1::InsertRequest::DATA_NOT_SET:
      break;
  }
  // Nothing to commit: the Ingestor only needs to resolve the table and columns. An `accepted`
  // ack answers as soon as that is done, where a committed one would wait for the table's next
  // flush (a batch without rows is never flushed).
  if (out->row_count == 0) request.ack = ingest::AckMode::kAccepted;
  return absl::OkStatus();
}

}  // namespace chgate::service
