#include "server/service/rpcs.h"

namespace bandit::server {

const char* RpcName(Rpc rpc) {
  switch (rpc) {
#define BANDIT_RPC_NAME(method, request, response, role) \
  case Rpc::k##method:                                   \
    return #method;
    BANDIT_FOR_EACH_RPC(BANDIT_RPC_NAME)
    BANDIT_FOR_EACH_STREAMING_RPC(BANDIT_RPC_NAME)
#undef BANDIT_RPC_NAME
    case Rpc::kCount:
      break;
  }
  return "?";
}

Role RequiredRole(Rpc rpc) {
  switch (rpc) {
#define BANDIT_RPC_ROLE(method, request, response, role) \
  case Rpc::k##method:                                   \
    return Role::role;
    BANDIT_FOR_EACH_RPC(BANDIT_RPC_ROLE)
    BANDIT_FOR_EACH_STREAMING_RPC(BANDIT_RPC_ROLE)
#undef BANDIT_RPC_ROLE
    case Rpc::kCount:
      break;
  }
  return Role::kAdmin;  // unknown: the strictest
}

}  // namespace bandit::server
