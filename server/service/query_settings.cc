#include "server/service/query_settings.h"

#include <algorithm>
#include <array>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/clickhouse/protocol/settings.h"
#include "server/common/string_view.h"
#include "text/status_macros.h"

namespace chgate::service {
namespace {

// Sorted.
constexpr std::string_view kDefaultAllowed[] = {
    "aggregation_memory_efficient_merge_threads",
    "count_distinct_implementation",
    "decimal_check_overflow",
    "distinct_overflow_mode",
    "enable_optimize_predicate_expression",
    "extremes",
    "force_index_by_date",
    "force_primary_key",
    "group_by_overflow_mode",
    "group_by_two_level_threshold",
    "group_by_two_level_threshold_bytes",
    "join_default_strictness",
    "join_overflow_mode",
    "join_use_nulls",
    "max_ast_depth",
    "max_ast_elements",
    "max_block_size",
    "max_bytes_before_external_group_by",
    "max_bytes_before_external_sort",
    "max_bytes_before_remerge_sort",
    "max_bytes_in_distinct",
    "max_bytes_in_join",
    "max_bytes_in_set",
    "max_bytes_to_read",
    "max_bytes_to_sort",
    "max_columns_to_read",
    "max_execution_time",
    "max_expanded_ast_elements",
    "max_memory_usage",
    "max_result_bytes",
    "max_result_rows",
    "max_rows_in_distinct",
    "max_rows_in_join",
    "max_rows_in_set",
    "max_rows_to_group_by",
    "max_rows_to_read",
    "max_rows_to_sort",
    "max_subquery_depth",
    "max_temporary_columns",
    "max_temporary_non_const_columns",
    "max_threads",
    "min_execution_speed",
    "optimize_move_to_prewhere",
    "preferred_block_size_bytes",
    "priority",
    "read_overflow_mode",
    "result_overflow_mode",
    "select_sequential_consistency",
    "set_overflow_mode",
    "sort_overflow_mode",
    "timeout_before_checking_execution_speed",
    "timeout_overflow_mode",
    "totals_auto_threshold",
    "totals_mode",
    "use_uncompressed_cache",
};

// chgate sets these itself, or they change what the connection's session may do.
constexpr std::string_view kNeverExact[] = {
    "allow_ddl",
    "async_insert",
    "insert_deduplication_token",
    "max_execution_time_leaf",
    "network_compression_method",
    "network_zstd_compression_level",
    "profile",
    "readonly",
    "replace_running_query",
    "wait_for_async_insert",
};
// Any name containing one of these: users, quotas, roles, DDL, query logging, introspection.
constexpr std::string_view kNeverParts[] = {
    "user",          "quota",           "readonly", "ddl",
    "role",          "all_queries",     "log_quer", "log_profile",
    "introspection", "replace_running", "grant",    "password",
};

bool IsSettingName(std::string_view name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
}

}  // namespace

QuerySettingsPolicy QuerySettingsPolicy::Default() {
  QuerySettingsPolicy policy;
  for (std::string_view name : kDefaultAllowed) policy.allowed_.emplace(name);
  return policy;
}

std::span<const std::string_view> QuerySettingsPolicy::DefaultAllowed() { return kDefaultAllowed; }

bool QuerySettingsPolicy::NeverSettable(std::string_view name) {
  const std::string lower = absl::AsciiStrToLower(AbslView(name));
  for (std::string_view n : kNeverExact) {
    if (lower == n) return true;
  }
  for (std::string_view part : kNeverParts) {
    if (absl::StrContains(lower, AbslView(part))) return true;
  }
  return false;
}

absl::StatusOr<QuerySettingsPolicy> QuerySettingsPolicy::Create(
    const std::vector<std::string>& extra) {
  QuerySettingsPolicy policy = Default();
  for (const std::string& name : extra) {
    if (!IsSettingName(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", absl::CHexEscape(AbslView(name)), "' is not a setting name"));
    }
    if (NeverSettable(name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "setting ", AbslView(name),
          " can never be set by callers (chgate sets it, or it concerns users, quotas, DDL, "
          "query logging or running queries)"));
    }
    policy.allowed_.emplace(name);
  }
  return policy;
}

absl::Status QuerySettingsPolicy::CheckName(std::string_view name) const {
  if (NeverSettable(name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("setting ", absl::CHexEscape(AbslView(name)), " cannot be set by callers"));
  }
  if (!allowed_.contains(AbslView(name))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "setting ", absl::CHexEscape(AbslView(name)),
        " is not one callers may set (the operator can allow it with --query-allowed-settings)"));
  }
  return absl::OkStatus();
}

absl::Status QuerySettingsPolicy::Check(std::string_view name, std::string_view value) const {
  CHGATE_RETURN_IF_ERROR(CheckName(name));
  if (const clickhouse::SettingSpec* spec = clickhouse::FindSetting(name); spec != nullptr) {
    CHGATE_RETURN_IF_ERROR(clickhouse::CheckSettingValue(*spec, value).status());
  }
  return absl::OkStatus();
}

absl::Status QuerySettingsPolicy::CheckAssigned(std::string_view name) const {
  if (name == "max_execution_time") {
    return absl::InvalidArgumentError(
        "setting max_execution_time cannot be assigned in the statement: set it in "
        "QueryRequest.settings, where chgate keeps it within the call's deadline");
  }
  if (absl::Status st = CheckName(name); !st.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(st.message(), " (assigned in the statement's SETTINGS or SET)"));
  }
  return absl::OkStatus();
}

}  // namespace chgate::service
