// Error-propagation helpers for the SDK's own .cc files (Abseil 20220623 has none). Named apart
// from the server's so that a program including both never sees a redefinition.
// CLIENT_RETURN_IF_ERROR(expr) returns the absl::Status of `expr` when it is not OK;
// CLIENT_ASSIGN_OR_RETURN(lhs, expr) unwraps an absl::StatusOr<T> or returns its status.
#pragma once

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define CHGATE_CLIENT_CONCAT_INNER_(a, b) a##b
#define CHGATE_CLIENT_CONCAT_(a, b) CHGATE_CLIENT_CONCAT_INNER_(a, b)

#define CLIENT_RETURN_IF_ERROR(expr)                               \
  do {                                                             \
    ::absl::Status chgate_client_status_ = (expr);                 \
    if (!chgate_client_status_.ok()) return chgate_client_status_; \
  } while (0)

#define CHGATE_CLIENT_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                         \
  if (!tmp.ok()) return std::move(tmp).status();             \
  lhs = std::move(tmp).value()

#define CLIENT_ASSIGN_OR_RETURN(lhs, expr)                                                      \
  CHGATE_CLIENT_ASSIGN_OR_RETURN_IMPL_(CHGATE_CLIENT_CONCAT_(chgate_client_or_, __LINE__), lhs, \
                                       expr)
