// libFuzzer target for query settings on their way to the server: arbitrary (name, value) lists
// go through WriteQuery at revisions 54412 (binary settings) and 54460 (settings as text), and
// what it writes is read back by the server-side reader (the fake server's). Either WriteQuery
// refuses and writes nothing, or the reader reads exactly one Query packet to its last byte with
// the same settings, each value in the form its type's checker gives (CheckSettingValue). A
// setting that a server would read differently from what was meant is what this looks for: the
// rest of the packet would then be read as new packets.
//
// Input: byte 0 picks the revision (bit 0). The rest is split at 0xff bytes into tokens taken in
// pairs (name, value); a name token of one byte below 0x80 names the catalog's setting of that
// index instead, so the fuzzer reaches every known type.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "server/clickhouse/protocol/client_reader.h"
#include "server/clickhouse/protocol/packets.h"
#include "server/clickhouse/protocol/settings.h"
#include "server/clickhouse/wire/buffer.h"
#include "server/clickhouse/wire/gather.h"

namespace {

using namespace chgate::clickhouse;  // NOLINT: a fuzz target's own file

std::vector<std::string> Tokens(std::string_view rest) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i <= rest.size(); ++i) {
    if (i == rest.size() || static_cast<uint8_t>(rest[i]) == 0xff) {
      out.emplace_back(rest.substr(start, i - start));
      start = i + 1;
    }
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > 4096) return 0;
  const uint64_t revision = (data[0] & 1) != 0 ? 54460 : 54412;
  const std::vector<std::string> tokens =
      Tokens(std::string_view(reinterpret_cast<const char*>(data + 1), size - 1));
  const auto catalog = AllSettings();
  QueryParams query;
  query.query_id = "fuzz";
  query.query = "SELECT 1";
  for (size_t i = 0; i + 1 < tokens.size(); i += 2) {
    std::string name = tokens[i];
    if (name.size() == 1 && static_cast<uint8_t>(name[0]) < 0x80) {
      name = std::string(catalog[static_cast<uint8_t>(name[0]) % catalog.size()].name);
    }
    query.settings.push_back({.name = name, .value = tokens[i + 1], .important = true});
  }
  HelloParams client;
  client.client_name = "fuzz";
  client.revision = revision;
  GatherWriter out;
  const absl::Status written = WriteQuery(query, client, revision, out);
  const std::string bytes = out.ToString();
  if (!written.ok()) {
    if (!bytes.empty()) __builtin_trap();  // a refused query writes nothing
    return 0;
  }
  MemoryReadBuffer in(bytes);
  ClientPacketReader reader(&in, kMaxClientReaderRevision);
  reader.set_revision(revision);
  absl::StatusOr<ClientPacket*> packet = reader.Next();
  if (!packet.ok() || (*packet)->type != ClientPacketType::kQuery) __builtin_trap();
  if (in.position() != bytes.size()) __builtin_trap();  // read to its last byte, no more
  const QueryParams& read = (*packet)->query;
  if (read.query != query.query || read.settings.size() != query.settings.size()) {
    __builtin_trap();
  }
  for (size_t i = 0; i < query.settings.size(); ++i) {
    const Setting& sent = query.settings[i];
    if (read.settings[i].name != sent.name) __builtin_trap();
    const SettingSpec* spec = FindSetting(sent.name);
    if (spec == nullptr) {
      if (revision < 54429 || read.settings[i].value != sent.value) __builtin_trap();
      continue;
    }
    absl::StatusOr<std::string> canonical = CheckSettingValue(*spec, sent.value);
    if (!canonical.ok()) __builtin_trap();  // WriteQuery sent a value its type refuses
    // Below 54429 the reader prints numbers back from their binary form.
    if (read.settings[i].value != *canonical) __builtin_trap();
  }
  return 0;
}
