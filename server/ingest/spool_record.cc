#include "server/ingest/spool_record.h"

#include "absl/strings/str_cat.h"
#include "server/clickhouse/columns/factory.h"
#include "server/clickhouse/protocol/revision.h"
#include "server/clickhouse/wire/buffer.h"
#include "server/clickhouse/wire/gather.h"
#include "text/status_macros.h"

namespace chgate::ingest {
namespace {

constexpr uint8_t kVersion = 1;
// Column lists, LSN lists and names longer than these are not a record chgate wrote.
constexpr uint64_t kMaxColumns = 1 << 20;
constexpr uint64_t kMaxLsns = 1 << 26;
constexpr uint64_t kMaxName = 1 << 20;
constexpr std::string_view kHeadersMagic = "CHGHDR01";

void WriteHead(clickhouse::GatherWriter& out, SpoolRecordKind kind, const TableId& table,
               const std::vector<std::string>& columns) {
  out.WriteFixed(static_cast<uint8_t>(kind));
  out.WriteFixed(kVersion);
  out.WriteString(table.database);
  out.WriteString(table.table);
  out.WriteVarUInt(columns.size());
  for (const std::string& c : columns) out.WriteString(c);
}

absl::Status Malformed(const absl::Status& cause) {
  return absl::DataLossError(absl::StrCat("malformed spool record: ", cause.message()));
}

}  // namespace

std::string EncodeRowsRecord(const TableId& table, const std::vector<std::string>& columns,
                             std::string_view idempotency_key, const clickhouse::Block& block) {
  std::string payload;
  EncodeRowsRecord(table, columns, idempotency_key, block, &payload);
  return payload;
}

void EncodeRowsRecord(const TableId& table, const std::vector<std::string>& columns,
                      std::string_view idempotency_key, const clickhouse::Block& block,
                      std::string* payload) {
  // The writer keeps its chunks across calls: encoding a record allocates at most its string.
  thread_local clickhouse::GatherWriter out;
  out.Clear();
  WriteHead(out, SpoolRecordKind::kRows, table, columns);
  out.WriteString(idempotency_key);
  out.WriteVarUInt(block.rows());
  out.WriteVarUInt(clickhouse::revision::kClient);
  clickhouse::WriteBlock(block, clickhouse::revision::kClient, out);
  payload->clear();
  out.AppendTo(payload);
}

std::string EncodeIntentRecord(const TableId& table, const std::vector<std::string>& columns,
                               const std::vector<uint64_t>& lsns) {
  clickhouse::GatherWriter out;
  WriteHead(out, SpoolRecordKind::kIntent, table, columns);
  out.WriteVarUInt(lsns.size());
  for (uint64_t lsn : lsns) out.WriteVarUInt(lsn);
  return out.ToString();
}

std::string EncodeHeaders(const std::vector<std::pair<std::string, const TableSchema*>>& headers) {
  clickhouse::GatherWriter out;
  out.Write(kHeadersMagic);
  out.WriteVarUInt(headers.size());
  for (const auto& [key, schema] : headers) {
    out.WriteString(key);
    out.WriteString(schema->server_time_zone);
    out.WriteVarUInt(schema->names.size());
    for (size_t i = 0; i < schema->names.size(); ++i) {
      out.WriteString(schema->names[i]);
      out.WriteString(schema->prototypes[i]->type_name());
    }
  }
  return out.ToString();
}

absl::StatusOr<std::vector<KnownHeader>> DecodeHeaders(std::string_view bytes) {
  if (bytes.substr(0, kHeadersMagic.size()) != kHeadersMagic) {
    return absl::DataLossError("not a headers file");
  }
  clickhouse::MemoryReadBuffer in(bytes.substr(kHeadersMagic.size()));
  std::vector<KnownHeader> out;
  uint64_t n = 0;
  absl::Status st = in.ReadVarUInt(&n);
  for (uint64_t h = 0; st.ok() && h < n; ++h) {
    KnownHeader known;
    uint64_t columns = 0;
    st = in.ReadString(&known.key, kMaxName);
    if (st.ok()) st = in.ReadString(&known.schema.server_time_zone, kMaxName);
    if (st.ok()) st = in.ReadVarUInt(&columns);
    if (st.ok() && columns > kMaxColumns) st = absl::DataLossError("too many columns");
    bool usable = true;
    for (uint64_t c = 0; st.ok() && c < columns; ++c) {
      std::string name, type;
      st = in.ReadString(&name, kMaxName);
      if (st.ok()) st = in.ReadString(&type, kMaxName);
      if (!st.ok()) break;
      absl::StatusOr<clickhouse::ColumnPtr> column = clickhouse::CreateColumn(type);
      usable = usable && column.ok();
      if (!column.ok()) continue;
      known.schema.names.push_back(std::move(name));
      known.schema.prototypes.push_back(*std::move(column));
    }
    if (st.ok() && usable) out.push_back(std::move(known));
  }
  if (!st.ok()) return Malformed(st);
  return out;
}

absl::StatusOr<SpoolRecordHeader> DecodeSpoolRecord(std::string_view payload,
                                                    clickhouse::Block* block) {
  clickhouse::MemoryReadBuffer in(payload);
  SpoolRecordHeader h;
  uint8_t kind = 0, version = 0;
  auto read_head = [&]() -> absl::Status {
    CHGATE_RETURN_IF_ERROR(in.ReadFixed(&kind));
    CHGATE_RETURN_IF_ERROR(in.ReadFixed(&version));
    if ((kind != 1 && kind != 2) || version != kVersion) {
      return absl::DataLossError(absl::StrCat("kind ", kind, ", version ", version));
    }
    h.kind = static_cast<SpoolRecordKind>(kind);
    CHGATE_RETURN_IF_ERROR(in.ReadString(&h.table.database, kMaxName));
    CHGATE_RETURN_IF_ERROR(in.ReadString(&h.table.table, kMaxName));
    uint64_t n = 0;
    CHGATE_RETURN_IF_ERROR(in.ReadVarUInt(&n));
    if (n > kMaxColumns) return absl::DataLossError(absl::StrCat(n, " columns"));
    h.columns.resize(n);
    for (std::string& c : h.columns) CHGATE_RETURN_IF_ERROR(in.ReadString(&c, kMaxName));
    return absl::OkStatus();
  };
  if (absl::Status st = read_head(); !st.ok()) return Malformed(st);
  if (h.kind == SpoolRecordKind::kIntent) {
    uint64_t n = 0;
    absl::Status st = in.ReadVarUInt(&n);
    if (st.ok() && n > kMaxLsns) st = absl::DataLossError(absl::StrCat(n, " LSNs"));
    if (st.ok()) h.lsns.resize(n);
    for (uint64_t& lsn : h.lsns) {
      if (st.ok()) st = in.ReadVarUInt(&lsn);
    }
    if (!st.ok()) return Malformed(st);
    return h;
  }
  uint64_t revision = 0;
  absl::Status st = in.ReadString(&h.idempotency_key, kMaxName);
  if (st.ok()) st = in.ReadVarUInt(&h.rows);
  if (st.ok()) st = in.ReadVarUInt(&revision);
  if (st.ok() && block != nullptr) {
    st = clickhouse::ReadBlock(in, revision, block);
    if (st.ok() && block->rows() != h.rows) {
      st = absl::DataLossError(
          absl::StrCat("block of ", block->rows(), " rows, header says ", h.rows));
    }
  }
  if (!st.ok()) return Malformed(st);
  return h;
}

}  // namespace chgate::ingest
