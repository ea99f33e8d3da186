#include "server/clickhouse/columns/dynamic.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "server/clickhouse/columns/array.h"
#include "server/clickhouse/columns/factory.h"
#include "server/clickhouse/columns/string.h"
#include "server/clickhouse/columns/tuple.h"
#include "text/status_macros.h"

namespace chgate::clickhouse {
namespace {

// Dynamic structure serialization versions (the first UInt64 of the prefix).
constexpr uint64_t kVersionV1 = 1;
constexpr uint64_t kVersionV2 = 2;
constexpr uint64_t kVersionFlattened = 3;
constexpr uint64_t kVersionV3 = 4;

// Bounds for corrupt input: type names and nesting of binary type encodings.
constexpr uint64_t kMaxTypeNameSize = 1 << 16;
constexpr int kMaxBinaryTypeDepth = 32;

// ---- Binary type encodings (ClickHouse's data types binary encoding) ----

TypeAst NumberArg(int64_t v) { return TypeAst{.kind = TypeAst::Kind::kNumber, .number = v}; }

// The DateTime types of codes 0x12 (with a zone), 0x13 (a precision) and 0x14 (both).
absl::Status ReadBinaryDateTime(uint8_t code, ReadBuffer& in, TypeAst* type) {
  type->name = code == 0x12 ? "DateTime" : "DateTime64";
  if (code != 0x12) {
    uint8_t precision = 0;
    CHGATE_RETURN_IF_ERROR(in.ReadFixed(&precision));
    type->args.push_back(NumberArg(precision));
  }
  if (code != 0x13) {
    std::string zone;
    CHGATE_RETURN_IF_ERROR(in.ReadString(&zone, kMaxTypeNameSize));
    type->args.push_back(TypeAst{.kind = TypeAst::Kind::kString, .name = std::move(zone)});
  }
  return absl::OkStatus();
}

absl::Status ReadBinaryType(ReadBuffer& in, int depth, TypeAst* type) {
  if (depth > kMaxBinaryTypeDepth) return absl::DataLossError("binary type nested too deeply");
  uint8_t code = 0;
  CHGATE_RETURN_IF_ERROR(in.ReadFixed(&code));
  static constexpr const char* kSimple[] = {
      nullptr, "UInt8", "UInt16", "UInt32", "UInt64",  "UInt128", "UInt256", "Int8",   "Int16",
      "Int32", "Int64", "Int128", "Int256", "Float32", "Float64", "Date",    "Date32", "DateTime"};
  *type = TypeAst{};
  if (code >= 0x01 && code <= 0x11) {
    type->name = kSimple[code];
    return absl::OkStatus();
  }
  switch (code) {
    case 0x12:  // DateTime(zone)
    case 0x13:  // DateTime64(precision)
    case 0x14:  // DateTime64(precision, zone)
      return ReadBinaryDateTime(code, in, type);
    case 0x15:
      type->name = "String";
      return absl::OkStatus();
    case 0x16: {  // FixedString(N)
      uint64_t n = 0;
      CHGATE_RETURN_IF_ERROR(in.ReadVarUInt(&n));
      if (n == 0 || n > (uint64_t{1} << 30)) return absl::DataLossError("bad FixedString size");
      type->name = "FixedString";
      type->args.push_back(NumberArg(static_cast<int64_t>(n)));
      return absl::OkStatus();
    }
    case 0x19:
    case 0x1a:
    case 0x1b:
    case 0x1c: {  // Decimal32/64/128/256(P, S): UInt8 precision, UInt8 scale
      uint8_t precision = 0, scale = 0;
      CHGATE_RETURN_IF_ERROR(in.ReadFixed(&precision));
      CHGATE_RETURN_IF_ERROR(in.ReadFixed(&scale));
      type->name = "Decimal";
      type->args = {NumberArg(precision), NumberArg(scale)};
      return absl::OkStatus();
    }
    case 0x1d:
      type->name = "UUID";
      return absl::OkStatus();
    case 0x1e: {  // Array(T)
      TypeAst nested;
      CHGATE_RETURN_IF_ERROR(ReadBinaryType(in, depth + 1, &nested));
      type->name = "Array";
      type->args.push_back(std::move(nested));
      return absl::OkStatus();
    }
    case 0x1f: {  // Tuple(T1, ..., Tn)
      uint64_t n = 0;
      CHGATE_RETURN_IF_ERROR(in.ReadVarUInt(&n));
      if (n == 0 || n > 1024) return absl::DataLossError("bad Tuple size in a binary type");
      type->name = "Tuple";
      for (uint64_t i = 0; i < n; ++i) {
        TypeAst element;
        CHGATE_RETURN_IF_ERROR(ReadBinaryType(in, depth + 1, &element));
        type->args.push_back(std::move(element));
      }
      return absl::OkStatus();
    }
    default:
      return absl::UnimplementedError(
          absl::StrCat("binary type encoding 0x", absl::Hex(code), " is not supported"));
  }
}

// Reads one value in RowBinary form into `column` (of a type ReadBinaryType produces).
absl::Status ReadRowBinaryValue(ReadBuffer& in, int depth, Column& column) {
  if (depth > kMaxBinaryTypeDepth) return absl::DataLossError("value nested too deeply");
  switch (column.kind()) {
    case ColumnKind::kFixed:
    case ColumnKind::kString:
      // One value of these types is the same in RowBinary and in a one-row Native body.
      return column.LoadBody(in, 1);
    case ColumnKind::kArray: {
      auto& array = static_cast<ColumnArray&>(column);
      uint64_t n = 0;
      CHGATE_RETURN_IF_ERROR(in.ReadVarUInt(&n));
      if (n > (uint64_t{1} << 32)) return absl::DataLossError("implausible array size");
      for (uint64_t i = 0; i < n; ++i) {
        CHGATE_RETURN_IF_ERROR(ReadRowBinaryValue(in, depth + 1, *array.nested()));
      }
      array.FinishRow();
      return absl::OkStatus();
    }
    case ColumnKind::kTuple: {
      auto& tuple = static_cast<ColumnTuple&>(column);
      for (size_t i = 0; i < tuple.element_count(); ++i) {
        CHGATE_RETURN_IF_ERROR(ReadRowBinaryValue(in, depth + 1, *tuple.element(i)));
      }
      return absl::OkStatus();
    }
    case ColumnKind::kNullable:
    case ColumnKind::kMap:
    case ColumnKind::kLowCardinality:
    case ColumnKind::kVariant:
    case ColumnKind::kDynamic:
    case ColumnKind::kJson:
    case ColumnKind::kAggregateState:
      break;
  }
  return absl::UnimplementedError(
      absl::StrCat("binary values of type ", column.type_name(), " are not supported"));
}

}  // namespace

absl::StatusOr<ColumnPtr> DecodeBinaryValue(std::string_view bytes) {
  MemoryReadBuffer in(bytes);
  TypeAst type;
  CHGATE_RETURN_IF_ERROR(ReadBinaryType(in, 0, &type));
  CHGATE_ASSIGN_OR_RETURN(ColumnPtr column, CreateColumn(type));
  CHGATE_RETURN_IF_ERROR(ReadRowBinaryValue(in, 0, *column));
  if (!in.AtEnd()) return absl::DataLossError("trailing bytes after a binary value");
  return column;
}

ColumnDynamic::ColumnDynamic(std::string type_name, TypeAst type, int64_t max_types)
    : Column(std::move(type_name), std::move(type)), max_types_(max_types) {
  names_ = {std::string(kSharedVariant)};
  variant_ = *MakeVariant(&names_);
}

absl::StatusOr<std::shared_ptr<ColumnVariant>> ColumnDynamic::MakeVariant(
    std::vector<std::string>* names) {
  std::sort(names->begin(), names->end());
  if (std::adjacent_find(names->begin(), names->end()) != names->end()) {
    return absl::DataLossError("Dynamic type list names a type twice");
  }
  if (names->size() > ColumnVariant::kMaxAlternatives) {
    return absl::DataLossError(absl::StrCat("Dynamic with ", names->size(), " types"));
  }
  std::vector<ColumnPtr> columns;
  std::vector<TypeAst> asts;
  for (const std::string& name : *names) {
    if (name == kSharedVariant) {
      columns.push_back(std::make_shared<ColumnString>());
      asts.push_back(TypeAst{.name = std::string(kSharedVariant)});
      continue;
    }
    CHGATE_ASSIGN_OR_RETURN(TypeAst ast, ParseTypeName(name));
    CHGATE_RETURN_IF_ERROR(CheckVariantAlternative(ast));
    CHGATE_ASSIGN_OR_RETURN(ColumnPtr column, CreateColumn(ast));
    columns.push_back(std::move(column));
    asts.push_back(std::move(ast));
  }
  TypeAst variant_type{.name = "Variant", .args = std::move(asts)};
  std::string variant_name = FormatTypeName(variant_type);
  return std::make_shared<ColumnVariant>(std::move(variant_name), std::move(variant_type),
                                         std::move(columns));
}

size_t ColumnDynamic::Find(std::string_view name) const {
  auto it = std::lower_bound(names_.begin(), names_.end(), name);
  return it != names_.end() && *it == name ? static_cast<size_t>(it - names_.begin())
                                           : names_.size();
}

absl::StatusOr<size_t> ColumnDynamic::Insert(const std::string& name) {
  std::vector<std::string> names = names_;
  names.push_back(name);
  CHGATE_ASSIGN_OR_RETURN(std::shared_ptr<ColumnVariant> wider, MakeVariant(&names));
  std::vector<size_t> mapping(names_.size());
  for (size_t i = 0; i < names_.size(); ++i) {
    mapping[i] = static_cast<size_t>(std::lower_bound(names.begin(), names.end(), names_[i]) -
                                     names.begin());
  }
  wider->AppendRemapped(*variant_, mapping, 0, variant_->Size());
  names_ = std::move(names);
  variant_ = std::move(wider);
  shared_index_ = Find(kSharedVariant);
  return Find(name);
}

absl::StatusOr<size_t> ColumnDynamic::AddType(std::string_view type_name) {
  CHGATE_ASSIGN_OR_RETURN(TypeAst ast, ParseTypeName(type_name));
  const std::string name = FormatTypeName(ast);
  if (name == kSharedVariant) return absl::InvalidArgumentError("SharedVariant is not a type");
  if (size_t i = Find(name); i != names_.size()) return i;
  CHGATE_RETURN_IF_ERROR(CheckVariantAlternative(ast));
  if (static_cast<int64_t>(names_.size()) - 1 >= max_types_) {
    return absl::ResourceExhaustedError(absl::StrCat(Column::type_name(), " already holds ",
                                                     max_types_, " types; cannot add ", name));
  }
  return Insert(name);
}

absl::StatusOr<Column*> ColumnDynamic::AppendValueOf(std::string_view type_name) {
  CHGATE_ASSIGN_OR_RETURN(size_t index, AddType(type_name));
  variant_->AppendAlternative(index);
  return variant_->alternative(index).get();
}

void ColumnDynamic::AppendRange(const Column& src, size_t begin, size_t end) {
  const auto& s = static_cast<const ColumnDynamic&>(src);
  std::vector<size_t> mapping(s.names_.size());
  for (size_t i = 0; i < s.names_.size(); ++i) {
    size_t at = Find(s.names_[i]);
    // Types of another Dynamic column were valid there, so adding them cannot fail.
    if (at == names_.size()) at = *Insert(s.names_[i]);
    mapping[i] = at;
  }
  // Inserting may have moved earlier types: look them up again.
  for (size_t i = 0; i < s.names_.size(); ++i) mapping[i] = Find(s.names_[i]);
  variant_->AppendRemapped(*s.variant_, mapping, begin, end);
}

ColumnPtr ColumnDynamic::CloneEmpty() const {
  auto copy = std::make_shared<ColumnDynamic>(type_name(), type(), max_types_);
  copy->names_ = names_;
  copy->shared_index_ = shared_index_;
  copy->variant_ = std::static_pointer_cast<ColumnVariant>(variant_->CloneEmpty());
  return copy;
}

absl::Status ColumnDynamic::LoadPrefix(ReadBuffer& in) {
  uint64_t version = 0;
  CHGATE_RETURN_IF_ERROR(in.ReadFixed(&version));
  if (version == kVersionFlattened || version == kVersionV3) {
    return absl::UnimplementedError(absl::StrCat("Dynamic serialization version ", version,
                                                 " is not supported (only V1 and V2)"));
  }
  if (version != kVersionV1 && version != kVersionV2) {
    return absl::DataLossError(absl::StrCat("unknown Dynamic serialization version ", version));
  }
  uint64_t count = 0;
  if (version == kVersionV1) CHGATE_RETURN_IF_ERROR(in.ReadVarUInt(&count));  // a hint readers skip
  CHGATE_RETURN_IF_ERROR(in.ReadVarUInt(&count));
  if (count >= ColumnVariant::kMaxAlternatives) {
    return absl::DataLossError(absl::StrCat("Dynamic prefix announces ", count, " types"));
  }
  incoming_names_.clear();
  for (uint64_t i = 0; i < count; ++i) {
    std::string name;
    CHGATE_RETURN_IF_ERROR(in.ReadString(&name, kMaxTypeNameSize));
    if (name == kSharedVariant) return absl::DataLossError("Dynamic lists SharedVariant");
    incoming_names_.push_back(std::move(name));
  }
  incoming_names_.emplace_back(kSharedVariant);
  CHGATE_ASSIGN_OR_RETURN(incoming_, MakeVariant(&incoming_names_));
  return incoming_->LoadPrefix(in);
}

absl::Status ColumnDynamic::LoadBody(ReadBuffer& in, size_t rows) {
  if (incoming_ == nullptr) return absl::DataLossError("Dynamic body without its prefix");
  CHGATE_RETURN_IF_ERROR(incoming_->LoadBody(in, rows));
  // Values that overflowed into SharedVariant are checked now so that printing cannot fail.
  const size_t shared = static_cast<size_t>(
      std::lower_bound(incoming_names_.begin(), incoming_names_.end(), kSharedVariant) -
      incoming_names_.begin());
  const auto& shared_values = static_cast<const ColumnString&>(*incoming_->alternative(shared));
  for (size_t i = 0; i < shared_values.Size(); ++i) {
    absl::StatusOr<ColumnPtr> value = DecodeBinaryValue(shared_values.At(i));
    if (!value.ok()) {
      return absl::Status(value.status().code(),
                          absl::StrCat("Dynamic shared variant value: ", value.status().message()));
    }
  }
  if (variant_->Size() == 0) {
    // The common case: take the block's types and rows as they are.
    names_ = incoming_names_;
    shared_index_ = shared;
    variant_ = std::move(incoming_);
    incoming_ = std::static_pointer_cast<ColumnVariant>(variant_->CloneEmpty());
    return absl::OkStatus();
  }
  std::vector<size_t> mapping(incoming_names_.size());
  for (const std::string& name : incoming_names_) {
    if (Find(name) == names_.size()) CHGATE_RETURN_IF_ERROR(Insert(name).status());
  }
  for (size_t i = 0; i < incoming_names_.size(); ++i) mapping[i] = Find(incoming_names_[i]);
  variant_->AppendRemapped(*incoming_, mapping, 0, incoming_->Size());
  incoming_->Clear();
  return absl::OkStatus();
}

void ColumnDynamic::SavePrefix(GatherWriter& out) const {
  out.WriteFixed<uint64_t>(kVersionV1);
  const size_t count = names_.size() - 1;  // without SharedVariant
  // V1 has a number here that readers skip; current servers write the type count, as here.
  out.WriteVarUInt(count);
  out.WriteVarUInt(count);
  for (const std::string& name : names_) {
    if (name != kSharedVariant) out.WriteString(name);
  }
  variant_->SavePrefix(out);
}

void ColumnDynamic::SaveBody(GatherWriter& out) const { variant_->SaveBody(out); }

}  // namespace chgate::clickhouse
