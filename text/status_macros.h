// Error-propagation helpers for every module, the server's and the SDK's .cc files alike
// (Abseil 20220623 has none), prefixed so that they meet no other library's macros.
// CHGATE_RETURN_IF_ERROR(expr) returns the absl::Status of `expr` when it is not OK.
// CHGATE_ASSIGN_OR_RETURN(lhs, expr) evaluates an absl::StatusOr<T>, returns its status on error
// and otherwise assigns (or declares) `lhs` from its value. CHGATE_CHECK aborts on a broken
// invariant.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define CHGATE_CONCAT_INNER_(a, b) a##b
#define CHGATE_CONCAT_(a, b) CHGATE_CONCAT_INNER_(a, b)

#define CHGATE_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    ::absl::Status chgate_status_ = (expr);          \
    if (!chgate_status_.ok()) return chgate_status_; \
  } while (0)

#define CHGATE_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return std::move(tmp).status();      \
  lhs = std::move(tmp).value()

#define CHGATE_ASSIGN_OR_RETURN(lhs, expr) \
  CHGATE_ASSIGN_OR_RETURN_IMPL_(CHGATE_CONCAT_(chgate_statusor_, __LINE__), lhs, expr)

#define CHGATE_CHECK(cond)                                                                 \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      std::fprintf(stderr, "%s:%d: CHGATE_CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                        \
    }                                                                                      \
  } while (0)
