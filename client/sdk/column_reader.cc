#include "client/sdk/column_reader.h"

#include <arpa/inet.h>

#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/civil_time.h"
#include "client/sdk/internal/strings.h"
#include "columnar/column_layout.h"
#include "text/escape.h"
#include "text/json.h"
#include "text/status_macros.h"
#include "text/type_facts.h"
#include "text/value_text.h"

namespace chgate::client {
namespace {

// ---- raw access --------------------------------------------------------------------------

// Little-endian loads of 1, 2, 4 or 8 bytes (text/value_text.h).
using text::LoadSigned;
using text::LoadUnsigned;

const char* Slot(const v1::Column& column, const ColumnType& type, uint64_t row) {
  return columnar::FixedAt(column, type.width_bytes, row);
}

uint64_t Begin(const v1::Column& column, uint64_t row) {
  return columnar::RowBegin(column.offsets(), row);
}

uint64_t End(const v1::Column& column, uint64_t row) {
  return columnar::RowEnd(column.offsets(), row);
}

bool IsComposite(TypeKind kind) {
  return kind == TypeKind::kArray || kind == TypeKind::kMap || kind == TypeKind::kTuple;
}

bool IsNumeric(TypeKind kind) {
  switch (kind) {
    case TypeKind::kInt:
    case TypeKind::kUInt:
    case TypeKind::kFloat:
    case TypeKind::kBFloat16:
    case TypeKind::kDecimal:
    case TypeKind::kBool:
    case TypeKind::kInterval:
      return true;
    default:
      return false;
  }
}

using text::BFloat16ToFloat;
using text::Pow10;
using text::SplitTicks;

// Whether a wide (or narrow) integer fits int64 / uint64; sets `*out` when it does.
bool WideToInt64(const char* p, size_t width, bool is_signed, int64_t* out) {
  if (width <= 8) {
    if (is_signed) {
      *out = LoadSigned(p, width);
      return true;
    }
    uint64_t u = LoadUnsigned(p, width);
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
    *out = static_cast<int64_t>(u);
    return true;
  }
  const int64_t low = static_cast<int64_t>(LoadUnsigned(p, 8));
  const unsigned char fill = (is_signed && low < 0) ? 0xff : 0x00;
  for (size_t i = 8; i < width; ++i) {
    if (static_cast<unsigned char>(p[i]) != fill) return false;
  }
  *out = low;
  return true;
}

bool WideToUInt64(const char* p, size_t width, bool is_signed, uint64_t* out) {
  if (is_signed && (static_cast<unsigned char>(p[width - 1]) & 0x80) != 0) return false;
  for (size_t i = 8; i < width; ++i) {
    if (p[i] != 0) return false;
  }
  *out = LoadUnsigned(p, width);
  return true;
}

double LoadDouble(const char* p, size_t width) {
  if (width == 4) {
    const uint32_t bits = static_cast<uint32_t>(LoadUnsigned(p, 4));
    float f;
    std::memcpy(&f, &bits, sizeof(f));
    return f;
  }
  const uint64_t bits = LoadUnsigned(p, 8);
  double d;
  std::memcpy(&d, &bits, sizeof(d));
  return d;
}

// ---- text of scalars -------------------------------------------------------------------

// A number's text (the integer, float, Bool and Decimal kinds) from its slot `p`.
void AppendPlainNumber(const char* p, const ColumnType& type, std::string* out) {
  switch (type.kind) {
    case TypeKind::kInt:
    case TypeKind::kUInt:
      if (type.width_bytes > 8) {
        AppendWideInteger(p, type.width_bytes, type.kind == TypeKind::kInt, out);
      } else if (type.kind == TypeKind::kInt) {
        absl::StrAppend(out, LoadSigned(p, type.width_bytes));
      } else {
        absl::StrAppend(out, LoadUnsigned(p, type.width_bytes));
      }
      return;
    case TypeKind::kInterval:
      absl::StrAppend(out, LoadSigned(p, 8));
      return;
    case TypeKind::kFloat:
      if (type.width_bytes == 4) {
        AppendShortestFloat(static_cast<float>(LoadDouble(p, 4)), out);
      } else {
        AppendShortestDouble(LoadDouble(p, 8), out);
      }
      return;
    case TypeKind::kBFloat16:
      text::AppendFloat(text::BFloat16ToFloat(p), out);
      return;
    case TypeKind::kBool:
      out->append(p[0] != 0 ? "true" : "false");
      return;
    case TypeKind::kDecimal:
      text::AppendDecimal(p, type.width_bytes, type.scale, out);
      return;
    default:
      return;
  }
}

// A date's or time's text (Date, Date32, DateTime, DateTime64, Time, Time64) from its slot `p`.
void AppendPlainTemporal(const char* p, const ColumnType& type, std::string* out) {
  switch (type.kind) {
    case TypeKind::kDate:
      text::AppendDate(static_cast<int64_t>(LoadUnsigned(p, 2)), out);
      return;
    case TypeKind::kDate32:
      text::AppendDate(LoadSigned(p, 4), out);
      return;
    case TypeKind::kDateTime:
      text::AppendDateTime(static_cast<int64_t>(LoadUnsigned(p, 4)), type.zone, out);
      return;
    case TypeKind::kDateTime64:
      text::AppendDateTime64(LoadSigned(p, 8), type.scale, type.zone, out);
      return;
    case TypeKind::kTime:
      text::AppendTime(LoadSigned(p, 4), out);
      return;
    case TypeKind::kTime64:
      text::AppendTime64(LoadSigned(p, 8), type.scale, out);
      return;
    default:
      return;
  }
}

// The value of a non-composite, non-NULL row as plain (unescaped) text.
void AppendPlain(const v1::Column& column, const ColumnType& type, uint64_t row, std::string* out) {
  switch (type.kind) {
    case TypeKind::kInt:
    case TypeKind::kUInt:
    case TypeKind::kInterval:
    case TypeKind::kFloat:
    case TypeKind::kBFloat16:
    case TypeKind::kBool:
    case TypeKind::kDecimal:
      return AppendPlainNumber(Slot(column, type, row), type, out);
    case TypeKind::kDate:
    case TypeKind::kDate32:
    case TypeKind::kDateTime:
    case TypeKind::kDateTime64:
    case TypeKind::kTime:
    case TypeKind::kTime64:
      return AppendPlainTemporal(Slot(column, type, row), type, out);
    case TypeKind::kEnum: {
      const int64_t v = LoadSigned(Slot(column, type, row), type.width_bytes);
      const std::string* name = type.EnumName(v);
      if (name != nullptr) {
        out->append(*name);
      } else {
        absl::StrAppend(out, v);
      }
      return;
    }
    case TypeKind::kUuid:
      text::AppendUuid(reinterpret_cast<const unsigned char*>(Slot(column, type, row)), out);
      return;
    case TypeKind::kIpv4:
      text::AppendIpv4(static_cast<uint32_t>(LoadUnsigned(Slot(column, type, row), 4)), out);
      return;
    case TypeKind::kIpv6:
      text::AppendIpv6(reinterpret_cast<const unsigned char*>(Slot(column, type, row)), out);
      return;
    case TypeKind::kFixedString:
      out->append(Slot(column, type, row), type.width_bytes);
      return;
    case TypeKind::kString: {
      const uint64_t begin = Begin(column, row);
      out->append(column.data(), begin, End(column, row) - begin);
      return;
    }
    case TypeKind::kNothing:
    case TypeKind::kNullable:
    case TypeKind::kArray:
    case TypeKind::kMap:
    case TypeKind::kTuple:
      return;
  }
}

void AppendSingleQuoted(std::string_view bytes, std::string* out) {
  out->push_back('\'');
  AppendTsvEscaped(bytes, out);
  out->push_back('\'');
}

void AppendCsvQuoted(std::string_view text, std::string* out) {
  out->push_back('"');
  for (char c : text) {
    if (c == '"') out->push_back('"');
    out->push_back(c);
  }
  out->push_back('"');
}

// TabSeparated text of a value inside an Array, Map or Tuple (strings quoted, NULL as NULL).
void AppendNested(const v1::Column& column, const ColumnType& type, uint64_t row, std::string* out);

void AppendCompositeNested(const v1::Column& column, const ColumnType& type, uint64_t row,
                           std::string* out) {
  if (type.kind == TypeKind::kTuple) {
    out->push_back('(');
    for (size_t i = 0; i < type.elements.size(); ++i) {
      if (i > 0) out->push_back(',');
      AppendNested(column.children(static_cast<int>(i)), type.elements[i], row, out);
    }
    out->push_back(')');
    return;
  }
  const bool is_map = type.kind == TypeKind::kMap;
  out->push_back(is_map ? '{' : '[');
  for (uint64_t i = Begin(column, row), end = End(column, row); i < end; ++i) {
    if (i > Begin(column, row)) out->push_back(',');
    AppendNested(column.children(0), type.elements[0], i, out);
    if (is_map) {
      out->push_back(':');
      AppendNested(column.children(1), type.elements[1], i, out);
    }
  }
  out->push_back(is_map ? '}' : ']');
}

void AppendNested(const v1::Column& column, const ColumnType& type, uint64_t row,
                  std::string* out) {
  if (IsNullAt(column, type, row)) {
    out->append("NULL");
  } else if (IsComposite(type.kind)) {
    AppendCompositeNested(column, type, row, out);
  } else if (IsNumeric(type.kind)) {
    AppendPlain(column, type, row, out);
  } else {
    std::string plain;
    AppendPlain(column, type, row, &plain);
    AppendSingleQuoted(plain, out);
  }
}

void AppendJson(const v1::Column& column, const ColumnType& type, uint64_t row, std::string* out) {
  if (IsNullAt(column, type, row)) {
    out->append("null");
    return;
  }
  switch (type.kind) {
    case TypeKind::kTuple: {
      bool named = !type.element_names.empty();
      for (const std::string& name : type.element_names) named = named && !name.empty();
      out->push_back(named ? '{' : '[');
      for (size_t i = 0; i < type.elements.size(); ++i) {
        if (i > 0) out->push_back(',');
        if (named) {
          AppendJsonString(type.element_names[i], out);
          out->push_back(':');
        }
        AppendJson(column.children(static_cast<int>(i)), type.elements[i], row, out);
      }
      out->push_back(named ? '}' : ']');
      return;
    }
    case TypeKind::kArray:
    case TypeKind::kMap: {
      const bool is_map = type.kind == TypeKind::kMap;
      out->push_back(is_map ? '{' : '[');
      for (uint64_t i = Begin(column, row), end = End(column, row); i < end; ++i) {
        if (i > Begin(column, row)) out->push_back(',');
        if (is_map) {
          std::string key;
          if (!IsNullAt(column.children(0), type.elements[0], i)) {
            AppendPlain(column.children(0), type.elements[0], i, &key);
          }
          AppendJsonString(key, out);
          out->push_back(':');
          AppendJson(column.children(1), type.elements[1], i, out);
        } else {
          AppendJson(column.children(0), type.elements[0], i, out);
        }
      }
      out->push_back(is_map ? '}' : ']');
      return;
    }
    case TypeKind::kFloat:
    case TypeKind::kBFloat16: {
      const double v = type.kind == TypeKind::kBFloat16
                           ? BFloat16ToFloat(Slot(column, type, row))
                           : LoadDouble(Slot(column, type, row), type.width_bytes);
      if (!std::isfinite(v)) {
        out->append("null");
      } else {
        AppendPlain(column, type, row, out);
      }
      return;
    }
    case TypeKind::kInt:
    case TypeKind::kUInt:
      if (type.width_bytes > 8) {
        out->push_back('"');
        AppendPlain(column, type, row, out);
        out->push_back('"');
      } else {
        AppendPlain(column, type, row, out);
      }
      return;
    default:
      if (IsNumeric(type.kind)) {
        AppendPlain(column, type, row, out);
      } else {
        std::string plain;
        AppendPlain(column, type, row, &plain);
        AppendJsonString(plain, out);
      }
      return;
  }
}

absl::Status TypeError(const ColumnType& type, std::string_view as) {
  return absl::FailedPreconditionError(
      absl::StrCat("a ", type.text, " value cannot be read as ", internal::Sv(as)));
}

absl::Status NullError(const ColumnType& type) {
  return absl::FailedPreconditionError(absl::StrCat("the ", type.text, " value is NULL"));
}

absl::Status RangeError(const ColumnType& type, std::string_view as) {
  return absl::OutOfRangeError(
      absl::StrCat("the ", type.text, " value does not fit ", internal::Sv(as)));
}

// ---- validation ------------------------------------------------------------------------

absl::Status Invalid(const ColumnType& type, std::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("malformed ", type.text, " column: ", internal::Sv(what)));
}

// A shared layout check's result for a column of `type`.
absl::Status Checked(const ColumnType& type, const absl::Status& checked) {
  if (checked.ok()) return checked;
  return Invalid(type, std::string_view(checked.message().data(), checked.message().size()));
}

absl::Status Validate(const v1::Column& column, const ColumnType& type, uint64_t rows, int depth) {
  if (depth > 64) return Invalid(type, "nested too deeply");
  if (type.nullable) {
    CHGATE_RETURN_IF_ERROR(
        Checked(type, columnar::CheckNulls(column, rows, columnar::NullFlags::kAnyByte)));
  } else if (!column.nulls().empty()) {
    return Invalid(type, "`nulls` is only for Nullable types");
  }
  if (type.is_fixed_width()) {
    return Checked(type, columnar::CheckFixedData(column, rows, type.width_bytes));
  }
  switch (type.kind) {
    case TypeKind::kString:
      return Checked(type, columnar::CheckStringData(column, rows));
    case TypeKind::kNothing:
      return absl::OkStatus();
    case TypeKind::kArray:
    case TypeKind::kMap: {
      const bool map = type.kind == TypeKind::kMap;
      const int children = map ? 2 : 1;
      CHGATE_RETURN_IF_ERROR(Checked(
          type, columnar::CheckChildren(column, children, map ? "keys, values" : "the elements")));
      absl::StatusOr<uint64_t> last = columnar::CheckOffsets(column.offsets(), rows, "elements");
      if (!last.ok()) return Checked(type, last.status());
      for (int i = 0; i < children; ++i) {
        CHGATE_RETURN_IF_ERROR(
            Validate(column.children(i), type.elements[static_cast<size_t>(i)], *last, depth + 1));
      }
      return absl::OkStatus();
    }
    case TypeKind::kTuple: {
      const int n = static_cast<int>(type.elements.size());
      CHGATE_RETURN_IF_ERROR(
          Checked(type, columnar::CheckChildren(column, n, "one per tuple element")));
      for (int i = 0; i < n; ++i) {
        CHGATE_RETURN_IF_ERROR(
            Validate(column.children(i), type.elements[static_cast<size_t>(i)], rows, depth + 1));
      }
      return absl::OkStatus();
    }
    default:
      return Invalid(type, "unexpected type");
  }
}

}  // namespace

// ---- public ----------------------------------------------------------------------------

absl::Status ValidateColumn(const v1::Column& column, const ColumnType& type, uint64_t rows) {
  return Validate(column, type, rows, 0);
}

bool IsNullAt(const v1::Column& column, const ColumnType& type, uint64_t row) {
  if (type.kind == TypeKind::kNothing) return true;
  return type.nullable && !column.nulls().empty() && column.nulls()[row] != 0;
}

void AppendValueText(const v1::Column& column, const ColumnType& type, uint64_t row,
                     TextFormat format, std::string* out) {
  switch (format) {
    case TextFormat::kJson:
      AppendJson(column, type, row, out);
      return;
    case TextFormat::kTsv:
      if (IsNullAt(column, type, row)) {
        out->append("\\N");
      } else if (IsComposite(type.kind)) {
        AppendCompositeNested(column, type, row, out);
      } else if (IsNumeric(type.kind)) {
        AppendPlain(column, type, row, out);
      } else {
        std::string plain;
        AppendPlain(column, type, row, &plain);
        AppendTsvEscaped(plain, out);
      }
      return;
    case TextFormat::kCsv:
      if (IsNullAt(column, type, row)) {
        out->append("\\N");
      } else if (IsComposite(type.kind)) {
        std::string nested;
        AppendCompositeNested(column, type, row, &nested);
        AppendCsvQuoted(nested, out);
      } else if (IsNumeric(type.kind)) {
        AppendPlain(column, type, row, out);
      } else {
        std::string plain;
        AppendPlain(column, type, row, &plain);
        AppendCsvQuoted(plain, out);
      }
      return;
  }
}

absl::StatusOr<uint64_t> ReadUInt64(const v1::Column& column, const ColumnType& type,
                                    uint64_t row) {
  if (IsNullAt(column, type, row)) return NullError(type);
  switch (type.kind) {
    case TypeKind::kUInt:
    case TypeKind::kInt:
    case TypeKind::kEnum:
    case TypeKind::kInterval: {
      uint64_t v = 0;
      if (!WideToUInt64(Slot(column, type, row), type.width_bytes, type.kind != TypeKind::kUInt,
                        &v)) {
        return RangeError(type, "UInt64");
      }
      return v;
    }
    case TypeKind::kBool:
    case TypeKind::kDate:
    case TypeKind::kDateTime:
    case TypeKind::kIpv4:
      return LoadUnsigned(Slot(column, type, row), type.width_bytes);
    default:
      return TypeError(type, "UInt64");
  }
}

absl::StatusOr<int64_t> ReadInt64(const v1::Column& column, const ColumnType& type, uint64_t row) {
  if (IsNullAt(column, type, row)) return NullError(type);
  switch (type.kind) {
    case TypeKind::kUInt:
    case TypeKind::kInt:
    case TypeKind::kEnum:
    case TypeKind::kInterval:
    case TypeKind::kDate32:
    case TypeKind::kDateTime64:
    case TypeKind::kTime:
    case TypeKind::kTime64: {
      int64_t v = 0;
      if (!WideToInt64(Slot(column, type, row), type.width_bytes, type.kind != TypeKind::kUInt,
                       &v)) {
        return RangeError(type, "Int64");
      }
      return v;
    }
    case TypeKind::kBool:
    case TypeKind::kDate:
    case TypeKind::kDateTime:
      return static_cast<int64_t>(LoadUnsigned(Slot(column, type, row), type.width_bytes));
    default:
      return TypeError(type, "Int64");
  }
}

absl::StatusOr<double> ReadFloat64(const v1::Column& column, const ColumnType& type, uint64_t row) {
  if (IsNullAt(column, type, row)) return NullError(type);
  switch (type.kind) {
    case TypeKind::kFloat:
      return LoadDouble(Slot(column, type, row), type.width_bytes);
    case TypeKind::kBFloat16:
      return static_cast<double>(BFloat16ToFloat(Slot(column, type, row)));
    case TypeKind::kBool:
      return Slot(column, type, row)[0] != 0 ? 1.0 : 0.0;
    case TypeKind::kInt:
    case TypeKind::kUInt:
    case TypeKind::kDecimal: {
      if (type.kind != TypeKind::kDecimal && type.width_bytes <= 8) {
        const char* p = Slot(column, type, row);
        return type.kind == TypeKind::kInt ? static_cast<double>(LoadSigned(p, type.width_bytes))
                                           : static_cast<double>(LoadUnsigned(p, type.width_bytes));
      }
      std::string text;
      AppendPlain(column, type, row, &text);
      double v = 0;
      if (!absl::SimpleAtod(text, &v)) return RangeError(type, "Float64");
      return v;
    }
    default:
      return TypeError(type, "Float64");
  }
}

absl::StatusOr<bool> ReadBool(const v1::Column& column, const ColumnType& type, uint64_t row) {
  if (IsNullAt(column, type, row)) return NullError(type);
  if (type.kind != TypeKind::kBool && type.kind != TypeKind::kInt && type.kind != TypeKind::kUInt) {
    return TypeError(type, "Bool");
  }
  const char* p = Slot(column, type, row);
  for (size_t i = 0; i < type.width_bytes; ++i) {
    if (p[i] != 0) return true;
  }
  return false;
}

absl::StatusOr<std::string_view> ReadString(const v1::Column& column, const ColumnType& type,
                                            uint64_t row) {
  if (IsNullAt(column, type, row)) return NullError(type);
  switch (type.kind) {
    case TypeKind::kString: {
      const uint64_t begin = Begin(column, row);
      return std::string_view(column.data()).substr(begin, End(column, row) - begin);
    }
    case TypeKind::kFixedString:
      return std::string_view(Slot(column, type, row), type.width_bytes);
    case TypeKind::kEnum: {
      const std::string* name =
          type.EnumName(LoadSigned(Slot(column, type, row), type.width_bytes));
      if (name == nullptr) return RangeError(type, "its enum names");
      return std::string_view(*name);
    }
    default:
      return TypeError(type, "String");
  }
}

absl::StatusOr<absl::Time> ReadTime(const v1::Column& column, const ColumnType& type,
                                    uint64_t row) {
  if (IsNullAt(column, type, row)) return NullError(type);
  const char* p = Slot(column, type, row);
  switch (type.kind) {
    case TypeKind::kDate:
      return absl::FromUnixSeconds(static_cast<int64_t>(LoadUnsigned(p, 2)) * 86400);
    case TypeKind::kDate32:
      return absl::FromUnixSeconds(LoadSigned(p, 4) * 86400);
    case TypeKind::kDateTime:
      return absl::FromUnixSeconds(static_cast<int64_t>(LoadUnsigned(p, 4)));
    case TypeKind::kDateTime64: {
      int64_t seconds = 0;
      int64_t fraction = 0;
      SplitTicks(LoadSigned(p, 8), type.scale, &seconds, &fraction);
      return absl::FromUnixSeconds(seconds) + absl::Nanoseconds(fraction * Pow10(9 - type.scale));
    }
    default:
      return TypeError(type, "a time");
  }
}

absl::StatusOr<std::pair<uint64_t, uint64_t>> ReadArrayBounds(const v1::Column& column,
                                                              const ColumnType& type,
                                                              uint64_t row) {
  if (type.kind != TypeKind::kArray && type.kind != TypeKind::kMap) {
    return TypeError(type, "an Array or Map");
  }
  return std::make_pair(Begin(column, row), End(column, row));
}

void AppendTsvEscaped(std::string_view bytes, std::string* out) { text::AppendEscaped(bytes, out); }

void AppendJsonString(std::string_view bytes, std::string* out) {
  text::AppendJsonString(bytes, out);
}

void AppendWideInteger(const char* bytes, size_t width, bool is_signed, std::string* out) {
  text::AppendWideInteger(bytes, width, is_signed, out);
}

void AppendShortestDouble(double v, std::string* out) { text::AppendFloat(v, out); }
void AppendShortestFloat(float v, std::string* out) { text::AppendFloat(v, out); }

namespace {

// Whether `type` is stored as T.
template <typename T>
bool StoredAs(const ColumnType& type) {
  if (type.width_bytes != sizeof(T)) return false;
  if constexpr (std::is_floating_point_v<T>) {
    return type.kind == TypeKind::kFloat;
  } else {
    switch (type.kind) {
      case TypeKind::kUInt:
      case TypeKind::kBool:
      case TypeKind::kDate:
      case TypeKind::kDateTime:
      case TypeKind::kIpv4:
        return std::is_unsigned_v<T>;
      case TypeKind::kInt:
      case TypeKind::kDate32:
      case TypeKind::kDateTime64:
      case TypeKind::kTime:
      case TypeKind::kTime64:
      case TypeKind::kEnum:
      case TypeKind::kInterval:
      case TypeKind::kDecimal:
        return std::is_signed_v<T>;
      default:
        return false;
    }
  }
}

}  // namespace

template <typename T>
absl::StatusOr<FixedColumnView<T>> ViewFixed(const v1::Column& column, const ColumnType& type) {
  if (!StoredAs<T>(type)) return TypeError(type, "a column of this C++ type");
  return FixedColumnView<T>(column.data().data(), column.data().size() / sizeof(T));
}

template absl::StatusOr<FixedColumnView<uint8_t>> ViewFixed(const v1::Column&, const ColumnType&);
template absl::StatusOr<FixedColumnView<uint16_t>> ViewFixed(const v1::Column&, const ColumnType&);
template absl::StatusOr<FixedColumnView<uint32_t>> ViewFixed(const v1::Column&, const ColumnType&);
template absl::StatusOr<FixedColumnView<uint64_t>> ViewFixed(const v1::Column&, const ColumnType&);
template absl::StatusOr<FixedColumnView<int8_t>> ViewFixed(const v1::Column&, const ColumnType&);
template absl::StatusOr<FixedColumnView<int16_t>> ViewFixed(const v1::Column&, const ColumnType&);
template absl::StatusOr<FixedColumnView<int32_t>> ViewFixed(const v1::Column&, const ColumnType&);
template absl::StatusOr<FixedColumnView<int64_t>> ViewFixed(const v1::Column&, const ColumnType&);
template absl::StatusOr<FixedColumnView<float>> ViewFixed(const v1::Column&, const ColumnType&);
template absl::StatusOr<FixedColumnView<double>> ViewFixed(const v1::Column&, const ColumnType&);

size_t StringColumnView::size() const {
  if (column_ == nullptr) return 0;
  return width_ > 0 ? column_->data().size() / width_
                    : static_cast<size_t>(column_->offsets_size());
}

std::string_view StringColumnView::operator[](size_t i) const {
  const std::string& data = column_->data();
  if (width_ > 0) return std::string_view(data).substr(i * width_, width_);
  const uint64_t begin = i == 0 ? 0 : column_->offsets(static_cast<int>(i - 1));
  const uint64_t end = column_->offsets(static_cast<int>(i));
  return std::string_view(data.data() + begin, end - begin);
}

absl::StatusOr<StringColumnView> ViewStrings(const v1::Column& column, const ColumnType& type) {
  if (type.kind == TypeKind::kString) return StringColumnView(&column, 0);
  if (type.kind == TypeKind::kFixedString) return StringColumnView(&column, type.width_bytes);
  return TypeError(type, "strings");
}

}  // namespace chgate::client
