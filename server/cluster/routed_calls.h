// ServiceCalls for one request of a front door in a cluster: a call for an instance this node
// serves runs here (LocalCalls), one for an instance another node owns runs on that node,
// through the router's one routing step for both doors (Router::Run over Router::Dispatch, the
// gRPC adapter's step: the caller's token, the routing header, x-bandit-forwarded-by; the owner
// answers once the change is durable). Where a call goes is decided per call.
#pragma once

#include <string>
#include <utility>

#include "server/cluster/router.h"
#include "server/service/service_calls.h"

namespace bandit::server::cluster {

class RoutedCalls final : public ServiceCalls {
 public:
  // `token`: the caller's (its key), "" = none.
  RoutedCalls(Router* router, DecisionService* service, std::string token)
      : router_(router), local_(service), token_(std::move(token)) {}

#define BANDIT_ROUTED_CALL(method, request, response)                                              \
  absl::Status method(const bandit::v1::request& req, bandit::v1::response* out,                   \
                      uint64_t* written_seq = nullptr) override {                                  \
    return Routed(Rpc::k##method, req, out, [&] { return local_.method(req, out, written_seq); }); \
  }
  BANDIT_FOR_EACH_INSTANCE_CALL(BANDIT_ROUTED_CALL)
#undef BANDIT_ROUTED_CALL

  // An instance another node owns exists (a live lease names it); otherwise this node's
  // registry answers (and claims a free instance placed here, as for any call).
  absl::Status Find(const std::string& name) override;

 private:
  template <typename Req, typename Resp, typename Local>
  absl::Status Routed(Rpc rpc, const Req& req, Resp* out, Local local) {
    Resp ignored;
    return router_->Run(rpc, req, out != nullptr ? out : &ignored,
                        Caller::WithToken(token_, RoutingKeyOf(req).name), local);
  }

  Router* const router_;
  LocalCalls local_;
  const std::string token_;
};

}  // namespace bandit::server::cluster
