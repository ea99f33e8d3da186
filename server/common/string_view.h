// Debian's Abseil has its own absl::string_view (not std::string_view): Abseil's string
// functions take std::string_view arguments through this conversion.
#pragma once

#include <string_view>

#include "absl/strings/string_view.h"

namespace chgate {

inline absl::string_view AbslView(std::string_view s) {
  return absl::string_view(s.data(), s.size());
}

}  // namespace chgate
