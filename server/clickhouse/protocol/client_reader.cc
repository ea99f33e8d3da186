#include "server/clickhouse/protocol/client_reader.h"

#include <algorithm>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "server/clickhouse/protocol/revision.h"
#include "server/clickhouse/types/type_ast.h"
#include "text/status_macros.h"

namespace chgate::clickhouse {
namespace {

// Revisions of ClientInfo fields that only the reading side needs.
constexpr uint64_t kXForwardedForInClientInfo = 54443;
constexpr uint64_t kRefererInClientInfo = 54447;
constexpr uint64_t kQueryAndLineNumbers = 54475;
constexpr uint64_t kJwtInInterserver = 54476;

constexpr uint64_t kMaxNameSize = 1 << 16;
constexpr uint64_t kMaxValueSize = 1 << 24;
constexpr std::string_view kInterserverMarker = " INTERSERVER SECRET ";

absl::Status ReadHelloBody(ReadBuffer& in, HelloParams* out) {
  HelloParams hello;
  CHGATE_RETURN_IF_ERROR(in.ReadString(&hello.client_name, kMaxNameSize));
  CHGATE_RETURN_IF_ERROR(in.ReadVarUInt(&hello.version_major));
  CHGATE_RETURN_IF_ERROR(in.ReadVarUInt(&hello.version_minor));
  CHGATE_RETURN_IF_ERROR(in.ReadVarUInt(&hello.revision));
  CHGATE_RETURN_IF_ERROR(in.ReadString(&hello.database, kMaxNameSize));
  CHGATE_RETURN_IF_ERROR(in.ReadString(&hello.user, kMaxNameSize));
  CHGATE_RETURN_IF_ERROR(in.ReadString(&hello.password, kMaxValueSize));
  if (hello.user == kInterserverMarker) {
    return absl::UnimplementedError("interserver authentication is not supported");
  }
  *out = std::move(hello);
  return absl::OkStatus();
}

absl::Status ReadBool(ReadBuffer& in, bool* out) {
  uint8_t v = 0;
  CHGATE_RETURN_IF_ERROR(in.ReadFixed(&v));
  *out = v != 0;
  return absl::OkStatus();
}

// One setting below 54429: the value in the binary form of the setting's type. Returns
// OkStatus with an empty name at the end of the list.
absl::Status ReadBinarySetting(ReadBuffer& in, Setting* out) {
  *out = {};
  CHGATE_RETURN_IF_ERROR(in.ReadString(&out->name, kMaxNameSize));
  if (out->name.empty()) return absl::OkStatus();
  switch (KindOfSetting(out->name)) {
    case SettingKind::kUInt:
    case SettingKind::kBool: {
      uint64_t v = 0;
      CHGATE_RETURN_IF_ERROR(in.ReadVarUInt(&v));
      out->value = absl::StrCat(v);
      return absl::OkStatus();
    }
    case SettingKind::kInt: {
      uint64_t zigzag = 0;
      CHGATE_RETURN_IF_ERROR(in.ReadVarUInt(&zigzag));
      const auto v = static_cast<int64_t>((zigzag >> 1) ^ (uint64_t{0} - (zigzag & 1)));
      out->value = absl::StrCat(v);
      return absl::OkStatus();
    }
    case SettingKind::kFloat:
    case SettingKind::kString:
      return in.ReadString(&out->value, kMaxValueSize);
    case SettingKind::kUnknown:
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "query setting '", out->name,
      "' arrived in the binary form used below protocol revision 54429, and its type is not "
      "known here, so the rest of the Query cannot be parsed"));
}

// One setting (or parameter) from 54429: name, flags, value text.
absl::Status ReadSettingWithFlags(ReadBuffer& in, Setting* out) {
  *out = {};
  CHGATE_RETURN_IF_ERROR(in.ReadString(&out->name, kMaxNameSize));
  if (out->name.empty()) return absl::OkStatus();
  uint64_t flags = 0;
  CHGATE_RETURN_IF_ERROR(in.ReadVarUInt(&flags));
  out->important = (flags & 1) != 0;
  out->custom = (flags & 2) != 0;
  return in.ReadString(&out->value, kMaxValueSize);
}

// Turns a parameter's quoted SQL literal ('abc', with backslash escapes) back into its value.
absl::StatusOr<std::string> UnquoteParameter(const std::string& name, std::string_view quoted) {
  if (quoted.size() < 2 || quoted.front() != '\'' || quoted.back() != '\'') {
    return absl::DataLossError(
        absl::StrCat("query parameter '", name, "' is not a quoted string literal"));
  }
  std::string out;
  out.reserve(quoted.size() - 2);
  const std::string_view body = quoted.substr(1, quoted.size() - 2);
  for (size_t i = 0; i < body.size(); ++i) {
    char c = body[i];
    if (c == '\'') {
      return absl::DataLossError(
          absl::StrCat("query parameter '", name, "' has an unescaped quote"));
    }
    if (c == '\\') {
      if (++i == body.size()) {
        return absl::DataLossError(
            absl::StrCat("query parameter '", name, "' ends inside an escape"));
      }
      c = UnescapeChar(body[i]);
    }
    out.push_back(c);
  }
  return out;
}

}  // namespace

absl::StatusOr<HelloParams> ReadClientHello(ReadBuffer& in) {
  uint64_t code = 0;
  CHGATE_RETURN_IF_ERROR(in.ReadVarUInt(&code));
  if (code != static_cast<uint64_t>(ClientCode::kHello)) {
    return absl::DataLossError(absl::StrCat("expected client Hello, got packet code ", code));
  }
  HelloParams hello;
  CHGATE_RETURN_IF_ERROR(ReadHelloBody(in, &hello));
  return hello;
}

absl::Status ReadAddendum(ReadBuffer& in, uint64_t revision, ClientAddendum* out) {
  *out = {};
  if (revision < revision::kAddendum) return absl::OkStatus();
  CHGATE_RETURN_IF_ERROR(in.ReadString(&out->quota_key, kMaxNameSize));
  if (revision >= revision::kChunkedPackets) {
    CHGATE_RETURN_IF_ERROR(in.ReadString(&out->proto_send_chunked, 64));
    CHGATE_RETURN_IF_ERROR(in.ReadString(&out->proto_recv_chunked, 64));
  }
  if (revision >= revision::kVersionedParallelReplicas) {
    CHGATE_RETURN_IF_ERROR(in.ReadVarUInt(&out->parallel_replicas_protocol_version));
  }
  return absl::OkStatus();
}

absl::Status ReadClientInfo(ReadBuffer& in, uint64_t revision, ClientInfo* out) {
  *out = {};
  ClientInfo& ci = *out;
  CHGATE_RETURN_IF_ERROR(in.ReadFixed(&ci.query_kind));
  if (ci.query_kind == ClientInfo::kQueryKindNone) return absl::OkStatus();
  CHGATE_RETURN_IF_ERROR(in.ReadString(&ci.initial_user, kMaxNameSize));
  CHGATE_RETURN_IF_ERROR(in.ReadString(&ci.initial_query_id, kMaxNameSize));
  CHGATE_RETURN_IF_ERROR(in.ReadString(&ci.initial_address, kMaxNameSize));
  if (revision >= revision::kInitialQueryStartTime) {
    CHGATE_RETURN_IF_ERROR(in.ReadFixed(&ci.initial_query_start_time_us));
  }
  CHGATE_RETURN_IF_ERROR(in.ReadFixed(&ci.interface));
  if (ci.interface == ClientInfo::kInterfaceTcp) {
    CHGATE_RETURN_IF_ERROR(in.ReadString(&ci.os_user, kMaxNameSize));
    CHGATE_RETURN_IF_ERROR(in.ReadString(&ci.client_hostname, kMaxNameSize));
    CHGATE_RETURN_IF_ERROR(in.ReadString(&ci.client_name, kMaxNameSize));
    CHGATE_RETURN_IF_ERROR(in.ReadVarUInt(&ci.client_version_major));
    CHGATE_RETURN_IF_ERROR(in.ReadVarUInt(&ci.client_version_minor));
    CHGATE_RETURN_IF_ERROR(in.ReadVarUInt(&ci.client_tcp_protocol_version));
  } else if (ci.interface == ClientInfo::kInterfaceHttp) {
    CHGATE_RETURN_IF_ERROR(in.ReadFixed(&ci.http_method));
    CHGATE_RETURN_IF_ERROR(in.ReadString(&ci.http_user_agent, kMaxValueSize));
    if (revision >= kXForwardedForInClientInfo) {
      CHGATE_RETURN_IF_ERROR(in.ReadString(&ci.forwarded_for, kMaxValueSize));
    }
    if (revision >= kRefererInClientInfo) {
      CHGATE_RETURN_IF_ERROR(in.ReadString(&ci.http_referer, kMaxValueSize));
    }
  }
  if (revision >= revision::kQuotaKeyInClientInfo) {
    CHGATE_RETURN_IF_ERROR(in.ReadString(&ci.quota_key, kMaxNameSize));
  }
  if (revision >= revision::kDistributedDepth)
    CHGATE_RETURN_IF_ERROR(in.ReadVarUInt(&ci.distributed_depth));
  if (ci.interface == ClientInfo::kInterfaceTcp && revision >= revision::kVersionPatch) {
    CHGATE_RETURN_IF_ERROR(in.ReadVarUInt(&ci.client_version_patch));
  }
  if (revision >= revision::kOpenTelemetry) {
    CHGATE_RETURN_IF_ERROR(ReadBool(in, &ci.has_trace_context));
    if (ci.has_trace_context) {
      CHGATE_RETURN_IF_ERROR(in.ReadFixed(&ci.trace_id_high));
      CHGATE_RETURN_IF_ERROR(in.ReadFixed(&ci.trace_id_low));
      CHGATE_RETURN_IF_ERROR(in.ReadFixed(&ci.span_id));
      CHGATE_RETURN_IF_ERROR(in.ReadString(&ci.tracestate, kMaxValueSize));
      CHGATE_RETURN_IF_ERROR(in.ReadFixed(&ci.trace_flags));
    }
  }
  if (revision >= revision::kParallelReplicas) {
    CHGATE_RETURN_IF_ERROR(in.ReadVarUInt(&ci.collaborate_with_initiator));
    CHGATE_RETURN_IF_ERROR(in.ReadVarUInt(&ci.count_participating_replicas));
    CHGATE_RETURN_IF_ERROR(in.ReadVarUInt(&ci.number_of_current_replica));
  }
  if (revision >= kQueryAndLineNumbers) {
    CHGATE_RETURN_IF_ERROR(in.ReadVarUInt(&ci.script_query_number));
    CHGATE_RETURN_IF_ERROR(in.ReadVarUInt(&ci.script_line_number));
  }
  if (revision >= kJwtInInterserver) {
    CHGATE_RETURN_IF_ERROR(ReadBool(in, &ci.has_jwt));
    if (ci.has_jwt) CHGATE_RETURN_IF_ERROR(in.ReadString(&ci.jwt, kMaxValueSize));
  }
  return absl::OkStatus();
}

ClientPacketReader::ClientPacketReader(ReadBuffer* in, uint64_t server_revision)
    : in_(in), compressed_in_(in), server_revision_(server_revision) {
  CHGATE_CHECK(server_revision_ <= kMaxClientReaderRevision);
}

void ClientPacketReader::set_revision(uint64_t revision) {
  CHGATE_CHECK(revision <= kMaxClientReaderRevision);
  revision_ = revision;
  revision_known_ = true;
  addendum_pending_ = false;
}

absl::Status ClientPacketReader::ReadQuery(ClientPacket* p) {
  QueryParams& q = p->query;
  q = {};
  p->client_info = {};
  p->external_roles.clear();
  p->interserver_secret.clear();
  CHGATE_RETURN_IF_ERROR(in_->ReadString(&q.query_id, kMaxNameSize));
  if (revision_ >= revision::kClientInfo)
    CHGATE_RETURN_IF_ERROR(ReadClientInfo(*in_, revision_, &p->client_info));
  while (true) {
    Setting s;
    if (revision_ >= revision::kSettingsAsStrings) {
      CHGATE_RETURN_IF_ERROR(ReadSettingWithFlags(*in_, &s));
    } else {
      CHGATE_RETURN_IF_ERROR(ReadBinarySetting(*in_, &s));
    }
    if (s.name.empty()) break;
    q.settings.push_back(std::move(s));
  }
  if (revision_ >= revision::kInterserverExternallyGrantedRoles) {
    CHGATE_RETURN_IF_ERROR(in_->ReadString(&p->external_roles, kMaxValueSize));
  }
  if (revision_ >= revision::kInterserverSecret) {
    CHGATE_RETURN_IF_ERROR(in_->ReadString(&p->interserver_secret, kMaxNameSize));
  }
  uint64_t stage = 0;
  CHGATE_RETURN_IF_ERROR(in_->ReadVarUInt(&stage));
  // 3 and 4 are the after-aggregation stages of distributed queries.
  if (stage > 4) return absl::DataLossError(absl::StrCat("unknown query stage ", stage));
  q.stage = static_cast<QueryStage>(stage);
  uint64_t compression = 0;
  CHGATE_RETURN_IF_ERROR(in_->ReadVarUInt(&compression));
  if (compression > 1) {
    return absl::DataLossError(absl::StrCat("bad query compression flag ", compression));
  }
  q.compression = compression == 1;
  CHGATE_RETURN_IF_ERROR(in_->ReadString(&q.query));
  if (revision_ >= revision::kParameters) {
    while (true) {
      Setting s;
      CHGATE_RETURN_IF_ERROR(ReadSettingWithFlags(*in_, &s));
      if (s.name.empty()) break;
      CHGATE_ASSIGN_OR_RETURN(std::string value, UnquoteParameter(s.name, s.value));
      q.parameters.emplace_back(std::move(s.name), std::move(value));
    }
  }
  compressed_ = q.compression;
  return absl::OkStatus();
}

absl::Status ClientPacketReader::ReadData(ClientPacket* p) {
  p->table_name.clear();
  if (revision_ >= revision::kTemporaryTables) {
    CHGATE_RETURN_IF_ERROR(in_->ReadString(&p->table_name, kMaxNameSize));
  }
  if (!compressed_) return ReadBlock(*in_, revision_, &p->block, discard_data_);
  compressed_in_.ResetArena();  // the previous block is cleared before it is read into
  CHGATE_RETURN_IF_ERROR(ReadBlock(compressed_in_, revision_, &p->block, discard_data_));
  if (compressed_in_.available() != 0) {
    return absl::DataLossError(absl::StrCat("client block ended ", compressed_in_.available(),
                                            " bytes before the end of its compression frame"));
  }
  return absl::OkStatus();
}

absl::StatusOr<ClientPacket*> ClientPacketReader::Next() {
  ClientPacket& p = packet_;
  if (addendum_pending_) {
    addendum_pending_ = false;
    p.type = ClientPacketType::kAddendum;
    CHGATE_RETURN_IF_ERROR(ReadAddendum(*in_, revision_, &p.addendum));
    return &p;
  }
  uint64_t code = 0;
  CHGATE_RETURN_IF_ERROR(in_->ReadVarUInt(&code));
  if (code == static_cast<uint64_t>(ClientCode::kHello)) {
    if (revision_known_) return absl::DataLossError("client sent a second Hello");
    p.type = ClientPacketType::kHello;
    CHGATE_RETURN_IF_ERROR(ReadHelloBody(*in_, &p.hello));
    revision_ = std::min(p.hello.revision, server_revision_);
    revision_known_ = true;
    addendum_pending_ = revision_ >= revision::kAddendum;
    return &p;
  }
  if (!revision_known_) {
    return absl::DataLossError(absl::StrCat("client sent packet code ", code, " before Hello"));
  }
  switch (code) {
    case static_cast<uint64_t>(ClientCode::kQuery):
      p.type = ClientPacketType::kQuery;
      CHGATE_RETURN_IF_ERROR(ReadQuery(&p));
      return &p;
    case static_cast<uint64_t>(ClientCode::kData):
      p.type = ClientPacketType::kData;
      CHGATE_RETURN_IF_ERROR(ReadData(&p));
      return &p;
    case static_cast<uint64_t>(ClientCode::kCancel):
      p.type = ClientPacketType::kCancel;
      return &p;
    case static_cast<uint64_t>(ClientCode::kPing):
      p.type = ClientPacketType::kPing;
      return &p;
    case 6:  // KeepAlive
      p.type = ClientPacketType::kKeepAlive;
      return &p;
    default:
      break;
  }
  if (code <= 14) {
    // TablesStatusRequest, Scalar, IgnoredPartUUIDs, read-task responses, SSH challenge, query
    // plans: interserver or authentication extensions.
    return absl::UnimplementedError(
        absl::StrCat("client packet code ", code, " is not supported by this reader"));
  }
  return absl::DataLossError(absl::StrCat("unknown client packet code ", code));
}

}  // namespace chgate::clickhouse
