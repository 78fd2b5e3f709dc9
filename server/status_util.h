// absl::Status <-> grpc::Status. The canonical codes are the same numbers; messages are cut to a
// sane length so a huge bad input cannot produce a huge error.
#pragma once

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace bandit::server {

inline constexpr size_t kMaxErrorMessageBytes = 1024;

grpc::Status ToGrpcStatus(const absl::Status& s);

}  // namespace bandit::server
