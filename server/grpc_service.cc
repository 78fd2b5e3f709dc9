#include "server/grpc_service.h"

#include <chrono>
#include <functional>
#include <type_traits>

#include "server/status_util.h"

namespace bandit::server {

grpc::Status ToGrpcStatus(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), CappedMessage(s));
}

void GrpcBanditService::Finish(Reactor* reactor, Rpc rpc,
                               std::chrono::steady_clock::time_point start,
                               const absl::Status& status) {
  const grpc::Status g = ToGrpcStatus(status);
  if (metrics_ != nullptr)
    metrics_->ObserveRpc(
        rpc, g.error_code(),
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  reactor->Finish(g);
}

template <typename Method, typename Req, typename Resp>
GrpcBanditService::Reactor* GrpcBanditService::Handle(Ctx* ctx, Rpc rpc, Method method,
                                                      const Req* req, Resp* resp) {
  const auto start = std::chrono::steady_clock::now();
  Reactor* reactor = ctx->DefaultReactor();
  if (auth_ != nullptr) {
    if (absl::Status denied = auth_->Check(rpc, *ctx); !denied.ok()) {
      Finish(reactor, rpc, start, denied);
      return reactor;
    }
  }
  using Done = std::function<void(absl::Status)>;
  if constexpr (std::is_invocable_v<Method, DecisionService*, const Req&, Resp*, Done>) {
    (service_->*method)(*req, resp, [this, reactor, rpc, start](absl::Status status) {
      Finish(reactor, rpc, start, status);
    });
  } else if constexpr (std::is_invocable_v<Method, DecisionService*, const Req&, Resp*,
                                           uint64_t*>) {
    uint64_t written_seq = 0;  // the newest record this call appended (0 = none)
    const absl::Status status = (service_->*method)(*req, resp, &written_seq);
    if (!status.ok() || !service_->MustWaitForDurability(written_seq)) {
      Finish(reactor, rpc, start, status);
    } else {
      service_->WhenDurable(written_seq, [this, reactor, rpc, start](absl::Status durable) {
        Finish(reactor, rpc, start, durable);
      });
    }
  } else {
    Finish(reactor, rpc, start, (service_->*method)(*req, resp));
  }
  return reactor;
}

#define BANDIT_DEFINE_HANDLER(method, request, response, role)                          \
  GrpcBanditService::Reactor* GrpcBanditService::method(                                \
      Ctx* ctx, const bandit::v1::request* req, bandit::v1::response* resp) {           \
    return Handle(ctx, Rpc::k##method, &DecisionService::method, req, resp);            \
  }
BANDIT_FOR_EACH_RPC(BANDIT_DEFINE_HANDLER)
#undef BANDIT_DEFINE_HANDLER

}  // namespace bandit::server
