// Debian's Abseil 20220623 has its own absl::string_view class, distinct from std::string_view,
// and absl::StrCat takes only the former. The SDK uses std::string_view in its API and converts
// at the StrCat call sites with Sv().
#pragma once

#include <string_view>

#include "absl/strings/string_view.h"

namespace chgate::client::internal {

inline absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

}  // namespace chgate::client::internal
