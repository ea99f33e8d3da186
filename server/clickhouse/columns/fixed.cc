#include "server/clickhouse/columns/fixed.h"

#include <arpa/inet.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace chgate::clickhouse {
namespace {

constexpr size_t kBulkStep = size_t{1} << 20;

}  // namespace

absl::Status ReadBulk(ReadBuffer& in, size_t bytes, ByteBuffer* out) {
  while (bytes > 0) {
    size_t step = std::min(bytes, std::max(kBulkStep, in.available()));
    char* dst = out->Prepare(step);
    CHGATE_RETURN_IF_ERROR(in.Read(dst, step));
    out->Commit(step);
    bytes -= step;
  }
  return absl::OkStatus();
}

ColumnFixed::ColumnFixed(std::string type_name, TypeAst type, text::FixedType fixed)
    : Column(std::move(type_name), std::move(type)),
      width_(fixed.width),
      params_(std::move(fixed)) {
  CHGATE_CHECK(width_ > 0);
}

void ColumnFixed::AppendDefault() {
  char* p = values_.Prepare(width_);
  std::memset(p, 0, width_);
  if (params_.kind == FixedKind::kEnum && !params_.enum_values.empty()) {
    // ClickHouse's default for an Enum is its first value.
    int64_t v = params_.enum_values.front().second;
    if (width_ == 1) {
      int8_t b = static_cast<int8_t>(v);
      std::memcpy(p, &b, 1);
    } else {
      int16_t b = static_cast<int16_t>(v);
      std::memcpy(p, &b, 2);
    }
  } else if (params_.kind == FixedKind::kNothing) {
    p[0] = '0';
  }
  values_.Commit(width_);
}

ColumnPtr ColumnFixed::CloneEmpty() const {
  return std::make_shared<ColumnFixed>(type_name(), type(), params_);
}

absl::Status ColumnFixed::SkipBody(ReadBuffer& in, size_t rows) {
  if (rows > std::numeric_limits<size_t>::max() / width_) {
    return absl::DataLossError(absl::StrCat("row count ", rows, " overflows"));
  }
  Clear();
  return in.Skip(rows * width_);
}

absl::Status ColumnFixed::LoadBody(ReadBuffer& in, size_t rows) {
  if (rows > std::numeric_limits<size_t>::max() / width_) {
    return absl::DataLossError(absl::StrCat("row count ", rows, " overflows"));
  }
  const size_t bytes = rows * width_;
  if (values_.empty() && in.WindowIsStable() && in.available() >= bytes) {
    // Zero copy: the values are used where they were decompressed.
    values_.SetView(in.pos(), bytes);
    in.Advance(bytes);
    return absl::OkStatus();
  }
  return ReadBulk(in, bytes, &values_);
}

}  // namespace chgate::clickhouse
