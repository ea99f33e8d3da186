// libFuzzer target for the SQL reading callers control: Tokenize and CheckQuery on arbitrary
// statements (no crash, no hang), and identifier round trips. A name that parses must quote and
// parse back to itself, so what chgate writes into an INSERT names exactly the table it read.
#include <cstddef>
#include <cstdint>
#include <string>

#include "server/sql/lexer.h"
#include "server/sql/query_policy.h"
#include "text/identifier.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A heap copy of exactly the input, so reads past it are caught.
  const std::string text(reinterpret_cast<const char*>(data), size);
  (void)chgate::sql::Tokenize(text);
  (void)chgate::sql::CheckQuery(text, {});
  (void)chgate::sql::CheckQuery(text, {.allow_writes = true});

  auto name = chgate::text::ParseQualifiedName(text);
  if (!name.ok()) return 0;
  std::string quoted = chgate::text::QuoteIdentifier(name->name);
  if (!name->database.empty()) {
    quoted = chgate::text::QuoteIdentifier(name->database) + "." + quoted;
  }
  auto again = chgate::text::ParseQualifiedName(quoted);
  if (!again.ok() || !(*again == *name)) __builtin_trap();
  return 0;
}
