// gRPC callback-API adapter: one handler per RPC in server/rpcs.h, each checks the caller's
// role, times the call, runs the DecisionService method of the same name and finishes the
// reactor. Handlers hold no state of their own and never see storage.
#pragma once

#include <grpcpp/support/status.h>

#include "bandit/v1/service.grpc.pb.h"
#include "server/arena_allocator.h"
#include "server/auth.h"
#include "server/decision_service.h"
#include "server/metrics.h"
#include "server/rpcs.h"

namespace bandit::server {

// The one absl::Status -> grpc::Status conversion (same code numbers; message capped).
grpc::Status ToGrpcStatus(const absl::Status& s);

class GrpcBanditService final : public bandit::v1::BanditService::CallbackService {
 public:
  // `auth` may be null (no authentication); when set, every handler checks the caller's token
  // against RequiredRole(rpc) before doing anything.
  GrpcBanditService(DecisionService* service, Metrics* metrics, const Authorizer* auth = nullptr)
      : service_(service), metrics_(metrics), auth_(auth) {
    allocators_.Install(*this);  // per-round RPCs parse into pooled arenas
  }

  using Ctx = grpc::CallbackServerContext;
  using Reactor = grpc::ServerUnaryReactor;

#define BANDIT_DECLARE_HANDLER(method, request, response, role)        \
  Reactor* method(Ctx* ctx, const bandit::v1::request* req, bandit::v1::response* resp) override;
  BANDIT_FOR_EACH_RPC(BANDIT_DECLARE_HANDLER)
#undef BANDIT_DECLARE_HANDLER

 private:
  // Checks the role, then calls `method` in whichever of the service's three shapes it has:
  //   read:     Status (const Req&, Resp*)
  //   write:    Status (const Req&, Resp*, uint64_t* written_seq); acknowledged only once the
  //             service says the call's newest record is as durable as --durability promises
  //             (in `always`, after the group-commit fsync, off this thread)
  //   deferred: void (const Req&, Resp*, std::function<void(absl::Status)> done); finished
  //             when `done` runs (work the service does off the RPC thread)
  template <typename Method, typename Req, typename Resp>
  Reactor* Handle(Ctx* ctx, Rpc rpc, Method method, const Req* req, Resp* resp);
  void Finish(Reactor* reactor, Rpc rpc, std::chrono::steady_clock::time_point start,
              const absl::Status& status);

  RoundMessageAllocators allocators_;
  DecisionService* service_;
  Metrics* metrics_;
  const Authorizer* auth_;
};

}  // namespace bandit::server
