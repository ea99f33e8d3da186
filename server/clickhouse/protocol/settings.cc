#include "server/clickhouse/protocol/settings.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/common/string_view.h"

namespace chgate::clickhouse {
namespace {

using T = SettingType;

constexpr std::string_view kOverflowMode[] = {"throw", "break"};
constexpr std::string_view kOverflowModeGroupBy[] = {"throw", "break", "any"};
constexpr std::string_view kTotalsMode[] = {"before_having", "after_having_exclusive",
                                            "after_having_inclusive", "after_having_auto"};
constexpr std::string_view kJoinStrictness[] = {"", "ALL", "ANY"};
constexpr std::string_view kLoadBalancing[] = {"random", "nearest_hostname", "in_order"};
constexpr std::string_view kDistributedProductMode[] = {"deny", "local", "global", "allow"};
constexpr std::string_view kCompressionMethod[] = {"lz4", "zstd"};
constexpr std::string_view kLogsLevel[] = {"none",        "error", "warning",
                                           "information", "debug", "trace"};
constexpr std::string_view kCountDistinct[] = {"uniq", "uniqCombined", "uniqHLL12", "uniqExact"};

constexpr SettingSpec U(std::string_view name, std::string_view server_type = "UInt64") {
  return {name, T::kUInt, {}, server_type};
}
constexpr SettingSpec B(std::string_view name) { return {name, T::kBool, {}, "Bool"}; }
constexpr SettingSpec E(std::string_view name, std::span<const std::string_view> values,
                        std::string_view server_type) {
  return {name, T::kEnum, values, server_type};
}

// Sorted by name.
constexpr SettingSpec kCatalog[] = {
    U("aggregation_memory_efficient_merge_threads"),
    B("allow_ddl"),
    B("allow_experimental_low_cardinality_type"),
    B("async_insert"),
    B("calculate_text_stack_trace"),
    U("connect_timeout", "Seconds"),
    E("count_distinct_implementation", kCountDistinct, "String"),
    B("decimal_check_overflow"),
    E("distinct_overflow_mode", kOverflowMode, "OverflowMode"),
    B("distributed_group_by_no_merge"),
    E("distributed_product_mode", kDistributedProductMode, "DistributedProductMode"),
    B("enable_optimize_predicate_expression"),
    B("extremes"),
    B("force_index_by_date"),
    B("force_primary_key"),
    {"format_csv_delimiter", T::kChar, {}, "Char"},
    E("group_by_overflow_mode", kOverflowModeGroupBy, "OverflowModeGroupBy"),
    U("group_by_two_level_threshold"),
    U("group_by_two_level_threshold_bytes"),
    B("input_format_skip_unknown_fields"),
    B("insert_deduplicate"),
    {"insert_deduplication_token", T::kString, {}, "String"},
    B("insert_distributed_sync"),
    U("insert_quorum"),
    U("insert_quorum_timeout", "Milliseconds"),
    B("insert_sample_with_metadata"),
    E("join_default_strictness", kJoinStrictness, "JoinStrictness"),
    E("join_overflow_mode", kOverflowMode, "OverflowMode"),
    B("join_use_nulls"),
    E("load_balancing", kLoadBalancing, "LoadBalancing"),
    B("log_queries"),
    U("log_queries_cut_to_length"),
    B("low_cardinality_allow_in_native_format"),
    U("max_ast_depth"),
    U("max_ast_elements"),
    U("max_block_size"),
    U("max_bytes_before_external_group_by"),
    U("max_bytes_before_external_sort"),
    U("max_bytes_before_remerge_sort"),
    U("max_bytes_in_distinct"),
    U("max_bytes_in_join"),
    U("max_bytes_in_set"),
    U("max_bytes_to_read"),
    U("max_bytes_to_sort"),
    U("max_columns_to_read"),
    U("max_compress_block_size"),
    U("max_concurrent_queries_for_user"),
    U("max_execution_time", "Seconds"),
    U("max_expanded_ast_elements"),
    U("max_insert_block_size"),
    U("max_memory_usage"),
    U("max_network_bandwidth"),
    U("max_network_bytes"),
    U("max_parallel_replicas"),
    U("max_query_size"),
    U("max_result_bytes"),
    U("max_result_rows"),
    U("max_rows_in_distinct"),
    U("max_rows_in_join"),
    U("max_rows_in_set"),
    U("max_rows_to_group_by"),
    U("max_rows_to_read"),
    U("max_rows_to_sort"),
    U("max_subquery_depth"),
    U("max_temporary_columns"),
    U("max_temporary_non_const_columns"),
    U("max_threads", "MaxThreads"),
    U("min_compress_block_size"),
    U("min_execution_speed"),
    U("min_insert_block_size_bytes"),
    U("min_insert_block_size_rows"),
    E("network_compression_method", kCompressionMethod, "CompressionMethod"),
    {"network_zstd_compression_level", T::kInt, {}, "Int64"},
    B("optimize_move_to_prewhere"),
    B("output_format_json_quote_64bit_integers"),
    U("preferred_block_size_bytes"),
    U("priority"),
    U("queue_max_wait_ms", "Milliseconds"),
    E("read_overflow_mode", kOverflowMode, "OverflowMode"),
    U("readonly"),
    U("receive_timeout", "Seconds"),
    E("result_overflow_mode", kOverflowMode, "OverflowMode"),
    U("select_sequential_consistency"),
    E("send_logs_level", kLogsLevel, "LogsLevel"),
    U("send_timeout", "Seconds"),
    E("set_overflow_mode", kOverflowMode, "OverflowMode"),
    B("skip_unavailable_shards"),
    E("sort_overflow_mode", kOverflowMode, "OverflowMode"),
    U("timeout_before_checking_execution_speed", "Seconds"),
    E("timeout_overflow_mode", kOverflowMode, "OverflowMode"),
    {"totals_auto_threshold", T::kFloat, {}, "Float"},
    E("totals_mode", kTotalsMode, "TotalsMode"),
    B("use_uncompressed_cache"),
    B("wait_for_async_insert"),
};

std::string_view WithoutSettingPrefix(std::string_view type) {
  constexpr std::string_view kPrefix = "Setting";
  if (type.substr(0, kPrefix.size()) == kPrefix && type.size() > kPrefix.size()) {
    type.remove_prefix(kPrefix.size());
  }
  return type;
}

absl::Status Needs(const SettingSpec& spec, std::string_view value, std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("setting ", AbslView(spec.name), " needs ",
                                                 AbslView(what), ", got '",
                                                 absl::CHexEscape(AbslView(value)), "'"));
}

bool AllDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

const SettingSpec* FindSetting(std::string_view name) {
  static const auto* index = [] {
    auto* m = new absl::flat_hash_map<std::string_view, const SettingSpec*>();
    for (const SettingSpec& s : kCatalog) m->emplace(s.name, &s);
    return m;
  }();
  auto it = index->find(name);
  return it == index->end() ? nullptr : it->second;
}

std::span<const SettingSpec> AllSettings() { return kCatalog; }

absl::StatusOr<std::string> CheckSettingValue(const SettingSpec& spec, std::string_view value) {
  switch (spec.type) {
    case T::kUInt: {
      uint64_t v = 0;
      // Digits only: SimpleAtoi would also take a sign and blanks the server's parser refuses.
      if (!AllDigits(value) || !absl::SimpleAtoi(AbslView(value), &v)) {
        return Needs(spec, value, "an unsigned integer");
      }
      return absl::StrCat(v);
    }
    case T::kBool:
      if (value == "0" || value == "false") return std::string("0");
      if (value == "1" || value == "true") return std::string("1");
      return Needs(spec, value, "0, 1, true or false");
    case T::kInt: {
      int64_t v = 0;
      std::string_view digits = value;
      if (!digits.empty() && digits.front() == '-') digits.remove_prefix(1);
      if (!AllDigits(digits) || !absl::SimpleAtoi(AbslView(value), &v))
        return Needs(spec, value, "an integer");
      return absl::StrCat(v);
    }
    case T::kFloat: {
      double v = 0;
      const bool plain = !value.empty() && std::all_of(value.begin(), value.end(), [](char c) {
        return (c >= '0' && c <= '9') || c == '.' || c == '-' || c == 'e' || c == 'E' || c == '+';
      });
      if (!plain || !absl::SimpleAtod(AbslView(value), &v) || !std::isfinite(v)) {
        return Needs(spec, value, "a finite decimal number");
      }
      return std::string(value);
    }
    case T::kEnum:
      for (std::string_view allowed : spec.values) {
        if (value == allowed) return std::string(value);
      }
      return Needs(
          spec, value,
          absl::StrCat("one of ",
                       absl::StrJoin(spec.values, ", ", [](std::string* out, std::string_view v) {
                         absl::StrAppend(out, "'", AbslView(v), "'");
                       })));
    case T::kChar:
      if (value.size() != 1) return Needs(spec, value, "exactly one character");
      return std::string(value);
    case T::kString:
      return std::string(value);
  }
  return Needs(spec, value, "a value of a known type");
}

bool ServerTypeAgrees(const SettingSpec& spec, std::string_view server_type) {
  const std::string_view type = WithoutSettingPrefix(server_type);
  if (type == WithoutSettingPrefix(spec.server_type)) return true;
  switch (spec.type) {
    case T::kUInt:
      return type == "UInt64" || type == "Seconds" || type == "Milliseconds" ||
             type == "MaxThreads";
    case T::kBool:
      return type == "UInt64";  // 0 and 1 read the same
    case T::kEnum:
      return type == "String";
    default:
      return false;
  }
}

}  // namespace chgate::clickhouse
