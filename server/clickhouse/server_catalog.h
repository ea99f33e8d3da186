// What a connected ClickHouse server knows that decides what a caller may send it: its query
// settings (system.settings) and its table functions (system.table_functions). And the check a
// caller's setting passes before it is sent to that server: the server knows the name, chgate
// knows how that server reads its value (protocol/settings.h), and the value is one it accepts.
// A setting that fails is never sent, so the connection stays in step with the server.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/clickhouse/connection.h"

namespace chgate::clickhouse {

struct ServerCatalog {
  // Every setting the server has, with the type it reports ("" from servers whose system.settings
  // has no `type` column, before ClickHouse 20.5).
  absl::flat_hash_map<std::string, std::string> types;
  // Every table function the server has, lower case (ClickHouse matches them case-insensitively
  // when it looks a call up).
  absl::flat_hash_set<std::string> table_functions;
  std::string version;  // "18.16.1", for messages
  uint64_t revision = 0;
};

// Reads system.settings and system.table_functions over `conn` (three small queries).
absl::StatusOr<ServerCatalog> ReadServerCatalog(Connection& conn);

// `value` for the setting `name` as it will be sent to `server`. Errors: InvalidArgument when the
// server has no such setting, when chgate cannot tell how the server reads its value (a type it
// does not know, or below revision 54429 a setting outside its catalog), or when the value is not
// one the setting's type accepts.
absl::StatusOr<std::string> CheckSettingForServer(std::string_view name, std::string_view value,
                                                  const ServerCatalog& server);

// ServerCatalog per server: read on first use and kept for the process's life, keyed by the
// endpoint, the server's version and the negotiated revision (an upgraded server is read again).
// Thread-safe.
class ServerCatalogCache {
 public:
  absl::StatusOr<std::shared_ptr<const ServerCatalog>> Get(Connection& conn);

 private:
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<const ServerCatalog>> servers_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace chgate::clickhouse
