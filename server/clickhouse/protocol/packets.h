// Native protocol packets: codes, the client packets we write (Hello, Addendum, Query with
// ClientInfo and settings, Ping, Cancel, Data header) and the server packets we read (Hello,
// Exception, Progress, ProfileInfo, TableColumns). Each field is gated on the negotiated
// revision R = min(client, server). Stateless functions; thread-compatible.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/clickhouse/protocol/error_codes.h"
#include "server/clickhouse/wire/buffer.h"
#include "server/clickhouse/wire/gather.h"
#include "text/trace_context.h"

namespace chgate::clickhouse {

enum class ClientCode : uint64_t { kHello = 0, kQuery = 1, kData = 2, kCancel = 3, kPing = 4 };

enum class ServerCode : uint64_t {
  kHello = 0,
  kData = 1,
  kException = 2,
  kProgress = 3,
  kPong = 4,
  kEndOfStream = 5,
  kProfileInfo = 6,
  kTotals = 7,
  kExtremes = 8,
  kTablesStatusResponse = 9,
  kLog = 10,
  kTableColumns = 11,
  kPartUuids = 12,
  kReadTaskRequest = 13,
  kProfileEvents = 14,
};

struct HelloParams {
  std::string client_name = "chgate";
  uint64_t version_major = 1;
  uint64_t version_minor = 0;
  uint64_t version_patch = 0;
  uint64_t revision = 0;
  std::string database;
  std::string user = "default";
  std::string password;
  std::string quota_key;
  // Reported in ClientInfo (clickhouse-client sends the login name and the host's FQDN).
  std::string os_user;
  std::string client_hostname;
};

struct ServerInfo {
  std::string name;
  uint64_t version_major = 0;
  uint64_t version_minor = 0;
  uint64_t version_patch = 0;
  uint64_t revision = 0;
  std::string timezone;
  std::string display_name;
};

// A setting sent with a query. Below revision 54429 the value is sent in the setting's own binary
// form, so its type must be known (see SettingKind); from 54429 as text with flags.
struct Setting {
  std::string name;
  std::string value;
  bool important = false;  // flag 0x01 (from 54429): an unknown name makes the server throw
  bool custom = false;     // flag 0x02 (from 54429): a user-defined `custom_*` setting
};

enum class QueryStage : uint64_t { kFetchColumns = 0, kWithMergeableState = 1, kComplete = 2 };

struct QueryParams {
  std::string query_id;
  std::string query;
  std::vector<Setting> settings;
  std::vector<std::pair<std::string, std::string>> parameters;  // name -> value text
  QueryStage stage = QueryStage::kComplete;
  bool compression = false;
  // Sent in ClientInfo to servers of revision 54442 or later (trace_context.h); older servers
  // get the query without it.
  std::optional<text::TraceContext> trace;
};

struct Progress {
  uint64_t rows = 0;
  uint64_t bytes = 0;
  uint64_t total_rows = 0;
  uint64_t total_bytes = 0;
  uint64_t written_rows = 0;
  uint64_t written_bytes = 0;
  uint64_t elapsed_ns = 0;

  void Add(const Progress& other);
};

struct ProfileInfo {
  uint64_t rows = 0;
  uint64_t blocks = 0;
  uint64_t bytes = 0;
  bool applied_limit = false;
  uint64_t rows_before_limit = 0;
  bool calculated_rows_before_limit = false;
  bool applied_aggregation = false;
  uint64_t rows_before_aggregation = 0;
};

// One exception as the server sends it (nested ones follow in `nested`).
struct ServerException {
  int32_t code = 0;
  std::string name;
  std::string message;
  std::string stack_trace;
  std::vector<ServerException> nested;
};

void WriteHello(const HelloParams& hello, GatherWriter& out);
void WriteAddendum(uint64_t revision, const std::string& quota_key, GatherWriter& out);
// Errors: InvalidArgument when a setting cannot be encoded at this revision (unknown type below
// 54429) or parameters are given and the server predates 54459.
absl::Status WriteQuery(const QueryParams& query, const HelloParams& client, uint64_t revision,
                        GatherWriter& out);
// Writes the packet code and (empty) table name that precede a Data block body.
void WriteDataHeader(uint64_t revision, GatherWriter& out);

// Reads the server's answer to Hello (the packet code included). An Exception there becomes its
// status (e.g. wrong password), anything else is DataLoss.
absl::StatusOr<ServerInfo> ReadServerHello(ReadBuffer& in, uint64_t client_revision);
// Reads an Exception body (after the code) into `out`.
absl::Status ReadException(ReadBuffer& in, ServerException* out);
absl::Status ReadProgress(ReadBuffer& in, uint64_t revision, Progress* out);
absl::Status ReadProfileInfo(ReadBuffer& in, uint64_t revision, ProfileInfo* out);

// How a setting's value is encoded below revision 54429.
enum class SettingKind { kUInt, kInt, kBool, kFloat, kString, kUnknown };
SettingKind KindOfSetting(std::string_view name);

// The status for a server exception: the code maps to the nearest absl code (UNKNOWN_TABLE ->
// NotFound, READONLY -> PermissionDenied, TOO_MANY_PARTS -> Unavailable, ...), the message
// reads "ClickHouse error 60 (UNKNOWN_TABLE, DB::Exception): Table ... doesn't exist", and the
// code and the exception's name are attached as payloads for ClickHouseCode() and
// ClickHouseExceptionName().
absl::Status ExceptionToStatus(const ServerException& e);
// The ClickHouse error code carried by a status, if it came from a server exception.
std::optional<int32_t> ClickHouseCode(const absl::Status& status);
// The server exception's name carried by a status ("DB::Exception"), or "" when the status did
// not come from a server exception. Data, not parsed from the message: layers that prefix
// context to the message keep the payloads.
std::string ClickHouseExceptionName(const absl::Status& status);

}  // namespace chgate::clickhouse
