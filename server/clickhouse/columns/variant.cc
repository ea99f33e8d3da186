#include "server/clickhouse/columns/variant.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "server/clickhouse/columns/fixed.h"
#include "text/status_macros.h"

namespace chgate::clickhouse {
namespace {

// Discriminators serialization modes (the prefix) and, in COMPACT mode, granule formats.
constexpr uint64_t kModeBasic = 0;
constexpr uint64_t kModeCompact = 1;
constexpr uint8_t kGranulePlain = 0;
constexpr uint8_t kGranuleCompact = 1;

}  // namespace

ColumnVariant::ColumnVariant(std::string type_name, TypeAst type,
                             std::vector<ColumnPtr> alternatives)
    : Column(std::move(type_name), std::move(type)),
      alternatives_(std::move(alternatives)),
      counts_(alternatives_.size(), 0) {
  CHGATE_CHECK(alternatives_.size() <= kMaxAlternatives);
}

std::optional<size_t> ColumnVariant::FindAlternative(std::string_view type_name) const {
  for (size_t i = 0; i < alternatives_.size(); ++i) {
    if (alternatives_[i]->type_name() == type_name) return i;
  }
  return std::nullopt;
}

void ColumnVariant::AppendNull() {
  discriminators_.PushBack(static_cast<char>(kNullDiscriminator));
  offsets_.push_back(0);
}

void ColumnVariant::AppendAlternative(size_t index) {
  CHGATE_CHECK(index < alternatives_.size());
  discriminators_.PushBack(static_cast<char>(index));
  offsets_.push_back(counts_[index]++);
}

void ColumnVariant::Clear() {
  discriminators_.clear();
  offsets_.clear();
  std::fill(counts_.begin(), counts_.end(), 0);
  for (auto& a : alternatives_) a->Clear();
}

void ColumnVariant::Truncate(size_t rows) {
  // Each alternative keeps the values of the rows that stay: the first dropped row of an
  // alternative is where its column is cut.
  std::vector<bool> cut(alternatives_.size(), false);
  for (size_t row = rows; row < Size(); ++row) {
    const uint8_t d = discriminator(row);
    if (d == kNullDiscriminator || cut[d]) continue;
    cut[d] = true;
    counts_[d] = offsets_[row];
    alternatives_[d]->Truncate(static_cast<size_t>(offsets_[row]));
  }
  discriminators_.resize(rows);
  offsets_.resize(rows);
}

void ColumnVariant::AppendRange(const Column& src, size_t begin, size_t end) {
  const auto& s = static_cast<const ColumnVariant&>(src);
  std::vector<size_t> identity(alternatives_.size());
  for (size_t i = 0; i < identity.size(); ++i) identity[i] = i;
  AppendRemapped(s, identity, begin, end);
}

void ColumnVariant::AppendRemapped(const ColumnVariant& src, const std::vector<size_t>& mapping,
                                   size_t begin, size_t end) {
  for (size_t row = begin; row < end; ++row) {
    const uint8_t d = src.discriminator(row);
    if (d == kNullDiscriminator) {
      AppendNull();
      continue;
    }
    const size_t target = mapping[d];
    const size_t at = static_cast<size_t>(src.offset(row));
    AppendAlternative(target);
    alternatives_[target]->AppendRange(*src.alternatives_[d], at, at + 1);
  }
}

ColumnPtr ColumnVariant::CloneEmpty() const {
  std::vector<ColumnPtr> empty;
  empty.reserve(alternatives_.size());
  for (const auto& a : alternatives_) empty.push_back(a->CloneEmpty());
  return std::make_shared<ColumnVariant>(type_name(), type(), std::move(empty));
}

size_t ColumnVariant::ByteSize() const {
  size_t n = discriminators_.size() + offsets_.size() * sizeof(uint64_t);
  for (const auto& a : alternatives_) n += a->ByteSize();
  return n;
}

absl::Status ColumnVariant::LoadPrefix(ReadBuffer& in) {
  CHGATE_RETURN_IF_ERROR(in.ReadFixed(&mode_));
  if (mode_ != kModeBasic && mode_ != kModeCompact) {
    return absl::DataLossError(absl::StrCat("unknown Variant discriminators mode ", mode_));
  }
  for (auto& a : alternatives_) CHGATE_RETURN_IF_ERROR(a->LoadPrefix(in));
  return absl::OkStatus();
}

absl::Status ColumnVariant::ReadDiscriminators(ReadBuffer& in, size_t rows) {
  if (mode_ == kModeBasic) return ReadBulk(in, rows, &discriminators_);
  size_t read = 0;
  while (read < rows) {
    uint64_t granule = 0;
    uint8_t format = 0;
    CHGATE_RETURN_IF_ERROR(in.ReadVarUInt(&granule));
    CHGATE_RETURN_IF_ERROR(in.ReadFixed(&format));
    if (granule == 0 || granule > rows - read) {
      return absl::DataLossError(
          absl::StrCat("Variant granule of ", granule, " rows where ", rows - read, " remain"));
    }
    const size_t n = static_cast<size_t>(granule);
    if (format == kGranuleCompact) {
      uint8_t d = 0;
      CHGATE_RETURN_IF_ERROR(in.ReadFixed(&d));
      std::memset(discriminators_.Prepare(n), d, n);
      discriminators_.Commit(n);
    } else if (format == kGranulePlain) {
      CHGATE_RETURN_IF_ERROR(ReadBulk(in, n, &discriminators_));
    } else {
      return absl::DataLossError(absl::StrCat("unknown Variant granule format ", format));
    }
    read += n;
  }
  return absl::OkStatus();
}

absl::Status ColumnVariant::LoadBody(ReadBuffer& in, size_t rows) {
  const size_t first = Size();
  CHGATE_RETURN_IF_ERROR(ReadDiscriminators(in, rows));
  std::vector<uint64_t> added(alternatives_.size(), 0);
  offsets_.reserve(first + rows);
  for (size_t row = first; row < first + rows; ++row) {
    const uint8_t d = discriminator(row);
    if (d == kNullDiscriminator) {
      offsets_.push_back(0);
      continue;
    }
    if (d >= alternatives_.size()) {
      discriminators_.resize(first);
      offsets_.resize(first);
      return absl::DataLossError(absl::StrCat("Variant discriminator ", d, " in row ", row - first,
                                              " of a type with ", alternatives_.size(),
                                              " alternatives"));
    }
    offsets_.push_back(counts_[d] + added[d]++);
  }
  for (size_t i = 0; i < alternatives_.size(); ++i) {
    CHGATE_RETURN_IF_ERROR(alternatives_[i]->LoadBody(in, static_cast<size_t>(added[i])));
    counts_[i] += added[i];
  }
  return absl::OkStatus();
}

void ColumnVariant::SavePrefix(GatherWriter& out) const {
  out.WriteFixed<uint64_t>(kModeBasic);
  for (const auto& a : alternatives_) a->SavePrefix(out);
}

void ColumnVariant::SaveBody(GatherWriter& out) const {
  out.Reference(discriminators_.data(), discriminators_.size());
  for (size_t i = 0; i < alternatives_.size(); ++i) {
    // A value appended without AppendAlternative (or the reverse) would shift every later row.
    CHGATE_CHECK(alternatives_[i]->Size() == counts_[i]);
    alternatives_[i]->SaveBody(out);
  }
}

}  // namespace chgate::clickhouse
