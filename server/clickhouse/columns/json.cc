#include "server/clickhouse/columns/json.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "server/clickhouse/columns/array.h"
#include "server/clickhouse/columns/dynamic.h"
#include "server/clickhouse/columns/fixed.h"
#include "server/clickhouse/columns/low_cardinality.h"
#include "server/clickhouse/columns/nullable.h"
#include "server/clickhouse/columns/tuple.h"
#include "server/clickhouse/columns/variant.h"
#include "text/json.h"
#include "text/status_macros.h"

namespace chgate::clickhouse {
namespace {

// Object serialization versions (the first UInt64 of the prefix).
constexpr uint64_t kVersionV1 = 0;
constexpr uint64_t kVersionString = 1;
constexpr uint64_t kVersionV2 = 2;
constexpr uint64_t kVersionFlattened = 3;
constexpr uint64_t kVersionV3 = 4;

constexpr uint64_t kMaxPathSize = 1 << 16;
constexpr uint64_t kMaxDynamicPaths = 1 << 16;
constexpr int kMaxJsonDepth = 1000;

// A strict recursive-descent JSON checker.
class JsonChecker {
 public:
  explicit JsonChecker(std::string_view text) : text_(text) {}

  absl::Status CheckObjectDocument() {
    SkipSpaces();
    if (!At('{')) return Error("expected a JSON object");
    CHGATE_RETURN_IF_ERROR(Value(0));
    SkipSpaces();
    if (pos_ != text_.size()) return Error("unexpected characters after the object");
    return absl::OkStatus();
  }

 private:
  absl::Status Error(std::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid JSON: ", std::string(what), " at offset ", pos_));
  }
  bool At(char c) const { return pos_ < text_.size() && text_[pos_] == c; }
  void SkipSpaces() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }
  bool Literal(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }
  static bool IsDigit(char c) { return c >= '0' && c <= '9'; }

  absl::Status Value(int depth) {
    if (depth > kMaxJsonDepth) return Error("nested too deeply");
    SkipSpaces();
    if (pos_ >= text_.size()) return Error("unexpected end");
    switch (text_[pos_]) {
      case '{':
        return Object(depth);
      case '[':
        return Array(depth);
      case '"':
        return String();
      case 't':
        return Literal("true") ? absl::OkStatus() : Error("bad literal");
      case 'f':
        return Literal("false") ? absl::OkStatus() : Error("bad literal");
      case 'n':
        return Literal("null") ? absl::OkStatus() : Error("bad literal");
      default:
        return Number();
    }
  }

  absl::Status Object(int depth) {
    ++pos_;  // {
    SkipSpaces();
    if (At('}')) {
      ++pos_;
      return absl::OkStatus();
    }
    while (true) {
      SkipSpaces();
      if (!At('"')) return Error("expected a key");
      CHGATE_RETURN_IF_ERROR(String());
      SkipSpaces();
      if (!At(':')) return Error("expected ':'");
      ++pos_;
      CHGATE_RETURN_IF_ERROR(Value(depth + 1));
      SkipSpaces();
      if (At(',')) {
        ++pos_;
        continue;
      }
      if (At('}')) {
        ++pos_;
        return absl::OkStatus();
      }
      return Error("expected ',' or '}'");
    }
  }

  absl::Status Array(int depth) {
    ++pos_;  // [
    SkipSpaces();
    if (At(']')) {
      ++pos_;
      return absl::OkStatus();
    }
    while (true) {
      CHGATE_RETURN_IF_ERROR(Value(depth + 1));
      SkipSpaces();
      if (At(',')) {
        ++pos_;
        continue;
      }
      if (At(']')) {
        ++pos_;
        return absl::OkStatus();
      }
      return Error("expected ',' or ']'");
    }
  }

  absl::Status String() {
    ++pos_;  // "
    while (pos_ < text_.size()) {
      const unsigned char c = static_cast<unsigned char>(text_[pos_]);
      if (c == '"') {
        ++pos_;
        return absl::OkStatus();
      }
      if (c < 0x20) return Error("control character in a string");
      if (c == '\\') {
        ++pos_;
        if (pos_ >= text_.size()) break;
        const char e = text_[pos_];
        if (e == 'u') {
          for (int i = 1; i <= 4; ++i) {
            if (pos_ + static_cast<size_t>(i) >= text_.size() ||
                !std::isxdigit(static_cast<unsigned char>(text_[pos_ + static_cast<size_t>(i)]))) {
              return Error("bad \\u escape");
            }
          }
          pos_ += 4;
        } else if (std::string_view("\"\\/bfnrt").find(e) == std::string_view::npos) {
          return Error("bad escape");
        }
      }
      ++pos_;
    }
    return Error("unterminated string");
  }

  absl::Status Number() {
    const size_t start = pos_;
    if (At('-')) ++pos_;
    if (At('0')) {
      ++pos_;
    } else if (pos_ < text_.size() && IsDigit(text_[pos_])) {
      while (pos_ < text_.size() && IsDigit(text_[pos_])) ++pos_;
    } else {
      pos_ = start;
      return Error("expected a value");
    }
    if (At('.')) {
      ++pos_;
      if (pos_ >= text_.size() || !IsDigit(text_[pos_])) return Error("bad number");
      while (pos_ < text_.size() && IsDigit(text_[pos_])) ++pos_;
    }
    if (At('e') || At('E')) {
      ++pos_;
      if (At('+') || At('-')) ++pos_;
      if (pos_ >= text_.size() || !IsDigit(text_[pos_])) return Error("bad number");
      while (pos_ < text_.size() && IsDigit(text_[pos_])) ++pos_;
    }
    return absl::OkStatus();
  }

  std::string_view text_;
  size_t pos_ = 0;
};

// One (path, JSON value text) of a row.
struct PathValue {
  std::string path;
  std::string value;
};

// Writes `entries` (sorted by path) as one object, paths split at '.' into nested objects.
void AppendNestedObject(const std::vector<PathValue>& entries, std::string* out) {
  std::vector<std::string_view> open;  // components of the nested objects currently open
  out->push_back('{');
  bool first_at_level = true;
  for (const PathValue& entry : entries) {
    std::vector<std::string_view> parts;
    std::string_view rest = entry.path;
    while (true) {
      const size_t dot = rest.find('.');
      parts.push_back(rest.substr(0, dot));
      if (dot == std::string_view::npos) break;
      rest.remove_prefix(dot + 1);
    }
    size_t common = 0;
    while (common < open.size() && common + 1 < parts.size() && open[common] == parts[common]) {
      ++common;
    }
    while (open.size() > common) {
      out->push_back('}');
      open.pop_back();
      first_at_level = false;
    }
    for (size_t i = common; i < parts.size(); ++i) {
      if (!first_at_level) out->push_back(',');
      AppendJsonString(parts[i], out);
      out->push_back(':');
      if (i + 1 == parts.size()) {
        out->append(entry.value);
        first_at_level = false;
      } else {
        out->push_back('{');
        open.push_back(parts[i]);
        first_at_level = true;
      }
    }
  }
  while (!open.empty()) {
    out->push_back('}');
    open.pop_back();
  }
  out->push_back('}');
}

void AppendFixedJson(const ColumnFixed& c, size_t row, std::string* out) {
  switch (c.fixed_kind()) {
    case FixedKind::kUInt:
    case FixedKind::kInt:
    case FixedKind::kDecimal:
    case FixedKind::kBool:
      c.FormatValue(row, false, out);
      return;
    case FixedKind::kFloat:
    case FixedKind::kBFloat16: {
      std::string text;
      c.FormatValue(row, false, &text);
      // Non-finite values are null in ClickHouse's JSON output (without quote_denormals).
      const bool finite = !text.empty() && text.find_first_of("ni") == std::string::npos;
      out->append(finite ? text : "null");
      return;
    }
    case FixedKind::kNothing:
      out->append("null");
      return;
    case FixedKind::kFixedString:
      AppendJsonString(std::string_view(c.RawAt(row), c.width()), out);
      return;
    case FixedKind::kDate:
    case FixedKind::kDate32:
    case FixedKind::kDateTime:
    case FixedKind::kDateTime64:
    case FixedKind::kTime:
    case FixedKind::kTime64:
    case FixedKind::kUuid:
    case FixedKind::kIpv4:
    case FixedKind::kIpv6:
    case FixedKind::kEnum: {
      std::string text;
      text::AppendPlainText(c.params(), c.RawAt(row), &text);
      AppendJsonString(text, out);
      return;
    }
  }
}

}  // namespace

absl::Status ValidateJsonObject(std::string_view text) {
  return JsonChecker(text).CheckObjectDocument();
}

void AppendJsonString(std::string_view s, std::string* out) {
  text::AppendClickHouseJsonString(s, out);
}

namespace {

// An Array as a JSON array, a Map as a JSON object (keys as their text).
void AppendJsonArrayOrMap(const Column& column, size_t row, std::string* out) {
  const auto& c = static_cast<const ColumnArray&>(column);
  const size_t begin = static_cast<size_t>(c.RowBegin(row));
  const size_t end = static_cast<size_t>(c.Offset(row));
  if (column.kind() == ColumnKind::kArray) {
    out->push_back('[');
    for (size_t i = begin; i < end; ++i) {
      if (i != begin) out->push_back(',');
      AppendJsonValue(*c.nested(), i, out);
    }
    out->push_back(']');
    return;
  }
  const auto& pairs = static_cast<const ColumnTuple&>(*c.nested());
  out->push_back('{');
  for (size_t i = begin; i < end; ++i) {
    if (i != begin) out->push_back(',');
    std::string key;
    pairs.element(0)->FormatValue(i, false, &key);
    AppendJsonString(key, out);
    out->push_back(':');
    AppendJsonValue(*pairs.element(1), i, out);
  }
  out->push_back('}');
}

// A named Tuple as a JSON object, an unnamed one as a JSON array.
void AppendJsonTuple(const Column& column, size_t row, std::string* out) {
  const auto& c = static_cast<const ColumnTuple&>(column);
  const bool named = !column.type().args.empty() && !column.type().args[0].element_name.empty();
  out->push_back(named ? '{' : '[');
  for (size_t i = 0; i < c.element_count(); ++i) {
    if (i != 0) out->push_back(',');
    if (named) {
      AppendJsonString(column.type().args[i].element_name, out);
      out->push_back(':');
    }
    AppendJsonValue(*c.element(i), row, out);
  }
  out->push_back(named ? '}' : ']');
}

// A Dynamic value as its type's JSON (a value in the shared variant decoded first).
void AppendJsonDynamic(const Column& column, size_t row, std::string* out) {
  const auto& c = static_cast<const ColumnDynamic&>(column);
  if (c.IsNull(row)) {
    out->append("null");
  } else if (c.IsShared(row)) {
    const auto& values =
        static_cast<const ColumnString&>(*c.variant().alternative(c.shared_index()));
    absl::StatusOr<ColumnPtr> value =
        DecodeBinaryValue(values.At(static_cast<size_t>(c.variant().offset(row))));
    if (value.ok()) {
      AppendJsonValue(**value, 0, out);
    } else {
      out->append("null");
    }
  } else {
    AppendJsonValue(*c.variant().alternative(c.variant().discriminator(row)),
                    static_cast<size_t>(c.variant().offset(row)), out);
  }
}

}  // namespace

void AppendJsonValue(const Column& column, size_t row, std::string* out) {
  switch (column.kind()) {
    case ColumnKind::kFixed:
      AppendFixedJson(static_cast<const ColumnFixed&>(column), row, out);
      return;
    case ColumnKind::kString:
      AppendJsonString(static_cast<const ColumnString&>(column).At(row), out);
      return;
    case ColumnKind::kNullable: {
      const auto& c = static_cast<const ColumnNullable&>(column);
      if (c.IsNull(row)) {
        out->append("null");
      } else {
        AppendJsonValue(*c.nested(), row, out);
      }
      return;
    }
    case ColumnKind::kArray:
    case ColumnKind::kMap:
      AppendJsonArrayOrMap(column, row, out);
      return;
    case ColumnKind::kTuple:
      AppendJsonTuple(column, row, out);
      return;
    case ColumnKind::kLowCardinality: {
      const auto& c = static_cast<const ColumnLowCardinality&>(column);
      if (c.IsNull(row)) {
        out->append("null");
      } else {
        AppendJsonValue(*c.dictionary(), static_cast<size_t>(c.Index(row)), out);
      }
      return;
    }
    case ColumnKind::kVariant: {
      const auto& c = static_cast<const ColumnVariant&>(column);
      if (c.IsNull(row)) {
        out->append("null");
      } else {
        AppendJsonValue(*c.alternative(c.discriminator(row)), static_cast<size_t>(c.offset(row)),
                        out);
      }
      return;
    }
    case ColumnKind::kDynamic:
      AppendJsonDynamic(column, row, out);
      return;
    case ColumnKind::kJson:
      out->append(static_cast<const ColumnJson&>(column).Text(row));
      return;
    case ColumnKind::kAggregateState: {
      std::string text;
      column.FormatValue(row, false, &text);
      AppendJsonString(text, out);
      return;
    }
  }
}

ColumnJson::ColumnJson(std::string type_name, TypeAst type, JsonParams params)
    : Column(std::move(type_name), std::move(type)), params_(std::move(params)) {}

absl::Status ColumnJson::AppendJson(std::string_view text) {
  CHGATE_RETURN_IF_ERROR(ValidateJsonObject(text));
  texts_.Append(text);
  return absl::OkStatus();
}

ColumnPtr ColumnJson::CloneEmpty() const {
  JsonParams params = params_;
  for (auto& [path, column] : params.typed_paths) column = column->CloneEmpty();
  return std::make_shared<ColumnJson>(type_name(), type(), std::move(params));
}

absl::Status ColumnJson::LoadPrefix(ReadBuffer& in) {
  CHGATE_RETURN_IF_ERROR(in.ReadFixed(&version_));
  dynamic_paths_.clear();
  shared_ = nullptr;
  if (version_ == kVersionString) return absl::OkStatus();
  if (version_ == kVersionFlattened || version_ == kVersionV3) {
    return absl::UnimplementedError(absl::StrCat("JSON serialization version ", version_,
                                                 " is not supported (only V1, V2 and STRING)"));
  }
  if (version_ != kVersionV1 && version_ != kVersionV2) {
    return absl::DataLossError(absl::StrCat("unknown JSON serialization version ", version_));
  }
  uint64_t count = 0;
  if (version_ == kVersionV1) CHGATE_RETURN_IF_ERROR(in.ReadVarUInt(&count));  // max_dynamic_paths
  CHGATE_RETURN_IF_ERROR(in.ReadVarUInt(&count));
  if (count > kMaxDynamicPaths) {
    return absl::DataLossError(absl::StrCat("JSON prefix announces ", count, " dynamic paths"));
  }
  const TypeAst dynamic_type{.name = "Dynamic"};
  for (uint64_t i = 0; i < count; ++i) {
    std::string path;
    CHGATE_RETURN_IF_ERROR(in.ReadString(&path, kMaxPathSize));
    dynamic_paths_.emplace_back(
        std::move(path),
        std::make_shared<ColumnDynamic>("Dynamic", dynamic_type, params_.max_dynamic_types));
  }
  for (auto& [path, column] : params_.typed_paths) {
    column->Clear();
    CHGATE_RETURN_IF_ERROR(column->LoadPrefix(in));
  }
  for (auto& [path, column] : dynamic_paths_) CHGATE_RETURN_IF_ERROR(column->LoadPrefix(in));
  // Shared data is Array(Tuple(String, String)), which has no prefix.
  const TypeAst string_type{.name = "String"};
  const TypeAst pair_type{.name = "Tuple", .args = {string_type, string_type}};
  shared_ = std::make_shared<ColumnArray>(
      "Array(Tuple(String, String))", TypeAst{.name = "Array", .args = {pair_type}},
      std::make_shared<ColumnTuple>("Tuple(String, String)", pair_type,
                                    std::vector<ColumnPtr>{std::make_shared<ColumnString>(),
                                                           std::make_shared<ColumnString>()}));
  return absl::OkStatus();
}

absl::Status ColumnJson::LoadBody(ReadBuffer& in, size_t rows) {
  if (version_ == kVersionString) {
    // Each row is the server's own JSON text; it is kept as it came.
    return texts_.LoadBody(in, rows);
  }
  if (shared_ == nullptr) return absl::DataLossError("JSON body without its prefix");
  for (auto& [path, column] : params_.typed_paths)
    CHGATE_RETURN_IF_ERROR(column->LoadBody(in, rows));
  for (auto& [path, column] : dynamic_paths_) CHGATE_RETURN_IF_ERROR(column->LoadBody(in, rows));
  CHGATE_RETURN_IF_ERROR(shared_->LoadBody(in, rows));
  const auto& pairs =
      static_cast<const ColumnTuple&>(*static_cast<ColumnArray&>(*shared_).nested());
  const auto& values = static_cast<const ColumnString&>(*pairs.element(1));
  for (size_t i = 0; i < values.Size(); ++i) {
    absl::StatusOr<ColumnPtr> value = DecodeBinaryValue(values.At(i));
    if (!value.ok()) {
      return absl::Status(value.status().code(),
                          absl::StrCat("JSON shared data value: ", value.status().message()));
    }
  }
  AppendObjectRows(rows);
  for (auto& [path, column] : params_.typed_paths) column->Clear();
  for (auto& [path, column] : dynamic_paths_) column->Clear();
  shared_->Clear();
  return absl::OkStatus();
}

void ColumnJson::AppendObjectRows(size_t rows) {
  const auto& shared = static_cast<const ColumnArray&>(*shared_);
  const auto& pairs = static_cast<const ColumnTuple&>(*shared.nested());
  const auto& shared_paths = static_cast<const ColumnString&>(*pairs.element(0));
  const auto& shared_values = static_cast<const ColumnString&>(*pairs.element(1));
  std::vector<PathValue> entries;
  std::string text;
  for (size_t row = 0; row < rows; ++row) {
    entries.clear();
    for (const auto& [path, column] : params_.typed_paths) {
      entries.push_back({path, {}});
      AppendJsonValue(*column, row, &entries.back().value);
    }
    for (const auto& [path, column] : dynamic_paths_) {
      if (static_cast<const ColumnDynamic&>(*column).IsNull(row)) continue;
      entries.push_back({path, {}});
      AppendJsonValue(*column, row, &entries.back().value);
    }
    for (size_t i = static_cast<size_t>(shared.RowBegin(row));
         i < static_cast<size_t>(shared.Offset(row)); ++i) {
      absl::StatusOr<ColumnPtr> value = DecodeBinaryValue(shared_values.At(i));
      if (!value.ok()) continue;  // checked in LoadBody
      entries.push_back({std::string(shared_paths.At(i)), {}});
      AppendJsonValue(**value, 0, &entries.back().value);
    }
    std::sort(entries.begin(), entries.end(),
              [](const PathValue& a, const PathValue& b) { return a.path < b.path; });
    text.clear();
    AppendNestedObject(entries, &text);
    texts_.Append(text);
  }
}

void ColumnJson::SavePrefix(GatherWriter& out) const { out.WriteFixed<uint64_t>(kVersionString); }

void ColumnJson::FormatValue(size_t row, bool nested, std::string* out) const {
  if (nested) {
    AppendQuoted(Text(row), out);
  } else {
    AppendTsvEscaped(Text(row), out);
  }
}

}  // namespace chgate::clickhouse
