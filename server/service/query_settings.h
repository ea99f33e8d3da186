// Which ClickHouse settings a Query caller may set. An allowlist: by default the read-side tuning
// a read-only ClickHouse user may change (limits on what a query reads, sorts, groups, joins and
// returns, their overflow modes, threads, block sizes, extremes, totals, join defaults);
// `--query-allowed-settings` adds names, so a newer server's settings never widen it by
// themselves. Some names are never settable, whatever the option says: chgate's own (readonly,
// max_execution_time_leaf, the network compression), and anything about users, quotas, DDL,
// query logging or replacing a running query.
//
// A setting passes two checks: Check here, before the call is admitted (allowed, and a value its
// type accepts when chgate knows the type), and clickhouse::CheckSettingForServer on the
// connection the query will use (the server knows the name and chgate knows how that server reads
// its value). Anything else is INVALID_ARGUMENT and nothing is sent.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace chgate::service {

class QuerySettingsPolicy {
 public:
  // The default allowlist plus `extra` (names, case-sensitive as ClickHouse's are).
  // InvalidArgument for a never-settable name or one that is not a setting name.
  static absl::StatusOr<QuerySettingsPolicy> Create(const std::vector<std::string>& extra);

  // The default allowlist alone.
  static QuerySettingsPolicy Default();
  // The default allowlist, sorted.
  static std::span<const std::string_view> DefaultAllowed();
  // Whether `name` is never settable by a caller.
  static bool NeverSettable(std::string_view name);

  // OK when a caller may send `name` = `value` (before the server's own check).
  absl::Status Check(std::string_view name, std::string_view value) const;
  // OK when the statement itself may assign `name` (a SETTINGS clause or a SET statement;
  // sql::AssignedSettings): the same allowlist as Check, and never max_execution_time, which
  // chgate caps at the call's deadline only where callers set it, in QueryRequest.settings.
  absl::Status CheckAssigned(std::string_view name) const;

 private:
  // The name checks of Check: never settable, or not allowed.
  absl::Status CheckName(std::string_view name) const;

  absl::flat_hash_set<std::string> allowed_;
};

}  // namespace chgate::service
