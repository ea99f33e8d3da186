#include "client/sdk/builders.h"

#include <arpa/inet.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "client/sdk/internal/strings.h"
#include "columnar/column_layout.h"
#include "text/type_facts.h"
#include "text/value_parse.h"

namespace chgate::client {

// ---- row values --------------------------------------------------------------------------

v1::Value MakeNull() {
  v1::Value v;
  v.set_null_value(google::protobuf::NULL_VALUE);
  return v;
}

v1::Value MakeValue(std::nullptr_t) { return MakeNull(); }

v1::Value MakeValue(bool v) {
  v1::Value out;
  out.set_bool_value(v);
  return out;
}

v1::Value MakeValue(double v) {
  v1::Value out;
  out.set_double_value(v);
  return out;
}

v1::Value MakeValue(std::string_view text) {
  v1::Value out;
  out.set_string_value(std::string(text));
  return out;
}

v1::Value MakeValue(const char* text) { return MakeValue(std::string_view(text)); }
v1::Value MakeValue(const std::string& text) { return MakeValue(std::string_view(text)); }

v1::Value MakeValue(absl::Time t) {
  v1::Value out;
  const int64_t seconds = absl::ToUnixSeconds(t);  // rounds toward negative infinity
  out.mutable_timestamp_value()->set_seconds(seconds);
  out.mutable_timestamp_value()->set_nanos(
      static_cast<int32_t>(absl::ToInt64Nanoseconds(t - absl::FromUnixSeconds(seconds))));
  return out;
}

v1::Value MakeBytes(std::string_view bytes) {
  v1::Value out;
  out.set_bytes_value(std::string(bytes));
  return out;
}

v1::Value MakeArray(std::vector<v1::Value> elements) {
  v1::Value out;
  for (v1::Value& e : elements) *out.mutable_array_value()->add_values() = std::move(e);
  out.mutable_array_value();
  return out;
}

v1::Value MakeTuple(std::vector<v1::Value> elements) {
  v1::Value out;
  for (v1::Value& e : elements) *out.mutable_tuple_value()->add_values() = std::move(e);
  out.mutable_tuple_value();
  return out;
}

v1::Value MakeMap(std::vector<std::pair<v1::Value, v1::Value>> entries) {
  v1::Value out;
  v1::MapValue* map = out.mutable_map_value();
  for (auto& [key, value] : entries) {
    v1::MapValue::Entry* entry = map->add_entries();
    *entry->mutable_key() = std::move(key);
    *entry->mutable_value() = std::move(value);
  }
  return out;
}

void AddRow(v1::InsertRequest* request, std::vector<v1::Value> values) {
  v1::Row* row = request->mutable_rows()->add_rows();
  for (v1::Value& v : values) *row->add_values() = std::move(v);
}

v1::Row MakeRow(std::vector<v1::Value> values) {
  v1::Row row;
  row.mutable_values()->Reserve(static_cast<int>(values.size()));
  for (v1::Value& v : values) *row.add_values() = std::move(v);
  return row;
}

// ---- columnar blocks ---------------------------------------------------------------------

namespace {

// Digits of a decimal integer text as little-endian bytes of `width` (two's complement when
// negative); false when the text is not an integer or does not fit `width` bytes.
bool DigitsToBytes(bool negative, std::string_view digits, size_t width, bool is_signed,
                   std::string* out) {
  std::vector<uint32_t> limbs((width + 3) / 4 + 1, 0);
  for (char c : digits) {
    if (c < '0' || c > '9') return false;
    uint64_t carry = static_cast<uint64_t>(c - '0');
    for (uint32_t& limb : limbs) {
      const uint64_t v = static_cast<uint64_t>(limb) * 10 + carry;
      limb = static_cast<uint32_t>(v);
      carry = v >> 32;
    }
    if (carry != 0) return false;
  }
  std::string bytes(limbs.size() * 4, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) {
    bytes[i] = static_cast<char>((limbs[i / 4] >> (8 * (i % 4))) & 0xff);
  }
  // Magnitude limits: unsigned < 2^(8w); signed positive < 2^(8w-1); negative <= 2^(8w-1).
  auto bit = [&](size_t index) {
    return (static_cast<unsigned char>(bytes[index / 8]) >> (index % 8)) & 1;
  };
  const size_t bits = 8 * width;
  for (size_t i = bits; i < bytes.size() * 8; ++i) {
    if (bit(i)) return false;
  }
  if (negative && !is_signed) {
    for (char b : bytes) {
      if (b != 0) return false;
    }
  }
  if (is_signed && bit(bits - 1)) {
    // Only -2^(bits-1) is allowed with the top bit set.
    if (!negative) return false;
    for (size_t i = 0; i + 1 < bits; ++i) {
      if (bit(i)) return false;
    }
  }
  bytes.resize(width);
  if (negative) {
    unsigned carry = 1;
    for (char& b : bytes) {
      const unsigned v = static_cast<unsigned>(static_cast<unsigned char>(~b)) + carry;
      b = static_cast<char>(v & 0xff);
      carry = v >> 8;
    }
  }
  out->append(bytes);
  return true;
}

// Parses "[-+]digits[.digits]" into the digits of value x 10^scale; false when malformed or
// when it has more significant fractional digits than `scale`.
bool ScaledDigits(std::string_view text, int scale, bool* negative, std::string* digits) {
  *negative = false;
  if (!text.empty() && (text.front() == '-' || text.front() == '+')) {
    *negative = text.front() == '-';
    text.remove_prefix(1);
  }
  const size_t dot = text.find('.');
  std::string_view whole = text.substr(0, dot);
  std::string_view fraction = dot == std::string_view::npos ? "" : text.substr(dot + 1);
  if (whole.empty() && fraction.empty()) return false;
  while (fraction.size() > static_cast<size_t>(scale) && fraction.back() == '0') {
    fraction.remove_suffix(1);
  }
  if (fraction.size() > static_cast<size_t>(scale)) return false;
  digits->assign(whole);
  digits->append(fraction);
  digits->append(static_cast<size_t>(scale) - fraction.size(), '0');
  for (char c : *digits) {
    if (c < '0' || c > '9') return false;
  }
  const size_t first = digits->find_first_not_of('0');
  digits->erase(0, first == std::string::npos ? digits->size() : first);
  if (digits->empty()) *negative = false;
  return true;
}

void StoreLittleEndian(uint64_t v, size_t width, std::string* out) {
  for (size_t i = 0; i < width; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

}  // namespace

ColumnBuilder::ColumnBuilder(BlockBuilder* owner, std::string path, ColumnType type,
                             v1::Column* column)
    : owner_(owner), path_(std::move(path)), type_(std::move(type)), column_(column) {
  column_->set_type(type_.text);
  std::vector<std::string> names;
  if (type_.kind == TypeKind::kArray) names = {"[]"};
  if (type_.kind == TypeKind::kMap) names = {".keys", ".values"};
  if (type_.kind == TypeKind::kTuple) {
    for (size_t i = 0; i < type_.elements.size(); ++i) {
      names.push_back(absl::StrCat(
          ".", type_.element_names[i].empty() ? absl::StrCat(i + 1) : type_.element_names[i]));
    }
  }
  for (size_t i = 0; i < names.size(); ++i) {
    v1::Column* child = column_->add_children();
    if (type_.kind == TypeKind::kMap) child->set_name(i == 0 ? "keys" : "values");
    if (type_.kind == TypeKind::kTuple) child->set_name(type_.element_names[i]);
    children_.push_back(std::unique_ptr<ColumnBuilder>(
        new ColumnBuilder(owner_, path_ + names[i], type_.elements[i], child)));
  }
}

void ColumnBuilder::Fail(std::string_view what) {
  owner_->Fail(absl::InvalidArgumentError(
      absl::StrCat("column ", path_, " (", type_.text, ") row ", rows_, ": ", internal::Sv(what))));
}

bool ColumnBuilder::StartValue() {
  switch (type_.kind) {
    case TypeKind::kArray:
    case TypeKind::kMap:
    case TypeKind::kTuple:
      Fail("append to element() and call EndRow() for composite columns");
      return false;
    case TypeKind::kNothing:
      Fail("Nothing takes no values");
      return false;
    default:
      break;
  }
  if (type_.nullable) column_->mutable_nulls()->push_back('\0');
  return true;
}

void ColumnBuilder::AppendBytes(const char* bytes, size_t size) {
  column_->mutable_data()->append(bytes, size);
  ++rows_;
}

void ColumnBuilder::AppendInteger(bool negative, uint64_t magnitude) {
  // Turns the value into the column's integer representation, range-checked.
  auto fits_signed = [&](size_t bits) {
    if (bits > 64) return true;
    if (bits == 64)
      return negative ? magnitude <= (uint64_t{1} << 63) : magnitude < (uint64_t{1} << 63);
    const uint64_t limit = uint64_t{1} << (bits - 1);
    return negative ? magnitude <= limit : magnitude < limit;
  };
  auto fits_unsigned = [&](size_t bits) {
    return !negative && (bits >= 64 || magnitude < (uint64_t{1} << bits));
  };
  auto store = [&](size_t width) {
    const uint64_t v = negative ? ~magnitude + 1 : magnitude;
    std::string bytes;
    StoreLittleEndian(v, width < 8 ? width : 8, &bytes);
    for (size_t i = 8; i < width; ++i) bytes.push_back(negative ? '\xff' : '\0');
    AppendBytes(bytes.data(), bytes.size());
  };
  const size_t width = type_.width_bytes;
  const std::string value = absl::StrCat(negative ? "-" : "", magnitude);
  switch (type_.kind) {
    case TypeKind::kInt:
    case TypeKind::kDate32:
    case TypeKind::kDateTime64:
    case TypeKind::kInterval:
      if (!fits_signed(8 * width)) return Fail(absl::StrCat(value, " is out of range"));
      if (type_.kind == TypeKind::kDate32 &&
          (negative ? magnitude > static_cast<uint64_t>(-text::kDate32MinDays)
                    : magnitude > static_cast<uint64_t>(text::kDate32MaxDays))) {
        return Fail(absl::StrCat(value, " days is outside 1900-01-01..2299-12-31"));
      }
      return store(width);
    case TypeKind::kTime:
    case TypeKind::kTime64: {
      const uint64_t max = static_cast<uint64_t>(text::kTimeMaxSeconds * text::Pow10(type_.scale) +
                                                 (text::Pow10(type_.scale) - 1));
      if (magnitude > max) {
        return Fail(absl::StrCat(value, " is outside -999:59:59 .. 999:59:59"));
      }
      return store(width);
    }
    case TypeKind::kUInt:
    case TypeKind::kDate:
    case TypeKind::kDateTime:
    case TypeKind::kIpv4:
      if (!fits_unsigned(8 * width)) return Fail(absl::StrCat(value, " is out of range"));
      return store(width);
    case TypeKind::kBool:
      if (negative || magnitude > 1) return Fail(absl::StrCat(value, " is not 0 or 1"));
      return store(1);
    case TypeKind::kEnum: {
      if (!fits_signed(64)) return Fail(absl::StrCat(value, " is not an element"));
      const int64_t v =
          negative ? -static_cast<int64_t>(magnitude) : static_cast<int64_t>(magnitude);
      if (type_.EnumName(v) == nullptr) return Fail(absl::StrCat(value, " is not an element"));
      return store(width);
    }
    case TypeKind::kDecimal: {
      std::string digits = absl::StrCat(magnitude);
      if (magnitude != 0) digits.append(static_cast<size_t>(type_.scale), '0');
      if (static_cast<int>(digits.size()) > type_.precision) {
        return Fail(absl::StrCat(value, " exceeds the precision"));
      }
      std::string bytes;
      if (!DigitsToBytes(negative, digits, width, true, &bytes)) {
        return Fail(absl::StrCat(value, " is out of range"));
      }
      return AppendBytes(bytes.data(), bytes.size());
    }
    default:
      return Fail("the type does not take integers");
  }
}

ColumnBuilder& ColumnBuilder::AppendInt64(int64_t v) {
  if (!StartValue()) return *this;
  const bool negative = v < 0;
  const uint64_t magnitude = negative ? ~static_cast<uint64_t>(v) + 1 : static_cast<uint64_t>(v);
  AppendInteger(negative, magnitude);
  return *this;
}

ColumnBuilder& ColumnBuilder::AppendUInt64(uint64_t v) {
  if (!StartValue()) return *this;
  AppendInteger(false, v);
  return *this;
}

ColumnBuilder& ColumnBuilder::AppendBool(bool v) {
  if (!StartValue()) return *this;
  AppendInteger(false, v ? 1 : 0);
  return *this;
}

ColumnBuilder& ColumnBuilder::AppendDecimalRaw(int64_t scaled) {
  if (!StartValue()) return *this;
  if (type_.kind != TypeKind::kDecimal) {
    Fail("AppendDecimalRaw needs a Decimal column");
    return *this;
  }
  const bool negative = scaled < 0;
  const uint64_t magnitude =
      negative ? ~static_cast<uint64_t>(scaled) + 1 : static_cast<uint64_t>(scaled);
  const std::string digits = absl::StrCat(magnitude);
  std::string bytes;
  if ((magnitude != 0 && static_cast<int>(digits.size()) > type_.precision) ||
      !DigitsToBytes(negative, digits, type_.width_bytes, true, &bytes)) {
    Fail(absl::StrCat(scaled, " exceeds the precision"));
    return *this;
  }
  AppendBytes(bytes.data(), bytes.size());
  return *this;
}

ColumnBuilder& ColumnBuilder::AppendFloat64(double v) {
  if (!StartValue()) return *this;
  if (type_.kind == TypeKind::kFloat && type_.width_bytes == 8) {
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof(bits));
    std::string bytes;
    StoreLittleEndian(bits, 8, &bytes);
    AppendBytes(bytes.data(), bytes.size());
  } else if (type_.kind == TypeKind::kFloat || type_.kind == TypeKind::kBFloat16) {
    // The server's rule for Float32 and BFloat16 (text/value_parse.h).
    std::string bytes;
    if (type_.kind == TypeKind::kFloat) {
      float f;
      if (!text::ToFloat32(v, &f)) {
        Fail(absl::StrCat(v, " is beyond the range of ", type_.text));
        return *this;
      }
      uint32_t bits;
      std::memcpy(&bits, &f, sizeof(bits));
      StoreLittleEndian(bits, 4, &bytes);
    } else {
      uint16_t b;
      if (!text::ToBFloat16(v, &b)) {
        Fail(absl::StrCat(v, " is beyond the range of ", type_.text));
        return *this;
      }
      StoreLittleEndian(b, 2, &bytes);
    }
    AppendBytes(bytes.data(), bytes.size());
  } else {
    Fail("the type does not take floating-point values");
  }
  return *this;
}

namespace {

// The bytes of an integer or decimal written as text, exactly (no rounding).
bool ExactNumberFromText(const ColumnType& type, std::string_view v, std::string* out,
                         std::string* why) {
  const bool decimal = type.kind == TypeKind::kDecimal;
  bool negative = false;
  std::string digits;
  if (!ScaledDigits(v, decimal ? type.scale : 0, &negative, &digits)) {
    *why = absl::StrCat("'", internal::Sv(v), "' is not an exact ", decimal ? "decimal" : "integer",
                        " for the type");
    return false;
  }
  const bool too_precise = decimal && static_cast<int>(digits.size()) > type.precision;
  if (too_precise ||
      !DigitsToBytes(negative, digits, type.width_bytes, type.kind != TypeKind::kUInt, out)) {
    *why = absl::StrCat("'", internal::Sv(v), "' is out of range");
    return false;
  }
  return true;
}

// The fixed-width bytes of text `v` for `type` (FixedString, Enum, UUID, Time, IPv4/6, integers
// and decimals). False with `why` for text the type does not take.
bool FixedBytesFromText(const ColumnType& type, std::string_view v, std::string* out,
                        std::string* why) {
  out->clear();
  switch (type.kind) {
    case TypeKind::kFixedString: {
      if (v.size() > type.width_bytes) {
        *why = absl::StrCat(v.size(), " bytes do not fit");
        return false;
      }
      out->assign(v);
      out->resize(type.width_bytes, '\0');
      return true;
    }
    case TypeKind::kEnum: {
      int64_t value = 0;
      if (!type.EnumValue(v, &value)) {
        *why = absl::StrCat("'", internal::Sv(v), "' is not an element");
        return false;
      }
      StoreLittleEndian(static_cast<uint64_t>(value), type.width_bytes, out);
      return true;
    }
    case TypeKind::kUuid: {
      unsigned char bytes[16];
      if (!text::ParseUuidText(v, bytes)) {
        *why = absl::StrCat("'", internal::Sv(v), "' is not a UUID");
        return false;
      }
      out->assign(reinterpret_cast<const char*>(bytes), 16);
      return true;
    }
    case TypeKind::kTime:
    case TypeKind::kTime64: {
      int64_t ticks = 0;
      if (const char* error = text::ParseTimeText(v, type.scale, &ticks)) {
        *why = absl::StrCat("'", internal::Sv(v), "': ", error);
        return false;
      }
      StoreLittleEndian(static_cast<uint64_t>(ticks), type.width_bytes, out);
      return true;
    }
    case TypeKind::kIpv4: {
      uint32_t address = 0;
      if (!text::ParseIpv4Text(v, &address)) {
        *why = absl::StrCat("'", internal::Sv(v), "' is not an IPv4 address");
        return false;
      }
      StoreLittleEndian(address, 4, out);
      return true;
    }
    case TypeKind::kIpv6: {
      unsigned char address[16];
      if (!text::ParseIpv6Text(v, address)) {
        *why = absl::StrCat("'", internal::Sv(v), "' is not an IPv6 address");
        return false;
      }
      out->assign(reinterpret_cast<const char*>(address), 16);
      return true;
    }
    case TypeKind::kDecimal:
    case TypeKind::kInt:
    case TypeKind::kUInt:
      return ExactNumberFromText(type, v, out, why);
    default:
      *why = "the type does not take strings";
      return false;
  }
}

}  // namespace

ColumnBuilder& ColumnBuilder::AppendString(std::string_view v) {
  if (!StartValue()) return *this;
  if (type_.kind == TypeKind::kString) {
    columnar::AppendString(v, column_);
    ++rows_;
    return *this;
  }
  std::string bytes;
  std::string why;
  if (!FixedBytesFromText(type_, v, &bytes, &why)) {
    Fail(why);
    return *this;
  }
  AppendBytes(bytes.data(), bytes.size());
  return *this;
}

ColumnBuilder& ColumnBuilder::AppendTime(absl::Time t) {
  if (!StartValue()) return *this;
  auto append_signed = [&](int64_t v) {
    const bool negative = v < 0;
    AppendInteger(negative, negative ? ~static_cast<uint64_t>(v) + 1 : static_cast<uint64_t>(v));
  };
  const int64_t seconds = absl::ToUnixSeconds(t);  // floor
  switch (type_.kind) {
    case TypeKind::kDate:
    case TypeKind::kDate32: {
      int64_t days = seconds / 86400;
      if (seconds % 86400 < 0) --days;
      append_signed(days);
      return *this;
    }
    case TypeKind::kDateTime:
      append_signed(seconds);
      return *this;
    case TypeKind::kDateTime64: {
      int64_t unit_ns = 1;
      for (int i = type_.scale; i < 9; ++i) unit_ns *= 10;
      absl::Duration remainder;
      int64_t ticks =
          absl::IDivDuration(t - absl::UnixEpoch(), absl::Nanoseconds(unit_ns), &remainder);
      if (remainder < absl::ZeroDuration()) --ticks;
      append_signed(ticks);
      return *this;
    }
    default:
      Fail("the type does not take times");
      return *this;
  }
}

ColumnBuilder& ColumnBuilder::AppendNull() {
  if (!type_.nullable) {
    Fail("NULL for a type that is not Nullable");
    return *this;
  }
  column_->mutable_nulls()->push_back('\1');
  if (type_.kind == TypeKind::kString) {
    columnar::AppendString({}, column_);
  } else {
    column_->mutable_data()->append(type_.width_bytes, '\0');
  }
  ++rows_;
  return *this;
}

ColumnBuilder& ColumnBuilder::element(size_t index) {
  if (index >= children_.size()) {
    Fail(absl::StrCat("no element ", index));
    // Keep chaining harmless: hand back this column (appends fail once more, but the first
    // error is the one reported).
    return *this;
  }
  return *children_[index];
}

ColumnBuilder& ColumnBuilder::EndRow() {
  switch (type_.kind) {
    case TypeKind::kArray:
      columnar::AppendRowEnd(children_[0]->rows(), column_);
      break;
    case TypeKind::kMap:
      if (children_[0]->rows() != children_[1]->rows()) {
        Fail(absl::StrCat(children_[0]->rows(), " keys but ", children_[1]->rows(), " values"));
        return *this;
      }
      columnar::AppendRowEnd(children_[0]->rows(), column_);
      break;
    case TypeKind::kTuple:
      for (const auto& child : children_) {
        if (child->rows() != rows_ + 1) {
          Fail(absl::StrCat("element ", child->path_, " has ", child->rows(), " rows, expected ",
                            rows_ + 1));
          return *this;
        }
      }
      break;
    default:
      Fail("EndRow() is for Array, Map and Tuple columns");
      return *this;
  }
  ++rows_;
  return *this;
}

ColumnBuilder& BlockBuilder::AddColumn(std::string name, std::string type) {
  v1::Column* column = block_.add_columns();
  column->set_name(name);
  absl::StatusOr<ColumnType> parsed = ParseColumnType(type);
  if (!parsed.ok()) {
    Fail(
        absl::InvalidArgumentError(absl::StrCat("column ", name, ": ", parsed.status().message())));
    parsed = ColumnType{};
  }
  ColumnType column_type = *std::move(parsed);
  column_type.text = type;
  columns_.push_back(std::unique_ptr<ColumnBuilder>(
      new ColumnBuilder(this, std::move(name), std::move(column_type), column)));
  return *columns_.back();
}

void BlockBuilder::Fail(absl::Status status) {
  if (error_.ok()) error_ = std::move(status);
}

absl::StatusOr<v1::Block> BlockBuilder::Build() {
  if (error_.ok() && !columns_.empty()) {
    const uint64_t rows = columns_[0]->rows();
    for (const auto& column : columns_) {
      if (column->rows() != rows) {
        Fail(absl::InvalidArgumentError(absl::StrCat("column ", column->path_, " has ",
                                                     column->rows(), " rows, column ",
                                                     columns_[0]->path_, " has ", rows)));
        break;
      }
      // A composite whose children hold elements of a row not closed by EndRow.
      std::vector<const ColumnBuilder*> stack = {column.get()};
      while (!stack.empty() && error_.ok()) {
        const ColumnBuilder* c = stack.back();
        stack.pop_back();
        const bool is_list = c->type_.kind == TypeKind::kArray || c->type_.kind == TypeKind::kMap;
        for (const auto& child : c->children_) {
          const uint64_t expected =
              is_list ? (c->column_->offsets().empty() ? 0 : c->column_->offsets().rbegin()[0])
                      : c->rows();
          if (child->rows() != expected) {
            Fail(absl::InvalidArgumentError(
                absl::StrCat("column ", child->path_, " has ", child->rows(), " rows, expected ",
                             expected, " (a row of ", c->path_, " not closed with EndRow?)")));
            break;
          }
          stack.push_back(child.get());
        }
      }
    }
    block_.set_rows(rows);
  }
  columns_.clear();
  if (!error_.ok()) return error_;
  return std::move(block_);
}

}  // namespace chgate::client
