// libFuzzer target for rows read in place (server/proto_convert/wire_rows.h): arbitrary bytes go
// to CarriesRows (in two pieces) and DecodeRowsRequest. Whatever the decoder reads, protobuf must
// read too, to the same fields and the same rows value for value, and CarriesRows must have seen
// it coming; what it declines falls back to protobuf's parse in the server, so only a read that
// protobuf would refuse or read differently is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "server/proto_convert/wire_rows.h"
#include "tests/unit/proto_convert/same_rows.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  chgate::v1::InsertRequest fields;
  chgate::proto_convert::WireRows rows;
  const std::string_view view(bytes);
  const std::string_view pieces[] = {view.substr(0, size / 3), view.substr(size / 3)};
  const bool carries = chgate::proto_convert::CarriesRows(pieces);
  if (!chgate::proto_convert::DecodeRowsRequest(bytes, &fields, &rows)) return 0;
  if (!carries) {
    std::fprintf(stderr, "read a request of rows that CarriesRows does not see\n");
    std::abort();
  }
  chgate::v1::InsertRequest parsed;
  if (!parsed.ParseFromString(bytes)) {
    std::fprintf(stderr, "read bytes that protobuf refuses\n");
    std::abort();
  }
  const std::string difference =
      chgate::proto_convert::testing::RequestDifference(fields, rows, parsed);
  if (!difference.empty()) {
    std::fprintf(stderr, "read differently from protobuf: %s\n", difference.c_str());
    std::abort();
  }
  return 0;
}
