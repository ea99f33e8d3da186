#include "server/proto_convert/values.h"

#include <memory>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "server/clickhouse/columns/factory.h"
#include "server/ingest/value_error.h"
#include "server/proto_convert/column_node.h"
#include "text/status_macros.h"

namespace chgate::proto_convert {

// ---------------------------------------------------------------------------------------------
// Row path: ValueRef over chgate.v1.Value
// ---------------------------------------------------------------------------------------------

namespace {

const v1::Value& AsValue(const void* impl) { return *static_cast<const v1::Value*>(impl); }

ingest::ValueKind ProtoKind(const void* impl) {
  switch (AsValue(impl).kind_case()) {
    case v1::Value::kNullValue:
      return ingest::ValueKind::kNull;
    case v1::Value::kBoolValue:
      return ingest::ValueKind::kBool;
    case v1::Value::kInt64Value:
      return ingest::ValueKind::kInt64;
    case v1::Value::kUint64Value:
      return ingest::ValueKind::kUInt64;
    case v1::Value::kDoubleValue:
      return ingest::ValueKind::kDouble;
    case v1::Value::kStringValue:
      return ingest::ValueKind::kString;
    case v1::Value::kBytesValue:
      return ingest::ValueKind::kBytes;
    case v1::Value::kTimestampValue:
      return ingest::ValueKind::kTimestamp;
    case v1::Value::kArrayValue:
      return ingest::ValueKind::kArray;
    case v1::Value::kTupleValue:
      return ingest::ValueKind::kTuple;
    case v1::Value::kMapValue:
      return ingest::ValueKind::kMap;
    case v1::Value::KIND_NOT_SET:
      break;
  }
  return ingest::ValueKind::kUnset;
}

const v1::ValueList& AsList(const v1::Value& v) {
  return v.kind_case() == v1::Value::kTupleValue ? v.tuple_value() : v.array_value();
}

}  // namespace

const ingest::ValueRef::Ops kProtoValueOps = {
    .kind = &ProtoKind,
    .bool_value = [](const void* p) { return AsValue(p).bool_value(); },
    .int64_value = [](const void* p) { return static_cast<int64_t>(AsValue(p).int64_value()); },
    .uint64_value = [](const void* p) { return static_cast<uint64_t>(AsValue(p).uint64_value()); },
    .double_value = [](const void* p) { return AsValue(p).double_value(); },
    .bytes_value =
        [](const void* p) {
          const v1::Value& v = AsValue(p);
          const std::string& s =
              v.kind_case() == v1::Value::kBytesValue ? v.bytes_value() : v.string_value();
          return std::string_view(s);
        },
    .timestamp_value =
        [](const void* p) {
          const google::protobuf::Timestamp& ts = AsValue(p).timestamp_value();
          return ingest::Timestamp{.seconds = ts.seconds(), .nanos = ts.nanos()};
        },
    .size =
        [](const void* p) {
          const v1::Value& v = AsValue(p);
          if (v.kind_case() == v1::Value::kMapValue) {
            return static_cast<size_t>(v.map_value().entries_size());
          }
          return static_cast<size_t>(AsList(v).values_size());
        },
    .element = [](const void* p,
                  size_t i) { return ProtoValue(AsList(AsValue(p)).values(static_cast<int>(i))); },
    .map_key =
        [](const void* p, size_t i) {
          return ProtoValue(AsValue(p).map_value().entries(static_cast<int>(i)).key());
        },
    .map_value =
        [](const void* p, size_t i) {
          return ProtoValue(AsValue(p).map_value().entries(static_cast<int>(i)).value());
        },
};

// ---------------------------------------------------------------------------------------------
// Columnar path: chgate.v1.Column -> clickhouse::Column (column_node.h)
// ---------------------------------------------------------------------------------------------

absl::Status AppendProtoColumn(const v1::Column& src, uint64_t rows, std::string_view column,
                               clickhouse::Column* dst) {
  const internal::Scope scope{.column = std::string(column), .type = dst->type_name()};
  CHGATE_ASSIGN_OR_RETURN(std::unique_ptr<internal::Node> root,
                          internal::Build(src, rows, dst, internal::Position{.scope = &scope}));
  return root->Append(0, rows);
}

namespace {

// An empty column of `type`, cloned from one built on this thread for the same name: a client
// names its columns' types again in every request, and parsing a type name costs several times
// the clone. Names of at most kMaxCachedName bytes are kept, at most kMaxCachedTypes of them (all
// dropped when full), so the cache stays small whatever callers send.
absl::StatusOr<clickhouse::ColumnPtr> NewColumn(const std::string& type) {
  constexpr size_t kMaxCachedName = 512;
  constexpr size_t kMaxCachedTypes = 128;
  thread_local absl::flat_hash_map<std::string, clickhouse::ColumnPtr> prototypes;
  if (const auto it = prototypes.find(type); it != prototypes.end()) {
    return it->second->CloneEmpty();
  }
  CHGATE_ASSIGN_OR_RETURN(clickhouse::ColumnPtr column, clickhouse::CreateColumn(type));
  if (type.size() <= kMaxCachedName) {
    if (prototypes.size() >= kMaxCachedTypes) prototypes.clear();
    prototypes.emplace(type, column->CloneEmpty());
  }
  return column;
}

}  // namespace

absl::Status ConvertBlock(const v1::Block& block, std::span<const std::string> names,
                          clickhouse::Block* out) {
  CHGATE_CHECK(names.size() == static_cast<size_t>(block.columns_size()));
  out->Clear();
  for (int i = 0; i < block.columns_size(); ++i) {
    const v1::Column& src = block.columns(i);
    const std::string& name = names[static_cast<size_t>(i)];
    if (src.type().empty()) {
      return ingest::WithValueError(
          absl::InvalidArgumentError(absl::StrCat(
              "block column '", ingest::PrintableName(name),
              "': `type` is required on insert (the full ClickHouse type of the target column, "
              "e.g. \"Nullable(String)\")")),
          {.column = name});
    }
    absl::StatusOr<clickhouse::ColumnPtr> column = NewColumn(src.type());
    if (!column.ok()) {
      return ingest::WithValueError(
          absl::Status(
              column.status().code(),
              absl::StrCat("block column '", ingest::PrintableName(name), "' (",
                           ingest::PrintableName(src.type()), "): ", column.status().message())),
          {.column = name, .type = src.type()});
    }
    CHGATE_RETURN_IF_ERROR(AppendProtoColumn(src, block.rows(), name, column->get()));
    out->AddColumn(name, *std::move(column));
  }
  return absl::OkStatus();
}

}  // namespace chgate::proto_convert
