#include "server/clickhouse/protocol/packets.h"

#include <charconv>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/clickhouse/protocol/error_codes.h"
#include "server/clickhouse/protocol/revision.h"
#include "server/clickhouse/protocol/settings.h"
#include "server/clickhouse/types/type_ast.h"
#include "text/status_macros.h"

namespace chgate::clickhouse {
namespace {

constexpr std::string_view kCodePayloadUrl = "chgate.clickhouse/code";
constexpr std::string_view kNamePayloadUrl = "chgate.clickhouse/exception-name";
constexpr int kMaxNestedExceptions = 32;

void WriteClientInfo(const HelloParams& client, const std::optional<text::TraceContext>& trace,
                     uint64_t revision, GatherWriter& out) {
  out.WriteFixed<uint8_t>(1);  // query_kind: initial query
  out.WriteString("");         // initial_user
  out.WriteString("");         // initial_query_id
  out.WriteString("0.0.0.0:0");
  if (revision >= revision::kInitialQueryStartTime) out.WriteFixed<uint64_t>(0);
  out.WriteFixed<uint8_t>(1);  // interface: TCP
  out.WriteString(client.os_user);
  out.WriteString(client.client_hostname);
  out.WriteString(client.client_name);
  out.WriteVarUInt(client.version_major);
  out.WriteVarUInt(client.version_minor);
  out.WriteVarUInt(client.revision);
  if (revision >= revision::kQuotaKeyInClientInfo) out.WriteString(client.quota_key);
  if (revision >= revision::kDistributedDepth) out.WriteVarUInt(0);
  if (revision >= revision::kVersionPatch) out.WriteVarUInt(client.version_patch);
  if (revision >= revision::kOpenTelemetry) {
    out.WriteFixed<uint8_t>(trace.has_value() ? 1 : 0);
    if (trace.has_value()) {
      out.WriteFixed<uint64_t>(trace->trace_id_high);  // ClickHouse's UUID layout
      out.WriteFixed<uint64_t>(trace->trace_id_low);
      out.WriteFixed<uint64_t>(trace->span_id);
      out.WriteString(trace->tracestate);
      out.WriteFixed<uint8_t>(trace->trace_flags);
    }
  }
  if (revision >= revision::kParallelReplicas) {
    out.WriteVarUInt(0);  // collaborate_with_initiator
    out.WriteVarUInt(0);  // count_participating_replicas
    out.WriteVarUInt(0);  // number_of_current_replica
  }
}

// One setting below 54429, in the binary form of its type. The value was checked
// (CheckSettingValue) and is in the form the server reads back.
void WriteBinarySetting(const std::string& name, const std::string& value, SettingKind kind,
                        GatherWriter& out) {
  out.WriteString(name);
  switch (kind) {
    case SettingKind::kUInt:
    case SettingKind::kBool: {
      uint64_t v = 0;
      (void)absl::SimpleAtoi(value, &v);
      out.WriteVarUInt(v);
      return;
    }
    case SettingKind::kInt: {
      int64_t v = 0;
      (void)absl::SimpleAtoi(value, &v);
      out.WriteVarUInt((static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63));
      return;
    }
    case SettingKind::kFloat:
    case SettingKind::kString:
    case SettingKind::kUnknown:
      out.WriteString(value);
      return;
  }
}

// Every setting as it will be sent, checked before a byte is written: a server that stops
// reading at a setting reads the rest of the packet as new packets. Below 54429 a setting
// must be in the catalog (its binary form depends on its type); from 54429 one in the catalog
// must still have a value its type accepts (the server reads the text, then throws on it).
absl::StatusOr<std::vector<std::string>> CheckedSettingValues(const std::vector<Setting>& settings,
                                                              uint64_t revision) {
  std::vector<std::string> values;
  values.reserve(settings.size());
  for (const Setting& s : settings) {
    if (s.name.empty()) return absl::InvalidArgumentError("setting with an empty name");
    const SettingSpec* spec = s.custom ? nullptr : FindSetting(s.name);
    if (spec == nullptr) {
      if (revision < revision::kSettingsAsStrings) {
        return absl::InvalidArgumentError(absl::StrCat(
            "setting ", s.name,
            " cannot be sent to this server: below protocol revision 54429 settings travel in a "
            "typed binary form and the type of this one is not known to chgate"));
      }
      values.push_back(s.value);
      continue;
    }
    CHGATE_ASSIGN_OR_RETURN(std::string value, CheckSettingValue(*spec, s.value));
    values.push_back(std::move(value));
  }
  return values;
}

}  // namespace

void Progress::Add(const Progress& o) {
  rows += o.rows;
  bytes += o.bytes;
  total_rows += o.total_rows;
  total_bytes += o.total_bytes;
  written_rows += o.written_rows;
  written_bytes += o.written_bytes;
  elapsed_ns += o.elapsed_ns;
}

SettingKind KindOfSetting(std::string_view name) {
  const SettingSpec* spec = FindSetting(name);
  if (spec == nullptr) return SettingKind::kUnknown;
  switch (spec->type) {
    case SettingType::kUInt:
      return SettingKind::kUInt;
    case SettingType::kBool:
      return SettingKind::kBool;
    case SettingType::kInt:
      return SettingKind::kInt;
    case SettingType::kFloat:
      return SettingKind::kFloat;
    case SettingType::kEnum:
    case SettingType::kChar:
    case SettingType::kString:
      return SettingKind::kString;
  }
  return SettingKind::kUnknown;
}

void WriteHello(const HelloParams& hello, GatherWriter& out) {
  out.WriteVarUInt(static_cast<uint64_t>(ClientCode::kHello));
  out.WriteString(hello.client_name);
  out.WriteVarUInt(hello.version_major);
  out.WriteVarUInt(hello.version_minor);
  out.WriteVarUInt(hello.revision);
  out.WriteString(hello.database);
  out.WriteString(hello.user);
  out.WriteString(hello.password);
}

void WriteAddendum(uint64_t revision, const std::string& quota_key, GatherWriter& out) {
  if (revision < revision::kAddendum) return;
  out.WriteString(quota_key);
  if (revision >= revision::kChunkedPackets) {
    out.WriteString("notchunked");
    out.WriteString("notchunked");
  }
  if (revision >= revision::kVersionedParallelReplicas) out.WriteVarUInt(0);
}

absl::Status WriteQuery(const QueryParams& query, const HelloParams& client, uint64_t revision,
                        GatherWriter& out) {
  if (!query.parameters.empty() && revision < revision::kParameters) {
    return absl::InvalidArgumentError(absl::StrCat("query parameters need protocol revision ",
                                                   revision::kParameters, "; this server speaks ",
                                                   revision));
  }
  for (const auto& [name, value] : query.parameters) {
    if (name.empty()) return absl::InvalidArgumentError("query parameter with an empty name");
  }
  CHGATE_ASSIGN_OR_RETURN(const std::vector<std::string> values,
                          CheckedSettingValues(query.settings, revision));
  out.WriteVarUInt(static_cast<uint64_t>(ClientCode::kQuery));
  out.WriteString(query.query_id);
  if (revision >= revision::kClientInfo) WriteClientInfo(client, query.trace, revision, out);
  for (size_t i = 0; i < query.settings.size(); ++i) {
    const Setting& s = query.settings[i];
    if (revision >= revision::kSettingsAsStrings) {
      out.WriteString(s.name);
      out.WriteVarUInt((s.important ? 1u : 0u) | (s.custom ? 2u : 0u));
      out.WriteString(values[i]);
    } else {
      WriteBinarySetting(s.name, values[i], KindOfSetting(s.name), out);
    }
  }
  out.WriteString("");  // end of settings
  if (revision >= revision::kInterserverExternallyGrantedRoles) out.WriteString("");
  if (revision >= revision::kInterserverSecret) out.WriteString("");
  out.WriteVarUInt(static_cast<uint64_t>(query.stage));
  out.WriteVarUInt(query.compression ? 1 : 0);
  out.WriteString(query.query);
  if (revision >= revision::kParameters) {
    for (const auto& [name, value] : query.parameters) {
      out.WriteString(name);
      out.WriteVarUInt(2);  // CUSTOM
      std::string quoted;
      AppendQuoted(value, &quoted);
      out.WriteString(quoted);
    }
    out.WriteString("");
  }
  return absl::OkStatus();
}

void WriteDataHeader(uint64_t revision, GatherWriter& out) {
  out.WriteVarUInt(static_cast<uint64_t>(ClientCode::kData));
  if (revision >= revision::kTemporaryTables) out.WriteString("");
}

absl::StatusOr<ServerInfo> ReadServerHello(ReadBuffer& in, uint64_t client_revision) {
  uint64_t code = 0;
  CHGATE_RETURN_IF_ERROR(in.ReadVarUInt(&code));
  if (code == static_cast<uint64_t>(ServerCode::kException)) {
    ServerException e;
    CHGATE_RETURN_IF_ERROR(ReadException(in, &e));
    return ExceptionToStatus(e);
  }
  if (code != static_cast<uint64_t>(ServerCode::kHello)) {
    return absl::DataLossError(absl::StrCat("expected server Hello, got packet code ", code));
  }
  ServerInfo info;
  CHGATE_RETURN_IF_ERROR(in.ReadString(&info.name, 1 << 16));
  CHGATE_RETURN_IF_ERROR(in.ReadVarUInt(&info.version_major));
  CHGATE_RETURN_IF_ERROR(in.ReadVarUInt(&info.version_minor));
  CHGATE_RETURN_IF_ERROR(in.ReadVarUInt(&info.revision));
  const uint64_t r = std::min(client_revision, info.revision);
  if (r >= revision::kVersionedParallelReplicas) {
    uint64_t ignored;
    CHGATE_RETURN_IF_ERROR(in.ReadVarUInt(&ignored));
  }
  if (r >= revision::kServerTimezone)
    CHGATE_RETURN_IF_ERROR(in.ReadString(&info.timezone, 1 << 16));
  if (r >= revision::kServerDisplayName) {
    CHGATE_RETURN_IF_ERROR(in.ReadString(&info.display_name, 1 << 16));
  }
  if (r >= revision::kVersionPatch) CHGATE_RETURN_IF_ERROR(in.ReadVarUInt(&info.version_patch));
  if (r >= revision::kChunkedPackets) {
    std::string send, recv;
    CHGATE_RETURN_IF_ERROR(in.ReadString(&send, 64));
    CHGATE_RETURN_IF_ERROR(in.ReadString(&recv, 64));
    if (send != "notchunked" && send != "notchunked_optional" && send != "chunked_optional") {
      return absl::UnimplementedError(absl::StrCat("server requires chunked packets (", send, ")"));
    }
  }
  if (r >= revision::kPasswordComplexityRules) {
    uint64_t rules = 0;
    CHGATE_RETURN_IF_ERROR(in.ReadVarUInt(&rules));
    if (rules > 1024) return absl::DataLossError("implausible password rule count");
    std::string ignored;
    for (uint64_t i = 0; i < rules * 2; ++i)
      CHGATE_RETURN_IF_ERROR(in.ReadString(&ignored, 1 << 16));
  }
  if (r >= revision::kInterserverSecretV2) {
    uint64_t nonce;
    CHGATE_RETURN_IF_ERROR(in.ReadFixed(&nonce));
  }
  return info;
}

absl::Status ReadException(ReadBuffer& in, ServerException* out) {
  ServerException* current = out;
  std::vector<ServerException> chain;
  for (int depth = 0;; ++depth) {
    if (depth > kMaxNestedExceptions) return absl::DataLossError("exception nested too deeply");
    ServerException e;
    CHGATE_RETURN_IF_ERROR(in.ReadFixed(&e.code));
    CHGATE_RETURN_IF_ERROR(in.ReadString(&e.name, 1 << 16));
    CHGATE_RETURN_IF_ERROR(in.ReadString(&e.message, 1 << 24));
    CHGATE_RETURN_IF_ERROR(in.ReadString(&e.stack_trace, 1 << 24));
    uint8_t has_nested = 0;
    CHGATE_RETURN_IF_ERROR(in.ReadFixed(&has_nested));
    chain.push_back(std::move(e));
    if (has_nested == 0) break;
  }
  *current = std::move(chain[0]);
  for (size_t i = 1; i < chain.size(); ++i) current->nested.push_back(std::move(chain[i]));
  return absl::OkStatus();
}

absl::Status ReadProgress(ReadBuffer& in, uint64_t revision, Progress* out) {
  *out = {};
  CHGATE_RETURN_IF_ERROR(in.ReadVarUInt(&out->rows));
  CHGATE_RETURN_IF_ERROR(in.ReadVarUInt(&out->bytes));
  if (revision >= revision::kTotalRowsInProgress)
    CHGATE_RETURN_IF_ERROR(in.ReadVarUInt(&out->total_rows));
  if (revision >= revision::kTotalBytesInProgress) {
    CHGATE_RETURN_IF_ERROR(in.ReadVarUInt(&out->total_bytes));
  }
  if (revision >= revision::kClientWriteInfo) {
    CHGATE_RETURN_IF_ERROR(in.ReadVarUInt(&out->written_rows));
    CHGATE_RETURN_IF_ERROR(in.ReadVarUInt(&out->written_bytes));
  }
  if (revision >= revision::kServerQueryTimeInProgress) {
    CHGATE_RETURN_IF_ERROR(in.ReadVarUInt(&out->elapsed_ns));
  }
  return absl::OkStatus();
}

absl::Status ReadProfileInfo(ReadBuffer& in, uint64_t revision, ProfileInfo* out) {
  *out = {};
  uint8_t flag = 0;
  CHGATE_RETURN_IF_ERROR(in.ReadVarUInt(&out->rows));
  CHGATE_RETURN_IF_ERROR(in.ReadVarUInt(&out->blocks));
  CHGATE_RETURN_IF_ERROR(in.ReadVarUInt(&out->bytes));
  CHGATE_RETURN_IF_ERROR(in.ReadFixed(&flag));
  out->applied_limit = flag != 0;
  CHGATE_RETURN_IF_ERROR(in.ReadVarUInt(&out->rows_before_limit));
  CHGATE_RETURN_IF_ERROR(in.ReadFixed(&flag));
  out->calculated_rows_before_limit = flag != 0;
  if (revision >= revision::kRowsBeforeAggregation) {
    CHGATE_RETURN_IF_ERROR(in.ReadFixed(&flag));
    out->applied_aggregation = flag != 0;
    CHGATE_RETURN_IF_ERROR(in.ReadVarUInt(&out->rows_before_aggregation));
  }
  return absl::OkStatus();
}

absl::Status ExceptionToStatus(const ServerException& e) {
  const absl::StatusCode code = StatusCodeForClickHouseError(e.code);
  std::string symbol(ClickHouseErrorName(e.code));
  std::string message =
      absl::StrCat("ClickHouse error ", e.code, " (", symbol.empty() ? "" : symbol,
                   symbol.empty() ? "" : ", ", e.name, "): ", e.message);
  for (const ServerException& n : e.nested) {
    absl::StrAppend(&message, "; caused by ", n.code, " (", n.name, "): ", n.message);
  }
  absl::Status status(code, message);
  status.SetPayload(absl::string_view(kCodePayloadUrl.data(), kCodePayloadUrl.size()),
                    absl::Cord(absl::StrCat(e.code)));
  status.SetPayload(absl::string_view(kNamePayloadUrl.data(), kNamePayloadUrl.size()),
                    absl::Cord(e.name));
  return status;
}

std::optional<int32_t> ClickHouseCode(const absl::Status& status) {
  auto payload =
      status.GetPayload(absl::string_view(kCodePayloadUrl.data(), kCodePayloadUrl.size()));
  if (!payload) return std::nullopt;
  int32_t code = 0;
  if (!absl::SimpleAtoi(std::string(*payload), &code)) return std::nullopt;
  return code;
}

std::string ClickHouseExceptionName(const absl::Status& status) {
  auto payload =
      status.GetPayload(absl::string_view(kNamePayloadUrl.data(), kNamePayloadUrl.size()));
  return payload ? std::string(*payload) : std::string();
}

}  // namespace chgate::clickhouse
