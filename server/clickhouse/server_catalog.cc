#include "server/clickhouse/server_catalog.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "server/clickhouse/protocol/revision.h"
#include "server/clickhouse/protocol/settings.h"
#include "server/clickhouse/text_form.h"
#include "server/common/string_view.h"
#include "text/status_macros.h"

namespace chgate::clickhouse {
namespace {

std::string VersionOf(const Connection& conn) {
  const ServerInfo& s = conn.server_info();
  return absl::StrCat(s.version_major, ".", s.version_minor, ".", s.version_patch);
}

// Rows of a query of string columns, each row's columns as text.
absl::StatusOr<std::vector<std::vector<std::string>>> Rows(Connection& conn, std::string sql) {
  std::vector<std::vector<std::string>> rows;
  CHGATE_RETURN_IF_ERROR(conn.Select({.query = std::move(sql)}, [&](const Block& block) {
    for (size_t r = 0; r < block.rows(); ++r) {
      std::vector<std::string>& row = rows.emplace_back(block.column_count());
      for (size_t c = 0; c < block.column_count(); ++c) {
        AppendTsvValue(*block.column(c).column, r, false, &row[c]);
      }
    }
    return absl::OkStatus();
  }));
  return rows;
}

// A checker for a setting outside chgate's catalog, from the server's own type name.
std::optional<SettingType> TypeFromServer(std::string_view type) {
  constexpr std::string_view kPrefix = "Setting";
  if (type.substr(0, kPrefix.size()) == kPrefix) type.remove_prefix(kPrefix.size());
  if (type == "UInt64" || type == "Seconds" || type == "Milliseconds" || type == "MaxThreads") {
    return SettingType::kUInt;
  }
  if (type == "Bool") return SettingType::kBool;
  if (type == "Int64") return SettingType::kInt;
  if (type == "Float") return SettingType::kFloat;
  if (type == "Char") return SettingType::kChar;
  if (type == "String") return SettingType::kString;
  return std::nullopt;
}

}  // namespace

absl::StatusOr<ServerCatalog> ReadServerCatalog(Connection& conn) {
  ServerCatalog out;
  out.version = VersionOf(conn);
  out.revision = conn.revision();
  CHGATE_ASSIGN_OR_RETURN(auto typed,
                          Rows(conn,
                               "SELECT name FROM system.columns WHERE database = 'system' "
                               "AND table = 'settings' AND name = 'type'"));
  CHGATE_ASSIGN_OR_RETURN(auto rows,
                          Rows(conn, typed.empty() ? "SELECT name, '' FROM system.settings"
                                                   : "SELECT name, type FROM system.settings"));
  for (auto& row : rows) {
    if (row.size() == 2) out.types.emplace(std::move(row[0]), std::move(row[1]));
  }
  CHGATE_ASSIGN_OR_RETURN(auto functions, Rows(conn, "SELECT name FROM system.table_functions"));
  for (auto& row : functions) {
    if (row.size() == 1) out.table_functions.insert(absl::AsciiStrToLower(row[0]));
  }
  if (out.types.empty()) {
    return absl::FailedPreconditionError(
        "ClickHouse's system.settings returned no settings: caller settings cannot be checked");
  }
  return out;
}

absl::StatusOr<std::string> CheckSettingForServer(std::string_view name, std::string_view value,
                                                  const ServerCatalog& server) {
  auto it = server.types.find(AbslView(name));
  if (it == server.types.end()) {
    return absl::InvalidArgumentError(absl::StrCat("setting ", absl::CHexEscape(AbslView(name)),
                                                   " is not known to this ClickHouse server (",
                                                   server.version, ")"));
  }
  const std::string& server_type = it->second;
  if (const SettingSpec* spec = FindSetting(name); spec != nullptr) {
    if (!server_type.empty() && !ServerTypeAgrees(*spec, server_type)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "setting ", AbslView(name), " has type ", server_type, " on this ClickHouse server (",
          server.version, "), not the one chgate checks values against"));
    }
    return CheckSettingValue(*spec, value);
  }
  const std::optional<SettingType> type =
      server.revision >= revision::kSettingsAsStrings && !server_type.empty()
          ? TypeFromServer(server_type)
          : std::nullopt;
  if (!type.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "setting ", AbslView(name), " cannot be checked for this ClickHouse server (",
        server.version, server_type.empty() ? "" : absl::StrCat(", type ", server_type),
        "): chgate does not know how the server reads its values, so it is not sent"));
  }
  const SettingSpec generic{.name = name, .type = *type, .values = {}, .server_type = server_type};
  return CheckSettingValue(generic, value);
}

absl::StatusOr<std::shared_ptr<const ServerCatalog>> ServerCatalogCache::Get(Connection& conn) {
  const std::string key = absl::StrCat(conn.options().host, ":", conn.options().port, "/",
                                       VersionOf(conn), "/", conn.revision());
  {
    absl::MutexLock lock(&mu_);
    auto it = servers_.find(key);
    if (it != servers_.end()) return it->second;
  }
  CHGATE_ASSIGN_OR_RETURN(ServerCatalog read, ReadServerCatalog(conn));
  auto shared = std::make_shared<const ServerCatalog>(std::move(read));
  absl::MutexLock lock(&mu_);
  return servers_.emplace(key, std::move(shared)).first->second;
}

}  // namespace chgate::clickhouse
