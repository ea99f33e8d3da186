#include "columnar/column_layout.h"

#include <algorithm>
#include <cstddef>

#include "absl/strings/str_cat.h"

namespace chgate::columnar {
namespace {

// Abseil 20220623 keeps its own string_view type.
absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

}  // namespace

const char* FieldName(unsigned field) {
  switch (field) {
    case kNulls:
      return "nulls";
    case kOffsets:
      return "offsets";
    case kData:
      return "data";
    case kChildren:
      return "children";
    case kInt64s:
      return "int64s";
    case kUInt64s:
      return "uint64s";
    case kFloat64s:
      return "float64s";
    case kStrings:
      return "strings";
  }
  return "?";
}

unsigned PresentFields(const v1::Column& column) {
  unsigned fields = 0;
  if (!column.nulls().empty()) fields |= kNulls;
  if (column.offsets_size() > 0) fields |= kOffsets;
  if (!column.data().empty()) fields |= kData;
  if (column.children_size() > 0) fields |= kChildren;
  if (column.int64s_size() > 0) fields |= kInt64s;
  if (column.uint64s_size() > 0) fields |= kUInt64s;
  if (column.float64s_size() > 0) fields |= kFloat64s;
  if (column.strings_size() > 0) fields |= kStrings;
  return fields;
}

absl::Status CheckFields(const v1::Column& column, unsigned allowed) {
  const unsigned extra = PresentFields(column) & ~allowed;
  if (extra == 0) return absl::OkStatus();
  const unsigned first = extra & (~extra + 1);
  if (first == kNulls) return absl::InvalidArgumentError("`nulls` is only for Nullable types");
  return absl::InvalidArgumentError(
      absl::StrCat("unexpected field `", FieldName(first), "` for this type"));
}

absl::StatusOr<uint64_t> CheckOffsets(const Offsets& offsets, uint64_t rows,
                                      std::string_view unit) {
  if (static_cast<uint64_t>(offsets.size()) != rows) {
    return absl::InvalidArgumentError(absl::StrCat("`offsets` has ", offsets.size(),
                                                   " entries, expected ", rows, " (one per row)"));
  }
  uint64_t previous = 0;
  for (int i = 0; i < offsets.size(); ++i) {
    if (offsets.Get(i) < previous) {
      return absl::InvalidArgumentError(absl::StrCat("`offsets` decreases at row ", i, " (",
                                                     offsets.Get(i), " after ", previous, " ",
                                                     Sv(unit), ")"));
    }
    previous = offsets.Get(i);
  }
  return previous;
}

absl::Status CheckStringData(const v1::Column& column, uint64_t rows) {
  absl::StatusOr<uint64_t> last = CheckOffsets(column.offsets(), rows, "bytes");
  if (!last.ok()) return last.status();
  if (*last != column.data().size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "`offsets` end at byte ", *last, " but `data` has ", column.data().size(), " bytes"));
  }
  return absl::OkStatus();
}

absl::Status CheckFixedData(const v1::Column& column, uint64_t rows, size_t width) {
  const size_t size = column.data().size();
  if (width == 0 || size % width != 0 || size / width != rows) {
    return absl::InvalidArgumentError(
        absl::StrCat("`data` has ", size, " bytes, expected ", rows, " rows x ", width, " bytes"));
  }
  return absl::OkStatus();
}

absl::Status CheckNulls(const v1::Column& column, uint64_t rows, NullFlags flags) {
  const std::string& nulls = column.nulls();
  if (nulls.empty()) return absl::OkStatus();
  if (nulls.size() != rows) {
    return absl::InvalidArgumentError(
        absl::StrCat("`nulls` has ", nulls.size(), " bytes, expected ", rows, " (one per row)"));
  }
  if (flags == NullFlags::kAnyByte) return absl::OkStatus();
  for (size_t i = 0; i < nulls.size(); ++i) {
    if (nulls[i] != 0 && nulls[i] != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "`nulls` byte ", i, " is ", static_cast<int>(static_cast<unsigned char>(nulls[i])),
          "; use 1 for NULL and 0 otherwise"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckChildren(const v1::Column& column, int expected, std::string_view what) {
  if (column.children_size() == expected) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("has ", column.children_size(), " children, expected ", expected,
                   what.empty() ? "" : " (", Sv(what), what.empty() ? "" : ")"));
}

void AppendNullFlags(const char* flags, size_t count, uint64_t rows_before, v1::Column* column) {
  std::string* nulls = column->mutable_nulls();
  if (nulls->empty() && std::none_of(flags, flags + count, [](char f) { return f != 0; })) return;
  if (nulls->size() < rows_before) nulls->append(rows_before - nulls->size(), '\0');
  nulls->append(flags, count);
}

namespace {

// Gives `dst` the children `src` has and it lacks, named and typed as src's.
void AddMissingChildren(const v1::Column& src, v1::Column* dst) {
  while (dst->children_size() < src.children_size()) {
    const v1::Column& like = src.children(dst->children_size());
    v1::Column* child = dst->add_children();
    child->set_name(like.name());
    child->set_type(like.type());
  }
}

template <typename Field>
void AppendRange(const google::protobuf::RepeatedField<Field>& src, uint64_t begin, uint64_t end,
                 google::protobuf::RepeatedField<Field>* dst) {
  if (begin >= end || end > static_cast<uint64_t>(src.size())) return;
  // In range: end <= src.size(), an int.
  dst->Add(src.begin() + static_cast<std::ptrdiff_t>(begin),
           src.begin() + static_cast<std::ptrdiff_t>(end));
}

}  // namespace

void AppendRows(const v1::Column& src, uint64_t src_rows, uint64_t begin, uint64_t end,
                uint64_t dst_rows, v1::Column* dst) {
  if (begin >= end) return;
  const uint64_t count = end - begin;
  if (!src.nulls().empty()) {
    AppendNullFlags(src.nulls().data() + begin, count, dst_rows, dst);
  } else if (!dst->nulls().empty()) {
    dst->mutable_nulls()->append(count, '\0');
  }
  AppendRange(src.int64s(), begin, end, dst->mutable_int64s());
  AppendRange(src.uint64s(), begin, end, dst->mutable_uint64s());
  AppendRange(src.float64s(), begin, end, dst->mutable_float64s());
  if (src.strings_size() > 0) {
    for (uint64_t i = begin; i < end && i < static_cast<uint64_t>(src.strings_size()); ++i) {
      dst->add_strings(src.strings(static_cast<int>(i)));
    }
  }
  if (src.offsets_size() > 0) {
    // String bytes, or the elements of Array and Map rows.
    const uint64_t first = RowBegin(src.offsets(), begin);
    const uint64_t last = RowEnd(src.offsets(), end - 1);
    const uint64_t base = dst->offsets_size() == 0 ? 0 : dst->offsets(dst->offsets_size() - 1);
    dst->mutable_offsets()->Reserve(dst->offsets_size() + static_cast<int>(count));
    for (uint64_t r = begin; r < end; ++r) {
      dst->mutable_offsets()->AddAlreadyReserved(base + (RowEnd(src.offsets(), r) - first));
    }
    if (src.children_size() == 0) {
      dst->mutable_data()->append(src.data(), first, last - first);
      return;
    }
    AddMissingChildren(src, dst);
    const uint64_t src_elements =
        RowEnd(src.offsets(), static_cast<uint64_t>(src.offsets_size()) - 1);
    for (int i = 0; i < src.children_size(); ++i) {
      AppendRows(src.children(i), src_elements, first, last, base, dst->mutable_children(i));
    }
    return;
  }
  if (src.children_size() > 0) {
    // Tuple elements: the same rows.
    AddMissingChildren(src, dst);
    for (int i = 0; i < src.children_size(); ++i) {
      AppendRows(src.children(i), src_rows, begin, end, dst_rows, dst->mutable_children(i));
    }
    return;
  }
  if (!src.data().empty() && src_rows > 0) {
    const size_t width = src.data().size() / src_rows;
    dst->mutable_data()->append(src.data(), begin * width, count * width);
  }
}

}  // namespace chgate::columnar
