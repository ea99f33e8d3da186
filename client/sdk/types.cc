#include "client/sdk/types.h"

#include <cctype>
#include <charconv>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "client/sdk/internal/status_macros.h"
#include "client/sdk/internal/strings.h"

namespace chgate::client {
namespace {

bool IsIdentStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsIdentChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Recursive-descent parser over one type text. Every method leaves `pos_` after what it read.
class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  absl::StatusOr<ColumnType> ParseAll() {
    absl::StatusOr<ColumnType> type = ParseType(0);
    if (!type.ok()) return type;
    SkipSpace();
    if (pos_ != text_.size()) return Error("unexpected text after the type");
    return type;
  }

 private:
  static constexpr int kMaxDepth = 64;

  absl::Status Error(std::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("cannot parse type '", internal::Sv(text_),
                                                   "': ", internal::Sv(what), " at offset ", pos_));
  }

  void SkipSpace() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }

  bool Peek(char c) {
    SkipSpace();
    return pos_ < text_.size() && text_[pos_] == c;
  }

  bool Consume(char c) {
    if (!Peek(c)) return false;
    ++pos_;
    return true;
  }

  absl::Status Expect(char c) {
    if (Consume(c)) return absl::OkStatus();
    return Error(absl::StrCat("expected '", std::string(1, c), "'"));
  }

  // An identifier, or a backquoted name (tuple element names).
  absl::StatusOr<std::string> Name() {
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == '`') return Quoted('`');
    if (pos_ >= text_.size() || !IsIdentStart(text_[pos_])) return Error("expected a name");
    size_t start = pos_;
    while (pos_ < text_.size() && IsIdentChar(text_[pos_])) ++pos_;
    return std::string(text_.substr(start, pos_ - start));
  }

  // A literal quoted with `quote`, with backslash escapes (and doubled quotes) undone.
  absl::StatusOr<std::string> Quoted(char quote) {
    SkipSpace();
    if (pos_ >= text_.size() || text_[pos_] != quote) return Error("expected a quoted literal");
    ++pos_;
    std::string out;
    while (pos_ < text_.size()) {
      char c = text_[pos_++];
      if (c == '\\') {
        if (pos_ >= text_.size()) break;
        char e = text_[pos_++];
        switch (e) {
          case 'n':
            out.push_back('\n');
            break;
          case 't':
            out.push_back('\t');
            break;
          case 'r':
            out.push_back('\r');
            break;
          case 'b':
            out.push_back('\b');
            break;
          case 'f':
            out.push_back('\f');
            break;
          case '0':
            out.push_back('\0');
            break;
          default:
            out.push_back(e);
        }
      } else if (c == quote) {
        if (pos_ < text_.size() && text_[pos_] == quote) {
          out.push_back(quote);
          ++pos_;
        } else {
          return out;
        }
      } else {
        out.push_back(c);
      }
    }
    return Error("unterminated quoted literal");
  }

  absl::StatusOr<int64_t> Number() {
    SkipSpace();
    size_t start = pos_;
    if (pos_ < text_.size() && (text_[pos_] == '-' || text_[pos_] == '+')) ++pos_;
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) ++pos_;
    std::string_view digits = text_.substr(start, pos_ - start);
    if (!digits.empty() && digits.front() == '+') digits.remove_prefix(1);
    int64_t value = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size()) {
      pos_ = start;
      return Error("expected a number");
    }
    return value;
  }

  // Skips one balanced argument (e.g. the function of SimpleAggregateFunction) up to the next
  // top-level ',' or ')'.
  absl::Status SkipArgument() {
    int depth = 0;
    while (pos_ < text_.size()) {
      char c = text_[pos_];
      if (c == '\'' || c == '`') {
        absl::StatusOr<std::string> skipped = Quoted(c);
        if (!skipped.ok()) return skipped.status();
        continue;
      }
      if (depth == 0 && (c == ',' || c == ')')) return absl::OkStatus();
      if (c == '(') ++depth;
      if (c == ')') --depth;
      ++pos_;
    }
    return Error("unterminated argument");
  }

  static ColumnType Fixed(TypeKind kind, size_t width) {
    ColumnType t;
    t.kind = kind;
    t.width_bytes = width;
    return t;
  }

  absl::StatusOr<ColumnType> ParseType(int depth) {
    if (depth > kMaxDepth) return Error("type nested too deeply");
    SkipSpace();
    const size_t start = pos_;
    absl::StatusOr<std::string> name = Name();
    if (!name.ok()) return name.status();
    absl::StatusOr<ColumnType> type = ParseNamed(*name, depth);
    if (!type.ok()) return type;
    type->text = std::string(text_.substr(start, pos_ - start));
    return type;
  }

  absl::StatusOr<ColumnType> Single(int depth) {
    CLIENT_RETURN_IF_ERROR(Expect('('));
    absl::StatusOr<ColumnType> inner = ParseType(depth + 1);
    if (!inner.ok()) return inner;
    CLIENT_RETURN_IF_ERROR(Expect(')'));
    return inner;
  }

  absl::StatusOr<ColumnType> ParseNamed(const std::string& name, int depth) {
    // Plain numbers first: the most common case.
    static constexpr struct {
      const char* name;
      TypeKind kind;
      size_t width;
    } kSimple[] = {
        {"Int8", TypeKind::kInt, 1},          {"Int16", TypeKind::kInt, 2},
        {"Int32", TypeKind::kInt, 4},         {"Int64", TypeKind::kInt, 8},
        {"Int128", TypeKind::kInt, 16},       {"Int256", TypeKind::kInt, 32},
        {"UInt8", TypeKind::kUInt, 1},        {"UInt16", TypeKind::kUInt, 2},
        {"UInt32", TypeKind::kUInt, 4},       {"UInt64", TypeKind::kUInt, 8},
        {"UInt128", TypeKind::kUInt, 16},     {"UInt256", TypeKind::kUInt, 32},
        {"Float32", TypeKind::kFloat, 4},     {"Float64", TypeKind::kFloat, 8},
        {"BFloat16", TypeKind::kBFloat16, 2}, {"Bool", TypeKind::kBool, 1},
        {"Date", TypeKind::kDate, 2},         {"Date32", TypeKind::kDate32, 4},
        {"UUID", TypeKind::kUuid, 16},        {"IPv4", TypeKind::kIpv4, 4},
        {"IPv6", TypeKind::kIpv6, 16},        {"String", TypeKind::kString, 0},
        {"Nothing", TypeKind::kNothing, 0},
    };
    for (const auto& simple : kSimple) {
      if (name == simple.name) return Fixed(simple.kind, simple.width);
    }
    if (name.rfind("Interval", 0) == 0 && name.size() > 8) return Fixed(TypeKind::kInterval, 8);

    if (name == "Nullable") {
      absl::StatusOr<ColumnType> inner = Single(depth);
      if (!inner.ok()) return inner;
      if (inner->nullable || inner->kind == TypeKind::kArray || inner->kind == TypeKind::kMap ||
          inner->kind == TypeKind::kTuple) {
        return Error("Nullable of a composite or Nullable type");
      }
      inner->nullable = true;
      return inner;
    }
    if (name == "LowCardinality") {
      absl::StatusOr<ColumnType> inner = Single(depth);
      if (!inner.ok()) return inner;
      inner->low_cardinality = true;
      return inner;
    }
    if (name == "Array") {
      absl::StatusOr<ColumnType> inner = Single(depth);
      if (!inner.ok()) return inner;
      ColumnType t;
      t.kind = TypeKind::kArray;
      t.elements.push_back(*std::move(inner));
      return t;
    }
    if (name == "Map") {
      ColumnType t;
      t.kind = TypeKind::kMap;
      CLIENT_RETURN_IF_ERROR(Expect('('));
      for (int i = 0; i < 2; ++i) {
        if (i == 1) CLIENT_RETURN_IF_ERROR(Expect(','));
        absl::StatusOr<ColumnType> inner = ParseType(depth + 1);
        if (!inner.ok()) return inner;
        t.elements.push_back(*std::move(inner));
      }
      CLIENT_RETURN_IF_ERROR(Expect(')'));
      return t;
    }
    if (name == "Tuple") return ParseTuple(depth);
    if (name == "FixedString") {
      CLIENT_RETURN_IF_ERROR(Expect('('));
      absl::StatusOr<int64_t> n = Number();
      if (!n.ok()) return n.status();
      if (*n <= 0 || *n > (int64_t{1} << 30)) return Error("bad FixedString size");
      CLIENT_RETURN_IF_ERROR(Expect(')'));
      return Fixed(TypeKind::kFixedString, static_cast<size_t>(*n));
    }
    if (name == "DateTime") {
      ColumnType t = Fixed(TypeKind::kDateTime, 4);
      if (Consume('(')) {
        absl::StatusOr<std::string> tz = Quoted('\'');
        if (!tz.ok()) return tz.status();
        t.time_zone = *std::move(tz);
        t.zone = LoadZoneOrUtc(t.time_zone);
        CLIENT_RETURN_IF_ERROR(Expect(')'));
      }
      return t;
    }
    if (name == "DateTime64") {
      ColumnType t = Fixed(TypeKind::kDateTime64, 8);
      CLIENT_RETURN_IF_ERROR(Expect('('));
      absl::StatusOr<int64_t> p = Number();
      if (!p.ok()) return p.status();
      if (*p < 0 || *p > 9) return Error("DateTime64 precision must be 0..9");
      t.scale = static_cast<int>(*p);
      if (Consume(',')) {
        absl::StatusOr<std::string> tz = Quoted('\'');
        if (!tz.ok()) return tz.status();
        t.time_zone = *std::move(tz);
        t.zone = LoadZoneOrUtc(t.time_zone);
      }
      CLIENT_RETURN_IF_ERROR(Expect(')'));
      return t;
    }
    if (name == "Decimal" || name == "Decimal32" || name == "Decimal64" || name == "Decimal128" ||
        name == "Decimal256") {
      return ParseDecimal(name);
    }
    if (name == "Enum8" || name == "Enum16") return ParseEnum(name == "Enum8" ? 1 : 2);
    if (name == "SimpleAggregateFunction") {
      CLIENT_RETURN_IF_ERROR(Expect('('));
      CLIENT_RETURN_IF_ERROR(SkipArgument());
      CLIENT_RETURN_IF_ERROR(Expect(','));
      absl::StatusOr<ColumnType> inner = ParseType(depth + 1);
      if (!inner.ok()) return inner;
      CLIENT_RETURN_IF_ERROR(Expect(')'));
      return inner;
    }
    // Geo types are aliases of Tuple and Array types.
    if (name == "Point") {
      ColumnType t;
      t.kind = TypeKind::kTuple;
      for (int i = 0; i < 2; ++i) {
        ColumnType f = Fixed(TypeKind::kFloat, 8);
        f.text = "Float64";
        t.elements.push_back(f);
        t.element_names.emplace_back();
      }
      return t;
    }
    if (name == "Ring" || name == "LineString") return GeoArray("Point", depth);
    if (name == "Polygon" || name == "MultiLineString") return GeoArray("Ring", depth);
    if (name == "MultiPolygon") return GeoArray("Polygon", depth);

    return absl::UnimplementedError(absl::StrCat("type '", internal::Sv(text_), "': '", name,
                                                 "' is not supported by chgate.v1.Column"));
  }

  absl::StatusOr<ColumnType> GeoArray(const std::string& element, int depth) {
    absl::StatusOr<ColumnType> inner = ParseNamed(element, depth + 1);
    if (!inner.ok()) return inner;
    inner->text = element;
    ColumnType t;
    t.kind = TypeKind::kArray;
    t.elements.push_back(*std::move(inner));
    return t;
  }

  absl::StatusOr<ColumnType> ParseTuple(int depth) {
    ColumnType t;
    t.kind = TypeKind::kTuple;
    CLIENT_RETURN_IF_ERROR(Expect('('));
    if (Consume(')')) return t;
    do {
      // `name Type` or just `Type`: a first word followed by another word is an element name.
      SkipSpace();
      const size_t start = pos_;
      absl::StatusOr<std::string> first = Name();
      if (!first.ok()) return first.status();
      SkipSpace();
      std::string element_name;
      if (pos_ < text_.size() && (IsIdentStart(text_[pos_]) || text_[pos_] == '`')) {
        element_name = *std::move(first);
        absl::StatusOr<ColumnType> element = ParseType(depth + 1);
        if (!element.ok()) return element;
        t.elements.push_back(*std::move(element));
      } else {
        absl::StatusOr<ColumnType> element = ParseNamed(*first, depth + 1);
        if (!element.ok()) return element;
        element->text = std::string(text_.substr(start, pos_ - start));
        t.elements.push_back(*std::move(element));
      }
      t.element_names.push_back(std::move(element_name));
    } while (Consume(','));
    CLIENT_RETURN_IF_ERROR(Expect(')'));
    return t;
  }

  absl::StatusOr<ColumnType> ParseDecimal(const std::string& name) {
    ColumnType t;
    t.kind = TypeKind::kDecimal;
    CLIENT_RETURN_IF_ERROR(Expect('('));
    absl::StatusOr<int64_t> first = Number();
    if (!first.ok()) return first.status();
    int64_t precision = 0;
    int64_t scale = 0;
    if (name == "Decimal") {
      precision = *first;
      CLIENT_RETURN_IF_ERROR(Expect(','));
      absl::StatusOr<int64_t> s = Number();
      if (!s.ok()) return s.status();
      scale = *s;
    } else {
      precision = name == "Decimal32"    ? 9
                  : name == "Decimal64"  ? 18
                  : name == "Decimal128" ? 38
                                         : 76;
      scale = *first;
    }
    CLIENT_RETURN_IF_ERROR(Expect(')'));
    if (precision < 1 || precision > 76 || scale < 0 || scale > precision) {
      return Error("bad Decimal precision or scale");
    }
    t.precision = static_cast<int>(precision);
    t.scale = static_cast<int>(scale);
    t.width_bytes = precision <= 9 ? 4 : precision <= 18 ? 8 : precision <= 38 ? 16 : 32;
    return t;
  }

  absl::StatusOr<ColumnType> ParseEnum(size_t width) {
    ColumnType t = Fixed(TypeKind::kEnum, width);
    CLIENT_RETURN_IF_ERROR(Expect('('));
    do {
      absl::StatusOr<std::string> element = Quoted('\'');
      if (!element.ok()) return element.status();
      CLIENT_RETURN_IF_ERROR(Expect('='));
      absl::StatusOr<int64_t> value = Number();
      if (!value.ok()) return value.status();
      const int64_t limit = width == 1 ? 128 : 32768;
      if (*value < -limit || *value >= limit) return Error("enum value out of range");
      t.enum_values.emplace_back(*std::move(element), *value);
    } while (Consume(','));
    CLIENT_RETURN_IF_ERROR(Expect(')'));
    return t;
  }

  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

const std::string* ColumnType::EnumName(int64_t value) const {
  for (const auto& [name, v] : enum_values) {
    if (v == value) return &name;
  }
  return nullptr;
}

bool ColumnType::EnumValue(std::string_view name, int64_t* value) const {
  for (const auto& [n, v] : enum_values) {
    if (n == name) {
      *value = v;
      return true;
    }
  }
  return false;
}

absl::StatusOr<ColumnType> ParseColumnType(std::string_view text) {
  return Parser(text).ParseAll();
}

void ApplyDefaultTimeZone(const absl::TimeZone& zone, ColumnType* type) {
  if ((type->kind == TypeKind::kDateTime || type->kind == TypeKind::kDateTime64) &&
      type->time_zone.empty()) {
    type->zone = zone;
  }
  for (ColumnType& element : type->elements) ApplyDefaultTimeZone(zone, &element);
}

absl::TimeZone LoadZoneOrUtc(const std::string& name) {
  absl::TimeZone zone;
  if (name.empty() || !absl::LoadTimeZone(name, &zone)) return absl::UTCTimeZone();
  return zone;
}

}  // namespace chgate::client
