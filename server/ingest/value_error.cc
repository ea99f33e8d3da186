#include "server/ingest/value_error.h"

#include <cstring>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/types/optional.h"
#include "text/utf8.h"

namespace chgate::ingest {
namespace {

constexpr char kPayloadUrl[] = "type.chgate.dev/chgate.ingest.ValueError";
constexpr char kPayloadVersion = 1;

// Appends `s` escaped as PrintableValue describes, to at most `limit` bytes.
void AppendPrintable(std::string_view s, size_t limit, std::string* out) {
  constexpr char kHex[] = "0123456789abcdef";
  constexpr std::string_view kEllipsis = "...";
  const size_t start = out->size();
  size_t cut = start;  // end of the last unit that leaves room for the ellipsis
  char unit[4];
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t consumed = 1;
    size_t unit_size = 1;
    const char* unit_data = unit;
    if (c == '\\') {
      unit[0] = unit[1] = '\\';
      unit_size = 2;
    } else if (c == '\n' || c == '\t' || c == '\r') {
      unit[0] = '\\';
      unit[1] = c == '\n' ? 'n' : c == '\t' ? 't' : 'r';
      unit_size = 2;
    } else if (c < 0x20 || c == 0x7f) {
      unit[0] = '\\';
      unit[1] = 'x';
      unit[2] = kHex[c >> 4];
      unit[3] = kHex[c & 0xf];
      unit_size = 4;
    } else if (c < 0x80) {
      unit[0] = static_cast<char>(c);
    } else if (size_t n = text::Utf8SequenceLength(s, i); n > 0) {
      unit_data = s.data() + i;
      unit_size = consumed = n;
    } else {
      unit[0] = '\\';
      unit[1] = 'x';
      unit[2] = kHex[c >> 4];
      unit[3] = kHex[c & 0xf];
      unit_size = 4;
    }
    if (out->size() - start + unit_size > limit) {
      out->resize(cut);
      out->append(kEllipsis);
      return;
    }
    out->append(unit_data, unit_size);
    if (out->size() - start + kEllipsis.size() <= limit) cut = out->size();
    i += consumed;
  }
}

void PutU32(uint32_t v, std::string* out) {
  char b[4];
  std::memcpy(b, &v, 4);
  out->append(b, 4);
}

void PutString(std::string_view s, std::string* out) {
  PutU32(static_cast<uint32_t>(s.size()), out);
  out->append(s);
}

bool GetString(std::string_view* in, std::string* out) {
  if (in->size() < 4) return false;
  uint32_t n;
  std::memcpy(&n, in->data(), 4);
  in->remove_prefix(4);
  if (in->size() < n) return false;
  out->assign(in->data(), n);
  in->remove_prefix(n);
  return true;
}

// `error` with its value made printable.
ValueError Normalized(const ValueError& error) {
  ValueError e = error;
  e.value = PrintableValue(error.value);
  e.column = TruncateText(error.column, kMaxNameTextBytes);
  e.type = TruncateText(error.type, 2 * kMaxNameTextBytes);
  e.path = TruncateText(error.path, kMaxNameTextBytes);
  e.kind = TruncateText(error.kind, kMaxNameTextBytes);
  return e;
}

void Attach(const ValueError& e, absl::Status* status) {
  std::string payload;
  payload.push_back(kPayloadVersion);
  payload.push_back(e.row.has_value() ? 1 : 0);
  char row[8];
  const uint64_t r = e.row.value_or(0);
  std::memcpy(row, &r, 8);
  payload.append(row, 8);
  for (const std::string* s : {&e.column, &e.type, &e.value, &e.path, &e.kind}) {
    PutString(*s, &payload);
  }
  status->SetPayload(kPayloadUrl, absl::Cord(std::move(payload)));
}

}  // namespace

std::string PrintableName(std::string_view name) {
  std::string out;
  AppendPrintable(name, kMaxNameTextBytes, &out);
  return out;
}

std::string TruncateText(std::string_view text, size_t limit) {
  constexpr std::string_view kEllipsis = "...";
  if (text.size() <= limit) return std::string(text);
  size_t cut = limit > kEllipsis.size() ? limit - kEllipsis.size() : 0;
  // Back up over UTF-8 continuation bytes so no character is split.
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  std::string out(text.substr(0, cut));
  out.append(kEllipsis);
  return out;
}

std::string PrintableValue(std::string_view bytes) {
  std::string out;
  AppendPrintable(bytes, kMaxValueTextBytes, &out);
  return out;
}

absl::Status InvalidValue(const ValueError& error, std::string_view what) {
  const ValueError e = Normalized(error);
  std::string message;
  if (e.row.has_value()) absl::StrAppend(&message, "row ", *e.row, ", ");
  message.append("column '");
  AppendPrintable(e.column, kMaxNameTextBytes, &message);
  message.append("' (");
  AppendPrintable(e.type, 2 * kMaxNameTextBytes, &message);
  message.push_back(')');
  if (!e.path.empty()) {
    message.append(" at ");
    AppendPrintable(e.path, kMaxNameTextBytes, &message);
  }
  message.append(": cannot convert");
  if (!e.kind.empty()) absl::StrAppend(&message, " ", e.kind);
  // Text values are quoted (an empty string shows as ""); other values are printed bare.
  if (e.kind == "string" || e.kind == "bytes" || (e.kind.empty() && !e.value.empty())) {
    absl::StrAppend(&message, " \"", e.value, "\"");
  } else if (!e.value.empty()) {
    absl::StrAppend(&message, " ", e.value);
  }
  if (!what.empty()) absl::StrAppend(&message, ": ", absl::string_view(what.data(), what.size()));
  absl::Status status = absl::InvalidArgumentError(message);
  Attach(e, &status);
  return status;
}

absl::Status WithValueError(absl::Status status, const ValueError& error) {
  if (status.ok()) return status;
  Attach(Normalized(error), &status);
  return status;
}

std::optional<ValueError> GetValueError(const absl::Status& status) {
  absl::optional<absl::Cord> payload = status.GetPayload(kPayloadUrl);
  if (!payload.has_value()) return std::nullopt;
  const std::string flat(*payload);
  std::string_view in = flat;
  if (in.size() < 10 || in[0] != kPayloadVersion) return std::nullopt;
  ValueError e;
  if (in[1] != 0) {
    uint64_t row;
    std::memcpy(&row, in.data() + 2, 8);
    e.row = row;
  }
  in.remove_prefix(10);
  for (std::string* s : {&e.column, &e.type, &e.value, &e.path, &e.kind}) {
    if (!GetString(&in, s)) return std::nullopt;
  }
  return e;
}

}  // namespace chgate::ingest
