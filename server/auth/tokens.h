// Bearer tokens of API callers: a file maps each token to an identity name. Tokens are kept only
// as SHA-256 digests, and a lookup compares the digest of the presented token with every entry in
// constant time, so neither the file's content nor the timing of a lookup reveals a token.
// Immutable after Parse; safe to share between threads.
//
// File format (UTF-8 text, one entry a line):
//   # comment                      blank lines and lines starting with '#' are ignored
//   <identity> <token>             separated by spaces or tabs
// An identity may have several tokens (to rotate: add the new one, move the callers, remove the
// old one). Tokens are at least 16 characters of visible ASCII; a token listed twice is an error.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace chgate::auth {

using TokenDigest = std::array<uint8_t, 32>;

// SHA-256 of `token`.
TokenDigest DigestToken(absl::string_view token);

class TokenSet {
 public:
  inline static constexpr size_t kMinTokenLength = 16;

  // Parses the file text. Returns InvalidArgument naming the line (never the token) for a line
  // without exactly two fields, a short or non-printable token, or a duplicate token.
  static absl::StatusOr<TokenSet> Parse(absl::string_view text);

  // The identity whose token has `digest`, or nullopt. Takes the same time whether or not, and
  // wherever, the token matches.
  std::optional<std::string> Find(const TokenDigest& digest) const;

  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    TokenDigest digest;
    std::string identity;
  };
  std::vector<Entry> entries_;
};

}  // namespace chgate::auth
