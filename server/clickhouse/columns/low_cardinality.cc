#include "server/clickhouse/columns/low_cardinality.h"

#include "absl/strings/str_cat.h"
#include "server/clickhouse/columns/fixed.h"
#include "server/clickhouse/columns/string.h"
#include "text/status_macros.h"

namespace chgate::clickhouse {
namespace {

constexpr uint64_t kSharedDictionariesWithAdditionalKeys = 1;
constexpr uint64_t kNeedGlobalDictionaryBit = uint64_t{1} << 8;
constexpr uint64_t kHasAdditionalKeysBit = uint64_t{1} << 9;
constexpr uint64_t kNeedUpdateDictionaryBit = uint64_t{1} << 10;

}  // namespace

ColumnLowCardinality::ColumnLowCardinality(std::string type_name, TypeAst type,
                                           ColumnPtr dictionary, bool nullable)
    : Column(std::move(type_name), std::move(type)),
      dictionary_(std::move(dictionary)),
      nullable_(nullable) {
  ResetDictionary();
}

void ColumnLowCardinality::ResetDictionary() {
  dictionary_->Clear();
  lookup_.clear();
  if (nullable_) dictionary_->AppendDefault();  // key 0: the NULL placeholder
}

void ColumnLowCardinality::Clear() {
  indexes_.clear();
  ResetDictionary();
}

ColumnPtr ColumnLowCardinality::CloneEmpty() const {
  return std::make_shared<ColumnLowCardinality>(type_name(), type(), dictionary_->CloneEmpty(),
                                                nullable_);
}

void ColumnLowCardinality::AppendNull() {
  CHGATE_CHECK(nullable_);
  indexes_.push_back(0);
}

void ColumnLowCardinality::AppendDefault() {
  if (nullable_) {
    AppendNull();
    return;
  }
  dictionary_->AppendDefault();
  // Deduplicated like any value; a dictionary whose values cannot be keyed gets one per row.
  if (!AppendFromDictionaryTail().ok()) {
    indexes_.push_back(static_cast<uint32_t>(dictionary_->Size() - 1));
  }
}

absl::Status ColumnLowCardinality::AppendFromDictionaryTail() {
  const size_t size = dictionary_->Size();
  if (size <= (nullable_ ? 1u : 0u)) {
    return absl::InvalidArgumentError(
        absl::StrCat("AppendFromDictionaryTail on ", type_name(), " without a new value"));
  }
  const size_t last = size - 1;
  // The same key AppendString uses for String-like dictionaries (FixedString without its zero
  // padding), the raw value bytes for other fixed-width types.
  std::string_view key;
  if (auto* f = dynamic_cast<ColumnFixed*>(dictionary_.get())) {
    key = std::string_view(f->RawAt(last), f->width());
    if (f->fixed_kind() == FixedKind::kFixedString) {
      while (!key.empty() && key.back() == '\0') key.remove_suffix(1);
    }
  } else if (auto* s = dynamic_cast<ColumnString*>(dictionary_.get())) {
    key = s->At(last);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("AppendFromDictionaryTail on ", type_name(), " whose values are not fixed"));
  }
  if (auto it = lookup_.find(absl::string_view(key.data(), key.size())); it != lookup_.end()) {
    dictionary_->Truncate(last);
    indexes_.push_back(it->second);
    return absl::OkStatus();
  }
  const uint32_t index = static_cast<uint32_t>(last);
  lookup_.emplace(std::string(key), index);
  indexes_.push_back(index);
  return absl::OkStatus();
}

absl::Status ColumnLowCardinality::AppendString(std::string_view value) {
  auto it = lookup_.find(absl::string_view(value.data(), value.size()));
  if (it != lookup_.end()) {
    indexes_.push_back(it->second);
    return absl::OkStatus();
  }
  if (auto* s = dynamic_cast<ColumnString*>(dictionary_.get())) {
    s->Append(value);
  } else if (auto* f = dynamic_cast<ColumnFixed*>(dictionary_.get());
             f != nullptr && f->fixed_kind() == FixedKind::kFixedString) {
    if (value.size() > f->width()) {
      return absl::InvalidArgumentError(
          absl::StrCat("value of ", value.size(), " bytes does not fit ", f->type_name()));
    }
    char* p = f->values().Prepare(f->width());
    std::memcpy(p, value.data(), value.size());
    std::memset(p + value.size(), 0, f->width() - value.size());
    f->values().Commit(f->width());
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("AppendString on ", type_name(), " which is not string-like"));
  }
  uint32_t key = static_cast<uint32_t>(dictionary_->Size() - 1);
  lookup_.emplace(std::string(value), key);
  indexes_.push_back(key);
  return absl::OkStatus();
}

void ColumnLowCardinality::AppendRange(const Column& src, size_t begin, size_t end) {
  const auto& s = static_cast<const ColumnLowCardinality&>(src);
  const bool string_like =
      dynamic_cast<const ColumnString*>(dictionary_.get()) != nullptr ||
      (dynamic_cast<const ColumnFixed*>(dictionary_.get()) != nullptr &&
       static_cast<const ColumnFixed&>(*dictionary_).fixed_kind() == FixedKind::kFixedString);
  for (size_t row = begin; row < end; ++row) {
    if (s.IsNull(row)) {
      AppendNull();
      continue;
    }
    const uint32_t key = s.indexes_[row];
    if (string_like) {
      std::string_view value;
      if (const auto* str = dynamic_cast<const ColumnString*>(s.dictionary_.get())) {
        value = str->At(key);
      } else {
        const auto& fixed = static_cast<const ColumnFixed&>(*s.dictionary_);
        value = std::string_view(fixed.RawAt(key), fixed.width());
      }
      (void)AppendString(value);  // cannot fail: same type
    } else {
      dictionary_->AppendRange(*s.dictionary_, key, key + 1);
      indexes_.push_back(static_cast<uint32_t>(dictionary_->Size() - 1));
    }
  }
}

absl::Status ColumnLowCardinality::LoadPrefix(ReadBuffer& in) {
  uint64_t version = 0;
  CHGATE_RETURN_IF_ERROR(in.ReadFixed(&version));
  if (version != kSharedDictionariesWithAdditionalKeys) {
    return absl::DataLossError(
        absl::StrCat("unsupported LowCardinality serialization version ", version));
  }
  return absl::OkStatus();
}

absl::Status ColumnLowCardinality::LoadBody(ReadBuffer& in, size_t rows) {
  size_t read = 0;
  while (read < rows) {
    uint64_t index_type = 0;
    CHGATE_RETURN_IF_ERROR(in.ReadFixed(&index_type));
    if (index_type & kNeedGlobalDictionaryBit) {
      return absl::UnimplementedError("LowCardinality with a global dictionary is not supported");
    }
    if (!(index_type & kHasAdditionalKeysBit)) {
      return absl::DataLossError("LowCardinality block without additional keys");
    }
    const uint64_t width_code = index_type & 0xff;
    if (width_code > 3) {
      return absl::DataLossError(absl::StrCat("bad LowCardinality key width code ", width_code));
    }
    uint64_t n_keys = 0;
    CHGATE_RETURN_IF_ERROR(in.ReadFixed(&n_keys));
    if (n_keys > (uint64_t{1} << 32)) {
      return absl::DataLossError(absl::StrCat("LowCardinality dictionary of ", n_keys, " keys"));
    }
    // Each chunk carries its own additional keys; they are appended to ours and re-based. While
    // a nullable dictionary holds nothing but our NULL placeholder, the chunk's own key 0 (its
    // NULL placeholder) takes its place, so that decoded data re-encodes to the same bytes.
    if (nullable_ && n_keys > 0 && dictionary_->Size() == 1) dictionary_->Clear();
    const uint64_t base = dictionary_->Size();
    CHGATE_RETURN_IF_ERROR(dictionary_->LoadBody(in, static_cast<size_t>(n_keys)));
    uint64_t n_rows = 0;
    CHGATE_RETURN_IF_ERROR(in.ReadFixed(&n_rows));
    if (n_rows > rows - read) {
      return absl::DataLossError(
          absl::StrCat("LowCardinality chunk of ", n_rows, " rows exceeds the block"));
    }
    const size_t width = size_t{1} << width_code;
    const uint64_t dict_size = dictionary_->Size();
    for (uint64_t i = 0; i < n_rows; ++i) {
      uint64_t key = 0;
      CHGATE_RETURN_IF_ERROR(in.Read(&key, width));
      uint64_t global = key + base;
      if (global >= dict_size) {
        return absl::DataLossError(absl::StrCat("LowCardinality index ", key,
                                                " outside a dictionary of ", dict_size - base));
      }
      // Key 0 of each chunk's dictionary is NULL for nullable columns.
      if (nullable_ && key == 0) global = 0;
      indexes_.push_back(static_cast<uint32_t>(global));
    }
    read += static_cast<size_t>(n_rows);
  }
  lookup_.clear();
  return absl::OkStatus();
}

void ColumnLowCardinality::SavePrefix(GatherWriter& out) const {
  out.WriteFixed<uint64_t>(kSharedDictionariesWithAdditionalKeys);
}

void ColumnLowCardinality::SaveBody(GatherWriter& out) const {
  // Like ClickHouse, write nothing for no rows (the elements of empty arrays): readers read no
  // body for 0 rows, so a dictionary header here would be taken for the next column's data.
  if (indexes_.empty()) return;
  const uint64_t keys = dictionary_->Size();
  // The index width ClickHouse picks for this many keys (18.16 writes UInt8 up to 255 keys, UInt16
  // from 256 to 65,535, UInt32 from 65,536), so a re-encoded block is the server's bytes.
  const uint64_t width_code = keys < 0x100 ? 0 : keys < 0x10000 ? 1 : 2;
  out.WriteFixed<uint64_t>(width_code | kHasAdditionalKeysBit | kNeedUpdateDictionaryBit);
  out.WriteFixed<uint64_t>(keys);
  dictionary_->SaveBody(out);
  out.WriteFixed<uint64_t>(indexes_.size());
  const size_t width = size_t{1} << width_code;
  if (width == 4) {
    out.Reference(indexes_.data(), indexes_.size() * 4);
    return;
  }
  encoded_indexes_.clear();
  char* p = encoded_indexes_.Prepare(indexes_.size() * width);
  for (size_t i = 0; i < indexes_.size(); ++i) std::memcpy(p + i * width, &indexes_[i], width);
  encoded_indexes_.Commit(indexes_.size() * width);
  out.Reference(encoded_indexes_.data(), encoded_indexes_.size());
}

}  // namespace chgate::clickhouse
