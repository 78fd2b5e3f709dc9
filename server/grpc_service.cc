#include "server/grpc_service.h"

#include <chrono>
#include <functional>
#include <utility>
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

std::optional<uint64_t> GrpcBanditService::PendingCalls::Add(const Call& call) {
  absl::MutexLock lock(&mu_);
  if (cut_.has_value()) return std::nullopt;
  const uint64_t id = next_id_++;
  calls_.emplace(id, call);
  return id;
}

std::optional<GrpcBanditService::PendingCalls::Call> GrpcBanditService::PendingCalls::Claim(
    uint64_t id) {
  absl::MutexLock lock(&mu_);
  auto it = calls_.find(id);
  if (it == calls_.end()) return std::nullopt;  // cut: already answered
  Call call = it->second;
  calls_.erase(it);
  return call;
}

std::vector<GrpcBanditService::PendingCalls::Call> GrpcBanditService::PendingCalls::Cut(
    const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  if (!cut_.has_value()) cut_ = status;
  std::vector<Call> out;
  for (auto& [id, call] : calls_) out.push_back(call);
  calls_.clear();
  return out;
}

absl::Status GrpcBanditService::PendingCalls::cut_status() const {
  absl::MutexLock lock(&mu_);
  return cut_.value_or(absl::OkStatus());
}

double GrpcBanditService::PendingCalls::OldestDurableWaitSeconds() const {
  absl::MutexLock lock(&mu_);
  // Ids follow arrival; a call starts waiting right after its handler returns, so the first
  // durability call found is (close to) the oldest.
  for (const auto& [id, call] : calls_)
    if (call.durability)
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - call.start).count();
  return 0;
}

std::optional<uint64_t> GrpcBanditService::AddPending(const PendingCalls::Call& call) {
  std::optional<uint64_t> id = pending_->Add(call);
  if (!id.has_value()) Finish(call.reactor, call.rpc, call.start, pending_->cut_status());
  return id;
}

int GrpcBanditService::CutPendingCalls(const absl::Status& status) {
  const std::vector<PendingCalls::Call> cut = pending_->Cut(status);
  for (const auto& call : cut) Finish(call.reactor, call.rpc, call.start, status);
  return static_cast<int>(cut.size());
}

double GrpcBanditService::OldestDurableWaitSeconds() const {
  return pending_->OldestDurableWaitSeconds();
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
    const std::optional<uint64_t> id = AddPending({reactor, rpc, start, /*durability=*/false});
    if (!id.has_value()) return reactor;
    (service_->*method)(*req, resp, [this, pending = pending_, id = *id](absl::Status status) {
      if (auto call = pending->Claim(id)) Finish(call->reactor, call->rpc, call->start, status);
    });
  } else if constexpr (std::is_invocable_v<Method, DecisionService*, const Req&, Resp*,
                                           uint64_t*>) {
    uint64_t written_seq = 0;  // the newest record this call appended (0 = none)
    const absl::Status status = (service_->*method)(*req, resp, &written_seq);
    if (!status.ok() || !service_->MustWaitForDurability(written_seq)) {
      Finish(reactor, rpc, start, status);
    } else {
      const std::optional<uint64_t> id = AddPending({reactor, rpc, start, /*durability=*/true});
      if (id.has_value())
        service_->WhenDurable(written_seq, [this, pending = pending_, id = *id](absl::Status s) {
          if (auto call = pending->Claim(id)) Finish(call->reactor, call->rpc, call->start, s);
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
