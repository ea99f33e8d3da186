#include "server/auth/tokens.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <cstdlib>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace chgate::auth {

TokenDigest DigestToken(absl::string_view token) {
  TokenDigest digest{};
  unsigned int size = 0;
  // EVP_Digest only fails on allocation failure or a broken OpenSSL; neither is recoverable.
  if (EVP_Digest(token.data(), token.size(), digest.data(), &size, EVP_sha256(), nullptr) != 1 ||
      size != digest.size()) {
    std::abort();
  }
  return digest;
}

absl::StatusOr<TokenSet> TokenSet::Parse(absl::string_view text) {
  TokenSet set;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line.front() == '#') continue;
    std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (fields.size() != 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("tokens line ", line_number, ": expected \"<identity> <token>\""));
    }
    const absl::string_view token = fields[1];
    if (token.size() < kMinTokenLength) {
      return absl::InvalidArgumentError(absl::StrCat("tokens line ", line_number,
                                                     ": the token is shorter than ",
                                                     kMinTokenLength, " characters"));
    }
    for (char c : token) {
      if (c < 0x21 || c > 0x7e) {
        return absl::InvalidArgumentError(absl::StrCat(
            "tokens line ", line_number, ": the token has a character that is not visible ASCII"));
      }
    }
    Entry entry{DigestToken(token), std::string(fields[0])};
    for (const Entry& e : set.entries_) {
      if (e.digest == entry.digest) {
        return absl::InvalidArgumentError(absl::StrCat(
            "tokens line ", line_number, ": the token is already listed for '", e.identity, "'"));
      }
    }
    set.entries_.push_back(std::move(entry));
  }
  return set;
}

std::optional<std::string> TokenSet::Find(const TokenDigest& digest) const {
  // Every entry is compared, with no early exit, so the time does not depend on the match.
  size_t match = entries_.size();
  for (size_t i = 0; i < entries_.size(); ++i) {
    const bool equal = CRYPTO_memcmp(entries_[i].digest.data(), digest.data(), digest.size()) == 0;
    match = equal ? i : match;
  }
  if (match == entries_.size()) return std::nullopt;
  return entries_[match].identity;
}

}  // namespace chgate::auth
