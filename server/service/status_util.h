// absl::Status into what the API returns: one conversion for whole calls (ToGrpcStatus in
// grpc_service.h) and for batch items (ToItemStatus), with messages cut to a sane length so a huge
// bad input cannot produce a huge error. The canonical codes are the same numbers everywhere.
#pragma once

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "bandit/v1/service.pb.h"

namespace bandit::server {

inline constexpr size_t kMaxErrorMessageBytes = 1024;

// The status message, cut to kMaxErrorMessageBytes ("..." marks a cut).
std::string CappedMessage(const absl::Status& s);
void ToItemStatus(const absl::Status& s, bandit::v1::ItemStatus* out);

}  // namespace bandit::server
