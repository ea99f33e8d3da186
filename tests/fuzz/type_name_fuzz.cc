// libFuzzer target for type names: ParseTypeName on arbitrary text, FormatTypeName of what
// parses, and CreateColumn of it. A created column's canonical type name must itself create a
// column with the same name (INSERT compares these names with the server's), and a column with
// a couple of default rows must encode and decode back to the same values.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "server/clickhouse/block.h"
#include "server/clickhouse/columns/factory.h"
#include "server/clickhouse/text_form.h"
#include "server/clickhouse/types/type_ast.h"
#include "server/clickhouse/wire/buffer.h"
#include "server/clickhouse/wire/gather.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A heap copy of exactly the input, so reads past it are caught.
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto ast = chgate::clickhouse::ParseTypeName(text);
  if (!ast.ok()) return 0;
  // The printed form of anything that parses must parse again.
  const std::string formatted = chgate::clickhouse::FormatTypeName(*ast);
  if (!chgate::clickhouse::ParseTypeName(formatted).ok()) __builtin_trap();
  auto column = chgate::clickhouse::CreateColumn(*ast);
  if (!column.ok()) return 0;

  const std::string& canonical = (*column)->type_name();
  auto again = chgate::clickhouse::CreateColumn(canonical);
  if (!again.ok() || (*again)->type_name() != canonical) __builtin_trap();

  chgate::clickhouse::ColumnPtr rows = (*column)->CloneEmpty();
  rows->AppendDefault();
  rows->AppendDefault();
  chgate::clickhouse::Block block;
  block.AddColumn("c", rows);
  std::string printed;
  AppendTsvValue(*rows, 1, false, &printed);
  AppendTsvValue(*rows, 1, true, &printed);

  chgate::clickhouse::GatherWriter out;
  chgate::clickhouse::WriteBlock(block, 54460, out);
  const std::string encoded = out.ToString();
  chgate::clickhouse::MemoryReadBuffer in(encoded);
  chgate::clickhouse::Block decoded;
  if (!chgate::clickhouse::ReadBlock(in, 54460, &decoded).ok() || decoded.rows() != 2 ||
      decoded.column(0).column->type_name() != canonical) {
    __builtin_trap();
  }
  std::string printed_again;
  AppendTsvValue(*decoded.column(0).column, 1, false, &printed_again);
  AppendTsvValue(*decoded.column(0).column, 1, true, &printed_again);
  if (printed_again != printed) __builtin_trap();
  return 0;
}
