#include "server/status_util.h"

#include <string>

namespace bandit::server {

grpc::Status ToGrpcStatus(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  std::string msg(s.message());
  if (msg.size() > kMaxErrorMessageBytes) {
    msg.resize(kMaxErrorMessageBytes);
    msg += "...";
  }
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), msg);
}

}  // namespace bandit::server
